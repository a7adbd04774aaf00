"""Benchmark: the history's database at fleet scale (issue 29 item 2).

Simulates --hosts hosts x 3 host checks (clients, logs, routes) for --days days of 96 rounds
a day, appended round by round through the store as `history.append` does (one transaction a
round); then times the last --timed rounds through `history.append` itself (the whole path,
the newest round's file included), one host's timeline over the 7 days
(`history.load(path, since, host)`, what `history --host` and `explain` read), and reports
the size on disk (database and WAL) against what the JSONL history would have taken.

The simulated fleet: log ages under a minute most rounds (the summary's seconds move every
round), 1 % of rounds a log older than a minute, connection counts that change in 1 % of
rounds, 0.2 % of rows WARN for a round; the routes row never changes.

    .venv/bin/python bench/bench_history.py --hosts 10000 --days 7 --json bench/history_results.json
"""

from __future__ import annotations

import argparse
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


def line_of(at: datetime, results: list[Result]) -> dict[str, Any]:
    report = Report(at.strftime("%Y-%m-%dT%H:%M:%S.000Z"), 12.0, tuple(results))
    return json.loads(json.dumps(history._line(report), default=str))


def disk(path: Path) -> int:
    db = store.db_path(path)
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--timed", type=int, default=5, help="rounds through history.append")
    ap.add_argument("--json")
    a = ap.parse_args()
    load_before = list(os.getloadavg())
    fleet = Fleet(a.hosts)
    rounds = a.days * 96
    with tempfile.TemporaryDirectory(prefix="fc-bench-history-") as tmp:
        path = Path(tmp) / "history.jsonl"
        appends: list[float] = []
        jsonl_bytes = 0
        for i in range(rounds - a.timed):
            at = T0 + timedelta(minutes=15 * i)
            line = line_of(at, fleet.results())
            if i == 0:
                jsonl_bytes = len(json.dumps(line, separators=(",", ":"))) + 1
            t = time.perf_counter()
            db = store.connect(path, write=True)
            try:
                history.migrate(db, path)
                with store.transaction(db):
                    store.add_round(db, line)
                    store.expire(db, store.epoch(line["started_at"]))
            finally:
                db.close()
            appends.append(time.perf_counter() - t)
            if i % 96 == 0:
                print(f"day {i // 96}: {disk(path) / 1e6:.1f} MB, append {appends[-1]:.3f} s")
        whole: list[float] = []
        for i in range(rounds - a.timed, rounds):
            at = T0 + timedelta(minutes=15 * i)
            report = Report(at.strftime("%Y-%m-%dT%H:%M:%S.000Z"), 12.0, tuple(fleet.results()))
            t = time.perf_counter()
            history.append(report, path)
            whole.append(time.perf_counter() - t)
        size = disk(path)
        since = T0 + timedelta(minutes=15 * rounds) - timedelta(days=7)
        reads = []
        for h in (fleet.hosts[0], fleet.hosts[len(fleet.hosts) // 2], fleet.hosts[-1]):
            t = time.perf_counter()
            got, _ = history.load(path, since, h)
            reads.append(time.perf_counter() - t)
            assert len(got) >= rounds - 96 and all(h in r.hosts for r in got)
        db = store.connect(path, write=False)
        (stored,) = db.execute("SELECT count(*) FROM rows").fetchone()
        db.close()
    appends.sort()
    res = {
        "hosts": a.hosts,
        "checks": 3,
        "rounds": rounds,
        "rows_recorded": rounds * a.hosts * 3,
        "rows_stored": stored,
        "disk_mb": round(size / 1e6, 1),
        "jsonl_mb_same_rounds": round(jsonl_bytes * rounds / 1e6, 1),
        "append_store_median_s": round(appends[len(appends) // 2], 3),
        "append_store_max_s": round(appends[-1], 3),
        "append_whole_median_s": round(sorted(whole)[len(whole) // 2], 3),
        "append_whole_max_s": round(max(whole), 3),
        "host_timeline_7d_max_s": round(max(reads), 3),
        "load_before": load_before,
        "load_after": list(os.getloadavg()),
        "machine": f"{os.cpu_count()} cores, shared with other engineers' work",
    }
    print(json.dumps(res, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
