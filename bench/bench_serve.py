"""`fleetcheck serve` under load on loopback: N requests from C concurrent clients over a
week of history (one round every 15 minutes for a 20-host fleet), mixed over every page.
Reports errors, throughput, latency percentiles and the server's resident memory after each
fifth of the requests; then two more bursts of the same size, to show where memory settles
(flat memory: no growth per request). Writes bench/serve_results.json.

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_serve.py [--requests 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fleetcheck.core.model import Report, Result, Status
from fleetcheck.rounds import history

HOSTS = [f"w{i:02d}" for i in range(20)]


def fleet_round(at: datetime, i: int) -> Report:
    iso = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    rows = [
        Result("queue_depth", None, Status.OK, "depth", metrics={"depth": 40 + i % 60, "cap": 100}),
        Result("live_hash", None, Status.OK, "live", metrics={"fresh": 30, "stale": i % 7}),
    ]
    for n, h in enumerate(HOSTS):
        bad = (i + n) % 97 == 0
        rows.append(
            Result(
                "clients",
                h,
                Status.CRIT if bad else Status.OK,
                f"{h}: {0 if bad else 8} connections",
                metrics={"connections": 0 if bad else 8, "by_addr": {f"10.0.0.{n}": 8}},
            )
        )
        rows.append(
            Result(
                "logs",
                h,
                Status.OK,
                f"{h}: last line <script>x</script> 30s ago",
                metrics={"age_s": 30.0 + (i * n) % 300, "logs": {"/var/log/w.log": {"age_s": 30}}},
                evidence={"logs": [{"path": "/var/log/w.log", "last_line": "<b>line</b>"}]},
            )
        )
    return Report(iso, 1.5, tuple(rows))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7 * 96, help="history rounds (7 days x 15m)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fleetcheck-bench-serve-"))
    hist = tmp / "history.jsonl"
    now = datetime.now(UTC)
    for i in range(args.rounds):
        history.append(fleet_round(now - timedelta(minutes=15 * (args.rounds - 1 - i)), i), hist)
    cfg = tmp / "hosts.toml"
    cfg.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\n[checks.clients]\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetcheck", "serve", "-c", str(cfg), "--history", str(hist),
         "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    base = proc.stdout.readline().split()[2].rstrip("/")
    paths = ["/", "/charts", "/row?check=logs&host=w03", "/metrics", "/report.json", "/healthz"]
    errors: list[str] = []
    latencies: dict[str, list[float]] = {p: [] for p in paths}
    lock = threading.Lock()
    counter = [0]
    first = [True]  # latencies and checkpoints from the first burst only
    memory: list[tuple[int, int]] = [(0, rss_kib(proc.pid))]
    checkpoints = {args.requests * k // 5 for k in range(1, 6)}

    def client() -> None:
        while True:
            with lock:
                if counter[0] >= args.requests:
                    return
                counter[0] += 1
                n = counter[0]
            path = paths[n % len(paths)]
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(base + path, timeout=30) as resp:
                    resp.read()
                    if resp.status != 200:
                        errors.append(f"{path}: {resp.status}")
            except (urllib.error.URLError, OSError) as e:
                errors.append(f"{path}: {e}")
            dt = time.perf_counter() - t
            with lock:
                if not first[0]:
                    continue
                latencies[path].append(dt)
                if n in checkpoints:
                    memory.append((n, rss_kib(proc.pid)))

    # one warm-up pass over every page (first render, imports), not counted
    for p in paths:
        urllib.request.urlopen(base + p, timeout=60).read()
    memory[0] = (0, rss_kib(proc.pid))
    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - start
    bursts = [rss_kib(proc.pid)]
    first[0] = False
    for _ in range(2):  # the same load again: memory must not keep growing
        counter[0] = 0
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        bursts.append(rss_kib(proc.pid))
    proc.terminate()
    proc.wait(timeout=10)
    history_bytes = hist.stat().st_size
    subprocess.run(["rm", "-rf", str(tmp)], check=False)

    every = sorted(x for v in latencies.values() for x in v)

    def pct(xs: list[float], q: float) -> float:
        return round(1000 * xs[min(len(xs) - 1, int(q * len(xs)))], 1) if xs else 0.0

    result = {
        "requests": args.requests,
        "clients": args.clients,
        "history_rounds": args.rounds,
        "history_bytes": history_bytes,
        "error_examples": errors[:5],
        "seconds": round(elapsed, 2),
        "requests_per_s": round(args.requests / elapsed, 1),
        "latency_ms": {"p50": pct(every, 0.5), "p95": pct(every, 0.95), "max": pct(every, 1.0)},
        "latency_ms_by_path": {
            p: {"p50": pct(sorted(v), 0.5), "p95": pct(sorted(v), 0.95)}
            for p, v in latencies.items()
        },
        "rss_kib_after_requests": memory,
        "rss_kib_after_each_burst": bursts,
        "errors_in_all_bursts": len(errors),
        "machine": f"{os.cpu_count()} cores, Python {sys.version.split()[0]}",
    }
    out = Path(__file__).with_name("serve_results.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
