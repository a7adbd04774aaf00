"""Start-up cost, whole process, before and after in one run, as users run it: each version
built into a wheel and installed into a fresh venv of its own (`pip install` of the wheel, the
library versions pinned to this checkout's .venv), then started through its `fleetcheck` console
script. (Not the development .venv: its editable install adds a path finder that costs ~20 ms
per process, more than half of `python -c pass` there.)

Times (wall clock of the whole process, median and minimum of --runs, the variants
interleaved run by run so that a busy machine weighs on all of them alike):

- `python -c pass` of the "after" venv, and the imports a patrol cannot avoid, each alone:
  typer, asyncio, redis-py, typer + redis-py (the floor of a patrol: the libraries the
  brief names), and that plus typer building the click commands of our CLI (what typer does
  for every command before it runs one); in the "before" venv, typer 0.29 with the pydantic
  its option coercion imports (`typer._adapters`), alone and with redis-py (the floor before);
- `fleetcheck --version`, `--help`, `run --help`;
- a broker-only patrol, `fleetcheck run --only broker --format json` on a five-host fleet
  with every check configured (hosts.example.toml's check tables), against a redis-server
  this script starts on a unix socket; state and history on (the default), in a temp dir.

"before" is the code at --before (default: the commit issue 15 started from) with the newest
typer its pyproject allows (0.29: pydantic), "after" this checkout's tracked files with the
typer this checkout's .venv has (below 0.29: no pydantic); every other library is pinned to
this checkout's .venv. The issue's targets are printed as its ratios to `python -c pass`
(150 ms and 60 ms when `python -c pass` took 12 ms: 12.5x and 5x). Every process runs in a
neutral directory.

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "5b5e749"  # main when issue 15 started


def unpack(rev: str | None, into: Path) -> Path:
    """The tracked files at `rev` (None: this checkout's working tree of tracked files)."""
    into.mkdir()
    if rev is None:
        files = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True
        ).stdout.split(b"\0")
        for name in filter(None, files):
            src, dst = ROOT / name.decode(), into / name.decode()
            if src.is_file():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
        return into
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def install(tree: Path, venv: Path, constraints: Path) -> Path:
    """A fresh venv with the wheel built from `tree` installed the way the README says; its
    console script."""
    wheels = venv.parent / f"{venv.name}-wheel"
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(wheels), str(tree)], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (wheel,) = wheels.glob("*.whl")
    subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", "-c", str(constraints), str(wheel)], check=True
    )
    return venv / "bin/fleetcheck"


