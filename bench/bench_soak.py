"""Long patrols: N rounds at a fixed interval against a lab fleet, in one process, sampling
open file descriptors, threads and RSS, so a leak (sockets, SSH transports, threads) shows up
as growth. Issue 6 asks for 500 rounds at 1 s with fds and RSS flat.

    .venv/bin/python bench/bench_soak.py [--rounds 500] [--every 1] [--hosts 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleetcheck.config import load  # noqa: E402
from fleetcheck.core import registry, runner  # noqa: E402
from fleetcheck.lab import Lab  # noqa: E402
from fleetcheck.rounds.patrol import Outputs, one_round, repeat  # noqa: E402

CHECKS = """
[checks.clients]
[checks.live_hash]
key = "arena:live"
[checks.queue_depth]
keys = ["arena:queue"]
cap = 100
samples = 1
[checks.rater_probe]
inbox = "arena:rater:inbox"
timeout = "2s"
[checks.broker]
[checks.logs]
[checks.routes]
"""


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def sample(n: int, t0: float) -> dict[str, float]:
    return {
        "round": n,
        "elapsed_s": round(time.monotonic() - t0, 1),
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": threading.active_count(),
        "rss_kib": rss_kib(),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--out", default="bench/soak_results.json")
    args = ap.parse_args()
    with Lab() as lab, __import__("tempfile").TemporaryDirectory() as tmp:
        extra = {}
        for i in range(args.hosts):
            h = lab.add_host(f"h{i}")
            lab.start_workers(h, 2)
            log = h.log_path("worker.log")
            log.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ tick\n", time.gmtime()))
            extra[h.name] = f'tz = "UTC"\nlogs = [{{ path = "{log}" }}]'
        lab.start_rater(inbox="arena:rater:inbox")
        cfg = lab.config(checks=CHECKS, host_extra=extra)
        fleet = load(cfg, registry.config_type, registry.host_config_types)
        items = runner.plan(fleet, registry.available())
        outputs = Outputs(state=Path(tmp) / "state.json", history=Path(tmp) / "history.jsonl")
        samples = []
        statuses: dict[str, int] = {}
        t0 = time.monotonic()
        marks = {1, 10, 50} | set(range(100, args.rounds + 1, 100)) | {args.rounds}
        count = [0]

        def on_report(report, next_at):  # type: ignore[no-untyped-def]
            count[0] += 1
            statuses[report.status.label] = statuses.get(report.status.label, 0) + 1
            if count[0] in marks:
                samples.append(sample(count[0], t0))
                print(samples[-1], flush=True)

        repeat(lambda: one_round(fleet, items, outputs), args.every, args.rounds, on_report)
    result = {
        "rounds": args.rounds,
        "every_s": args.every,
        "hosts": args.hosts,
        "statuses": statuses,
        "samples": samples,
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    first, last = samples[0], samples[-1]
    print(
        f"{args.rounds} rounds, {args.hosts} hosts + broker checks: fds {first['fds']} -> "
        f"{last['fds']}, threads {first['threads']} -> {last['threads']}, RSS "
        f"{first['rss_kib'] / 1024:.1f} -> {last['rss_kib'] / 1024:.1f} MiB; statuses {statuses}"
    )


if __name__ == "__main__":
    main()
