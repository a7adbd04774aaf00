"""Start-up cost: `fleetcheck --version` and `--help` against a bare `python -c pass`, as
ratios measured in one run (issue 6 targets: --version <= 2x, --help <= 10x).

    .venv/bin/python bench/bench_startup.py [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent


def timed(cmd: list[str], runs: int) -> float:
    """Median wall time of `runs` runs (after one warm-up run)."""
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    exe = str(VENV_BIN / "fleetcheck")
    env_note = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
    base = timed([sys.executable, "-c", "pass"], args.runs)
    version = timed([exe, "--version"], args.runs)
    help_ = timed([exe, "--help"], args.runs)
    run_help = timed([exe, "run", "--help"], args.runs)
    print(f"start-up, median of {args.runs} runs ({env_note}):")
    print(f"  python -c pass          {base * 1000:7.1f} ms  1.00x")
    print(
        f"  fleetcheck --version    {version * 1000:7.1f} ms  {version / base:.2f}x (target <= 2x)"
    )
    print(f"  fleetcheck --help       {help_ * 1000:7.1f} ms  {help_ / base:.2f}x (target <= 10x)")
    print(f"  fleetcheck run --help   {run_help * 1000:7.1f} ms  {run_help / base:.2f}x")


if __name__ == "__main__":
    main()
