"""`fleetcheck serve` under load on loopback: N requests from C concurrent clients over a
week of history (one round every 15 minutes for a 20-host fleet), mixed over every page.
Reports errors, throughput, latency percentiles and the server's resident memory after each
fifth of the requests; then two more bursts of the same size, to show where memory settles
(flat memory: no growth per request). Writes bench/serve_results.json.

`--starve` (issue 22 item 3): 300 slow-header and 300 idle connections held open, then
authenticated /healthz timed (p50/max over 20 requests, each on a new connection), the
server's thread count and its CPU use while it holds them; with the fd limit as it comes and
under `ulimit -n 256`; for the server at `--before` (default: where this branch left main, its
console/server.py, and its console/httpd.py if it has one, run in today's tree) and for
today's `fleetcheck serve`, in the same run.
Writes bench/serve_starve_results.json.

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_serve.py [--requests 1000]
    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_serve.py --starve
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
from typing import Any

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


SLOW_HEAD = b"GET / HTTP/1.1\r\nHost: console\r\nX-Slow: "
TOKEN = "bench-token"

# run by `--serve-at REV`: the console on the server module of an earlier commit
OLD_SERVE = """
import sys
sys.path.insert(0, sys.argv[1])
from at_revision import module_at
from fleetcheck.console.source import Source
import subprocess, fleetcheck.console
try:  # the hand-written server the console ran on before waitress, at that commit too
    fleetcheck.console.httpd = module_at(sys.argv[2], "fleetcheck/console/httpd.py",
                                         "fleetcheck.console.httpd")
except subprocess.CalledProcessError:
    pass
old = module_at(sys.argv[2], "fleetcheck/console/server.py", "fleetcheck_server_before")
console = old.Console(Source(__import__("pathlib").Path(sys.argv[3])), 900.0, 86400.0, "1d",
                      auth=old.Auth(sys.argv[4]))
server = old.make_server(console, "127.0.0.1", 0)
print(f"fleetcheck serve: http://127.0.0.1:{server.server_address[1]}/", flush=True)
server.serve_forever(poll_interval=0.5)
"""


def start(cmd: list[str], nofile: int | None) -> tuple[subprocess.Popen[str], str]:
    import resource

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limit,
        env={**os.environ, "FC_TOKEN": TOKEN},
    )  # fmt: skip
    assert proc.stdout is not None
    return proc, proc.stdout.readline().split()[2].rstrip("/")


def hold(port: int, n: int, first: bytes, socks: list[Any], within: float = 15.0) -> int:
    """`n` connections opened at once; `first` sent on each that connects; how many did."""
    import selectors
    import socket

    sel = selectors.DefaultSelector()
    for _ in range(n):
        s = socket.socket()
        socks.append(s)
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_WRITE)
    connected = 0
    deadline = time.monotonic() + within
    while sel.get_map() and time.monotonic() < deadline:
        for key, _ in sel.select(0.2):
            sock = key.fileobj
            sel.unregister(sock)
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:  # type: ignore[union-attr]
                connected += 1
                try:
                    sock.send(first) if first else None  # type: ignore[union-attr]
                except OSError:
                    pass
    sel.close()
    return connected


def proc_status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return -1


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def starve_one(cmd: list[str], nofile: int | None) -> dict[str, Any]:
    proc, base = start(cmd, nofile)
    port = int(base.rsplit(":", 1)[1])
    socks: list[Any] = []
    try:
        threads_idle = proc_status(proc.pid, "Threads")
        t = time.perf_counter()
        slow = hold(port, 300, SLOW_HEAD, socks)
        idle = hold(port, 300, b"", socks)
        opened_s = time.perf_counter() - t
        times, failures = [], []
        cpu0, t0 = cpu_s(proc.pid), time.monotonic()
        for _ in range(20):
            req = urllib.request.Request(
                base + "/healthz", headers={"Authorization": f"Bearer {TOKEN}"}
            )
            t = time.perf_counter()
            try:
                with urllib.request.urlopen(req, timeout=5) as resp:
                    resp.read()
                times.append(time.perf_counter() - t)
            except (urllib.error.URLError, OSError) as e:
                failures.append(f"{type(e).__name__}: {e}"[:120])
                times.append(time.perf_counter() - t)
                if len(failures) >= 3:  # starved: more attempts would only take longer
                    break
        threads = proc_status(proc.pid, "Threads")
        time.sleep(max(0.0, 2.0 - (time.monotonic() - t0)))  # a measuring window of >= 2 s
        cpu = (cpu_s(proc.pid) - cpu0) / (time.monotonic() - t0)
    finally:
        for sock in socks:
            sock.close()
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    times.sort()
    return {
        "connected": {"slow_header": slow, "idle": idle, "seconds": round(opened_s, 2)},
        "healthz_ms": {
            "p50": round(1000 * times[len(times) // 2], 1),
            "max": round(1000 * times[-1], 1),
        },
        "healthz_failed": len(failures),
        "failure_example": failures[:1],
        "threads": {"before_load": threads_idle, "under_load": threads},
        "cpu_share_of_a_core": round(cpu, 2),
        "stderr_lines": len(err.splitlines()),
        "stderr_tracebacks": err.count("Traceback"),
    }


def starve(before: str | None) -> None:
    root = Path(__file__).resolve().parent.parent
    rev = before or subprocess.run(
        ["git", "-C", str(root), "merge-base", "HEAD", "main"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    tmp = Path(tempfile.mkdtemp(prefix="fleetcheck-bench-starve-"))
    hist = tmp / "history.jsonl"
    history.append(fleet_round(datetime.now(UTC), 0), hist)
    cfg = tmp / "hosts.toml"
    cfg.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\n[checks.clients]\n')
    variants = {
        f"before ({rev[:7]})": [sys.executable, "-c", OLD_SERVE, str(root / "bench"), rev,
                                str(hist), TOKEN],
        "after": [sys.executable, "-m", "fleetcheck", "serve", "-c", str(cfg), "--history",
                  str(hist), "--listen", "127.0.0.1:0", "--token-env", "FC_TOKEN"],
    }  # fmt: skip
    result: dict[str, Any] = {
        "load": "300 slow-header + 300 idle connections, then 20 x /healthz (3 failures end it)"
    }
    try:
        for limit_name, nofile in (("fd limit as given", None), ("ulimit -n 256", 256)):
            for name, cmd in variants.items():
                result[f"{name}, {limit_name}"] = starve_one(cmd, nofile)
                print(name, limit_name, json.dumps(result[f"{name}, {limit_name}"]), flush=True)
    finally:
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    result["machine"] = f"{os.cpu_count()} cores, Python {sys.version.split()[0]}"
    out = Path(__file__).with_name("serve_starve_results.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starve", action="store_true", help="slow and idle clients (item 3)")
    ap.add_argument("--before", help="the commit whose server --starve compares against")
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7 * 96, help="history rounds (7 days x 15m)")
    args = ap.parse_args()
    if args.starve:
        starve(args.before)
        return
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
    # the history as recorded: the database beside the JSONL path (a JSONL before it)
    history_bytes = sum(p.stat().st_size for p in tmp.glob("history*") if p.is_file())
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