def fleet_config(tree: Path, url: str, into: Path) -> Path:
    text = (tree / "hosts.example.toml").read_text()
    text = text.replace('url = "redis://192.168.1.10:6379/0"', f'url = "{url}"', 1)
    # the first real [[hosts]] table, not the comment that names it above
    start, end = text.index("\n[[hosts]]") + 1, text.index("\n[checks.")
    hosts = "".join(
        f'[[hosts]]\nname = "w{i}"\nssh = "local"\naddrs = ["127.0.1.{i}"]\ntz = "UTC"\n'
        f'logs = [{{ path = "/var/log/arena/worker.log", max_age = "10m" }}]\n\n'
        for i in range(1, 6)
    )
    path = into / "hosts.toml"
    path.write_text(text[:start] + hosts + text[end:])
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--before", default=BEFORE, help=f"default {BEFORE}; none: the after only")
    ap.add_argument("--json", help="also write the numbers to this file")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fleetcheck-startup-"))
    redis = None
    try:
        constraints = tmp / "constraints.txt"
        frozen = subprocess.run(
            [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        constraints.write_text(frozen)
        unpinned = tmp / "constraints-before.txt"  # the newest typer the old pyproject allows
        unpinned.write_text(
            "".join(f"{line}\n" for line in frozen.splitlines() if not line.startswith("typer="))
        )
        has_before = a.before != "none"
        new_tree = unpack(None, tmp / "after")
        old_tree = unpack(a.before, tmp / "before") if has_before else new_tree
        old = install(old_tree, tmp / "venv-before", unpinned) if has_before else None
        new = install(new_tree, tmp / "venv-after", constraints)
        py = str(tmp / "venv-after/bin/python")
        py_old = str(tmp / "venv-before/bin/python")
        versions = {}
        for label, python in (("before", py_old), ("after", py))[not has_before :]:
            versions[label] = subprocess.run(
                [python, "-c", "import typer; print(typer.__version__)"],
                capture_output=True,
                text=True,
            ).stdout.strip()
        sock = tmp / "redis.sock"
        redis = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", str(sock), "--save", "",
             "--appendonly", "no", "--dir", str(tmp)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while not sock.exists():
            if time.monotonic() > deadline:
                raise SystemExit("redis-server did not start")
            time.sleep(0.02)
        config = fleet_config(old_tree, f"unix://{sock}", tmp)  # the older example: both read it
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env_after = {**env, "XDG_STATE_HOME": str(tmp / "state-after")}
        env_before = {**env, "XDG_STATE_HOME": str(tmp / "state-before")}
        patrol = ["run", "-c", str(config), "--only", "broker", "--format", "json"]
        cases: list[tuple[str, list[str], dict[str, str]]] = [
            ("python -c pass", [py, "-c", "pass"], env_after),
            ("import typer", [py, "-c", "import typer"], env_after),
            ("import asyncio", [py, "-c", "import asyncio"], env_after),
            ("import redis", [py, "-c", "import redis"], env_after),
            ("floor: import typer, redis", [py, "-c", "import typer, redis"], env_after),
            (
                # the same, with the cycle collector handled as fleetcheck's entry point does
                # (fleetcheck/__main__.py): off for the imports, their objects frozen
                "floor, GC as our entry point: typer, redis",
                [py, "-c", "import gc; gc.disable(); import typer, redis; gc.freeze()"],
                env_after,
            ),
            (
                "floor + typer builds our CLI (no command run)",
                [
                    py,
                    "-c",
                    "import typer.main, redis, fleetcheck.cli as c; typer.main.get_command(c.app)",
                ],
                env_after,
            ),
        ]
        if has_before:
            cases.append(("before: import typer", [py_old, "-c", "import typer"], env_before))
        # the pydantic floor exists only where "before" has a typer that coerces through it
        # (0.29); a --before whose pyproject pins typer below 0.29 has none
        pydantic_before = has_before and (
            subprocess.run([py_old, "-c", "import typer._adapters"], capture_output=True).returncode
            == 0
        )
        if pydantic_before:
            cases += [
                (
                    "before: import typer._adapters (pydantic)",
                    [py_old, "-c", "import typer._adapters"],
                    env_before,
                ),
                (
                    "before: floor: typer + pydantic + redis",
                    [py_old, "-c", "import typer, typer._adapters, redis"],
                    env_before,
                ),
            ]
        for label, args in (
            ("--version", ["--version"]),
            ("--help", ["--help"]),
            ("run --help", ["run", "--help"]),
            ("broker-only patrol", patrol),
        ):
            if old is not None:
                cases.append((f"before: fleetcheck {label}", [str(old), *args], env_before))
            cases.append((f"after:  fleetcheck {label}", [str(new), *args], env_after))
        for _, cmd, env in cases:  # warm-up (bytecode caches), and every case must work
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
            if proc.returncode not in (0,) and "patrol" not in " ".join(cmd):
                raise SystemExit(f"{cmd}: {proc.stderr}")
        samples: dict[str, list[float]] = {label: [] for label, _, _ in cases}
        cpu: dict[str, list[float]] = {label: [] for label, _, _ in cases}
        for _ in range(a.runs):
            for label, cmd, env in cases:
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t = time.perf_counter()
                subprocess.run(
                    cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp
                )
                samples[label].append(time.perf_counter() - t)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[label].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        check = subprocess.run([str(new), *patrol], env=env_after, capture_output=True)
        rows = json.loads(check.stdout)["results"]
        assert [r["status"] for r in rows] == ["OK"], rows
    finally:
        if redis is not None:
            redis.kill()
            redis.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    machine = f"{os.cpu_count()} cores, Python {platform.python_version()}"
    targets = {"broker-only patrol": 150 / 12, "--help": 60 / 12}  # the issue's, as ratios
    print(
        f"start-up, whole process, {a.runs} interleaved runs ({machine}; load average at the "
        f"end {os.getloadavg()[0]:.1f}): wall median / min, CPU (user+sys) median"
    )
    out: dict[str, Any] = {"runs": a.runs, "machine": machine, "before": a.before, "cases": {}}
    base = statistics.median(samples["python -c pass"])
    for label, _, _ in cases:
        med, low = statistics.median(samples[label]), min(samples[label])
        c = statistics.median(cpu[label])
        out["cases"][label] = {
            "median_ms": round(med * 1000, 1),
            "min_ms": round(low * 1000, 1),
            "cpu_median_ms": round(c * 1000, 1),
        }
        print(
            f"  {label:<42} {med * 1000:7.1f} ms  (min {low * 1000:6.1f})  {med / base:5.2f}x"
            f"   CPU {c * 1000:6.1f} ms"
        )
    for what, ratio in targets.items():
        got = out["cases"][f"after:  fleetcheck {what}"]["median_ms"] / (base * 1000)
        print(f"  target {what}: <= {ratio:.1f}x python -c pass = {ratio * base * 1000:.0f} ms"
              f" here; after: {got:.1f}x")  # fmt: skip
    ratio = {k: v["median_ms"] / (base * 1000) for k, v in out["cases"].items()}
    built = ratio["floor + typer builds our CLI (no command run)"]
    before_floor = ratio.get("before: floor: typer + pydantic + redis")
    print(f"  floors: after typer + redis {ratio['floor: import typer, redis']:.1f}x (+ typer"
          f" building our commands {built:.1f}x), typer alone"
          f" {ratio['import typer']:.1f}x"
          + (f"; before (typer 0.29) typer + pydantic + redis {before_floor:.1f}x"
             if before_floor is not None else ""))  # fmt: skip
    patrol_ms = {
        w: out["cases"][f"{w}:{' ' if w == 'after' else ''} fleetcheck broker-only patrol"][
            "median_ms"
        ]
        for w in ("before", "after")[not has_before :]
    }
    floor_ms = out["cases"]["floor: import typer, redis"]["median_ms"]
    gc_floor_ms = out["cases"]["floor, GC as our entry point: typer, redis"]["median_ms"]
    mine = {w: f"{w} {ms / floor_ms:.2f}x" for w, ms in patrol_ms.items()}
    print(f"  broker-only patrol / floor `import typer, redis` (issue 43: <= 1.3x):"
          f" {', '.join(mine.values())}; after / the floor with our entry point's GC handling"
          f" {patrol_ms['after'] / gc_floor_ms:.2f}x")  # fmt: skip
    print(f"  typer: {versions}")
    out["typer"] = versions
    out["targets_x"] = targets
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
