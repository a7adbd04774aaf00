"""The history's storage: one SQLite database (the standard library's) beside the history path,
written once per round, read by host and by time.

Why SQLite: each round is one transaction (a crash or a torn write loses at most the round
being written: the journal rolls it back), WAL lets `serve`, `history` and `explain` read while
a patrol writes, and the rows' (key, round) primary key gives a host's timeline without reading
the rest. Why only changes: 10,000 hosts x 3 checks x 96 rounds a day is ~20 million rows a
week, ~4 GB as JSON lines, and most rows say what they said the round before. So a row is
stored only when its signature differs from the last one stored for its key (the keys table
holds it): its status, its summary's words (its text without digits and dots: the numbers in
"12s ago" or "3.5 ms" are no change), its limits, or a metric's bucket (`bucket`: integers
exactly, other numbers in ~19 % steps, durations under a minute as one). A known key with no
row in a round (a host removed) gets a tombstone, a row with no body, so it is not carried on.

A round is read back as each key's newest stored row at or before it; a row stored in an
earlier round carries `as_of` (that round's start): its summary and metrics are from then,
within the bucket, and a reader can tell. Retention keeps the rounds from the newest one at
or before now - RETENTION_S (`whole_from`) and, of the rows before it, each key's newest.
Rows migrated from the JSONL history are all stored as written (`add_round(full=True)`).

The rounds table's `keyframe` column is kept for databases that stored every row again now
and then: they read the same way."""

from __future__ import annotations

import json
import marshal
import math
import sqlite3
from bisect import bisect_right
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import Any

from fleetcheck.core.model import BROKER_WIDE, Status, place

RETENTION_S = 8 * 86400.0  # the console's 7-day window and a day of margin
SCHEMA = 1
BROKER_KEY = ""  # the host column of broker-wide rows (host None)

