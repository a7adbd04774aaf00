"""Issue 29's figures in one run: every benchmark behind them, each with its before.

One command runs, one after another (each a subprocess with its own --json into a temp dir,
so they never compete for the 2 cores), each before next to its after:

- start-up (item 4): `bench_startup.py --before REV`, which builds both wheels and times them
  interleaved: the broker-only patrol against the floor of `import typer, redis`;
- the resident shell on kept connections: `bench_ssh_rounds.py --rc-ms 90 --only routes
  --kill` on 50 lab hosts, and the same bench run against REV's package (it has no resident
  shell: its repeat round is one exec a round on kept connections, the before the docs name);
- 10,000 host entries over 600 lab sshds (item 3): `bench_scale.py`, and the same bench run
  against REV's package (its JSON-lines history and state file; fewer simulated rounds: its
  history rotates at 10 MB, so its size stops growing after a few rounds at this scale);
- the history's database at fleet scale (items 2 and 3): `bench_history.py --hosts 10000
  --days 7` through its command line, and for the before REV's JSON-lines history driven
  with the same simulated fleet (the generator read from bench_history.py) for fewer rounds:
  a week of it would be ~2.9 GB, which bench_history.py computes for the same rounds, and its
  rotation (10 MB, one older file) would have kept only the last few rounds anyway. REV had
  no `explain` command.

"REV's package" is a `git worktree add --detach` of REV in the temp dir (removed afterwards,
also on failure or Ctrl-C) with this checkout's bench file copied into its bench/ and run
there with this checkout's Python: its fleetcheck (and its lab) are REV's.

It prints the load average at the start and the end, writes one JSON with every figure, its
target and whether it is met, and with --markdown prints (with --splice FILE, also replaces
the block between `<!-- fleet-scale:begin -->` and `<!-- fleet-scale:end -->` in FILE) one
table: figure | before (REV) | after | target | met. --quick runs every piece at small sizes
(a few minutes: a smoke run of this orchestrator, not a measurement).

Needs root and the lab prerequisites. The full run (~40 minutes), under the bench lock:

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_fleet_scale.py \\
        --json bench/fleet_scale_results.json --markdown --splice docs/performance.md
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
BEFORE = "fc8cffc"  # main just before issues 24 and 29 began
BEGIN, END = "<!-- fleet-scale:begin -->", "<!-- fleet-scale:end -->"

# The sizes of each piece. The full run's are the docs' (issue 29's own); the befores are
# sized to keep the whole run near 40 minutes on this 2-core machine.
FULL: dict[str, Any] = {
    "startup_runs": 20,
    "rounds_hosts": 50,
    "rounds_pairs": 3,
    "rc_ms": 90,
    "scale_hosts": 600,
    "scale_entries": 10000,
    "scale_rounds": 96,
    "scale_rounds_before": 12,
    "history_hosts": 10000,
    "history_days": 7,
    "history_rounds_before": 24,
}
QUICK: dict[str, Any] = {
    "startup_runs": 3,
    "rounds_hosts": 20,
    "rounds_pairs": 1,
    "rc_ms": 90,
    "scale_hosts": 40,
    "scale_entries": 200,
    "scale_rounds": 8,
    "scale_rounds_before": 8,
    "history_hosts": 500,
    "history_days": 1,
    "history_rounds_before": 24,
}


# ---------------------------------------------------------------- the before's tree


def before_tree(rev: str, into: Path) -> Path:
    """A detached worktree of `rev` whose fleetcheck imports on its own (fleetcheck.checks is
    the top-level checks/ in this repository, which an editable install maps to this
    checkout's: a symlink makes the tree's own found first) and with this checkout's bench
    files copied into its bench/ (run there, they measure `rev`'s package)."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--quiet", "--detach", str(into), rev],
        check=True,
    )
    (into / "fleetcheck/checks").symlink_to("../checks")
    for name in ("bench_ssh_rounds.py", "bench_scale.py", Path(__file__).name):
        shutil.copy2(BENCH / name, into / "bench" / name)
    return into


def remove_tree(tree: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
        capture_output=True,
    )
    shutil.rmtree(tree, ignore_errors=True)
    subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], capture_output=True)


# ---------------------------------------------------------------- the before's history


