"""Benchmark: does the OpenSSH-faithful host-key path (issue 23) cost patrol speed? One run,
one lab of N hosts (default 50, real sshd each), the same fleetcheck patrol alternately with
two source trees: the tree to compare against (`--before`, e.g. `git archive 057231a
fleetcheck | tar -x -C /tmp/before`) and this one. Median wall and client CPU of --rounds
patrols each, and their ratio.

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_hostkeys.py --before /tmp/before
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.lab import Lab  # noqa: E402

HERE = Path(__file__).resolve().parent.parent


def patrol(tree: Path, config: Path) -> tuple[float, float]:
    """Wall and CPU (user+sys of the patrol process) of one `fleetcheck run`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "run", "-c", str(config)],
        capture_output=True,
        env=env,
        timeout=600,
        cwd="/",
    )
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):  # OK or WARN only: every host must have been seen
        raise RuntimeError(f"patrol with {tree} exited {proc.returncode}: {proc.stdout[-800:]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, type=Path)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    with Lab() as lab:
        hosts = [lab.add_host(f"h{i:03d}") for i in range(a.hosts)]
        config = lab.config(checks="[checks.routes]\n", hosts=hosts)
        runs: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
        patrol(HERE, config)  # warm caches (imports, page cache) for both trees alike
        patrol(a.before, config)
        for _ in range(a.rounds):
            runs["before"].append(patrol(a.before, config))
            runs["after"].append(patrol(HERE, config))
    med = {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
        for k, v in runs.items()
    }
    for k, (w, c) in med.items():
        print(
            f"{k:6s}: wall {w:.3f} s, client CPU {c:.3f} s ({a.hosts} hosts, median of {a.rounds})"
        )
    print(
        f"after/before: wall {med['after'][0] / med['before'][0]:.3f}, "
        f"CPU {med['after'][1] / med['before'][1]:.3f}"
    )


if __name__ == "__main__":
    main()