_DDL = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rounds (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, started TEXT NOT NULL,
    duration_s REAL NOT NULL, status TEXT NOT NULL, keyframe INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS rounds_at ON rounds (at);
CREATE TABLE IF NOT EXISTS keys (
    id INTEGER PRIMARY KEY, host TEXT NOT NULL, check_name TEXT NOT NULL,
    sig BLOB, UNIQUE (host, check_name));
CREATE TABLE IF NOT EXISTS rows (
    key INTEGER NOT NULL, round INTEGER NOT NULL, body TEXT,
    PRIMARY KEY (key, round)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rows_round ON rows (round);
"""


def db_path(history: Path) -> Path:
    """`history-x.jsonl` -> `history-x.db` (the JSONL name stays the history's name)."""
    name = history.name[: -len(".jsonl")] if history.name.endswith(".jsonl") else history.name
    return history.with_name(name + ".db")


def exists(history: Path) -> bool:
    return db_path(history).exists()


def connect(history: Path, write: bool) -> sqlite3.Connection:
    """The store's connection; a writer creates it (0600, WAL) when missing."""
    path = db_path(history)
    if write and not path.exists():
        from fleetcheck.files import private_open

        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with private_open(path):
            pass  # created private: SQLite gives its -wal and -shm the same mode
    db = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA busy_timeout = 30000")
    if write:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")  # WAL: a crash loses at most the last round
        # a round's changes at 10,000 hosts touch ~1,000 pages: past the default cache (~500)
        # SQLite spills them to the WAL before the commit, some twice; up to 32 MB, as needed
        db.execute("PRAGMA cache_size = -32768")
        db.executescript(_DDL)
        got = meta(db, "schema")
        if got is None:
            set_meta(db, "schema", str(SCHEMA))
        elif got != str(SCHEMA):
            db.close()
            raise OSError(f"{path}: history schema {got}, this fleetcheck writes {SCHEMA}")
    return db


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def bucket(key: str, value: Any) -> Any:
    """What a metric must change by to be stored again (see the module doc)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        if key.endswith("_s") and abs(value) < 60:
            return "<1m"
        if value == 0:
            return 0
        return ("-" if value < 0 else "+") + str(round(math.log2(abs(value)) * 4))
    if isinstance(value, dict):
        return tuple((str(k), bucket(str(k), v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(bucket(key, v) for v in value)
    return str(value)


_NUMBERS = b"0123456789."  # a summary's words are its text without them (cut as bytes: faster)


def signature(row: dict[str, Any]) -> bytes:
    """The part of a row that, when it changes, makes the row stored again: its status, its
    summary's words, its metrics' buckets and its limits, as bytes only ever compared for
    equality (marshal's version 2: equal values give equal bytes in any process; `repr` for a
    value marshal cannot hold, such as a TOML date in a limit)."""
    metrics = row.get("metrics") or {}
    if isinstance(metrics, dict):
        form: Any = {k: v if type(v) in _EXACT else bucket(str(k), v) for k, v in metrics.items()}
    else:
        form = bucket("", metrics)
    text = str(row.get("summary", "")).encode("utf-8", "surrogatepass")
    words = text.translate(None, _NUMBERS).decode("utf-8", "surrogatepass")
    parts = (row.get("status"), words, form, row.get("limits") or None)
    try:
        return marshal.dumps(parts, 2)
    except ValueError:
        return repr(parts).encode("utf-8", "backslashreplace")


_EXACT = frozenset((int, str, bool, type(None)))  # a metric that is its own bucket
# one encoder for every body (json.dumps with options builds a new one per call)
_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode


def add_round(db: sqlite3.Connection, line: dict[str, Any], full: bool = False) -> None:
    """One round (as the JSONL line records it: `history._line`) in the caller's transaction:
    each row whose signature changed (`full`: every row), and a tombstone for each key that
    had a row and has none in this round. A key is "host NUL check" (host "" broker-wide)."""
    cur = db.execute(
        "INSERT INTO rounds (at, started, duration_s, status, keyframe) VALUES (?, ?, ?, ?, 0)",
        (
            epoch(line["started_at"]),
            str(line["started_at"]),
            float(line.get("duration_s") or 0.0),
            str(line["status"]),
        ),
    )
    rnd = cur.lastrowid
    rows: list[dict[str, Any]] = line["rows"]
    keys = [f"{BROKER_KEY if r.get('host') is None else r['host']}\0{r.get('check')}" for r in rows]
    present = set(keys)
    if len(present) != len(keys):
        keys = _apart(keys)
        present = set(keys)
    sigs = dict(db.execute("SELECT host || char(0) || check_name, sig FROM keys"))
    (last,) = db.execute("SELECT coalesce(max(id), 0) FROM keys").fetchone()
    new: list[tuple[Any, ...]] = []  # (id, host, check, signature, body)
    known: list[tuple[Any, ...]] = []  # (signature, body, host, check); a tombstone's: None
    for k, row in zip(keys, rows, strict=True):
        sig = signature(row)
        if full or sigs.get(k) != sig:
            body = _encode(row)
            if k in sigs:
                known.append((sig, body, *k.rsplit("\0", 1)))
            else:
                last += 1
                new.append((last, *k.rsplit("\0", 1), sig, body))
    for k in sigs.keys() - present:  # not in this round: gone, unless gone already
        if sigs[k] is not None:
            known.append((None, None, *k.rsplit("\0", 1)))
    # the writer holds the database (BEGIN IMMEDIATE): a new key's id, the next one, is given
    # here, so its row needs no look-up (a first round: every row); rows read back in id order
    db.executemany(
        "INSERT INTO keys (id, host, check_name, sig) VALUES (?, ?, ?, ?)", [n[:4] for n in new]
    )
    db.executemany(
        "INSERT INTO rows (key, round, body) VALUES (?, ?, ?)", [(n[0], rnd, n[4]) for n in new]
    )
    db.executemany(
        "UPDATE keys SET sig = ? WHERE host = ? AND check_name = ?",
        [(sig, host, check) for sig, _, host, check in known],
    )
    db.executemany(
        "INSERT INTO rows (key, round, body) SELECT id, ?, ? FROM keys "
        "WHERE host = ? AND check_name = ?",
        [(rnd, body, host, check) for _, body, host, check in known],
    )


def _apart(keys: list[str]) -> list[str]:
    """Keys with a second (third...) row of one check for one host named apart, "#1", "#2"
    after the check's name, in the round's order: kept apart, never merged."""
    used: set[str] = set()
    out = []
    for k in keys:
        n, named = 0, k
        while named in used:
            n += 1
            named = f"{k}#{n}"
        used.add(named)
        out.append(named)
    return out


def expire(db: sqlite3.Connection, now: float) -> None:
    """Keep every round from the newest one at or before now - retention (the oldest kept
    whole, `whole_from`); of the rows before it, each key's newest (it holds then), and the
    rounds they were stored in (their `as_of`); drop the rest."""
    (cut,) = db.execute("SELECT max(id) FROM rounds WHERE at <= ?", (now - RETENTION_S,)).fetchone()
    done = whole_from(db) or 0
    if cut is None or cut <= done:
        return
    db.execute(  # rows that a row of their key stored since the last cut replaced
        "DELETE FROM rows WHERE (key, round) IN (SELECT o.key, o.round FROM rows n "
        "JOIN rows o ON o.key = n.key AND o.round < n.round WHERE n.round > ? AND n.round <= ?)",
        (done, cut),
    )
    db.execute(  # a tombstone that nothing before it is left to hide
        "DELETE FROM rows WHERE body IS NULL AND round > ? AND round <= ?", (done, cut)
    )
    db.execute(
        "DELETE FROM rounds WHERE id < ? AND id NOT IN (SELECT round FROM rows WHERE round < ?)",
        (cut, cut),
    )
    db.execute(
        "DELETE FROM keys WHERE sig IS NULL AND NOT EXISTS (SELECT 1 FROM rows WHERE key = keys.id)"
    )
    set_meta(db, "whole_from", str(cut))


def whole_from(db: sqlite3.Connection) -> int | None:
    """The oldest round a reader can rebuild whole (None: every round kept)."""
    got = meta(db, "whole_from")
    return None if got is None else int(got)


def first_round(db: sqlite3.Connection, since: datetime | None) -> int | None:
    """The id of the oldest round at or after `since` (every round when None); None: no such
    round."""
    t = since.timestamp() if since is not None else -math.inf
    (first,) = db.execute("SELECT min(id) FROM rounds WHERE at >= ?", (t,)).fetchone()
    return None if first is None else int(first)


def reader_start(db: sqlite3.Connection, first: int) -> int:
    """A round at or before the one where each row holding at round `first` was stored: a
    reader of `first` and later reads the rows from there (a row that never changed was
    stored once, so this is the oldest stored row's round)."""
    (oldest,) = db.execute("SELECT min(round) FROM rows").fetchone()
    return min(first, oldest if oldest is not None else first)


def _replay(
    db: sqlite3.Connection, since: datetime | None, host: str | None, value: str
) -> Iterator[tuple[dict[str, Any], int, list[tuple[int, int, Any]]]]:
    """The rounds at or after `since`, oldest first, each as (its fields, its id, the rows
    stored up to it since the round before, as (round, key, `value`: an SQL expression of the
    row's body)): before the first round, each key's newest row at or before it. Only
    `host`'s keys when given."""
    first = first_round(db, since)
    if first is None:
        return
    first = max(first, whole_from(db) or 0)
    rounds = db.execute(
        "SELECT id, started, duration_s, status FROM rounds WHERE id >= ? ORDER BY id", (first,)
    ).fetchall()
    mine = "" if host is None else "WHERE k.host = ?"
    stored = db.execute(  # CROSS JOIN: key by key (never every row, each with a subquery)
        f"SELECT r.round, r.key, {value} FROM keys k CROSS JOIN rows r ON r.key = k.id AND "  # noqa: S608
        "r.round >= (SELECT coalesce(max(round), 0) FROM rows WHERE key = k.id AND round <= ?) "
        f"{mine} ORDER BY r.round, r.key",
        (first,) if host is None else (first, host),
    ).fetchall()
    at = 0
    for rid, started, duration, status in rounds:
        end = bisect_right(stored, rid, lo=at, key=itemgetter(0))
        yield {"started_at": started, "duration_s": duration, "status": status}, rid, stored[at:end]
        at = end


def read(
    db: sqlite3.Connection, since: datetime | None = None, host: str | None = None
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(round fields, its rows) per round at or after `since`, oldest first; only `host`'s
    rows (its own host name; "" for broker-wide) when given."""
    started_of = dict(db.execute("SELECT id, started FROM rounds").fetchall())
    out = []
    now: dict[int, tuple[int, dict[str, Any]]] = {}  # key -> (stored in round, row)
    for fields, rid, stored in _replay(db, since, host, "r.body"):
        for stored_in, key_id, body in stored:
            try:
                now[key_id] = (stored_in, json.loads(body))
            except (TypeError, ValueError):  # a tombstone (None), or a damaged body
                now.pop(key_id, None)
        rows = [
            row if stored_in == rid else {**row, "as_of": started_of.get(stored_in, "")}
            for stored_in, row in map(now.__getitem__, sorted(now))  # first seen first
        ]
        out.append((fields, rows))
    return out


def read_statuses(
    db: sqlite3.Connection, since: datetime | None = None
) -> tuple[list[tuple[dict[str, Any], dict[str, Status]]], int]:
    """(round fields, each host's worst status) per round at or after `since`, oldest first,
    and how many rounds could not be read: what `read` gives without the rows, for the
    timeline of `fleetcheck history` (each stored row's status alone, and a host's worst
    again only when one of its rows was stored: rebuilding every row took ~1 GB at 10,000
    hosts). Hosts are named as the HOST column shows them (model.place:
    BROKER_WIDE for broker-wide rows). A round holding a row whose status is not a status is
    left out and counted, as `history.load` does with `read`'s rounds."""
    host_of = {
        key_id: place(None if host == BROKER_KEY else str(host))
        for key_id, host in db.execute("SELECT id, host FROM keys")
    }
    labels = {s.label: s for s in Status}
    status = "iif(r.body IS NULL, NULL, coalesce(json_extract(r.body, '$.status'), ''))"
    out = []
    bad = 0
    per_host: dict[str, dict[int, Status]] = {}  # each host's rows now
    worst: dict[str, Status] = {}
    unreadable: set[int] = set()  # rows now whose status is not one
    for fields, _, stored in _replay(db, since, None, status):
        changed = set()
        for _, key_id, label in stored:
            host = host_of.get(key_id, BROKER_WIDE)
            mine = per_host.setdefault(host, {})
            mine.pop(key_id, None)
            unreadable.discard(key_id)
            if label is not None:  # None: a tombstone, the row is gone
                got = labels.get(label)
                if got is None:
                    unreadable.add(key_id)
                else:
                    mine[key_id] = got
            changed.add(host)
        for host in changed:
            if per_host[host]:
                worst[host] = max(per_host[host].values(), key=lambda s: s.rank)
            else:
                worst.pop(host, None)
        if unreadable:
            bad += 1
        else:
            out.append((fields, dict(worst)))
    return out, bad


def epoch(text: Any) -> float:
    from fleetcheck.iso import parse_iso

    when = parse_iso(str(text))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def meta(db: sqlite3.Connection, name: str) -> str | None:
    got = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    return None if got is None else str(got[0])


def set_meta(db: sqlite3.Connection, name: str, value: str) -> None:
    db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))
