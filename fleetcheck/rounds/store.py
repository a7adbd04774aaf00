"""The history's storage: one SQLite database (the standard library's) beside the history path,
written once per round, read by host and by time.

Why SQLite: each round is one transaction (a crash or a torn write loses at most the round
being written: the journal rolls it back), WAL lets `serve`, `history` and `explain` read while
a patrol writes, and its B-trees give a host's timeline and a time window without reading
the rest. Why not every row every round: 10,000 hosts x 3 checks x 96 rounds a day is ~20
million rows a week, ~4 GB as JSON lines. Most rows say the same thing round after round, so
a row is stored only when it changes: its status, its summary's words (its text without
digits and dots: the numbers in a summary such as "12s ago" or "3.5 ms" are not a change,
nor is a number that appears or goes, or a dot), its limits, or a metric's bucket (`bucket`:
integers exactly, other numbers in ~19 % steps, durations under a minute as one). Each row is
also stored again at least once every KEYFRAME rounds (its refresh), staggered by the row's
id so that no round stores every row: any KEYFRAME consecutive rounds hold every live row at
least once, so a reader of a round starts KEYFRAME - 1 rounds before it (or at a full round,
one with every row stored: the first, and every migrated round), and retention keeps the
KEYFRAME - 1 rounds before the oldest round it keeps whole. A row that disappears (a host
removed) is stored as a tombstone, so it is not carried forward.

Each round also leaves every known key (text, id, signature) in a file beside the database
(`keys_path`, `Remembered`), which the next round reads instead of the keys table; a file
that is not the newest round's (a crash after the commit, another database's, damaged)
is not used, and the table is read.

A row read back for a round in which it was not stored is the last stored one, carrying
`as_of` (that round's start): its summary and metrics are from then, rounded to the bucket
the later rounds were in, and a reader can tell. Rows migrated from the JSONL history are
all stored as written (every migrated round is a keyframe)."""

from __future__ import annotations

import json
import marshal
import math
import secrets
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain, compress, repeat
from operator import attrgetter, itemgetter, methodcaller, ne
from pathlib import Path
from typing import Any

from fleetcheck.core.model import BROKER_WIDE, Result, Status, place

KEYFRAME = 96  # rounds between keyframes: one a day at the default 15-minute interval
RETENTION_S = 8 * 86400.0  # the console's 7-day window and a day of margin
SCHEMA = 1

