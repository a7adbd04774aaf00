"""Benchmark: the history's database at fleet scale (issue 29 items 2 and 3).

Simulates --hosts hosts x 3 host checks (clients, logs, routes) plus two broker-wide rows
(queue_depth, live_hash) for --days days of 96 rounds a day, every round recorded through
`history.append` itself (the store's transaction and the newest round's whole file), each
timed; the state file written by `state.remember` for the first 96 rounds (its size and time).
Then, against the 7 days' database: the console's pages built by `Console.route` as the
server does, each first with a fresh source and cache (the first answer after a new round:
the newest round's file parsed, nothing cached) and then again (cached): the grid `/`, the
charts `/charts`, a host's page `/host` (its explanation) and a row's page `/row`; and
`explain HOST`'s reading of the history (`history.load(path, host=HOST)` and
`explain.explain` over the newest round's rows; the CLI also runs a patrol, not timed here).
Sizes on disk (database and WAL) after 96 rounds and at the end, against the JSONL history
the same rounds would have taken.

The simulated fleet: log ages under a minute most rounds (the summary's seconds move every
round), 1 % of rounds a log older than a minute, connection counts that change in 1 % of
rounds, 0.2 % of rows WARN for a round; the routes row never changes.

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_history.py --hosts 10000 \
        --days 7 --json bench/history_results.json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleetcheck import collector  # noqa: E402
from fleetcheck.core.model import Report, Result, Status  # noqa: E402
from fleetcheck.rounds import history, store  # noqa: E402

T0 = datetime(2026, 11, 1, tzinfo=UTC)


class Fleet:
    def __init__(self, hosts: int, seed: int = 29) -> None:
        self.rng = random.Random(seed)
        self.hosts = [f"w{i:05d}" for i in range(hosts)]
        self.conns = {h: self.rng.randint(2, 12) for h in self.hosts}

    def results(self) -> list[Result]:
        rng = self.rng
        out = []
        for i, h in enumerate(self.hosts):
            if rng.random() < 0.01:
                self.conns[h] = max(0, self.conns[h] + rng.choice((-1, 1)))
            n = self.conns[h]
            addr = f"198.18.{i // 250}.{i % 250 + 1}"
            status = Status.WARN if rng.random() < 0.002 else Status.OK
            out.append(
                Result(
                    "clients",
                    h,
                    status,
                    f"{n} broker connections ({addr}: {n})",
                    metrics={"connections": n, "addresses": 1},
                    limits={"min_clients": 1},
                )
            )
            age = rng.uniform(0, 50) if rng.random() > 0.01 else rng.uniform(60, 600)
            out.append(
                Result(
                    "logs",
                    h,
                    Status.OK,
                    f"/var/log/worker.log, {age:.0f}s ago",
                    metrics={"age_s": round(age, 1), "lines": 1},
                    limits={"max_age_s": 900},
                )
            )
            out.append(Result("routes", h, Status.OK, "one default route", metrics={"defaults": 1}))
        return out


def broker_rows(i: int, rng: random.Random) -> list[Result]:
    depth = rng.randint(0, 80)
    fresh, stale = rng.randint(40, 55), i % 7
    return [
        Result(
            "queue_depth",
            None,
            Status.OK,
            f"summed depth {depth} of cap 100",
            metrics={"depth": depth},
            limits={"cap": 100},
        ),
        Result(
            "live_hash",
            None,
            Status.OK,
            f"{fresh} fresh, {stale} stale entries",
            metrics={"fresh": fresh, "stale": stale},
        ),
    ]


def disk(path: Path) -> int:
    """The database, its WAL and the keys file beside it (where the store keeps one)."""
    db = store.db_path(path)
    keys = [store.keys_path(path)] if hasattr(store, "keys_path") else []
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal"), *keys) if p.exists())


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def pages(path: Path, now: datetime, hosts: list[str]) -> dict[str, float]:
    """Each page first from a fresh source and cache (uncached), then again (cached)."""
    from fleetcheck.console.server import Console
    from fleetcheck.console.source import Source

    focus = {"logs": {h: ("/var/log/worker.log", 900.0) for h in hosts}}  # the log-age chart
    host = hosts[len(hosts) // 2]
    out: dict[str, float] = {}
    for name, url, query in (
        ("grid", "/", {}),
        ("charts", "/charts", {}),
        ("host", "/host", {"host": [host]}),
        ("row", "/row", {"check": ["clients"], "host": [host]}),
    ):
        console = Console(Source(path), 900.0, 7 * 86400.0, "7d", focus, clock=lambda: now)
        ask = functools.partial(console.route, url, query)
        first, (code, _, body) = timed(ask)
        assert code == 200, (url, code, body[:300])
        again, (code, _, _) = timed(ask)
        assert code == 200
        out[f"{name}_first_s"] = round(first, 3)
        out[f"{name}_cached_s"] = round(again, 3)
        out[f"{name}_bytes"] = len(body)
    return out


def explain_host(path: Path, host: str) -> tuple[float, float]:
    """`explain HOST`'s history part: the host's rounds read, then explained (the newest
    round's rows from its whole file, as the console has them)."""
    from fleetcheck.console.source import Source
    from fleetcheck.iso import parse_iso
    from fleetcheck.rounds import explain

    report = Source(path).snapshot().report
    assert report is not None
    now = parse_iso(report.started_at)
    t = time.perf_counter()
    rounds, _ = history.load(path, host=host)
    read = time.perf_counter() - t
    told = explain.explain(host, report.results, rounds, now, (), explain.hints_from_registry())
    assert told.lines()
    return read, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--json")
    ap.add_argument(
        "--pages-only",
        action="store_true",
        help="every round but the last written by store.add_round untimed (no state, no "
        "newest-round file): to time the pages again without the appends",
    )
    a = ap.parse_args()
    from fleetcheck.rounds import state

    load_before = list(os.getloadavg())
    fleet = Fleet(a.hosts)
    rounds = a.days * 96
    res: dict[str, Any] = {"hosts": a.hosts, "checks": 3, "broker_rows": 2, "rounds": rounds}
    with tempfile.TemporaryDirectory(prefix="fc-bench-history-") as tmp:
        path = Path(tmp) / "history.jsonl"
        state_path = Path(tmp) / "state.json"
        appends: list[float] = []
        states: list[float] = []
        latest: list[float] = []
        jsonl_bytes = 0
        for i in range(rounds):
            at = T0 + timedelta(minutes=15 * i)
            results = broker_rows(i, fleet.rng) + fleet.results()
            report = Report(at.strftime("%Y-%m-%dT%H:%M:%S.000Z"), 12.0, tuple(results))
            if a.pages_only and i < rounds - 1:
                db = store.connect(path, write=True)
                try:
                    history.migrate(db, path)
                    with store.transaction(db):
                        store.add_round(db, history._line(report))
                        store.expire(db, at.timestamp())
                finally:
                    db.close()
                continue
            if i < 96 and not a.pages_only:
                remember = functools.partial(state.remember, report, state_path, state.Memory())
                took, report = timed(remember)
                states.append(took)
            if i == 0:
                line = history._line(report)
                jsonl_bytes = len(json.dumps(line, separators=(",", ":"), default=str)) + 1
            took, _ = timed(functools.partial(history.append, report, path))
            appends.append(took)
            if i % 8 == 0:  # the newest round's whole file alone, written aside as the
                aside = Path(tmp) / "aside.last.marshal"  # append writes it (collector held)
                with collector.paused():
                    latest.append(timed(functools.partial(history.write_latest, report, aside))[0])
            if i == 95 and not a.pages_only:
                res["history_mb_96_rounds"] = round(disk(path) / 1e6, 1)
                res["state_mb_96_rounds"] = round(state_path.stat().st_size / 1e6, 1)
                res["state_remember_median_s"] = round(sorted(states)[48], 3)
            if i % 96 == 95 and not a.pages_only:
                print(
                    f"day {i // 96 + 1}: {disk(path) / 1e6:.1f} MB, append median "
                    f"{sorted(appends[-96:])[48]:.3f} s, max {max(appends[-96:]):.3f} s, "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        size = disk(path)
        now = T0 + timedelta(minutes=15 * (rounds - 1), seconds=30)
        res.update(pages(path, now, fleet.hosts))
        reads = [explain_host(path, h) for h in (fleet.hosts[0], fleet.hosts[-1])]
        db = store.connect(path, write=False)
        (stored,) = db.execute("SELECT count(*) FROM rows").fetchone()
        db.close()
    ordered = sorted(appends)
    if a.pages_only:
        ordered = appends = latest = [0.0]
    res.update(
        {
            "rows_recorded": rounds * (a.hosts * 3 + 2),
            "rows_stored": stored,
            "disk_mb": round(size / 1e6, 1),
            "jsonl_mb_same_rounds": round(jsonl_bytes * rounds / 1e6, 1),
            "append_median_s": round(ordered[len(ordered) // 2], 3),
            "append_p95_s": round(ordered[int(len(ordered) * 0.95)], 3),
            "append_max_s": round(ordered[-1], 3),
            "append_first_round_s": round(appends[0], 3),
            "latest_file_median_s": round(sorted(latest)[len(latest) // 2], 3),
            "explain_read_max_s": round(max(r for r, _ in reads), 3),
            "explain_total_max_s": round(max(t for _, t in reads), 3),
            "load_before": load_before,
            "load_after": list(os.getloadavg()),
            "machine": f"{os.cpu_count()} cores, shared with other engineers' work",
        }
    )
    print(json.dumps(res, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
