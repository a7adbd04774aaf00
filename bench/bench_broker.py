"""Benchmark of the broker-side checks at fleet-breaking sizes.

Starts its own redis-server on loopback (file-descriptor limit raised so it can hold the
clients), fills a live hash of 1,000,000 fields, opens 10,000 client connections from 100
loopback "hosts" (127.0.1.1-100, all claimed by the fleet; four processes each holding 2,500
sockets, two client names a host, idle times spread over 0-10 s by PINGs), runs a simulated
rater, then times each broker check (probe + evaluate, through a fresh patrol context each
run, median of --runs) and one whole patrol, and reads the longest server-side command time of
fleetcheck's own commands from SLOWLOG (threshold 0, reset before each check, read after).

    .venv/bin/python bench/bench_broker.py            # full: 1M fields, 10k clients (~2-3 min)
    .venv/bin/python bench/bench_broker.py --quick    # seconds: 20k fields, 400 clients

The live-hash pass is also measured before/after in the same run, each run in a fresh child
process (so its peak RSS is its own), with hiredis, the variants interleaved run by run: the
code of 74ac460 (whole-reply cuts, digests, pipelined HSCAN), unpacked from git and run as it
was (`tree_pass`), the current plain reader (`current_pass`; also with COUNT 1000), and a
floor: the HSCAN replies read and nothing done with them (`floor_pass`). Each pass reports the
server's own HSCAN time (INFO commandstats before and after) and wall / that time. All give
the same entries and stale counts (checked).

The clients check is also timed end to end (`bench_clientlist.py` compares its reader with
the earlier ones). The ratio is to the server's own CLIENT LIST time (SLOWLOG, median of all
those runs), and a breakdown times each stage on its own: the server's command, the same reply
read on a plain socket (server + transfer), the fetch through redis-py, the reader, the
table's work, evaluate. The floor (that plain-socket read plus the cheapest regex pass over
the reply) is timed alternating with the check, once a round, so the check's ratio to it is
under the same load.
`--clients 10000 --fields 2000` keeps a run to about a minute.

Only loopback is used. Not part of the test run: numbers are measurements, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HOSTS = [f"127.0.1.{i}" for i in range(1, 101)]  # 100 claimed hosts, as on a real fleet
HOLDERS = 4  # processes holding the clients, each for a quarter of the hosts
IDLE_CYCLE_S = 10  # clients' idle times spread over this (see HOLDER)
NOFILE = 65536


def raise_nofile() -> None:
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))
    except (ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


HOLDER = textwrap.dedent(
    """\
    import resource, selectors, socket, sys, time
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, {nofile}))
    except (ValueError, OSError):
        pass
    srcs, port, name = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[4]
    count = int(sys.argv[3])
    socks = []
    for i in range(count):
        s = socket.socket()
        s.bind((srcs[i % len(srcs)], 0))
        s.connect(("127.0.0.1", port))
        n = ("%s-%d" % (name, i // len(srcs) % 2)).encode()  # two names a host
        setname = b"*3\\r\\n$6\\r\\nCLIENT\\r\\n$7\\r\\nSETNAME\\r\\n"
        s.sendall(setname + b"$%d\\r\\n%s\\r\\n" % (len(n), n))
        socks.append(s)
    for s in socks:
        s.recv(16)
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    # every client but every third one PINGs once each {cycle} s, at its own moment: idle
    # times spread over 0..{cycle} s and two commands a host, as on a fleet at work
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    tick, ticks = 0, {ticks}
    while sel.get_map():
        for i in range(tick, len(socks), ticks):
            if i % 3:
                socks[i].sendall(b"*1\\r\\n$4\\r\\nPING\\r\\n")
        deadline = time.monotonic() + {cycle} / ticks
        while (left := deadline - time.monotonic()) > 0:
            for key, _ in sel.select(left):
                try:
                    key.fileobj.recv(64)
                except OSError:  # the server went away: the benchmark is over
                    sys.exit(0)
        tick = (tick + 1) % ticks
    """
).format(nofile=NOFILE, cycle=IDLE_CYCLE_S, ticks=40)


# ---------------------------------------------------------------- live-hash pass, before/after
VARIANTS = [  # (label, code, parser, COUNT); code "tree:<rev>" runs that commit's own code
    ("before (74ac460): cuts, digests, pipelined", "tree:74ac460", "hiredis", 500),
    ("now: hscan_iter, set of names, json", "current", "hiredis", 500),
    ("now, COUNT 1000", "current", "hiredis", 1000),
    ("floor: HSCAN replies read, nothing done", "floor", "hiredis", 500),
]
MAX_AGE = 900.0


def current_pass(r: Any, key: str, now: float, count: int) -> tuple[int, int]:
    """The live_hash check's probe scan and evaluate's counting, of this tree or of the one
    unpacked for this child (its path first on sys.path)."""
    from fleetcheck.checks.live_hash.scan import read_live, stale_counts

    scan = read_live(r, key, count=count, keep=5)
    old, future, _by_owner = stale_counts(scan, now, MAX_AGE)
    min(scan.starts, default=None)
    return scan.entries, old + future + scan.malformed


def floor_pass(r: Any, key: str, now: float, count: int) -> tuple[int, int]:
    """The replies alone: HSCAN as the pass sends it, nothing done with the fields (entries
    counted, stale not judged: -1)."""
    entries = 0
    for _pair in r.hscan_iter(key, count=count):
        entries += 1
    return entries, -1


def proc_status_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process. Not ru_maxrss: Linux carries that over
    from the parent across fork and exec, so a child would report the bench's own peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def hscan_usec(r: Any) -> int:
    """The server's HSCAN time so far (INFO commandstats, microseconds)."""
    return int(r.info("commandstats").get("cmdstat_hscan", {}).get("usec", 0))


def run_variant(
    port: int, code: str, parser: str, count: int, now: float, tree: str | None = None
) -> dict[str, Any]:
    """One pass in this (fresh) process: wall, CPU, RSS before and peak, and the server's
    HSCAN time for the pass (INFO commandstats before and after)."""
    if tree:
        sys.path.insert(0, tree)
    import redis
    from redis._parsers import _HiredisParser, _RESP2Parser

    if parser == "hiredis" and not redis.utils.HIREDIS_AVAILABLE:
        return {"skipped": "hiredis not installed"}
    pool = redis.ConnectionPool(
        port=port,
        protocol=2,
        client_name="bench-variant",
        parser_class=_HiredisParser if parser == "hiredis" else _RESP2Parser,
    )
    r = redis.Redis(connection_pool=pool)
    r.ping()
    rss0 = proc_status_mb("VmRSS")
    fn = {"tree": current_pass, "current": current_pass, "floor": floor_pass}
    server0 = hscan_usec(r)
    c0, t0 = time.process_time(), time.perf_counter()
    entries, stale = fn[code](r, "arena:live", now, count)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = proc_status_mb("VmHWM")
    server = (hscan_usec(r) - server0) / 1e6
    import fleetcheck

    out = {
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "server_hscan_s": round(server, 3),
        "rss_before_mb": round(rss0, 1),
        "rss_peak_mb": round(peak, 1),
        "entries": entries,
        "stale": stale,
        "code_from": str(Path(fleetcheck.__file__).parent.parent),
    }
    return out


def own_id_and_list(r: Any) -> tuple[int, bytes]:
    """CLIENT ID and CLIENT LIST in one round trip, as the patrol context asks them."""
    pipe = r.pipeline(transaction=False)
    pipe.client_id()
    pipe.execute_command("CLIENT", "LIST")
    own_id, raw = pipe.execute()
    return own_id, raw


def h_addrs(host: Any) -> tuple[str, ...]:
    from fleetcheck.core.hostfacts import addrs_of

    return tuple(addrs_of(host))


class Bench:
    def __init__(self, fields: int, clients: int, runs: int) -> None:
        self.fields, self.clients, self.runs = fields, clients, runs
        self.dir = Path(tempfile.mkdtemp(prefix="fleetcheck-bench-"))
        self.port = free_port()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stop_rater = threading.Event()

    # ------------------------------------------------------------ setup
    def start_redis(self) -> None:
        proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
                "--maxclients",
                "20000",
                "--protected-mode",
                "no",
            ],
            stdout=open(self.dir / "redis.log", "wb"),
            stderr=subprocess.STDOUT,
            preexec_fn=raise_nofile,
            start_new_session=True,
        )
        self.procs.append(proc)
        wait_port(self.port)

    def client(self) -> Any:
        import redis

        return redis.Redis(port=self.port, protocol=2, client_name="bench-setup")

    def fill(self) -> float:
        r = self.client()
        start = time.perf_counter()
        now = time.time()
        chunk = 1000
        pipe = r.pipeline(transaction=False)
        for base in range(0, self.fields, chunk):
            mapping = {}
            for i in range(base, min(base + chunk, self.fields)):
                if i % 100 == 0:
                    value = "not json"
                elif i % 10 == 0:
                    value = json.dumps({"started_at": now - 3600 - i % 997, "host": "gone"})
                else:
                    host = f"host{i % 4 + 1}"
                    value = json.dumps({"started_at": now - i % 600, "host": host})
                mapping[f"match:{i}"] = value
            pipe.hset("arena:live", mapping=mapping)
            if len(pipe) >= 20:
                pipe.execute()
        pipe.execute()
        jobs = [json.dumps({"enqueued_at": now - 120 + i}) for i in range(500)]
        r.rpush("q:pending", *jobs)
        r.rpush("q:inflight", *jobs[:40])
        assert r.hlen("arena:live") == self.fields
        r.close()
        return time.perf_counter() - start

    def open_clients(self) -> float:
        start = time.perf_counter()
        per_holder = self.clients // HOLDERS
        holders = []
        for i in range(HOLDERS):
            left = per_holder if i < HOLDERS - 1 else self.clients - per_holder * (HOLDERS - 1)
            srcs = ",".join(HOSTS[i::HOLDERS])
            proc = subprocess.Popen(
                [sys.executable, "-c", HOLDER, srcs, str(self.port), str(left), f"worker{i + 1}"],
                stdout=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=raise_nofile,
            )
            self.procs.append(proc)
            holders.append(proc)
        for proc in holders:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != b"ready":
                raise RuntimeError("a client holder did not start (file descriptor limit?)")
        time.sleep(IDLE_CYCLE_S)  # one cycle of PINGs: the idle times are spread
        return time.perf_counter() - start

    def start_rater(self) -> None:
        import redis

        r = redis.Redis(port=self.port, protocol=2, client_name="rater", socket_timeout=None)

        def loop() -> None:
            while not self.stop_rater.is_set():
                try:
                    r.blpop(["arena:rater:inbox"], timeout=1)
                except Exception:
                    return

        threading.Thread(target=loop, daemon=True).start()

    def config(self) -> Path:
        lines = [
            "[broker]",
            f'url = "redis://127.0.0.1:{self.port}/0"',
            'socket_timeout = "30s"',
            "",
            "[patrol]",
            'deadline = "300s"',
            "",
        ]
        for i, addr in enumerate(HOSTS, 1):
            lines += ["[[hosts]]", f'name = "host{i}"', f'addrs = ["{addr}"]', ""]
        lines += [
            "[checks.clients]",
            "max_unknown = 5",
            "[checks.live_hash]",
            "[checks.queue_depth]",
            'keys = ["q:pending", "q:inflight"]',
            "cap = 1000",
            "samples = 1",
            "[checks.rater_probe]",
            'timeout = "5s"',
            "[checks.broker]",
        ]
        path = self.dir / "hosts.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    # ------------------------------------------------------------ measuring
    def slowlog_reset(self) -> None:
        r = self.client()
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", 1_000_000)
        r.slowlog_reset()
        r.close()

    def slowlog_read(self, client_name: str = "fleetcheck") -> dict[str, Any]:
        r = self.client()
        entries = r.execute_command("SLOWLOG", "GET", "-1")
        r.close()
        ours = []
        for e in entries:
            # [id, time, duration_us, argv, client addr, client name]
            name = e[5] if len(e) > 5 else b""
            if name != client_name.encode():
                continue
            argv = [a.decode("utf-8", "replace") if isinstance(a, bytes) else str(a) for a in e[3]]
            ours.append((int(e[2]), " ".join(argv[:3])[:60]))
        if not ours:
            return {"commands": 0, "max_us": None, "max_command": None}
        longest = max(ours)
        by_cmd: dict[str, list[int]] = {}
        for us, text in ours:
            by_cmd.setdefault(text.split()[0].upper(), []).append(us)
        stats = {}
        for verb, times in sorted(by_cmd.items(), key=lambda kv: -max(kv[1])):
            times.sort()
            stats[verb] = {
                "n": len(times),
                "p50_us": times[len(times) // 2],
                "p99_us": times[min(len(times) - 1, int(len(times) * 0.99))],
                "max_us": times[-1],
                "over_10ms": sum(1 for t in times if t > 10_000),
            }
        return {
            "commands": len(ours),
            "max_us": longest[0],
            "max_command": longest[1],
            "by_command": stats,
        }

    def time_check(
        self, fleet: Any, name: str, runs: int | None = None, check: Any = None, context: Any = None
    ) -> dict[str, Any]:
        from fleetcheck.core import registry
        from fleetcheck.core.context import PatrolContext

        check = check or registry.available()[name]
        config = fleet.checks[name]
        times, statuses, slow, rows = [], [], [], []
        for _ in range(runs or self.runs):
            self.slowlog_reset()
            ctx = (context or PatrolContext)(fleet)
            ctx.broker()  # the connection and its PING are not the check's cost
            start = time.perf_counter()
            try:
                targets = check.targets(fleet, config)
                measured = check.probe_all(ctx, targets, config)
                for target in targets:
                    facts = measured[target.name if target else None]
                    if isinstance(facts, Exception):
                        raise facts
                    result = check.evaluate(facts, config, target, ctx.clock())
                    statuses.append(result.status.label)
                    rows.append((result.status.label, result.summary, result.metrics))
            finally:
                times.append(time.perf_counter() - start)
                ctx.close()
            slow.append(self.slowlog_read())
        worst = max(slow, key=lambda s: s["max_us"] or 0)
        return {
            "check": name,
            "median_s": round(statistics.median(times), 4),
            "runs_s": [round(t, 4) for t in times],
            "statuses": sorted(set(statuses)),
            "server": worst,
            "rows": rows,
        }

    def plain_client_list(self) -> bytes:
        """CLIENT LIST sent and its reply read whole on a plain socket: the server's command
        plus the transfer, with no client library (the reply as RESP: "$len", data, CRLF)."""
        with socket.create_connection(("127.0.0.1", self.port)) as s:
            s.sendall(b"*2\r\n$6\r\nCLIENT\r\n$4\r\nLIST\r\n")
            buf = bytearray()
            need = None
            while need is None or len(buf) < need:
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise RuntimeError("the server closed the connection")
                buf += chunk
                if need is None and b"\r\n" in buf:
                    head = bytes(buf[: buf.index(b"\r\n")])
                    need = int(head[1:]) + len(head) + 4
            return bytes(buf)

    def clients_floor(self) -> float:
        """The least the clients check can cost, timed once: the reply read on a plain
        socket, decoded, and the cheapest regex pass over it (three values a line, nothing
        checked, nothing counted)."""
        import re

        start = time.perf_counter()
        reply = self.plain_client_list()
        text = reply[reply.index(b"\r\n") + 2 : -2].decode()
        re.findall(r"^id=([^ ]*+) addr=([^ ]*):([0-9]++)[^\n]*+$", text, re.M)
        return time.perf_counter() - start

    def clients_end_to_end(self, fleet: Any) -> dict[str, Any]:
        """The clients check end to end (CLIENT LIST on the server, transfer, parse, the
        rows), its runs alternating with the floor's, so both see the same load; each run's
        own CLIENT LIST time on the server (SLOWLOG) gives the ratio."""
        runs: list[float] = []
        server: list[float] = []
        floors: list[float] = []
        for _ in range(max(self.runs, 5)):
            got = self.time_check(fleet, "clients", runs=1)
            runs.append(got["median_s"])
            us = got["server"].get("by_command", {}).get("CLIENT", {}).get("max_us", 0)
            server.append(us / 1e6)
            floors.append(self.clients_floor())
        srv, floor, now = (statistics.median(v) for v in (server, floors, runs))
        return {
            "server_client_list_s": round(srv, 4),
            "floor_s": round(floor, 4),
            "floor_ratio_to_server": round(floor / srv, 2) if srv else None,
            "after": {
                "median_s": round(now, 4),
                "best_s": round(min(runs), 4),
                "runs_s": runs,
                "server_runs_s": server,
                "ratio_to_server": round(now / srv, 2) if srv else None,
                "ratio_to_floor": round(now / floor, 2),
            },
            "breakdown": self.clients_breakdown(fleet),
        }

    def clients_breakdown(self, fleet: Any) -> dict[str, Any]:
        """Where the clients check's time goes, each stage timed on its own (median of
        runs): the server's command (SLOWLOG), the same reply read on a plain socket (server
        + transfer: the floor), the fetch through redis-py (hiredis) at its default read
        size and at 1 MiB, the least a regular-expression pass over the reply costs (three
        values a line, no key checked), decoding + the reader, the table's
        own-connection filter, counts and selection, and the rows' evaluate."""
        import re

        import redis
        from fleetcheck.checks.clients.check import facts_of

        from fleetcheck.core import registry
        from fleetcheck.core.context import PatrolContext
        from fleetcheck.parse.clientlist import normalise_ip, read_client_table

        check = registry.available()["clients"]
        config = fleet.checks["clients"]
        targets = check.targets(fleet, config)
        runs = max(self.runs, 5)
        stages: dict[str, list[float]] = {}

        def timed(label: str, fn: Any) -> Any:
            start = time.perf_counter()
            value = fn()
            stages.setdefault(label, []).append(time.perf_counter() - start)
            return value

        def plain_socket() -> int:
            return len(self.plain_client_list())

        fetch = own_id_and_list

        claimed = frozenset(normalise_ip(a) for h in fleet.hosts for a in h_addrs(h))
        big = redis.Redis(port=self.port, protocol=2, socket_read_size=1 << 20)

        def one_run() -> int:
            self.slowlog_reset()
            ctx = PatrolContext(fleet)
            r = ctx.broker()
            own_id, raw = timed("fetch, redis-py (hiredis, default read size)", lambda: fetch(r))
            timed("fetch, redis-py (hiredis, socket_read_size 1 MiB)", lambda: fetch(big))
            timed("plain socket: command + reading the reply", plain_socket)
            text = raw.decode()
            timed(
                "floor: one re pass, 3 values a line, nothing checked",
                lambda: re.findall(r"^id=([^ ]*+) addr=([^ ]*):([0-9]++)[^\n]*+$", text, re.M),
            )
            read = timed("decode + reader", lambda: read_client_table(raw))
            table = timed("own-connection filter", lambda: read.without_own(own_id))
            facts = timed(
                "counts + selection (every row's facts)",
                lambda: [
                    facts_of(
                        table,
                        claimed,
                        None if t is None else {normalise_ip(a) for a in h_addrs(t)},
                        config.ignore_names,
                    )
                    for t in targets
                ],
            )
            timed(
                "evaluate (every row)",
                lambda: [
                    check.evaluate(f, config, t, ctx.clock())
                    for f, t in zip(facts, targets, strict=True)
                ],
            )
            ctx.close()
            slow = self.slowlog_read()
            stages.setdefault("server: CLIENT LIST (SLOWLOG, longest)", []).append(
                slow.get("by_command", {}).get("CLIENT", {}).get("max_us", 0) / 1e6
            )
            return len(raw)

        for _ in range(runs):
            size = one_run()
        big.close()
        return {
            "reply_bytes": size,
            "stages_ms": {k: round(statistics.median(v) * 1000, 2) for k, v in stages.items()},
        }

    def time_patrol(self, fleet: Any) -> dict[str, Any]:
        from fleetcheck.core import registry, runner

        times = []
        for _ in range(self.runs):
            items = runner.plan(fleet, registry.available())
            start = time.perf_counter()
            report = runner.run_patrol(fleet, items)
            times.append(time.perf_counter() - start)
        return {
            "median_s": round(statistics.median(times), 4),
            "runs_s": [round(t, 4) for t in times],
            "rows": len(report.results),
        }

    def unpack(self, rev: str) -> Path:
        """The tree at `rev`, importable as installed (checks/ as fleetcheck.checks)."""
        into = self.dir / f"tree-{rev}"
        if not into.exists():
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", rev, "fleetcheck", "checks"],
                capture_output=True,
                check=True,
            ).stdout
            into.mkdir()
            subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
            (into / "fleetcheck" / "checks").symlink_to(into / "checks")
        return into

    def live_hash_passes(self, now: float) -> list[dict[str, Any]]:
        """Each variant `runs` times, each run in a fresh child process, the variants
        interleaved run by run (so load drifting over the run hits them alike)."""
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in VARIANTS}
        slow: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in VARIANTS}
        for _ in range(self.runs):
            for label, code, parser, count in VARIANTS:
                extra = []
                if code.startswith("tree:"):
                    extra = ["--tree", str(self.unpack(code.removeprefix("tree:")))]
                    code = "tree"
                self.slowlog_reset()
                proc = subprocess.run(
                    [sys.executable, __file__, "--variant", f"{code}:{parser}:{count}"]
                    + ["--port", str(self.port), "--now", repr(now)]
                    + extra,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs[label].append(json.loads(proc.stdout.strip().splitlines()[-1]))
                slow[label].append(self.slowlog_read("bench-variant"))
        rows = []
        for label, _code, _parser, count in VARIANTS:
            done = runs[label]
            if "skipped" in done[0]:
                rows.append({"variant": label, **done[0]})
                print(f"  {label:<44} skipped: {done[0]['skipped']}", flush=True)
                continue
            hscan = [s.get("by_command", {}).get("HSCAN", {}) for s in slow[label]]
            row = {
                "variant": label,
                "count": count,
                "code_from": done[0]["code_from"],
                "median_wall_s": round(statistics.median(r["wall_s"] for r in done), 3),
                "median_cpu_s": round(statistics.median(r["cpu_s"] for r in done), 3),
                "median_server_hscan_s": round(
                    statistics.median(r["server_hscan_s"] for r in done), 3
                ),
                # the measure: the pass's wall over the server's own HSCAN time
                "wall_over_server": round(
                    statistics.median(r["wall_s"] / r["server_hscan_s"] for r in done), 2
                ),
                "runs_wall_s": [r["wall_s"] for r in done],
                "rss_before_mb": max(r["rss_before_mb"] for r in done),
                "rss_peak_mb": max(r["rss_peak_mb"] for r in done),
                "extra_peak_mb": round(max(r["rss_peak_mb"] - r["rss_before_mb"] for r in done), 1),
                "entries": done[0]["entries"],
                "stale": done[0]["stale"],
                "hscan_calls": max((h.get("n", 0) for h in hscan), default=0),
                "hscan_p50_us": max((h.get("p50_us", 0) for h in hscan), default=0),
                "hscan_p99_us": max((h.get("p99_us", 0) for h in hscan), default=0),
                "hscan_max_us": max((h.get("max_us", 0) for h in hscan), default=0),
            }
            rows.append(row)
            print(
                f"  {label:<44} {row['median_wall_s']:6.2f} s wall, {row['median_cpu_s']:5.2f} s"
                f" CPU, server HSCAN {row['median_server_hscan_s']:.2f} s (wall/server"
                f" {row['wall_over_server']:.2f}), +{row['extra_peak_mb']:.0f} MB peak RSS;"
                f" HSCAN x{row['hscan_calls']} p50 {row['hscan_p50_us']} us",
                flush=True,
            )
        answers = {(r["entries"], r["stale"]) for r in rows if r.get("stale", -1) >= 0}
        if len(answers) > 1:
            raise RuntimeError(f"the live-hash variants disagree: {answers}")
        return rows

    def close(self) -> None:
        self.stop_rater.set()
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, finishes in seconds")
    ap.add_argument("--fields", type=int, help="live-hash fields (default 1,000,000)")
    ap.add_argument("--clients", type=int, help="client connections (default 10,000)")
    ap.add_argument("--runs", type=int, help="runs per check (median reported; default 3)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--variant", help=argparse.SUPPRESS)  # child: code:parser:count
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--now", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--tree", help=argparse.SUPPRESS)  # child: run this tree's code
    args = ap.parse_args()
    if args.variant:
        code, parser, count = args.variant.split(":")
        print(json.dumps(run_variant(args.port, code, parser, int(count), args.now, args.tree)))
        return 0
    fields = args.fields or (20_000 if args.quick else 1_000_000)
    clients = args.clients or (400 if args.quick else 10_000)
    runs = args.runs or (1 if args.quick else 3)
    if shutil.which("redis-server") is None:
        print("bench needs redis-server", file=sys.stderr)
        return 3
    raise_nofile()

    from fleetcheck.config import load
    from fleetcheck.core import registry

    bench = Bench(fields, clients, runs)
    try:
        bench.start_redis()
        fill_s = bench.fill()
        judged_at = time.time() + 60  # one `now` for every variant: same stale counts
        clients_s = bench.open_clients()
        bench.start_rater()
        fleet = load(bench.config(), registry.config_type, registry.host_config_types)
        out: dict[str, Any] = {
            "machine": {
                "cpus": os.cpu_count(),
                "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
                "python": platform.python_version(),
                "redis": subprocess.run(
                    ["redis-server", "--version"], capture_output=True, text=True
                )
                .stdout.split()[2]
                .removeprefix("v="),
            },
            "sizes": {"live_hash_fields": fields, "clients": clients, "runs": runs},
            "setup_s": {"fill": round(fill_s, 2), "clients": round(clients_s, 2)},
            "checks": [],
        }
        for name in ("broker", "clients", "queue_depth", "rater_probe", "live_hash"):
            row = bench.time_check(fleet, name)
            out["checks"].append(row)
            srv = row["server"]
            print(
                f"{name:<12} {row['median_s'] * 1000:9.1f} ms  statuses {','.join(row['statuses'])}"
                f"  server: {srv['commands']} commands, longest {srv['max_us']} us"
                f" ({srv['max_command']})",
                flush=True,
            )
        for row in out["checks"]:
            row.pop("rows", None)
        out["clients_check"] = bench.clients_end_to_end(fleet)
        cc = out["clients_check"]
        print(
            f"clients check end to end; the server's CLIENT LIST (median of all runs):"
            f" {cc['server_client_list_s'] * 1000:.1f} ms",
            flush=True,
        )
        print(
            f"  floor   {cc['floor_s'] * 1000:6.1f} ms = {cc['floor_ratio_to_server']}x the"
            " server's command (plain-socket read + the cheapest regex pass, interleaved)",
            flush=True,
        )
        for label in ("after",):
            row = cc[label]
            print(
                f"  {label:<7} {row['median_s'] * 1000:6.1f} ms = {row['ratio_to_server']}x the"
                f" server's command, {row['ratio_to_floor']}x the floor"
                f" (best run {row['best_s'] * 1000:.1f} ms)",
                flush=True,
            )
        print(f"  breakdown ({cc['breakdown']['reply_bytes']} bytes of reply):", flush=True)
        for stage, ms in cc["breakdown"]["stages_ms"].items():
            print(f"    {stage:<52} {ms:7.2f} ms", flush=True)
        out["patrol"] = bench.time_patrol(fleet)
        print(f"{'patrol':<12} {out['patrol']['median_s'] * 1000:9.1f} ms  (all five checks)")
        print("live-hash pass (scan + counting), each run in a fresh process:", flush=True)
        out["live_hash_passes"] = bench.live_hash_passes(judged_at)
        out["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        if args.json:
            args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(json.dumps(out, indent=2))
        return 0
    finally:
        bench.close()


if __name__ == "__main__":
    sys.exit(main())
