"""Issue 43's user-facing targets, all measured in one run, with a table of target against
measured.

One command runs the benchmarks behind the targets one after another (each a subprocess with
its own --json into a temp dir, so they never compete for the cores with each other):

- the history (`bench_history.py --hosts 10000 --days 7 --timed 48`): a week of 10,000 hosts
  x 3 checks on disk; a round appended (`history.append`), the first round of a new database
  apart; the console's first answer after a new round (the grid and the charts);
- start-up (`bench_startup.py --before none`): a broker-only patrol against the floor
  `import typer, redis`, whole processes from a wheel installed in a venv of its own;
- kept connections (`bench_ssh_rounds.py --hosts 50 --only routes`): the patrol's wall of a
  repeat round on kept connections against a fresh one, on 50 lab hosts;
- 10,000 host entries over 600 lab sshds (`bench_scale.py --rounds 0`): real verdicts within
  the 15-minute deadline, peak RSS, most open file descriptors.

The week of history is built by the store itself from the rows as `history.append` records
them, without the Results, the newest round's file or the state (bench_history.py's --timed):
the same database file, about twice as fast; its last 48 rounds, and the first round of three
new databases, go through `history.append` and are timed.

It prints the load average (1 minute) before and after each piece (the machine may be shared:
read the figures with it), writes one JSON with every figure, its target and whether it is met,
and every piece's own JSON, and with --markdown prints (with --splice FILE, also replaces the
block between `<!-- targets:begin -->` and `<!-- targets:end -->` in FILE) the table.
--quick runs every piece at small sizes (a smoke run of this orchestrator, not the figures).

Needs root and the lab prerequisites; about 15-20 minutes on 2 cores. Under the bench lock:

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/targets.py \\
        --json bench/targets_results.json --markdown --splice docs/performance.md
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
BEGIN, END = "<!-- targets:begin -->", "<!-- targets:end -->"

FULL: dict[str, int] = {
    "history_hosts": 10000,
    "history_days": 7,
    "history_timed": 48,
    "history_first": 3,
    "startup_runs": 15,
    "rounds_hosts": 50,
    "rounds_pairs": 3,
    "scale_hosts": 600,
    "scale_entries": 10000,
}
QUICK: dict[str, int] = {
    "history_hosts": 500,
    "history_days": 1,
    "history_timed": 8,
    "history_first": 2,
    "startup_runs": 3,
    "rounds_hosts": 10,
    "rounds_pairs": 1,
    "scale_hosts": 40,
    "scale_entries": 200,
}


def steps(sizes: dict[str, int], tmp: Path) -> list[tuple[str, list[str]]]:
    """(name, argv) of every piece: the history first, on a machine the labs have not loaded."""
    py = sys.executable
    run = lambda name, *args: (name, [py, str(BENCH / f"bench_{name}.py"), *map(str, args),  # noqa: E731
                                      "--json", str(tmp / f"{name}.json")])  # fmt: skip
    return [
        run("history", "--hosts", sizes["history_hosts"], "--days", sizes["history_days"],
            "--timed", sizes["history_timed"], "--first", sizes["history_first"]),
        run("startup", "--runs", sizes["startup_runs"], "--before", "none"),
        run("ssh_rounds", "--hosts", sizes["rounds_hosts"], "--pairs", sizes["rounds_pairs"],
            "--only", "routes"),
        run("scale", "--hosts", sizes["scale_hosts"], "--entries", sizes["scale_entries"],
            "--rounds", 0),
    ]  # fmt: skip


def run_step(name: str, argv: list[str], log: Path) -> dict[str, Any]:
    """One bench as a subprocess, its output streamed (each line prefixed) and kept."""
    print(f"# {name}: {' '.join(argv)}", flush=True)
    t0, load0 = time.monotonic(), os.getloadavg()[0]
    with log.open("w") as keep:
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            keep.write(line)
            print(f"  [{name}] {line}", end="", flush=True)
        rc = proc.wait()
    took = round(time.monotonic() - t0, 1)
    print(f"# {name}: rc {rc}, {took:.0f} s", flush=True)
    return {"argv": argv, "rc": rc, "wall_s": took, "load_1m": [load0, os.getloadavg()[0]]}


def get(doc: Any, *keys: str) -> Any:
    """doc[k0][k1]... or None where any is missing (a piece that failed)."""
    for k in keys:
        if not isinstance(doc, dict) or k not in doc:
            return None
        doc = doc[k]
    return doc


def figures(d: dict[str, Any], sizes: dict[str, int]) -> list[dict[str, Any]]:
    """Each target's figure: name, measured, its text, target (text), met (None: not
    measured, or a figure shown beside a target)."""
    out: list[dict[str, Any]] = []

    def fig(name: str, value: Any, unit: str, target: float | None = None, most: bool = True,
            fmt: str = "{:.2f}") -> None:  # fmt: skip
        measured = isinstance(value, int | float)
        if not measured and target is None:
            return  # a figure shown beside a target, not in this run's pieces
        met = (
            None
            if target is None or not measured
            else (value <= target if most else value >= target)
        )
        bound = None if target is None else ("<= " if most else ">= ") + f"{target:g}{unit}"
        text = fmt.format(value) + unit if measured else "not measured"
        out.append({"figure": name, "measured": value, "measured_text": text,
                    "target": bound, "met": met})  # fmt: skip

    scale = d.get("scale")
    e = f"{sizes['scale_entries']:,} entries over {sizes['scale_hosts']} sshds"
    fig(f"{e}: real verdicts within the 15-minute deadline", get(scale, "run", "real_pct"), " %",
        99, most=False, fmt="{:.1f}")  # fmt: skip
    fig(f"{e}: the patrol's wall", get(scale, "run", "wall_s"), " s", 900, fmt="{:.0f}")
    fig(f"{e}: peak RSS", get(scale, "run", "max_rss_mb"), " MB", 600, fmt="{:.0f}")
    fig(f"{e}: most open fds", get(scale, "run", "max_fds"), "", 512, fmt="{:.0f}")

    h = d.get("history")
    n = f"{sizes['history_hosts']:,} hosts"
    timed = get(h, "appends_timed")
    for key in ("median", "p95", "max"):
        fig(f"{n}: a round appended, {key} of the week's last {timed}",
            get(h, f"append_{key}_s"), " s", 0.5, fmt="{:.3f}")  # fmt: skip
    fig(f"{n}: the same appends' CPU, median", get(h, "append_cpu_median_s"), " s",
        fmt="{:.3f}")  # fmt: skip
    fig(f"{n}: the same appends' CPU, max", get(h, "append_cpu_max_s"), " s", fmt="{:.3f}")
    firsts = get(h, "append_first_round_s") or []
    fig(f"{n}: a new database's first round appended, max of {len(firsts)}",
        max(firsts) if firsts else None, " s", 0.5, fmt="{:.3f}")  # fmt: skip
    pages = {"grid": "grid `/`", "charts": "charts `/charts`", "host": "a host's page",
             "row": "a row's page"}  # fmt: skip
    for page, label in pages.items():
        fig(f"{n}: console {label}, first answer after a new round", get(h, f"{page}_first_s"),
            " s", 1.0, fmt="{:.3f}")  # fmt: skip
    days = sizes["history_days"]
    fig(f"{n}: history on disk after {days} day{'s' if days != 1 else ''}", get(h, "disk_mb"),
        " MB", 300, fmt="{:.1f}")  # fmt: skip

    r = get(d.get("ssh_rounds"), "routes check")
    k = f"{sizes['rounds_hosts']} lab hosts"
    fig(f"{k}: a fresh round's wall", get(r, "median_wall_s", "fresh"), " s")
    fig(f"{k}: a repeat round on kept connections / a fresh one (wall)",
        get(r, "median_wall_s", "ratio"), "x", 0.4)  # fmt: skip

    st = get(d.get("startup"), "cases")
    floor = get(st, "floor: import typer, redis", "median_ms")
    patrol = get(st, "after:  fleetcheck broker-only patrol", "median_ms")
    fig("start-up: floor `import typer, redis`", floor, " ms", fmt="{:.0f}")
    fig("start-up: a broker-only patrol", patrol, " ms", fmt="{:.0f}")
    fig("start-up: a broker-only patrol / the floor", patrol / floor if patrol and floor else None,
        "x", 1.3)  # fmt: skip
    gc_floor = get(st, "floor, GC as our entry point: typer, redis", "median_ms")
    fig("start-up: the same / the floor with the collector handled as our entry point does",
        patrol / gc_floor if patrol and gc_floor else None, "x")  # fmt: skip
    return out


def markdown(res: dict[str, Any]) -> str:
    kind = "Quick smoke run (--quick: small sizes, NOT the figures)" if res["quick"] else "Run"
    head = (
        f"**{kind}** at {res['revision']}, {res['started_at']}, {res['machine']}; load average "
        f"(1 min) {res['load_start'][0]:.2f} at the start, {res['load_end'][0]:.2f} at the end; "
        f"{res['wall_min']:.1f} min. Each piece's load (1 min) at its start and end: "
        + "; ".join(
            f"{name} {s['load_1m'][0]:.1f} / {s['load_1m'][1]:.1f}"
            for name, s in res["steps"].items()
        )
        + ".\n\n"
    )
    lines = ["| figure | measured | target | met |", "|---|---:|---|---|"]
    for f in res["figures"]:
        met = {True: "**met**", False: "**not met**", None: ""}[f["met"]]
        lines.append(f"| {f['figure']} | {f['measured_text']} | {f['target'] or ''} | {met} |")
    failed = [k for k, v in res["steps"].items() if v["rc"] != 0]
    tail = f"\n\nFailed pieces: {', '.join(failed)}.\n" if failed else "\n"
    return head + "\n".join(lines) + tail


def splice(path: Path, text: str) -> None:
    doc = path.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(doc):
        raise SystemExit(f"{path}: no {BEGIN} ... {END} block")
    path.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text.rstrip()}\n{END}", doc, count=1))


def revision() -> str:
    git = ["git", "-C", str(ROOT)]
    rev = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    return rev.stdout.strip() + ("+dirty" if dirty else "")


def report(res: dict[str, Any], a: argparse.Namespace) -> None:
    """The table printed, and spliced as asked."""
    width = max(len(f["figure"]) for f in res["figures"])
    for f in res["figures"]:
        met = {True: "met", False: "NOT MET", None: ""}[f["met"]]
        print(f"  {f['figure']:<{width}}  {f['measured_text']:>14}  {f['target'] or '':<10} {met}")
    if a.markdown:
        print(markdown(res))
    if a.splice:
        splice(Path(a.splice), markdown(res))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--json", help="write every figure and the pieces' own JSON here")
    ap.add_argument("--markdown", action="store_true", help="print the table")
    ap.add_argument("--splice", metavar="FILE", help="replace the marked block in FILE")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    ap.add_argument("--only", help="comma-separated pieces: history, startup, ssh_rounds, scale")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=N",
                    help=f"one size changed (keys: {', '.join(FULL)})")  # fmt: skip
    ap.add_argument("--from-json", metavar="FILE",
                    help="run nothing: the table again from a run's --json")  # fmt: skip
    a = ap.parse_args()
    if a.from_json:
        saved = json.loads(Path(a.from_json).read_text())
        saved["figures"] = figures(saved["pieces"], saved["sizes"])
        report(saved, a)
        return
    sizes = dict(QUICK if a.quick else FULL)
    for item in a.set:
        key, _, value = item.partition("=")
        if key not in sizes:
            raise SystemExit(f"--set {item}: no size {key!r} (keys: {', '.join(sizes)})")
        sizes[key] = int(value)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # through the finally below
    res: dict[str, Any] = {
        "quick": a.quick,
        "revision": revision(),
        "started_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores",
        "sizes": sizes,
        "load_start": list(os.getloadavg()),
        "steps": {},
    }
    print(f"# issue 43's targets at {res['revision']}; load {res['load_start']}", flush=True)
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="fc-targets-"))
    data: dict[str, Any] = {}
    wanted = set(a.only.split(",")) if a.only else None
    try:
        for name, argv in steps(sizes, tmp):
            if wanted is not None and name not in wanted:
                continue
            res["steps"][name] = step = run_step(name, argv, tmp / f"{name}.log")
            out = tmp / f"{name}.json"
            if step["rc"] == 0 and out.exists():
                data[name] = json.loads(out.read_text())
            else:
                step["log_tail"] = (tmp / f"{name}.log").read_text()[-3000:]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["load_end"] = list(os.getloadavg())
    res["wall_min"] = round((time.monotonic() - t0) / 60, 1)
    res["figures"] = figures(data, sizes)
    res["pieces"] = data
    print(f"# done in {res['wall_min']:.1f} min; load {res['load_end']}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str) + "\n")
    report(res, a)
    if any(s["rc"] != 0 for s in res["steps"].values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