_DDL = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rounds (
    id INTEGER PRIMARY KEY, at REAL NOT NULL, started TEXT NOT NULL,
    duration_s REAL NOT NULL, status TEXT NOT NULL, keyframe INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS rounds_at ON rounds (at);
CREATE TABLE IF NOT EXISTS keys (
    id INTEGER PRIMARY KEY, host TEXT NOT NULL, check_name TEXT NOT NULL,
    sig TEXT, last INTEGER, UNIQUE (host, check_name));
CREATE TABLE IF NOT EXISTS rows (
    key INTEGER NOT NULL, round INTEGER NOT NULL, body TEXT,
    PRIMARY KEY (key, round)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rows_round ON rows (round);
"""

BROKER_KEY = ""  # the host column of broker-wide rows (host None)


def db_path(history: Path) -> Path:
    """`history-x.jsonl` -> `history-x.db` (the JSONL name stays the history's name)."""
    name = history.name[: -len(".jsonl")] if history.name.endswith(".jsonl") else history.name
    return history.with_name(name + ".db")


def keys_path(history: Path) -> Path:
    """`history-x.jsonl` -> `history-x.keys`: every known key as the newest round left them
    (`Remembered`), read by the next round instead of the keys table."""
    return db_path(history).with_suffix(".keys")


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
        # a round at 10,000 hosts dirties ~1,800 pages (its rows land on the pages of their
        # keys): past the default cache (~500 pages) SQLite spills them to the journal before
        # the commit, some twice; up to 32 MB, taken only as the transaction needs it
        db.execute("PRAGMA cache_size = -32768")
        db.executescript(_DDL)
        columns = [c[1] for c in db.execute("PRAGMA table_info(keys)")]
        if "last" not in columns:  # written before rows were refreshed one by one
            with transaction(db):
                db.execute("ALTER TABLE keys ADD COLUMN last INTEGER")
                db.execute(  # no later than the round it was last stored in: safe
                    "UPDATE keys SET last = (SELECT max(id) FROM rounds WHERE keyframe = 1)"
                )
        # the keys were remembered in the database before they were in their own file
        db.execute("DROP TABLE IF EXISTS known")
        got = db.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        if got is None:
            db.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
        elif got[0] != str(SCHEMA):
            db.close()
            raise OSError(f"{path}: history schema {got[0]}, this fleetcheck writes {SCHEMA}")
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


_MINUTE = "<1m"  # the bucket of every duration under a minute


def bucket(key: str, value: Any) -> Any:
    """What a metric must change by to be stored again (see the module doc)."""
    kind = type(value)
    if kind is int or kind is str or kind is bool or value is None:
        return value
    if kind is float:
        if not math.isfinite(value):
            return repr(value)
        if key.endswith("_s") and abs(value) < 60:
            return _MINUTE
        if value == 0:
            return 0
        return ("-" if value < 0 else "+") + str(round(math.log2(abs(value)) * 4))
    if isinstance(value, dict):
        return tuple(
            (str(k), v if type(v) in _EXACT else bucket(str(k), v)) for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return tuple(bucket(key, v) for v in value)
    if isinstance(value, int | float):
        return bucket(key, float(value))
    return str(value)


_EXACT = frozenset((int, str, bool, type(None)))  # a metric's own value is its bucket
_TEXT = frozenset((str,))
_ROWS_OF_DICTS = frozenset((dict, type(None)))  # metrics a round's rows can share a way for
_FLOAT = frozenset((float,))
# a summary's words: its text without digits and dots (str.translate: a C loop, where a
# pattern replacing each number measured 35 ms of 30,000 summaries against 1.5 ms); a number
# written "4" one round and "3.5" the next is no change either
_NO_NUMBERS = str.maketrans("", "", "0123456789.")
_NEW = object()  # the stored signature of a key not stored yet: equal to no signature


def signature(row: dict[str, Any]) -> bytes:
    """The part of a row that, when it changes, makes the row stored again, as bytes only
    ever compared for equality: its status, its summary's words, its metrics' buckets
    (`form`) and its limits, in marshal's version 2 (no references, no interning marks, so
    equal values give equal bytes in any process); `repr` for a value marshal cannot hold (a
    TOML date in a limit). A database written by a fleetcheck whose signatures had another
    form stores each row once more on its first round, then as before. `signatures` gives
    the same bytes for a whole round."""
    summary = row.get("summary", "")
    words = (summary if type(summary) is str else str(summary)).translate(_NO_NUMBERS)
    return _packed(row.get("status"), words, form(row.get("metrics")), row.get("limits") or None)


def form(metrics: Any) -> Any:
    """A row's metrics as its signature holds them: each value its bucket (`bucket`: the
    metrics themselves when every value is its own, the common case), keys as texts."""
    metrics = metrics or {}
    if type(metrics) is not dict:
        return bucket("", metrics)
    if not _TEXT.issuperset(map(type, metrics)):  # a key that is not a text: in order, named
        return tuple((str(k), _value(str(k), v)) for k, v in metrics.items())
    if _EXACT.issuperset(map(type, metrics.values())):
        return metrics
    return {k: _value(k, v) for k, v in metrics.items()}


def _packed(status: Any, words: str, forms: Any, limits: Any) -> bytes:
    """A row's signature from its parts (`signature`)."""
    parts = (status, words, forms, limits)
    try:
        return marshal.dumps(parts, 2)
    except ValueError:
        return repr(parts).encode("utf-8", "backslashreplace")


def _value(key: str, v: Any) -> Any:
    return v if type(v) in _EXACT else bucket(key, v)


_STATUS, _SUMMARY, _METRICS, _LIMITS = map(itemgetter, ("status", "summary", "metrics", "limits"))


def signatures(rows: list[dict[str, Any]]) -> list[bytes]:
    """`signature` of each row, as one round computes them: column by column, by C loops
    where the row-by-row way was a fifth of a round's append at 10,000 hosts. Its summaries'
    words made in one pass over all of them joined; its metrics' forms (`forms`); then each
    row's parts packed. A round with a row that lacks a part, a summary that is not a text
    or holds the joining character, or a value marshal cannot hold is done row by row."""
    try:
        columns = (
            list(map(_STATUS, rows)),
            list(map(_SUMMARY, rows)),
            list(map(_METRICS, rows)),
            list(map(_LIMITS, rows)),
        )
    except KeyError:  # a JSONL line's row (no limits)
        return [signature(row) for row in rows]
    got = _packed_columns(*columns)
    return got if got is not None else [signature(row) for row in rows]


def signatures_of_results(results: Sequence[Result]) -> list[bytes]:
    """`signatures` of the rows `Result.to_dict` makes of `results`, read from the results
    themselves (no row made)."""
    got = _packed_columns(
        list(map(_LABEL, results)),
        list(map(_RESULT_SUMMARY, results)),
        list(map(_RESULT_METRICS, results)),
        list(map(_RESULT_LIMITS, results)),
    )
    return got if got is not None else [signature(r.to_dict()) for r in results]


_LABEL, _RESULT_SUMMARY, _RESULT_METRICS, _RESULT_LIMITS, _HOST, _CHECK = map(
    attrgetter, ("status.label", "summary", "metrics", "limits", "host", "check")
)


def _packed_columns(
    statuses: list[Any], summaries: list[Any], metrics: list[Any], limits: list[Any]
) -> list[bytes] | None:
    """The rows' signatures from their parts' columns; None where the round must be done
    row by row (a summary not a text or holding NUL, a value marshal cannot hold)."""
    try:
        words = "\0".join(summaries).translate(_NO_NUMBERS).split("\0")
    except TypeError:  # a summary that is not a text
        return None
    if len(words) != len(summaries):  # a summary holding NUL
        return None
    limits = [lim or None for lim in limits]
    parts = zip(statuses, words, forms(metrics), limits, strict=True)
    try:
        return list(map(marshal.dumps, parts, repeat(2)))
    except ValueError:  # a value marshal cannot hold: those rows' bytes are repr's
        return None


def forms(metrics: list[Any]) -> list[Any]:
    """`form` of each row's metrics, as a round computes them: when every value of every row
    is its own bucket (integers, texts), the metrics themselves, told by two C loops;
    otherwise the rows grouped by their metrics' keys (a check's rows share them), each key's
    values bucketed as one column (a column of floats: each distinct value once), and the
    rows' forms made from the columns. Metrics that are not dicts, or keys that are not
    texts, have the round done row by row."""
    if not _ROWS_OF_DICTS.issuperset(map(type, metrics)):
        return list(map(form, metrics))
    metrics = [m or {} for m in metrics]
    if not _TEXT.issuperset(map(type, chain.from_iterable(metrics))):
        return list(map(form, metrics))
    if _EXACT.issuperset(map(type, chain.from_iterable(map(dict.values, metrics)))):
        return metrics
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, keys in enumerate(map(tuple, metrics)):
        group = groups.get(keys)
        if group is None:
            groups[keys] = [i]
        else:
            group.append(i)
    out = metrics  # a row whose values are all their own buckets keeps its metrics
    for keys, at in groups.items():
        if not keys:
            continue
        rows = list(map(metrics.__getitem__, at))
        columns: list[list[Any]] = []
        bucketed = False
        for key in keys:
            column = list(map(itemgetter(key), rows))
            kinds = set(map(type, column))
            if kinds <= _EXACT:
                columns.append(column)
                continue
            bucketed = True
            if kinds == _FLOAT and key.endswith("_s"):  # a duration: most under a minute,
                # told by a comparison (`bucket`'s answer; nan and the rest by `bucket`)
                columns.append([_MINUTE if -60.0 < v < 60.0 else bucket(key, v) for v in column])
            elif kinds == _FLOAT:  # each distinct value bucketed once (nan: by identity)
                of = {v: bucket(key, v) for v in set(column)}
                columns.append(list(map(of.__getitem__, column)))
            else:
                columns.append([_value(key, v) for v in column])
        if bucketed:
            made = list(map(dict, map(zip, repeat(keys), zip(*columns, strict=True))))
            list(map(out.__setitem__, at, made))
    return out


RECORDED = ("check", "host", "status", "summary", "metrics")


def recorded(row: dict[str, Any]) -> dict[str, Any]:
    """The part of a row the history stores (a `Result.to_dict` row carries evidence and the
    state's fields too, and always an "evidence" key): check, host, status, summary,
    metrics, and limits when set."""
    if "evidence" not in row:  # a recorded row already (a JSONL line's): kept as written
        return row
    out = {k: row.get(k) for k in RECORDED}
    if row.get("limits"):
        out["limits"] = row["limits"]
    return out


def body_encoder() -> Callable[[Any], str]:
    """A stored row's JSON (`json.dumps(body, separators=(",", ":"), default=str)`), by one
    encoder for the whole round: `JSONEncoder.encode` makes its C encoder again for each
    body, a tenth of a new database's first round at 10,000 hosts (30,000 bodies). The
    same text (test); `JSONEncoder.encode` where the C encoder is missing."""
    encoder = json.JSONEncoder(separators=(",", ":"), default=str)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return encoder.encode
    # as `JSONEncoder.iterencode` makes it for a one-shot encode (ASCII, circular check)
    one = make({}, str, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
    return lambda body: "".join(one(body, 0))


def recorded_of(result: Result) -> dict[str, Any]:
    """`recorded(result.to_dict())`, made without the whole row (a new database's first
    round stores all 30,000 at 10,000 hosts)."""
    out = {
        "check": result.check,
        "host": result.host,
        "status": result.status.label,
        "summary": result.summary,
        "metrics": result.metrics,
    }
    if result.limits:
        out["limits"] = result.limits
    return out


def add_round(
    db: sqlite3.Connection, line: dict[str, Any], full: bool = False, keys_file: Path | None = None
) -> Remembered | None:
    """One round (as the JSONL line recorded it, its rows as `Result.to_dict` makes them, or a
    patrol's `results` instead of rows: only their recorded part is stored), in the caller's
    transaction. `full`: every
    row stored (a full round), whatever the round's number. A row is stored when it is new,
    when its signature changed, on its staggered refresh ((id + round) % KEYFRAME == 0) and
    whenever KEYFRAME rounds have passed since it was last stored (a row that changed just
    before its refresh, or a database written before refreshes were staggered). `keys_file`:
    the keys the newest round left (`keys_path`), read instead of the keys table
    when it is theirs; the keys this round leaves are returned, for the caller to `write`
    once the transaction committed (None without `keys_file`)."""
    at = epoch(line["started_at"])
    (newest,) = db.execute("SELECT max(id) FROM rounds").fetchone()
    full = full or newest is None
    cur = db.execute(
        "INSERT INTO rounds (at, started, duration_s, status, keyframe) VALUES (?, ?, ?, ?, ?)",
        (
            at,
            str(line["started_at"]),
            float(line.get("duration_s") or 0.0),
            str(line["status"]),
            int(full),
        ),
    )
    rnd = int(cur.lastrowid or 0)
    results: Sequence[Result] | None = line.get("results")
    if results is not None:  # a patrol's: read from its results, no row made but those stored
        hosts: Iterable[Any] = map(_HOST, results)
        checks: Iterable[Any] = map(_CHECK, results)
        sigs = signatures_of_results(results)
        body_of: Callable[[int], dict[str, Any]] = lambda i: recorded_of(results[i])  # noqa: E731
    else:
        rows: list[dict[str, Any]] = line["rows"]
        hosts = map(methodcaller("get", "host"), rows)
        checks = map(methodcaller("get", "check"), rows)
        sigs = signatures(rows)
        body_of = lambda i: recorded(rows[i])  # noqa: E731
    # each row's key, "host NUL check" (check names hold no NUL), made by one comprehension
    keys = [f"{BROKER_KEY if h is None else h}\0{c}" for h, c in zip(hosts, checks, strict=True)]
    if len(set(keys)) != len(keys):  # a second row of one check for one host: kept apart
        keys = _apart(keys)
    token = _token(db) if keys_file is not None else ""
    known = _known(db, newest, keys_file, token) if keys_file is not None else None
    n = len(keys)
    same = _in_order(known, keys)
    names, id_list, old_sigs = known if known is not None else _known_of_table(db)
    if not names:  # no key known (a new database's first round): every row new
        bodies = map(recorded_of, results) if results is not None else map(recorded, rows)
        first = _store_first(db, rnd, keys, sigs, bodies)
        return None if keys_file is None else Remembered(keys_file, token, rnd, first)
    ids: dict[str, int] = {}
    olds: dict[str, Any] = {}
    if same:
        changed = list(compress(range(n), map(ne, old_sigs, sigs)))  # compared in C
    else:
        ids = dict(zip(names, id_list, strict=True))
        olds = dict(zip(names, old_sigs, strict=True))
        # the rows to store, told apart in C: a new key, or a signature not the one stored
        # (a new key's old signature is the missing marker, never equal to bytes)
        changed = list(compress(range(n), map(ne, map(olds.get, keys, repeat(_NEW)), sigs)))
    # and the rows whose refresh is due: their key's turn this round, or KEYFRAME rounds
    # since the row was last stored (a row that changed just before its turn), asked of
    # the keys table (a few hundred of 30,000)
    picked: Iterable[int] = changed
    if full:
        picked = range(n)
    else:
        due = {
            k
            for (k,) in db.execute(
                "SELECT host || char(0) || check_name FROM keys "
                "WHERE (id + ?) % ? = 0 OR last IS NULL OR ? - last >= ?",
                (rnd, KEYFRAME, rnd, KEYFRAME),
            )
        }
        if due:
            picked = sorted(set(changed).union(compress(range(n), map(due.__contains__, keys))))
    store: list[tuple[int, int, str | None]] = []
    marks: list[tuple[bytes | None, int, int]] = []  # (sig, round, key)
    new: list[tuple[int, str, str, bytes, int]] = []
    dumps = body_encoder()
    next_id = max(id_list, default=0) + 1
    for i in picked:
        k, sig = keys[i], sigs[i]
        # in order, every key is known at its row's index
        key_id = id_list[i] if same else ids.get(k)
        if key_id is None:  # a new key: its id the next (the writer's transaction holds)
            key_id = ids[k] = next_id
            next_id += 1
            h, c = k.rsplit("\0", 1)
            new.append((key_id, h, c, sig, rnd))
        else:
            marks.append((sig, rnd, key_id))
        store.append((key_id, rnd, dumps(body_of(i))))
    if same:  # no key gone; the remembered ones after this round's keep their tombstones
        left: Known = (names, id_list, sigs + old_sigs[n:] if changed else old_sigs)
    else:
        # gone this round: a tombstone for each known key whose row was not (the difference
        # of the sets in C), unless its last stored row is a tombstone already
        gone = sorted((ids[k], k) for k in olds.keys() - set(keys))
        for key_id, k in gone:
            if olds[k] is not None:
                store.append((key_id, rnd, None))
                marks.append((None, rnd, key_id))
        # this round's keys first, in its order, then the gone ones (each a tombstone now)
        left = (
            keys + [k for _, k in gone],
            list(map(ids.__getitem__, keys)) + [key_id for key_id, _ in gone],
            sigs + [None] * len(gone),
        )
    db.executemany("INSERT INTO keys (id, host, check_name, sig, last) VALUES (?, ?, ?, ?, ?)", new)
    db.executemany("INSERT INTO rows (key, round, body) VALUES (?, ?, ?)", store)
    db.executemany("UPDATE keys SET sig = ?, last = ? WHERE id = ?", marks)
    return None if keys_file is None else Remembered(keys_file, token, rnd, left)


Known = tuple[list[str], list[int], list[Any]]  # every key: its text, id, stored signature


def _store_first(
    db: sqlite3.Connection, rnd: int, keys: list[str], sigs: list[bytes], bodies: Iterable[Any]
) -> Known:
    """A round into a database that knows no key (a new one's first round): every row new,
    its id the next in the round's order, made column by column (30,000 rows at 10,000
    hosts, where `add_round`'s row-by-row loop took ~50 ms); the keys it leaves."""
    n = len(keys)
    fresh = list(range(1, n + 1))
    parted = zip(*map(methodcaller("rsplit", "\0", 1), keys), strict=True)
    new = list(zip(fresh, *parted, sigs, repeat(rnd, n), strict=True)) if n else []
    dumps = body_encoder()
    store = list(zip(fresh, repeat(rnd, n), map(dumps, bodies), strict=True))
    db.executemany("INSERT INTO keys (id, host, check_name, sig, last) VALUES (?, ?, ?, ?, ?)", new)
    db.executemany("INSERT INTO rows (key, round, body) VALUES (?, ?, ?)", store)
    return keys, fresh, sigs


def _in_order(known: Known | None, keys: list[str]) -> bool:
    """Whether the round's rows are the previous round's, in the same order (most rounds),
    with no key gone (the remembered ones after this round's were gone already: their last
    row is a tombstone): then each row's stored signature stands at its own index."""
    if known is None:
        return False
    names, _, sigs = known
    n = len(keys)
    return names[:n] == keys and sigs[n:].count(None) == len(sigs) - n


_MAGIC = "fleetcheck.keys/1"


@dataclass(frozen=True)
class Remembered:
    """Every known key as a round left them (text, id, signature: what the keys table holds;
    this round's keys first, in its order), for the next round's `_known`. Why: the keys
    table read back row by row (30,000 texts, ids and signatures made into Python objects)
    was a fifth of a round's append at 10,000 hosts, and the same value kept in the
    database cost as much again (4 MB through its pages, its journal and its checkpoint
    each round); a file beside it is written and read in a few milliseconds."""

    path: Path
    token: str  # the database's (meta 'token'): a file beside another database is not its
    round: int
    keys: Known

    def write(self) -> None:
        """Replace the file atomically (private: it names every host), after the round's
        transaction committed: a crash before it leaves the older file, which names an
        older round and is not used."""
        from fleetcheck.files import replace_private

        names, ids, sigs = self.keys
        replace_private(
            self.path, marshal.dumps((_MAGIC, self.token, self.round, names, ids, sigs), 2)
        )


def _token(db: sqlite3.Connection) -> str:
    """The database's own name for itself (made on first use), written into its keys file."""
    got = meta(db, "token")
    if got is None:
        got = secrets.token_hex(8)
        set_meta(db, "token", got)
    return got


def _known(db: sqlite3.Connection, newest: int | None, path: Path, token: str) -> Known | None:
    """Every known key as the newest round left them (`Remembered`), or None when that is not
    at hand: no round yet, no file, a file of another database or of an older round (written
    by a fleetcheck that does not keep it, or a crash before it was written), not the keys
    the table holds (as many, the same highest id), of the wrong shape or types, or
    unreadable."""
    if newest is None:
        return None
    try:
        value = marshal.loads(path.read_bytes())
    except (OSError, EOFError, TypeError, ValueError):
        return None
    if (
        type(value) is not tuple
        or len(value) != 6
        or value[:3] != (_MAGIC, token, newest)
        or not all(type(v) is list for v in value[3:])
        or not len(value[3]) == len(value[4]) == len(value[5])
    ):
        return None
    names, ids, sigs = value[3:]
    if not (
        _TEXT.issuperset(map(type, names))
        and _INT.issuperset(map(type, ids))
        and _SIGNATURE.issuperset(map(type, sigs))
    ):
        return None
    count, highest = db.execute("SELECT count(*), max(id) FROM keys").fetchone()
    if count != len(ids) or highest != max(ids, default=None):
        return None  # the keys table changed behind it (a repair, another writer)
    return names, ids, sigs


_INT = frozenset((int,))
_SIGNATURE = frozenset((bytes, str, type(None)))  # str: written by an older fleetcheck


def _known_of_table(db: sqlite3.Connection) -> Known:
    """Every known key from the keys table (one query; the lists made in C)."""
    found = db.execute("SELECT host || char(0) || check_name, id, sig FROM keys").fetchall()
    return (
        list(map(itemgetter(0), found)),
        list(map(itemgetter(1), found)),
        list(map(itemgetter(2), found)),
    )


def _apart(keys: list[str]) -> list[str]:
    """Keys with a second (third...) row of one check for one host named apart, "#1", "#2"
    after the check's name, in the round's order: kept apart, never merged."""
    used: set[str] = set()
    out = []
    for k in keys:
        if k in used:
            n = 1
            while f"{k}#{n}" in used:
                n += 1
            k = f"{k}#{n}"
        used.add(k)
        out.append(k)
    return out


def expire(db: sqlite3.Connection, now: float, retention_s: float = RETENTION_S) -> None:
    """Keep every round from the newest one at or before now - retention (the oldest kept
    whole, recorded as `whole_from`) and the KEYFRAME - 1 rounds before it (where the rows
    its readers start from were stored); drop the rest."""
    (cut,) = db.execute("SELECT max(id) FROM rounds WHERE at <= ?", (now - retention_s,)).fetchone()
    if cut is None or cut <= (whole_from(db) or 0):
        return
    (full,) = db.execute(
        "SELECT max(id) FROM rounds WHERE keyframe = 1 AND id <= ?", (cut,)
    ).fetchone()
    base = max(cut - (KEYFRAME - 1), full or 0)
    db.execute("DELETE FROM rows WHERE round < ?", (base,))
    db.execute("DELETE FROM rounds WHERE id < ?", (base,))
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
    """Where a reader of round `first` and later starts: KEYFRAME - 1 rounds before it, or
    the newest full round at or before it when that is later."""
    (full,) = db.execute(
        "SELECT max(id) FROM rounds WHERE keyframe = 1 AND id <= ?", (first,)
    ).fetchone()
    return max(first - (KEYFRAME - 1), full or 0)


Stored = tuple[int, Any]  # (key, what the round stored for it: a body, a status, None)


def _replay(
    db: sqlite3.Connection,
    since: datetime | None,
    stored_from: Callable[[int], Iterable[tuple[int, int, Any]]],
) -> Iterator[tuple[tuple[Any, ...], bool, list[Stored], bool]]:
    """The rounds a reader of the rounds at or after `since` walks, oldest first: from the
    one it must start at (`reader_start`) so that rows stored earlier are known. Each as
    (its rounds row: id, at, started, duration_s, status; whether it is a keyframe, so the
    rows before it are forgotten; what it stored, from `stored_from(first round walked)`'s
    (round, key, value) in round order; whether it is at or after `since`, to be shown)."""
    first = first_round(db, since)
    if first is None:
        return
    first = max(first, whole_from(db) or 0)
    base = reader_start(db, first)
    rounds = db.execute(
        "SELECT id, at, started, duration_s, status FROM rounds WHERE id >= ? ORDER BY id",
        (base,),
    ).fetchall()
    keyframes = {
        rid
        for (rid,) in db.execute("SELECT id FROM rounds WHERE keyframe = 1 AND id >= ?", (base,))
    }
    it = iter(stored_from(base))
    pending = next(it, None)
    for rnd in rounds:
        rid = rnd[0]
        stored: list[Stored] = []
        while pending is not None and pending[0] == rid:
            stored.append((pending[1], pending[2]))
            pending = next(it, None)
        yield rnd, rid in keyframes, stored, rid >= first


def read(
    db: sqlite3.Connection, since: datetime | None = None, host: str | None = None
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(round fields, its rows) per round at or after `since`, oldest first; only `host`'s
    rows (its own host name; "" for broker-wide) when given."""

    def bodies(base: int) -> Iterable[tuple[int, int, str | None]]:
        if host is None:
            return db.execute(
                "SELECT round, key, body FROM rows WHERE round >= ? ORDER BY round", (base,)
            )
        ids = [i for (i,) in db.execute("SELECT id FROM keys WHERE host = ?", (host,))]
        found: list[tuple[int, int, str | None]] = []
        for key_id in ids:
            found += [
                (r, key_id, b)
                for r, b in db.execute(
                    "SELECT round, body FROM rows WHERE key = ? AND round >= ?", (key_id, base)
                )
            ]
        found.sort(key=lambda x: x[0])
        return found

    out: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    state: dict[int, tuple[int, dict[str, Any]]] = {}  # key -> (stored in round, row)
    started_of: dict[int, str] = {}
    for (rid, _at, started, duration, status), keyframe, stored, shown in _replay(
        db, since, bodies
    ):
        started_of[rid] = started
        if keyframe:
            state = {}
        for key_id, body in stored:
            if body is None:
                state.pop(key_id, None)
            else:
                try:
                    state[key_id] = (rid, json.loads(body))
                except ValueError:
                    pass
        if not shown:
            continue
        rows_now = []
        for key_id in sorted(state):  # first seen first, wherever the reader started
            stored_in, row = state[key_id]
            if stored_in != rid:
                row = {**row, "as_of": started_of.get(stored_in, "")}
            rows_now.append(row)
        fields = {"started_at": started, "duration_s": duration, "status": status}
        out.append((fields, rows_now))
    return out


def read_statuses(
    db: sqlite3.Connection, since: datetime | None = None
) -> tuple[list[tuple[dict[str, Any], dict[str, Status]]], int]:
    """(round fields, each host's worst status) per round at or after `since`, oldest first,
    and how many rounds could not be read: what `read` gives without the rows, for the
    timeline of `fleetcheck history`. Hosts are named as the HOST column shows them
    (model.place: BROKER_WIDE for broker-wide rows). A round holding a row whose status is
    not a status is left out and counted, as `history.load` does with `read`'s rounds.

    Why apart from `read`: rebuilding every row of every round took 32 s and ~1 GB for a
    day at 10,000 hosts. This reads only each stored row's status, extracted by SQLite, and
    recomputes a host's worst only in the rounds where one of its rows was stored."""
    host_of: dict[int, str] = {
        key_id: place(None if host == BROKER_KEY else str(host))
        for key_id, host in db.execute("SELECT id, host FROM keys")
    }
    labels = {s.label: s for s in Status}

    def statuses(base: int) -> Iterable[tuple[int, int, Any]]:
        return db.execute(
            "SELECT round, key, CASE WHEN body IS NULL THEN NULL "
            "ELSE coalesce(json_extract(body, '$.status'), '') END FROM rows "
            "WHERE round >= ? ORDER BY round",
            (base,),
        )

    out: list[tuple[dict[str, Any], dict[str, Status]]] = []
    bad = 0
    per_host: dict[str, dict[int, Status]] = {}  # each host's rows now, carried forward
    worst: dict[str, Status] = {}
    unreadable: set[int] = set()  # rows now whose status is not one
    for (_rid, _at, started, duration, round_status), keyframe, stored, shown in _replay(
        db, since, statuses
    ):
        if keyframe:
            per_host, worst, unreadable = {}, {}, set()
        changed: set[str] = set()
        for key_id, label in stored:
            host = host_of.get(key_id, BROKER_WIDE)
            mine = per_host.setdefault(host, {})
            mine.pop(key_id, None)
            unreadable.discard(key_id)
            if label is not None:  # None: a tombstone, the row is gone
                got = labels.get(label) if isinstance(label, str) else None
                if got is None:
                    unreadable.add(key_id)
                else:
                    mine[key_id] = got
            changed.add(host)
        for host in changed:
            mine = per_host[host]
            if mine:
                worst[host] = max(mine.values(), key=_rank)
            else:
                worst.pop(host, None)
        if not shown:
            continue
        if unreadable:
            bad += 1
            continue
        fields = {"started_at": started, "duration_s": duration, "status": round_status}
        out.append((fields, dict(worst)))
    return out, bad


def _rank(status: Status) -> int:
    return status.rank


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
