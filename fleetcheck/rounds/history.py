"""Each patrol recorded as one round, so `fleetcheck history` can show when a machine went
dark, `fleetcheck serve` can chart the numbers behind each verdict and `explain` can read a
host's past. Rounds are stored in an SQLite database beside the history path
(fleetcheck.rounds.store: rows stored when they change, staggered refreshes, retention, WAL so
a second process reads while a patrol writes); the history path keeps its name (`history-x.jsonl`),
and a JSONL history written by an older fleetcheck is migrated into the database on the
first append (every row, as written), then moved aside as `*.migrated`. Until then, and for
a history that was never migrated, the JSONL is read as before. `export_jsonl` writes the
rounds back out as JSON lines. Appends happen under a lock (and, from a patrol with state,
under the state lock too); the files are private (0600).

Next to the history, the latest round is kept whole (`latest_path`: the `run --format
json` document, evidence included, in marshal's format: see `write_latest`), replaced
atomically each round: evidence is too bulky to keep for every round, but the console shows
it for the newest one."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import compress, repeat
from operator import attrgetter, is_
from pathlib import Path
from typing import Any

from fleetcheck import collector
from fleetcheck.core.model import BROKER_WIDE, Report, Status, place, worst_per_host
from fleetcheck.files import private_open
from fleetcheck.iso import parse_iso

MAX_BYTES = 10 * 1024 * 1024


def append(report: Report, path: Path, max_bytes: int = MAX_BYTES) -> None:
    """Record the round (`max_bytes`: the JSONL's rotation size, for callers from before the
    database; the database is bounded by retention instead)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with private_open(path.with_name(path.name + ".lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with collector.paused():  # see fleetcheck.collector
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
                "status": r.status.label,
                "summary": r.summary,
                "metrics": r.metrics,
                **({"limits": r.limits} if r.limits else {}),
            }
            for r in report.results
        ],
    }


def _append(report: Report, path: Path) -> None:
    from fleetcheck.rounds import store

    line = {
        "started_at": report.started_at,
        "duration_s": round(report.duration_s, 3),
        "status": report.status.label,
        # read by the store from the results (in the round's order: a check's second row
        # for one host keeps its key); rows made only of those it stores
        "results": report.results,
    }
    latest: _Latest | None = None
    try:
        db = store.connect(path, write=True)
        try:
            migrate(db, path)
            with store.transaction(db):
                kept = store.add_round(db, line, keys_file=store.keys_path(path))
                store.expire(db, store.epoch(line["started_at"]))
                # made while SQLite commits and checkpoints (it lets go of the interpreter
                # then): the document and its file, ~70 ms of a round at 10,000 hosts, beside
                # ~50 ms of the commit's
                latest = _Latest(report, latest_path(path))
        finally:
            db.close()
    except BaseException as e:
        if latest is not None:
            latest.finish(keep=False)
        if isinstance(e, sqlite3_errors()):  # a full disk, a damaged file: the caller warns
            raise OSError(f"{store.db_path(path)}: {e}") from None
        raise
    if kept is not None:
        try:
            kept.write()
        except OSError:  # the next round reads the keys table instead: the round is stored
            store.keys_path(path).unlink(missing_ok=True)
    if latest is not None:  # always, once the transaction committed
        latest.finish(keep=True)


class _Latest:
    """The newest round's file (`write_latest`: the report's document) made by a thread into
    a temporary file, and put in place by `finish` once the round is stored (or dropped when
    it was not)."""

    def __init__(self, report: Report, path: Path) -> None:
        self.path = path
        self.tmp = _tmp_beside(path)
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._write, name="fleetcheck-latest", daemon=True)
        self.report = report
        self.thread.start()

    def _write(self) -> None:
        try:
            _write_tmp(self.report, self.tmp)
        except BaseException as e:  # raised in the caller's thread, by finish
            self.failed = e

    def finish(self, keep: bool) -> None:
        try:
            self.thread.join()
            if self.failed is not None:
                if keep:
                    raise self.failed
            elif keep:
                os.replace(self.tmp, self.path)
                _legacy_latest_path(self.path).unlink(missing_ok=True)
        finally:
            self.tmp.unlink(missing_ok=True)


