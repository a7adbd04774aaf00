"""Each patrol recorded as one round, for `fleetcheck history`, the console's charts and
`explain`'s look at a host's past. Rounds live in an SQLite database beside the history path
(fleetcheck.rounds.store); the path keeps its name (`history-x.jsonl`). A JSONL history from an
older fleetcheck is read as it is until the first append migrates it (then it is moved aside
as `*.migrated`). Appends run one at a time under the history's lock (two overlapping runs
never both migrate or lose a round); the files are private (0600).

The newest round is also kept whole beside it (`latest_path`, evidence included): evidence is
too bulky for every round, but the console shows the newest one's, and falls back to the
database's round when that file lags, is missing or is damaged."""

from __future__ import annotations

import json
import marshal
import os
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetcheck.core.model import BROKER_WIDE, Report, Status, place, worst_per_host
from fleetcheck.files import private_open, replace_private
from fleetcheck.iso import iso_utc, parse_iso
from fleetcheck.rounds import store


def append(report: Report, path: Path) -> None:
    """Record the round under the history's lock (one append or migration at a time), with
    the cycle collector paused (fleetcheck.collector: a round's rows are many objects)."""
    import fcntl

    from fleetcheck import collector

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with collector.paused(), private_open(path.with_name(path.name + ".lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _append(report, path)


def _line(report: Report) -> dict[str, Any]:
    """The round as a JSONL history line records it (and the database stores its rows)."""
    return {
        "started_at": report.started_at,
        "duration_s": round(report.duration_s, 3),
        "status": report.status.label,
        "rows": [
            {
                "check": r.check,
                "host": r.host,
                **({"item": r.item} if r.item is not None else {}),
                "status": r.status.label,
                "summary": r.summary,
                "metrics": r.metrics,
                **({"limits": r.limits} if r.limits else {}),
            }
            for r in report.results
        ],
    }


def _append(report: Report, path: Path) -> None:
    """The round into the database (one transaction), then, once stored, its whole file."""
    line = _line(report)
    try:
        db = store.connect(path, write=True)
        try:
            migrate(db, path)
            with store.transaction(db):
                store.add_round(db, line)
                store.expire(db, store.epoch(line["started_at"]))
        finally:
            db.close()
    except sqlite3.Error as e:  # a full disk, a damaged file: the caller warns
        raise OSError(f"{store.db_path(path)}: {e}") from None
    write_latest(report, latest_path(path))
    # every key as an older fleetcheck kept it beside the database (it names every host)
    store.db_path(path).with_suffix(".keys").unlink(missing_ok=True)


def migrate(db: Any, path: Path) -> None:
    """A JSONL history (and its rotated file) into the database in one transaction, every
    readable round with each row as written; then the files are moved aside as `*.migrated`
    (kept: nothing is deleted). Done once: the database records it, so a crash between the
    commit and the move never migrates twice."""
    if store.meta(db, "migrated") is None:
        records, bad = _read_jsonl(path)
        with store.transaction(db):
            for data in records:
                store.add_round(db, data, full=True)
            store.set_meta(db, "migrated", json.dumps({"rounds": len(records), "unreadable": bad}))
    for p in _jsonl_files(path):
        if p.exists():
            os.replace(p, p.with_name(p.name + ".migrated"))


def _jsonl_files(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + ".1"), path


def latest_path(history_path: Path) -> Path:
    """Where the newest round is kept whole: `history-x.jsonl` -> `history-x.last.marshal`."""
    return history_path.with_name(history_path.stem + ".last.marshal")


def write_latest(report: Report | dict[str, Any], path: Path) -> None:
    """The report as `run --format json` builds it (`Report.to_dict`, or that document) in
    Python's marshal format (written and read by the same fleetcheck, ten times faster than
    JSON), replaced atomically and private (evidence carries log lines and client names).
    A value marshal cannot hold is written as JSON would have written it. The JSON file an
    older fleetcheck kept (`*.last.json`) is removed."""
    doc = report.to_dict() if isinstance(report, Report) else report
    try:
        data = marshal.dumps(doc)
    except ValueError:  # rare: a datetime, a Path in a row's evidence
        data = marshal.dumps(json.loads(json.dumps(doc, default=str)))
    replace_private(path, data)
    path.with_name(path.name.removesuffix(".last.marshal") + ".last.json").unlink(missing_ok=True)


def read_latest(path: Path) -> dict[str, Any]:
    """The newest round's document from its file. Raises FileNotFoundError when there is
    none, OSError when it cannot be read, ValueError when it is not a document (torn,
    damaged, written by a Python whose marshal format this one does not know, or in the
    columns an older fleetcheck wrote: its readers fall back to the database's round)."""
    try:
        doc = marshal.loads(path.read_bytes())
    except (EOFError, TypeError, ValueError) as e:
        raise ValueError(f"not a newest-round file ({e})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"not a newest-round file (a {type(doc).__name__})")
    if not isinstance(doc.get("results"), list):
        raise ValueError("not a newest-round file (no results)")
    return doc


@dataclass(frozen=True)
class Round:
    started_at: datetime
    status: Status
    hosts: dict[str, Status]  # model.BROKER_WIDE for broker-wide rows
    summaries: dict[str, list[str]]
    rows: tuple[dict[str, Any], ...] = ()  # as recorded: check, host, status, summary, metrics
    duration_s: float = 0.0


def load(
    path: Path, since: datetime | None = None, host: str | None = None
) -> tuple[list[Round], int]:
    """Rounds from the history, oldest first (those at or after `since`; with `host`, each
    round with only that host's rows: its name, or model.BROKER_WIDE); and how many could
    not be read (reported, never fatal: a torn last line after a crash is normal)."""
    key = None if host is None else ("" if host == BROKER_WIDE else host)
    got = from_store(path, lambda db: store.read(db, since, key))
    if got is not None:
        found, bad = got
        rounds, more = [], 0
        for fields, rows in found:
            try:
                rounds.append(_round({**fields, "rows": rows}))
            except (ValueError, KeyError, TypeError, AttributeError):
                more += 1
        return rounds, bad + more
    records, bad = _read_jsonl(path)
    rounds = []
    for data in records:
        rnd = _round(data)
        if host is not None:
            rnd = _round({**data, "rows": [r for r in data["rows"] if place(r["host"]) == host]})
        rounds.append(rnd)
    if since is not None:
        rounds = [r for r in rounds if r.started_at >= since]
    return rounds, bad


def load_statuses(path: Path, since: datetime | None = None) -> tuple[list[Round], int]:
    """As `load(path, since)`, each Round with its hosts' statuses only (no summaries, no
    rows): all that `fleetcheck history`'s timeline draws, read without rebuilding every row
    of every round (see store.read_statuses). A history not yet in a database is read by
    `load`."""
    got = from_store(path, lambda db: store.read_statuses(db, since))
    if got is None:
        rounds, bad = load(path, since)
        return [replace(r, summaries={}, rows=()) for r in rounds], bad
    (found, more), bad = got
    rounds = []
    for fields, hosts in found:
        try:
            rounds.append(
                Round(
                    started_at=parse_iso(str(fields["started_at"])),
                    status=Status.parse(str(fields["status"])),
                    hosts=hosts,
                    summaries={},
                    duration_s=float(fields.get("duration_s") or 0.0),
                )
            )
        except (ValueError, TypeError):
            more += 1
    return rounds, bad + more


def from_store(path: Path, read: Callable[[Any], Any]) -> tuple[Any, int] | None:
    """`read(db)` of the history's database and how many rounds its migration could not
    read; None when there is no database yet, or it is not migrated (the JSONL is read)."""
    if not store.exists(path):
        return None
    db = store.connect(path, write=False)
    try:
        done = store.meta(db, "migrated")
        if done is None:
            return None
        return read(db), int(json.loads(done).get("unreadable", 0))
    except sqlite3.Error as e:
        raise OSError(f"{store.db_path(path)}: {e}") from None
    finally:
        db.close()


def exists(path: Path) -> bool:
    """Whether there is a history at `path` (its database, or a JSONL not yet migrated)."""
    return store.exists(path) or any(p.exists() for p in _jsonl_files(path))


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The readable rounds of a JSONL history (rotated file first) as recorded, oldest
    first; and how many lines could not be read."""
    records: list[tuple[datetime, dict[str, Any]]] = []
    bad = 0
    for p in _jsonl_files(path):
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                pieces: list[Any] = [json.loads(line)]
            except ValueError:
                pieces = _pieces(line)  # texts, parsed below
            for record in pieces:
                try:
                    data = json.loads(record) if isinstance(record, str) else record
                    records.append((_round(data).started_at, data))
                except (ValueError, KeyError, TypeError, AttributeError):
                    bad += 1
    records.sort(key=lambda r: r[0])
    return [d for _, d in records], bad


def export_jsonl(path: Path, out: Any, since: datetime | None = None) -> int:
    """Every round as one JSON line (the format the history had before the database; a row
    carried from an earlier round has `as_of`), oldest first; returns how many."""
    rounds, _ = load(path, since)
    for rnd in rounds:
        line = {
            "started_at": iso_utc(rnd.started_at),
            "duration_s": rnd.duration_s,
            "status": rnd.status.label,
            "rows": list(rnd.rows),
        }
        out.write(json.dumps(line, separators=(",", ":"), default=str) + "\n")
    return len(rounds)


ROUND_START = '{"started_at":'


def _pieces(line: str) -> list[str]:
    """A line that does not parse, split into the torn fragment and the complete round(s) an
    older fleetcheck appended to it without starting a new line (each round begins with
    ROUND_START), so only the fragment is lost."""
    starts = [m.start() for m in re.finditer(re.escape(ROUND_START), line)]
    if not starts or starts == [0]:
        return [line]
    bounds = ([0] if starts[0] > 0 else []) + starts + [len(line)]
    return [line[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _round(data: dict[str, Any]) -> Round:
    statuses = [(place(row["host"]), Status.parse(row["status"])) for row in data["rows"]]
    summaries: dict[str, list[str]] = {}
    for row, (host, status) in zip(data["rows"], statuses, strict=True):
        if status is not Status.OK:
            summaries.setdefault(host, []).append(f"{row['check']}: {row['summary']}")
    return Round(
        started_at=parse_iso(data["started_at"]),
        status=Status.parse(data["status"]),
        hosts={h: s for h, s in worst_per_host(statuses).items() if h is not None},
        summaries=summaries,
        rows=tuple(data["rows"]),
        duration_s=float(data.get("duration_s") or 0.0),
    )


def timeline(rounds: list[Round], host: str | None = None) -> list[tuple[str, list[Status | None]]]:
    """Per host, one cell per round (None where the host was not in that round)."""
    hosts = sorted({h for r in rounds for h in r.hosts}, key=lambda h: (h != BROKER_WIDE, h))
    if host is not None:
        hosts = [h for h in hosts if h == host]
    return [(h, [r.hosts.get(h) for r in rounds]) for h in hosts]


def went_dark(rounds: list[Round], host: str) -> datetime | None:
    """When the host's current bad streak began (None if it is OK now)."""
    start = None
    for r in rounds:
        s = r.hosts.get(host)
        if s is None:
            continue
        if s is Status.OK:
            start = None
        elif start is None:
            start = r.started_at
    return start
