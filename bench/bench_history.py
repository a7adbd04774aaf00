"""Benchmark: the history's database at fleet scale.

Simulates --hosts hosts x 3 host checks (clients, logs, routes) plus two broker-wide rows
(queue_depth, live_hash) for --days days of 96 rounds a day, every round recorded through
`history.append` itself (the store's transaction and the newest round's whole file), each
timed; the state file written by `state.remember` for the first 96 rounds (its size and time).
With --timed N only the last N rounds are: the rounds before are stored by the same store
(`store.add_round`, one transaction a round) from the rows as `history.append` records them,
without making Results, the newest round's file or the state (the same database, in about half
the time). Before the week, the first round of a new database (every row new) is appended
--first times, each into a database of its own.
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
        --days 7 [--timed 48] --json bench/history_results.json
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

    def rows(self) -> list[dict[str, Any]]:
        """A round's host rows as the history records them (`history._line`'s form)."""
        rng = self.rng
        out: list[dict[str, Any]] = []
        for i, h in enumerate(self.hosts):
            if rng.random() < 0.01:
                self.conns[h] = max(0, self.conns[h] + rng.choice((-1, 1)))
            n = self.conns[h]
            addr = f"198.18.{i // 250}.{i % 250 + 1}"
            status = "WARN" if rng.random() < 0.002 else "OK"
            out.append(row("clients", h, status, f"{n} broker connections ({addr}: {n})",
                           {"connections": n, "addresses": 1}, {"min_clients": 1}))  # fmt: skip
            age = rng.uniform(0, 50) if rng.random() > 0.01 else rng.uniform(60, 600)
            out.append(row("logs", h, "OK", f"/var/log/worker.log, {age:.0f}s ago",
                           {"age_s": round(age, 1), "lines": 1}, {"max_age_s": 900}))  # fmt: skip
            out.append(row("routes", h, "OK", "one default route", {"defaults": 1}))
        return out

    def results(self) -> list[Result]:
        return [result(r) for r in self.rows()]


def row(
    check: str,
    host: str | None,
    status: str,
    summary: str,
    metrics: dict[str, Any],
    limits: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out = {"check": check, "host": host, "status": status, "summary": summary, "metrics": metrics}
    return out | ({"limits": limits} if limits else {})


STATUS = {s.label: s for s in Status}


def result(r: dict[str, Any]) -> Result:
    return Result(r["check"], r["host"], STATUS[r["status"]], r["summary"], metrics=r["metrics"],
                  limits=r.get("limits", {}))  # fmt: skip


def broker_dicts(i: int, rng: random.Random) -> list[dict[str, Any]]:
    depth = rng.randint(0, 80)
    fresh, stale = rng.randint(40, 55), i % 7
    return [
        row("queue_depth", None, "OK", f"summed depth {depth} of cap 100", {"depth": depth},
            {"cap": 100}),
        row("live_hash", None, "OK", f"{fresh} fresh, {stale} stale entries",
            {"fresh": fresh, "stale": stale}),
    ]  # fmt: skip


def broker_rows(i: int, rng: random.Random) -> list[Result]:
    return [result(r) for r in broker_dicts(i, rng)]


def started(i: int) -> str:
    return (T0 + timedelta(minutes=15 * i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def report(i: int, fleet: Fleet) -> Report:
    return Report(started(i), 12.0, tuple(broker_rows(i, fleet.rng) + fleet.results()))


def line(i: int, fleet: Fleet) -> dict[str, Any]:
    """Round i as `history._line` makes it of `report(i, fleet)`, without the Results."""
    rows = broker_dicts(i, fleet.rng) + fleet.rows()
    status = "WARN" if any(r["status"] == "WARN" for r in rows) else "OK"
    return {"started_at": started(i), "duration_s": 12.0, "status": status, "rows": rows}


def disk(path: Path) -> int:
    """The database and its WAL."""
    db = store.db_path(path)
    return sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())


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


def first_rounds(hosts: int, times: int) -> list[float]:
    """The first round of a new database (every row new), appended `times` times, each into a
    database of its own: `history.append`'s time."""
    took = []
    for _ in range(times):
        with tempfile.TemporaryDirectory(prefix="fc-bench-history-first-") as tmp:
            r = report(0, Fleet(hosts))
            took.append(timed(functools.partial(history.append, r, Path(tmp) / "history.jsonl"))[0])
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--json")
    ap.add_argument(
        "--timed",
        type=int,
        metavar="N",
        help="only the last N rounds through `history.append`, timed; the rounds before "
        "stored by `store.add_round` from the rows as the history records them (the same "
        "database, built faster: no Results, no newest round's file, no state file)",
    )
    ap.add_argument(
        "--first",
        type=int,
        default=3,
        metavar="K",
        help="time a new database's first round K times",
    )
    a = ap.parse_args()
    from fleetcheck.rounds import state

    load_before = list(os.getloadavg())
    firsts = first_rounds(a.hosts, a.first)
    fleet = Fleet(a.hosts)
    rounds = a.days * 96
    fast = rounds - min(rounds, a.timed if a.timed is not None else rounds)
    res: dict[str, Any] = {"hosts": a.hosts, "checks": 3, "broker_rows": 2, "rounds": rounds}
    res["rounds_built_fast"] = fast
    with tempfile.TemporaryDirectory(prefix="fc-bench-history-") as tmp:
        path = Path(tmp) / "history.jsonl"
        state_path = Path(tmp) / "state.json"
        appends: list[float] = []
        cpus: list[float] = []  # the appends' CPU: what a shared machine's load moves least
        states: list[float] = []
        latest: list[float] = []
        jsonl_bytes = 0
        db = store.connect(path, write=True)
        history.migrate(db, path)
        for i in range(rounds):
            if i < fast:
                data = line(i, fleet)
                with store.transaction(db):
                    store.add_round(db, data)
                    store.expire(db, store.epoch(data["started_at"]))
            else:
                db.close()
                r = report(i, fleet)
                if i < 96:
                    remember = functools.partial(state.remember, r, state_path, state.Memory())
                    took, r = timed(remember)
                    states.append(took)
                data = history._line(r)
                cpu = time.process_time()
                took, _ = timed(functools.partial(history.append, r, path))
                appends.append(took)
                cpus.append(time.process_time() - cpu)
                if i % 8 == 0:  # the newest round's whole file alone, written aside as the
                    aside = Path(tmp) / "aside.last.marshal"  # append writes it (collector held)
                    with collector.paused():
                        latest.append(timed(functools.partial(history.write_latest, r, aside))[0])
            if i == 0:
                jsonl_bytes = len(json.dumps(data, separators=(",", ":"), default=str)) + 1
            if i == 95:
                res["history_mb_96_rounds"] = round(disk(path) / 1e6, 1)
            if i == 95 and states:
                res["state_mb_96_rounds"] = round(state_path.stat().st_size / 1e6, 1)
                res["state_remember_median_s"] = round(sorted(states)[len(states) // 2], 3)
            if i % 96 == 95:
                recent = sorted(appends[-96:])
                told = (
                    f"append median {recent[len(recent) // 2]:.3f} s, max {recent[-1]:.3f} s"
                    if recent
                    else "stored by the store alone"
                )
                day = f"day {i // 96 + 1}: {disk(path) / 1e6:.1f} MB (with the WAL), {told}"
                print(f"{day}, load {os.getloadavg()[0]:.1f}", flush=True)
        db.close()
        size = disk(path)
        now = T0 + timedelta(minutes=15 * (rounds - 1), seconds=30)
        res.update(pages(path, now, fleet.hosts))
        reads = [explain_host(path, h) for h in (fleet.hosts[0], fleet.hosts[-1])]
        db = store.connect(path, write=False)
        (stored,) = db.execute("SELECT count(*) FROM rows").fetchone()
        db.close()
    ordered = sorted(appends) or [0.0]
    cpus = sorted(cpus) or [0.0]
    latest = sorted(latest) or [0.0]
    res.update(
        {
            "rows_recorded": rounds * (a.hosts * 3 + 2),
            "rows_stored": stored,
            "disk_mb": round(size / 1e6, 1),
            "jsonl_mb_same_rounds": round(jsonl_bytes * rounds / 1e6, 1),
            "appends_timed": len(appends),
            "append_median_s": round(ordered[len(ordered) // 2], 3),
            "append_p95_s": round(ordered[int(len(ordered) * 0.95)], 3),
            "append_max_s": round(ordered[-1], 3),
            "append_cpu_median_s": round(cpus[len(cpus) // 2], 3),
            "append_cpu_max_s": round(cpus[-1], 3),
            "append_first_round_s": [round(t, 3) for t in firsts],
            "append_first_round_median_s": round(sorted(firsts)[len(firsts) // 2], 3),
            "latest_file_median_s": round(latest[len(latest) // 2], 3),
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
