"""Benchmark: does the OpenSSH-faithful host-key path (issue 23) cost patrol speed? One run,
one lab of N hosts (default 50, real sshd each), the same fleetcheck patrol alternately with
two source trees: the tree to compare against (`--before`) and this one. Median wall, client
CPU and the whole machine's CPU (the lab's sshds and the hosts' shells run on it too) of
--rounds patrols each, and their ratios. `--logs` adds the logs check (the gathered script's
log fragment and the format detection on the patrol machine).

The before tree needs the checks beside the framework, as the installed package has them
(else the editable install's finder would serve today's checks to the old framework):

    git archive REV fleetcheck checks | tar -x -C /tmp/before
    ln -s /tmp/before/checks /tmp/before/fleetcheck/checks
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


def machine_cpu() -> float:
    """CPU seconds the whole machine has spent (every core, user+nice+system): the lab's sshds
    and the hosts' shells share this machine, so their cost shows here and not in ours."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:4]
    return sum(int(x) for x in fields) / os.sysconf("SC_CLK_TCK")


def patrol(tree: Path, config: Path) -> tuple[float, float, float]:
    """Wall, client CPU (user+sys of the patrol process) and the whole machine's CPU of one
    `fleetcheck run`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    m0 = machine_cpu()
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
    return wall, cpu, machine_cpu() - m0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, type=Path)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--logs", action="store_true", help="also the logs check, on a 200-line ISO log a host"
    )
    a = ap.parse_args()
    with Lab() as lab:
        hosts = [lab.add_host(f"h{i:03d}") for i in range(a.hosts)]
        checks, extra = "[checks.routes]\n", None
        if a.logs:
            from datetime import UTC, datetime

            log = lab.dir / "bench.log"  # one path for every host (namespaces share the fs)
            log.write_text(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%S}Z tick\n" * 200)
            checks += "[checks.logs]\n"
            extra = {h.name: f'tz = "UTC"\n[[hosts.logs]]\npath = "{log}"\n' for h in hosts}
        config = lab.config(checks=checks, host_extra=extra, hosts=hosts)
        runs: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
        patrol(HERE, config)  # warm caches (imports, page cache) for both trees alike
        patrol(a.before, config)
        for _ in range(a.rounds):
            runs["before"].append(patrol(a.before, config))
            runs["after"].append(patrol(HERE, config))
    med = {k: tuple(statistics.median(r[i] for r in v) for i in range(3)) for k, v in runs.items()}
    for k, (w, c, m) in med.items():
        print(
            f"{k:6s}: wall {w:.3f} s, client CPU {c:.3f} s, machine CPU {m:.3f} s "
            f"({a.hosts} hosts, median of {a.rounds})"
        )
    b, n = med["before"], med["after"]
    print(
        f"after/before: wall {n[0] / b[0]:.3f}, client CPU {n[1] / b[1]:.3f}, "
        f"machine CPU {n[2] / b[2]:.3f}"
    )


if __name__ == "__main__":
    main()