def fleet_generator(source: Path, model: dict[str, Any]) -> dict[str, Any]:
    """bench_history.py's simulated fleet (its Fleet, broker_rows and T0) executed against
    `model` (the Result and Status of the package measured), so the before's rounds are the
    after's: the same rows from the same seed."""
    tree = ast.parse(source.read_text())
    keep: list[ast.stmt] = [
        node
        for node in tree.body
        if (
            isinstance(node, ast.ClassDef | ast.FunctionDef)
            and node.name in ("Fleet", "broker_rows")
        )
        or (
            isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "T0" for t in node.targets)
        )
    ]
    import random
    from datetime import timedelta

    ns: dict[str, Any] = {"random": random, "datetime": datetime, "timedelta": timedelta}
    ns.update({"UTC": UTC, "__name__": "bench_history_fleet", **model})
    exec(compile(ast.Module(keep, []), str(source), "exec"), ns)
    return ns


def history_jsonl(hosts: int, rounds: int, generator: Path, out: Path) -> None:
    """The before of bench_history.py, in a tree of a revision whose history is JSON lines
    (fc8cffc): `rounds` rounds of the same simulated fleet through its `history.append` with
    its defaults (rotation at 10 MB, one older file kept), each timed; what it keeps on disk
    and how many rounds that is; then its console's pages as bench_history.py times them
    (first from a fresh source and cache, then again); its console had no host page."""
    import functools
    from datetime import timedelta

    sys.path.insert(0, str(ROOT))
    from fleetcheck.console.server import Console
    from fleetcheck.console.source import Source
    from fleetcheck.core.model import Report, Result, Status
    from fleetcheck.rounds import history

    gen = fleet_generator(generator, {"Result": Result, "Status": Status})
    fleet, t0 = gen["Fleet"](hosts), gen["T0"]
    res: dict[str, Any] = {"hosts": hosts, "rounds": rounds, "load_before": list(os.getloadavg())}
    with tempfile.TemporaryDirectory(prefix="fc-bench-history-jsonl-") as tmp:
        path = Path(tmp) / "history.jsonl"
        appends: list[float] = []
        for i in range(rounds):
            at = t0 + timedelta(minutes=15 * i)
            results = gen["broker_rows"](i, fleet.rng) + fleet.results()
            report = Report(at.strftime("%Y-%m-%dT%H:%M:%S.000Z"), 12.0, tuple(results))
            s = time.perf_counter()
            history.append(report, path)
            appends.append(time.perf_counter() - s)
            if i == 0:
                res["jsonl_round_bytes"] = path.stat().st_size
        files = [path, path.with_name(path.name + ".1")]
        res["jsonl_bytes"] = sum(p.stat().st_size for p in files if p.exists())
        res["latest_bytes"] = history.latest_path(path).stat().st_size
        res["rounds_kept"] = len(history.load(path)[0])
        now = t0 + timedelta(minutes=15 * (rounds - 1), seconds=30)
        focus = {"logs": {h: ("/var/log/worker.log", 900.0) for h in fleet.hosts}}  # log-age chart
        host = fleet.hosts[len(fleet.hosts) // 2]
        for name, url, query in (
            ("grid", "/", {}),
            ("charts", "/charts", {}),
            ("row", "/row", {"check": ["clients"], "host": [host]}),
        ):
            console = Console(Source(path), 900.0, 7 * 86400.0, "7d", focus, clock=lambda: now)
            ask = functools.partial(console.route, url, query)
            for kind in ("first", "cached"):
                s = time.perf_counter()
                code, _, body = ask()
                res[f"{name}_{kind}_s"] = round(time.perf_counter() - s, 3)
                assert code == 200, (url, code, body[:300])
    ordered = sorted(appends)
    res.update(
        {
            "append_median_s": round(statistics.median(ordered), 3),
            "append_p95_s": round(ordered[int(len(ordered) * 0.95)], 3),
            "append_max_s": round(ordered[-1], 3),
            "load_after": list(os.getloadavg()),
        }
    )
    print(json.dumps(res, indent=1))
    out.write_text(json.dumps(res, indent=2) + "\n")


# ---------------------------------------------------------------- running the pieces


SETTLE_LOAD = 1.0  # the 1-minute load a piece waits for before it starts
SETTLE_S = 300.0  # and how long at most


def settle(limit: float = SETTLE_LOAD, deadline_s: float = SETTLE_S) -> float:
    """Wait until the machine's 1-minute load is under `limit` (or `deadline_s` passed);
    the seconds waited. The 10,000-entry pieces leave the load at 6-8 for minutes after
    they end (600 sshds' work draining): a piece started then ran at half speed (the
    history's appends and pages measured 2x their time on a settled machine)."""
    start = time.monotonic()
    while os.getloadavg()[0] >= limit and time.monotonic() - start < deadline_s:
        time.sleep(2.0)  # polling the load: the condition itself, with a deadline
    return round(time.monotonic() - start, 1)


def run_step(name: str, argv: list[str], cwd: Path, log: Path) -> dict[str, Any]:
    """One bench as a subprocess, once the machine has settled (`settle`), its output
    streamed (each line prefixed) and kept."""
    waited = settle()
    print(f"# {name}: {' '.join(argv)}  (cwd {cwd}; waited {waited:.0f} s)", flush=True)
    t0 = time.monotonic()
    load0 = os.getloadavg()[0]
    with log.open("w") as keep:
        proc = subprocess.Popen(
            argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            keep.write(line)
            print(f"  [{name}] {line}", end="", flush=True)
        rc = proc.wait()
    took = round(time.monotonic() - t0, 1)
    print(f"# {name}: rc {rc}, {took:.0f} s", flush=True)
    return {
        "argv": argv,
        "rc": rc,
        "wall_s": took,
        "settle_s": waited,
        "load_1m": [load0, os.getloadavg()[0]],
    }


def steps(
    sizes: dict[str, Any], rev: str, tmp: Path, old: Path
) -> list[tuple[str, list[str], Path]]:
    """(name, argv, cwd) of every piece, each before next to its after."""
    py = sys.executable
    j = lambda name: ["--json", str(tmp / f"{name}.json")]  # noqa: E731
    rounds = ["--hosts", str(sizes["rounds_hosts"]), "--pairs", str(sizes["rounds_pairs"])]
    rounds += ["--rc-ms", str(sizes["rc_ms"]), "--only", "routes", "--kill"]
    scale = ["--hosts", str(sizes["scale_hosts"]), "--entries", str(sizes["scale_entries"])]
    # the history's pieces first, away from the 10,000-entry pieces' aftermath (600 sshds
    # on this machine). Not a cure for the machine's own moments: the same week's appends
    # measured a median of 0.22 s alone, 0.35 s after those pieces and 0.38 s first, within
    # two hours of one morning
    return [
        ("history_before", [py, str(old / "bench" / Path(__file__).name), "--history-jsonl",
                            "--hosts", str(sizes["history_hosts"]), "--rounds",
                            str(sizes["history_rounds_before"]), "--generator",
                            str(BENCH / "bench_history.py"), *j("history_before")], old),
        ("history_after", [py, str(BENCH / "bench_history.py"), "--hosts",
                           str(sizes["history_hosts"]), "--days", str(sizes["history_days"]),
                           *j("history_after")], ROOT),
        ("startup", [py, str(BENCH / "bench_startup.py"), "--runs", str(sizes["startup_runs"]),
                     "--before", rev, *j("startup")], ROOT),
        ("rounds_before", [py, str(old / "bench/bench_ssh_rounds.py"), *rounds,
                           *j("rounds_before")], old),
        ("rounds_after", [py, str(BENCH / "bench_ssh_rounds.py"), *rounds, *j("rounds_after")],
         ROOT),
        ("scale_before", [py, str(old / "bench/bench_scale.py"), *scale, "--rounds",
                          str(sizes["scale_rounds_before"]), *j("scale_before")], old),
        ("scale_after", [py, str(BENCH / "bench_scale.py"), *scale, "--rounds",
                         str(sizes["scale_rounds"]), *j("scale_after")], ROOT),
    ]  # fmt: skip


# ---------------------------------------------------------------- the figures


def get(doc: dict[str, Any] | None, *keys: str) -> Any:
    """doc[k0][k1]... or None where any is missing (a piece that failed, a field a revision's
    bench does not write)."""
    for k in keys:
        if not isinstance(doc, dict) or k not in doc:
            return None
        doc = doc[k]
    return doc


def ratio(a: Any, b: Any) -> float | None:
    return (
        round(a / b, 3) if isinstance(a, int | float) and isinstance(b, int | float) and b else None
    )


def figures(d: dict[str, Any], sizes: dict[str, Any], rev: str) -> list[dict[str, Any]]:
    """Every issue-29 figure: name, before, after, target (text), met (None: no target or
    not measured), and a note for a before that is not the same measurement."""
    out: list[dict[str, Any]] = []

    def fig(
        name: str,
        before: Any,
        after: Any,
        unit: str = "",
        target: float | None = None,
        most: bool = True,
        note: str = "",
        fmt: str = "{:.3g}",
    ) -> None:
        met = None
        if target is not None and isinstance(after, int | float):
            met = after <= target if most else after >= target
        shown = {
            w: (fmt.format(v) + unit if isinstance(v, int | float) else (v or "n/a"))
            for w, v in (("before", before), ("after", after))
        }
        out.append(
            {
                "figure": name,
                "before": before,
                "after": after,
                "before_text": shown["before"],
                "after_text": shown["after"],
                "target": None
                if target is None
                else ("<= " if most else ">= ") + f"{target:g}{unit}",
                "target_value": target,
                "met": met,
                "note": note,
            }
        )

    # start-up, item 4
    st = d.get("startup")
    case = lambda label: get(st, "cases", label, "median_ms")  # noqa: E731
    floor, gc_floor = (
        case("floor: import typer, redis"),
        case("floor, GC as our entry point: typer, redis"),
    )
    p_before = case("before: fleetcheck broker-only patrol")
    p_after = case("after:  fleetcheck broker-only patrol")
    fig("start-up: broker-only patrol", p_before, p_after, " ms", fmt="{:.0f}")
    fig("start-up: patrol / floor `import typer, redis` (item 4)", ratio(p_before, floor),
        ratio(p_after, floor), "x", 1.2, fmt="{:.2f}")  # fmt: skip
    fig("start-up: patrol / that floor with our entry point's GC handling (like for like)",
        ratio(p_before, gc_floor), ratio(p_after, gc_floor), "x", 1.2, fmt="{:.2f}")  # fmt: skip

    # the resident shell on kept connections
    rb, ra = d.get("rounds_before"), d.get("rounds_after")
    n, rc = sizes["rounds_hosts"], sizes["rc_ms"]
    w = "routes check"
    for key, label in (("wall_s", "patrol wall"), ("server_cpu_s", "host CPU")):
        fresh_b, kept_b = (
            get(rb, w, f"median_{key}", "fresh"),
            get(rb, w, f"median_{key}", "repeat"),
        )
        fresh_a = get(ra, w, f"rc_{key}", "fresh")
        kept_a = get(ra, w, f"rc_{key}", "repeat_resident")
        fig(f"{n} hosts, {rc:g} ms rc file: {label}, fresh round", fresh_b, fresh_a, " s")
        fig(f"{n} hosts, {rc:g} ms rc file: {label}, repeat round on kept connections / fresh",
            ratio(kept_b, fresh_b), ratio(kept_a, fresh_a), "x", 0.4, fmt="{:.2f}",
            note=f"before: {rev} has no resident shell, its repeat round is one exec a round; "
            "after, the same run's kept round with one exec a round: "
            f"{get(ra, w, f'rc_{key}', 'exec_ratio')}x")  # fmt: skip
    k = get(ra, "killed_shells_round")
    fig("resident shells killed between rounds: the next round's real verdicts",
        "n/a (no resident shell)", get(k, "real_pct"), " %", 100, most=False, fmt="{:.1f}",
        note=f"{get(k, 'shells_killed')} killed, {get(k, 'replaced_within_round')} replaced "
        "within the round")  # fmt: skip

    # 10,000 entries
    sb, sa = d.get("scale_before"), d.get("scale_after")
    e = f"{sizes['scale_entries']:,} entries / {sizes['scale_hosts']} sshds"
    run = lambda doc, key: get(doc, "run", key)  # noqa: E731
    fig(f"{e}: real verdicts within 15 min", run(sb, "real_pct"), run(sa, "real_pct"), " %",
        99, most=False, fmt="{:.1f}")  # fmt: skip
    fig(f"{e}: wall", run(sb, "wall_s"), run(sa, "wall_s"), " s", 900, fmt="{:.0f}")
    fig(f"{e}: client CPU an entry", run(sb, "client_cpu_ms_per_entry"),
        run(sa, "client_cpu_ms_per_entry"), " ms", fmt="{:.1f}")  # fmt: skip
    fig(f"{e}: hosts' CPU an entry", run(sb, "hosts_cpu_ms_per_entry"),
        run(sa, "hosts_cpu_ms_per_entry"), " ms", fmt="{:.1f}")  # fmt: skip
    fig(f"{e}: peak RSS", run(sb, "max_rss_mb"), run(sa, "max_rss_mb"), " MB", 600, fmt="{:.0f}")
    fig(f"{e}: peak open fds", run(sb, "max_fds"), run(sa, "max_fds"), "", 512, fmt="{:.0f}")
    mb = lambda v: None if v is None else v / 1e6  # noqa: E731
    fig(f"{e}: state file after the run", mb(run(sb, "state_bytes")), mb(run(sa, "state_bytes")),
        " MB", fmt="{:.2f}")  # fmt: skip
    fig(f"{e}: history on disk after the run (with the newest round's file)",
        mb(run(sb, "history_bytes")), mb(run(sa, "history_bytes")), " MB", fmt="{:.1f}",
        note=f"before: {rev}'s JSON lines (rotated at 10 MB) and .last.json")  # fmt: skip
    sim = lambda doc, key: get(doc, "simulated", key)  # noqa: E731
    rb_n, ra_n = sim(sb, "rounds"), sim(sa, "rounds")
    fig(f"{e}: state file after {ra_n} simulated rounds (before: {rb_n})",
        mb(sim(sb, "state_bytes")), mb(sim(sa, "state_bytes")), " MB", fmt="{:.2f}",
        note="the state grows while the flap window (10 rounds) fills, then stays")  # fmt: skip
    fig(f"{e}: history on disk after {ra_n} simulated rounds (before: {rb_n})",
        mb(sim(sb, "history_bytes")), mb(sim(sa, "history_bytes")), " MB", fmt="{:.1f}",
        note=f"before: {rev}'s history rotates at 10 MB, so it keeps only its last few "
        "rounds at this scale")  # fmt: skip
    fig(f"{e}: a simulated round's state and history, median", sim(sb, "round_median_s"),
        sim(sa, "round_median_s"), " s", fmt="{:.2f}")  # fmt: skip

    # the history's database
    hb, ha = d.get("history_before"), d.get("history_after")
    h = f"{sizes['history_hosts']:,} hosts"
    days = f"{sizes['history_days']} day{'s' if sizes['history_days'] != 1 else ''}"
    fig(f"{h}: history on disk after {days}", get(ha, "jsonl_mb_same_rounds"),
        get(ha, "disk_mb"), " MB", 300, fmt="{:.1f}",
        note=f"before: the JSON lines of the same rounds, computed (what {rev} would write "
        f"without rotation; with it, it kept {get(hb, 'rounds_kept')} rounds, "
        f"{mb(get(hb, 'jsonl_bytes')) or 0:.1f} MB)")  # fmt: skip
    nb = get(hb, "rounds")
    for key in ("median", "p95", "max"):
        fig(f"{h}: history append, {key}", get(hb, f"append_{key}_s"),
            get(ha, f"append_{key}_s"), " s", 0.5, fmt="{:.2f}",
            note=f"before over {nb} rounds (its appends do not grow: rotation)")  # fmt: skip
    for page, label in (("grid", "grid `/`"), ("charts", "charts `/charts`")):
        fig(f"{h}: {label}, first answer after a new round", get(hb, f"{page}_first_s"),
            get(ha, f"{page}_first_s"), " s", 1.0, fmt="{:.2f}",
            note=f"before: over the {get(hb, 'rounds_kept')} rounds {rev} kept")  # fmt: skip
    fig(f"{h}: a row's page `/row`, first answer", get(hb, "row_first_s"),
        get(ha, "row_first_s"), " s", fmt="{:.2f}")  # fmt: skip
    fig(f"{h}: `explain HOST` (the history read and explained)",
        f"n/a (no explain in {rev})", get(ha, "explain_total_max_s"), " s", 0.5,
        fmt="{:.3f}")  # fmt: skip
    return out


def markdown(res: dict[str, Any]) -> str:
    rev = res["before"]
    kind = "Quick smoke run (--quick: small sizes, NOT the figures)" if res["quick"] else "Full run"
    head = (
        f"**{kind}** at {res['revision']}, {res['started_at']}; load average (1 min) "
        f"{res['load_start'][0]:.2f} at the start, {res['load_end'][0]:.2f} at the end; "
        f"{res['wall_min']:.1f} min.\n\n"
    )
    lines = [f"| figure | before ({rev}) | after | target | met |", "|---|---:|---:|---|---|"]
    notes: list[str] = []  # each note once, numbered below the table
    for f in res["figures"]:
        met = {True: "**met**", False: "**not met**", None: ""}[f["met"]]
        name = f["figure"]
        if f["note"]:
            if f["note"] not in notes:
                notes.append(f["note"])
            name += f" [{notes.index(f['note']) + 1}]"
        lines.append(
            f"| {name} | {f['before_text']} | {f['after_text']} | {f['target'] or ''} | {met} |"
        )
    lines.append("")
    lines += [f"- [{i}] {note}" for i, note in enumerate(notes, 1)]
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
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return rev + ("+dirty" if dirty else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--json", help="write every figure and the pieces' own JSON here")
    ap.add_argument("--markdown", action="store_true", help="print the table")
    ap.add_argument("--splice", metavar="FILE", help="replace the marked block in FILE")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    ap.add_argument("--before", default=BEFORE, metavar="REV", help=f"default {BEFORE}")
    ap.add_argument(
        "--only",
        help="comma-separated pieces: startup, rounds, scale, history, or one side of one "
        "(e.g. scale_before)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=N",
        help=f"one size changed (keys: {', '.join(FULL)})",
    )
    ap.add_argument(
        "--from-json",
        metavar="FILE",
        help="run nothing: the figures again from a run's --json (its pieces), for --markdown "
        "and --splice",
    )
    # the before's history, run by this file copied into the before's tree
    ap.add_argument("--history-jsonl", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--hosts", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--generator", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.history_jsonl:
        history_jsonl(a.hosts, a.rounds, a.generator, Path(a.json))
        return
    if a.from_json:
        saved = json.loads(Path(a.from_json).read_text())
        saved["figures"] = figures(saved["pieces"], saved["sizes"], saved["before"])
        report(saved, a)
        return
    sizes = dict(QUICK if a.quick else FULL)
    for item in a.set:
        key, _, value = item.partition("=")
        if key not in sizes:
            raise SystemExit(f"--set {item}: no size {key!r} (keys: {', '.join(sizes)})")
        sizes[key] = int(value)
    # a SIGTERM ends the run as Ctrl-C does: through the finally that removes the tree
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    res: dict[str, Any] = {
        "quick": a.quick,
        "before": a.before,
        "revision": revision(),
        "started_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores",
        "sizes": sizes,
        "load_start": list(os.getloadavg()),
        "steps": {},
    }
    print(f"# issue 29's figures, {res['revision']} against {a.before}; load {res['load_start']}")
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="fc-fleet-scale-"))
    data: dict[str, Any] = {}
    try:
        old = before_tree(a.before, tmp / "before")
        wanted = set(a.only.split(",")) if a.only else None
        for name, argv, cwd in steps(sizes, a.before, tmp, old):
            if wanted is not None and not {name, name.split("_")[0]} & wanted:
                continue
            res["steps"][name] = run_step(name, argv, cwd, tmp / f"{name}.log")
            out = tmp / f"{name}.json"
            if res["steps"][name]["rc"] == 0 and out.exists():
                data[name] = json.loads(out.read_text())
            else:
                res["steps"][name]["log_tail"] = (tmp / f"{name}.log").read_text()[-3000:]
    finally:
        remove_tree(tmp / "before")
        shutil.rmtree(tmp, ignore_errors=True)
    res["load_end"] = list(os.getloadavg())
    res["wall_min"] = round((time.monotonic() - t0) / 60, 1)
    res["figures"] = figures(data, sizes, a.before)
    res["pieces"] = data
    print(f"# done in {res['wall_min']:.1f} min; load {res['load_end']}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str) + "\n")
    report(res, a)
    if any(s["rc"] != 0 for s in res["steps"].values()):
        raise SystemExit(1)


def report(res: dict[str, Any], a: argparse.Namespace) -> None:
    """The figures printed, and the table printed and spliced as asked."""
    for f in res["figures"]:
        met = {True: "met", False: "NOT MET", None: ""}[f["met"]]
        print(f"  {f['figure']}: {f['before_text']} -> {f['after_text']} {f['target'] or ''} {met}")
    if a.markdown or a.splice:
        text = markdown(res)
        if a.markdown:
            print(text)
        if a.splice:
            splice(Path(a.splice), text)


if __name__ == "__main__":
    main()