def migrate(db: Any, path: Path) -> None:
    """A JSONL history (and its rotated file) into the database in one transaction, every
    readable round as a keyframe (each row as written); then the files are moved aside as
    `*.migrated` (kept: nothing is deleted). Done once: the database records it, so a crash
    between the commit and the move never migrates twice."""
    from fleetcheck.rounds import store

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


def torn_tail(path: Path) -> bool:
    """Whether the file's last byte is not a newline (a line an earlier write left torn)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except FileNotFoundError:
        return False


def latest_path(history_path: Path) -> Path:
    """Where the newest round is kept whole: `history-x.jsonl` -> `history-x.last.marshal`."""
    return history_path.with_name(history_path.stem + ".last.marshal")


def _legacy_latest_path(history_path_latest: Path) -> Path:
    """The newest round's file as fleetcheck wrote it before (JSON): removed when the new
    one is written, so a stale copy of old evidence does not stay behind."""
    return history_path_latest.with_name(
        history_path_latest.name.removesuffix(".last.marshal") + ".last.json"
    )


def write_latest(report: Report | dict[str, Any], path: Path) -> None:
    """The report as `run --format json` builds it (`Report.to_dict`, or that document; a
    report's held as columns, `_columns`, and read back as the document by `read_latest`),
    in Python's marshal format, replaced atomically (readers never see half a file).
    Marshal, not JSON: the file is written by one fleetcheck and read by the same one (the
    console), and at 10,000 hosts JSON took 0.1-0.35 s of each round against marshal's
    0.01 s (and reads twice as fast). A value marshal cannot hold (an object JSON wrote with
    `str`) is made what JSON would have written, row by row; a file this fleetcheck cannot
    read is reported by its reader and replaced next round."""
    tmp = _tmp_beside(path)
    try:
        _write_tmp(report, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _legacy_latest_path(path).unlink(missing_ok=True)


def _tmp_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def _write_tmp(report: Report | dict[str, Any], tmp: Path) -> None:
    """The report's document in marshal's format into `tmp` (0600: evidence carries log
    lines and client names): a report's as columns (`_columns`), a document as it is (and
    either, when marshal cannot hold a value, as rows made what JSON would have written)."""
    import marshal

    try:
        data = marshal.dumps(_columns(report) if isinstance(report, Report) else report)
    except ValueError:  # rare: a row whose evidence holds an object (a datetime, a Path)
        doc = report.to_dict() if isinstance(report, Report) else report
        doc = {**doc, "results": [_marshallable(row) for row in doc["results"]]}
        data = marshal.dumps(doc)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


_COLUMNS = "fleetcheck.latest/columns-1"  # the file's layout when it holds columns
# `Result.to_dict`'s keys: those every row has, those a row has when set (not None), and
# the state's, which a row has all four of when it has a `since`
_ALWAYS: tuple[str, ...] = ("check", "host", "status", "summary", "metrics", "headline")
_ALWAYS += ("limits", "evidence", "duration_s")
_WHEN_SET = ("evidence_strength", "cause", "silenced")
_STATE = ("since", "bad_rounds", "alerting", "flapping")
_READ = {name: attrgetter(name) for name in _ALWAYS + _WHEN_SET + _STATE}
_READ["status"] = attrgetter("status.label")
_READ["alerting"] = attrgetter("should_alert")


def _columns(report: Report) -> dict[str, Any]:
    """The report's document (`Report.to_dict`) as columns: each key's values in the rows'
    order (worst first), read off the results by C loops, and which rows lack a key that
    only some rows have. Why: the document's 30,000 row dicts made and marshalled were the
    larger part of a round's append at 10,000 hosts (~140 ms with the state's keys, in the
    thread beside the commit: past it, the round waited); the columns take ~55 ms, and
    `read_latest` makes the rows again."""
    doc = report.document(None)  # the head
    del doc["results"]
    rows = report.sorted_results()
    fields = list(_ALWAYS)
    columns = {name: list(map(_READ[name], rows)) for name in _ALWAYS}
    omit: list[tuple[tuple[str, ...], list[int]]] = []
    for group in [(name,) for name in _WHEN_SET] + [_STATE]:
        first = columns[group[0]] = list(map(_READ[group[0]], rows))
        lacking = list(compress(range(len(rows)), map(is_, first, repeat(None))))
        if len(lacking) == len(rows):
            continue
        fields += group
        columns.update((name, list(map(_READ[name], rows))) for name in group[1:])
        if lacking:
            omit.append((group, lacking))
    return {
        "layout": _COLUMNS,
        "head": doc,
        "fields": fields,
        "columns": list(map(columns.__getitem__, fields)),
        "omit": omit,
    }


def _document(data: dict[str, Any]) -> dict[str, Any]:
    """The document `_columns` holds, its rows made again (exactly `Report.to_dict`'s)."""
    head, fields, columns, omit = data["head"], data["fields"], data["columns"], data["omit"]
    if not (
        isinstance(head, dict)
        and isinstance(fields, list)
        and isinstance(columns, list)
        and len(fields) == len(columns)
        and all(type(f) is str for f in fields)
        and all(type(c) is list for c in columns)
        and len({len(c) for c in columns}) <= 1
        and isinstance(omit, list)
    ):
        raise ValueError("not a newest-round file (its columns do not fit)")
    rows = list(map(dict, map(zip, repeat(fields), zip(*columns, strict=True))))
    for group, lacking in omit:
        for i in lacking:
            row = rows[i]
            for name in group:
                del row[name]
    notes = {k: head[k] for k in ("notes",) if k in head}
    return {**{k: v for k, v in head.items() if k != "notes"}, "results": rows, **notes}


def _marshallable(row: dict[str, Any]) -> dict[str, Any]:
    import marshal

    try:
        marshal.dumps(row)
        return row
    except ValueError:
        return dict(json.loads(json.dumps(row, default=str)))


def read_latest(path: Path) -> dict[str, Any]:
    """The newest round's document from its file. Raises FileNotFoundError when there is
    none, OSError when it cannot be read, ValueError when it is not a document (torn,
    damaged, or written by a Python whose marshal format this one does not know)."""
    import marshal

    blob = path.read_bytes()
    try:
        doc = marshal.loads(blob)
    except (EOFError, TypeError, ValueError) as e:
        raise ValueError(f"not a newest-round file ({e})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"not a newest-round file (a {type(doc).__name__})")
    if doc.get("layout") == _COLUMNS:
        try:
            return _document(doc)
        except (KeyError, TypeError, IndexError, ValueError) as e:
            raise ValueError(f"not a newest-round file ({type(e).__name__}: {e})") from None
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
    from fleetcheck.rounds import store

    key = None if host is None else ("" if host == BROKER_WIDE else host)
    got = _from_store(path, lambda db: store.read(db, since, key))
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
    from fleetcheck.rounds import store

    got = _from_store(path, lambda db: store.read_statuses(db, since))
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


def _from_store(path: Path, read: Callable[[Any], Any]) -> tuple[Any, int] | None:
    """`read(db)` of the history's database and how many rounds its migration could not
    read; None when there is no database yet, or it is not migrated (the JSONL is read)."""
    from fleetcheck.rounds import store

    if not store.exists(path):
        return None
    db = store.connect(path, write=False)
    try:
        done = store.meta(db, "migrated")
        if done is None:
            return None
        return read(db), int(json.loads(done).get("unreadable", 0))
    except sqlite3_errors() as e:
        raise OSError(f"{store.db_path(path)}: {e}") from None
    finally:
        db.close()


def exists(path: Path) -> bool:
    """Whether there is a history at `path` (its database, or a JSONL not yet migrated)."""
    from fleetcheck.rounds import store

    return store.exists(path) or any(p.exists() for p in _jsonl_files(path))


def sqlite3_errors() -> type[Exception]:
    import sqlite3

    return sqlite3.Error


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
            "started_at": iso_of(rnd.started_at),
            "duration_s": rnd.duration_s,
            "status": rnd.status.label,
            "rows": list(rnd.rows),
        }
        out.write(json.dumps(line, separators=(",", ":"), default=str) + "\n")
    return len(rounds)


def iso_of(when: datetime) -> str:
    from fleetcheck.iso import iso_utc

    return iso_utc(when)


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
