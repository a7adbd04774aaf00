"""The live hash of running matches: reading it safely, judging its entries, reaping zombies.

incident 1: `arena:live` holds one field per running match (HSET at start, HDEL at the end);
workers SIGKILLed by a deploy leak their entries forever because a hash field has no TTL before
Redis 7.4 / Valkey 9 (HEXPIRE). An entry older than the match wall (plus margin) is certainly
dead; one whose start time is missing or unreadable cannot prove it is alive and is stale too.

Reading: HSCAN with a small COUNT, never HGETALL (the hash may hold a million fields and no
command we send may hold the server for more than a few milliseconds). Deleting (only when the
operator asks, `reap-live --apply`): a Lua script per batch that deletes a field only if its
value is still byte-for-byte the one judged stale, so a worker that re-HSETs the same id in
between keeps its entry.

Speed (a million fields in under 2 s): the next HSCAN is sent before the previous reply is
decoded, so the server's work overlaps ours; values of the usual shape are read by one
compiled regex instead of json (EntryReader, proven equal to json by tests); hiredis, when
installed, parses the replies in C.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from itertools import compress, repeat
from operator import le
from typing import TYPE_CHECKING, Any, TextIO

from fleetcheck.parse.instant import MS_THRESHOLD, parse_instant

if TYPE_CHECKING:
    import redis

    from fleetcheck.config import FleetConfig

SCAN_COUNT = 500
DIGEST_PARTS = 8  # value ranges of hash() (64-bit) that the repeat check takes one by one
DIGEST_BOUNDS = [-(2**63) + k * 2**64 // DIGEST_PARTS for k in range(1, DIGEST_PARTS)]
OWNER_MAX = 64  # characters of an owner name we keep

# Deletes each (field, value) pair only while the field still holds exactly that value.
REAP_LUA = """
local removed = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    removed = removed + redis.call('HDEL', KEYS[1], ARGV[i])
  end
end
return removed
"""


@dataclass(frozen=True)
class LiveEntry:
    """One value of the live hash, read: its start time, or why it has none."""

    started_at: float | None
    problem: str | None  # set when the entry is malformed
    owner: str | None  # the host the value names, if any


def parse_entry(
    value: bytes | str,
    started_field: str = "started_at",
    owner_field: str | None = "host",
    assume_tz: tzinfo | None = None,
) -> LiveEntry:
    """Read one value (pure). Malformed: not JSON, not an object, start missing or unreadable."""
    return LiveEntry(*read_entry(value, started_field, owner_field, assume_tz))


Reading = tuple[float | None, str | None, str | None]  # (started_at, problem, owner)

_decode_json = json.JSONDecoder().decode
_MISSING = object()


def read_entry_json(
    value: bytes | str,
    started_field: str = "started_at",
    owner_field: str | None = "host",
    assume_tz: tzinfo | None = None,
) -> Reading:
    """The reference reading of one value, through json. The fast path must agree with it."""
    try:
        doc = _decode_json(value.decode("utf-8") if isinstance(value, bytes) else value)
    except (ValueError, UnicodeDecodeError):
        return None, "not JSON", None
    if type(doc) is not dict:
        return None, f"not a JSON object ({type(doc).__name__})", None
    owner = _owner(doc.get(owner_field)) if owner_field else None
    raw = doc.get(started_field, _MISSING)
    if raw is _MISSING:
        return None, f"no {started_field}", owner
    return _started(raw, owner, started_field, assume_tz)


def _owner(raw: object) -> str | None:
    if type(raw) is str and raw:
        return raw.strip()[:OWNER_MAX] or None
    return None


def _started(raw: Any, owner: str | None, started_field: str, assume_tz: tzinfo | None) -> Reading:
    if (type(raw) is float or type(raw) is int) and 0 <= raw < MS_THRESHOLD:
        return float(raw), None, owner  # plain epoch seconds: the common case, no NaN here
    try:
        return parse_instant(raw, assume_tz), None, owner
    except ValueError as e:  # parse_instant also refuses ints too large for a float
        return None, f"{started_field}: {e}", owner


# The fast path. A value written the usual way (one flat JSON object of plain ASCII strings,
# numbers, true/false/null, with the start as a number or a string) is read by one compiled
# regex instead of json; anything else falls back to json. The regex accepts only valid JSON
# whose decoding is known exactly: strings without escapes, control characters or non-ASCII
# bytes (their bytes are their text), nothing nested, the start key exactly once (the other
# keys exclude it), the owner key at most once before and once after it (json keeps the last,
# so does `finish`), JSON's own whitespace and number grammar, no NaN or Infinity.
_WS = rb"[ \t\n\r]*"
_CHARS = rb"[\x20\x21\x23-\x5b\x5d-\x7e]"  # printable ASCII except the quote and the backslash
_STR = rb'"' + _CHARS + rb'*"'
_DIGITS = rb"(?:0|[1-9][0-9]{0,30})(?:\.[0-9]{1,30})?(?:[eE][-+]?[0-9]{1,3})?"
_SIMPLE_NAME = re.compile(_CHARS + rb"+")


def fast_pattern(started_field: str, owner_field: str | None) -> re.Pattern[bytes] | None:
    """The regex of the common value shape; None when a field name cannot be matched byte for
    byte (it would need escapes or is not ASCII). Groups: owner before the start, the start
    as a number (never negative: json reads -0 as the int 0), as a string, owner after."""
    if owner_field == started_field:
        return None
    names = []
    for name in (started_field, owner_field):
        if name is None:
            continue
        raw = name.encode("utf-8")
        if not _SIMPLE_NAME.fullmatch(raw):
            return None
        names.append(re.escape(raw))
    not_ours = b"".join(rb"(?!" + n + rb'")' for n in names)
    other = rb'"' + not_ours + _CHARS + rb'*"' + _WS + rb":" + _WS
    other += rb"(?:" + _STR + rb"|-?" + _DIGITS + rb"|true|false|null)"
    sep = _WS + rb"," + _WS
    others = rb"(?:" + sep + other + rb")*"
    start = rb'"' + names[0] + rb'"' + _WS + rb":" + _WS
    start += rb"(?:(" + _DIGITS + rb')|"(' + _CHARS + rb'*)")'
    if owner_field:
        owner = rb'"' + names[1] + rb'"' + _WS + rb":" + _WS + rb'"(' + _CHARS + rb'*)"'
    else:
        owner = rb"(?!)()"  # never matches; keeps the group numbers
    # others, then an owner (json keeps the last one), others, the start, others, an owner
    body = b"".join(
        [rb"(?:", other, sep, rb")*", rb"(?:", owner, others, sep, rb")?"]
        + [start, others, rb"(?:", sep, owner, others, rb")?"]
    )
    return re.compile(_WS + rb"\{" + _WS + body + _WS + rb"\}" + _WS)


def line_pattern(started_field: str, owner_field: str | None) -> re.Pattern[bytes] | None:
    """The narrowest common shape, run by findall over a whole reply's values joined by
    newlines: `{"started_at": <number>, "host": "<text>"}`, the owner optional, spaces after
    `:` and `,` optional (json.dumps and JSON.stringify). Two groups: the number and the
    owner. A line of any other shape still matches, with both groups empty (the caller reads
    it in full). The language is a subset of fast_pattern's, with a non-empty owner, so an
    empty group always means it did not take part."""
    if fast_pattern(started_field, owner_field) is None:
        return None
    start = re.escape(started_field.encode())
    if owner_field:
        owner = rb'(?:, ?"' + re.escape(owner_field.encode()) + rb'": ?"(' + _CHARS + rb'++)")?'
    else:
        owner = rb"(?:(?!)(x))?"  # never takes part; keeps the group
    # possessive: a valid line never needs a digit or character given back (what follows a
    # run can never be part of it), and not backtracking saves a sixth of the time
    digits = rb"(?:0|[1-9][0-9]{0,30}+)(?:\.[0-9]{1,30}+)?+(?:[eE][-+]?[0-9]{1,3}+)?+"
    shape = rb'\{"' + start + rb'": ?(' + digits + rb")" + owner + rb"\}"
    return re.compile(rb"^(?:" + shape + rb")$|^.*$", re.MULTILINE)


class EntryReader:
    """Reads live-hash values exactly as read_entry_json does, through the fast path where a
    value has the common shape. One per scan: it memoises owner names."""

    def __init__(
        self,
        started_field: str = "started_at",
        owner_field: str | None = "host",
        assume_tz: tzinfo | None = None,
    ) -> None:
        self.started_field = started_field
        self.owner_field = owner_field or None
        self.assume_tz = assume_tz
        self.pattern = fast_pattern(started_field, self.owner_field)
        self.lines = line_pattern(started_field, self.owner_field)
        self._owners: dict[bytes | None, str | None] = {None: None}

    def __call__(self, value: bytes | str) -> Reading:
        got = self.fast(value)
        if got is None:
            return read_entry_json(value, self.started_field, self.owner_field, self.assume_tz)
        return got

    def fast(self, value: bytes | str) -> Reading | None:
        """The fast path alone: None when the value does not have the common shape."""
        if self.pattern is None or type(value) is not bytes:
            return None
        m = self.pattern.fullmatch(value)
        return None if m is None else self.finish(*m.groups())

    def owner_of(self, raw: bytes | None) -> str | None:
        """The owner a matched owner string names (its bytes are its text), memoised."""
        try:
            return self._owners[raw]
        except KeyError:
            assert raw is not None
            owner = _owner(raw.decode("ascii"))
            if len(self._owners) < 4096:
                self._owners[raw] = owner
            return owner

    def finish(
        self,
        owner_before: bytes | None,
        number: bytes | None,
        text: bytes | None,
        owner_after: bytes | None,
    ) -> Reading:
        """The reading of a matched value, from the regex groups."""
        owner = self.owner_of(owner_after if owner_after is not None else owner_before)
        raw: Any
        if number is not None:  # json's type: an int unless there is a fraction or exponent
            raw = int(number) if number.isdigit() else float(number)
        else:
            assert text is not None
            raw = text.decode("ascii")
        return _started(raw, owner, self.started_field, self.assume_tz)


def read_entry(
    value: bytes | str,
    started_field: str = "started_at",
    owner_field: str | None = "host",
    assume_tz: tzinfo | None = None,
) -> Reading:
    """parse_entry as a plain (started_at, problem, owner) tuple."""
    return _reader(started_field, owner_field or None, assume_tz)(value)


@functools.lru_cache(maxsize=16)
def _reader(started_field: str, owner_field: str | None, assume_tz: tzinfo | None) -> EntryReader:
    return EntryReader(started_field, owner_field, assume_tz)


def stale_reason(started_at: float | None, problem: str | None, now: float, max_age: float) -> str:
    """Why an entry is stale, or '' when it may be alive (pure).

    A start further in the future than max_age is no start time at all (a writer with a wrong
    clock or unit): such an entry would never age out, so it is malformed, hence stale.
    """
    if problem is not None or started_at is None:
        return f"malformed: {problem or 'no start time'}"
    age = now - started_at
    if age > max_age:
        return f"older than max_age ({age:.0f}s)"
    if -age > max_age:
        return f"malformed: started_at {-age:.0f}s in the future"
    return ""


def key_type(r: redis.Redis, key: str) -> str:
    raw = r.type(key)
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def hscan_replies(r: redis.Redis, key: str, count: int = SCAN_COUNT) -> Iterator[list[Any]]:
    """The flat [field, value, field, value, ...] list of every HSCAN reply of a full pass.

    The next HSCAN (its cursor is in the reply just read) is sent before the reply is handed
    over, so the server computes it while the caller decodes. A dropped connection is retried
    with the client's own retry budget (same cursor: HSCAN only reads); a connection left with
    a reply in flight (the caller stopped early or failed) is closed, never reused.
    """
    import redis as redis_mod

    pool = r.connection_pool
    own = r.connection is None
    conn: Any = pool.get_connection() if own else r.connection
    cursor: Any = 0
    in_flight = False

    def fetch() -> Any:
        nonlocal in_flight
        if not in_flight:
            conn.send_command("HSCAN", key, cursor, "COUNT", count)
            in_flight = True
        try:
            return conn.read_response()
        finally:
            in_flight = False  # read, or the connection was dropped with it

    def dropped(error: Exception) -> None:
        conn.disconnect()

    try:
        while True:
            cursor, items = conn.retry.call_with_retry(fetch, dropped)
            done = int(cursor) == 0
            if not done:
                try:
                    conn.send_command("HSCAN", key, cursor, "COUNT", count)
                    in_flight = True
                except (redis_mod.ConnectionError, redis_mod.TimeoutError):
                    conn.disconnect()  # fetch sends it again, within the retry budget
            yield items
            if done:
                return
    finally:
        if in_flight:
            conn.disconnect()
        if own:
            pool.release(conn)


def scan_hash(r: redis.Redis, key: str, count: int = SCAN_COUNT) -> Iterator[tuple[bytes, bytes]]:
    """Every (field, value) of a hash via HSCAN, each field once.

    HSCAN may return a field twice while the server resizes the hash; the first reading wins.
    """
    seen: set[bytes] = set()
    for items in hscan_replies(r, key, count):
        it = iter(items)
        for f, v in zip(it, it, strict=True):
            if f in seen:
                continue
            seen.add(f)
            yield f, v


@dataclass
class LiveScan:
    """What a scan of the live hash saw, reduced to plain values the check's evaluate judges.

    Bounded memory for a million fields: start times and owner indexes in typed arrays, the
    oldest few entries kept whole for evidence, malformed ones counted (a few kept).
    """

    key: str
    kind: str  # TYPE of the key: "hash", "none" (absent) or the wrong type
    starts: array[float] = field(default_factory=lambda: array("d"))
    owners: array[int] = field(default_factory=lambda: array("i"))  # -1: names no owner
    owner_names: list[str] = field(default_factory=list)
    oldest: list[tuple[float, str, str | None]] = field(default_factory=list)  # start, id, owner
    malformed: int = 0
    malformed_samples: list[tuple[str, str, str | None]] = field(default_factory=list)
    malformed_owners: dict[str, int] = field(default_factory=dict)
    keep: int = 5
    _owner_index: dict[str, int] = field(default_factory=dict, repr=False)
    _kept: list[tuple[float, str, str | None]] = field(default_factory=list, repr=False)

    @property
    def entries(self) -> int:
        return len(self.starts) + self.malformed

    def add(self, name: bytes | str, entry: LiveEntry) -> None:
        self.add_values(name, entry.started_at, entry.problem, entry.owner)

    def add_values(
        self, name: bytes | str, started: float | None, problem: str | None, owner: str | None
    ) -> None:
        if started is None:
            self.malformed += 1
            if len(self.malformed_samples) < self.keep:
                self.malformed_samples.append((_text(name), problem or "malformed", owner))
            if owner:
                self.malformed_owners[owner] = self.malformed_owners.get(owner, 0) + 1
            return
        self.starts.append(started)
        self.owners.append(-1 if owner is None else self.owner_index(owner))
        if started <= self.keep_below():
            self.keep_old(started, name, owner)

    def owner_index(self, owner: str) -> int:
        index = self._owner_index.get(owner)
        if index is None:
            index = self._owner_index[owner] = len(self.owner_names)
            self.owner_names.append(owner)
        return index

    def keep_below(self) -> float:
        """Entries starting after this cannot enter the oldest few (ties go by name)."""
        kept = self._kept
        if len(kept) < self.keep:
            return float("inf") if self.keep > 0 else float("-inf")
        return kept[-1][0]

    def keep_old(self, started: float, name: bytes | str, owner: str | None) -> float:
        """Offer an entry to the oldest few; the new bound. The kept ones are the `keep`
        smallest (start, id): the same whatever order the fields arrive in."""
        kept = self._kept
        row = (started, _text(name), owner)
        if len(kept) < self.keep:
            bisect.insort(kept, row, key=_start_and_id)
        elif _start_and_id(row) < _start_and_id(kept[-1]):
            bisect.insort(kept, row, key=_start_and_id)
            kept.pop()
        return self.keep_below()

    def finish(self) -> LiveScan:
        self.oldest = list(self._kept)
        return self


def _start_and_id(row: tuple[float, str, str | None]) -> tuple[float, str]:
    return row[0], row[1]


def read_live(
    r: redis.Redis,
    key: str,
    *,
    count: int = SCAN_COUNT,
    started_field: str = "started_at",
    owner_field: str | None = "host",
    assume_tz: tzinfo | None = None,
    keep: int = 5,
) -> LiveScan:
    """Scan the live hash once and reduce it (no judgement: that needs `now` and max_age)."""
    kind = key_type(r, key)
    if kind != "hash":
        return LiveScan(key=key, kind=kind, keep=keep)
    reader = EntryReader(started_field, owner_field, assume_tz)
    return reduce_pass(lambda: hscan_replies(r, key, count), key, reader, keep)


def reduce_pass(
    replies: Callable[[], Iterable[list[Any]]], key: str, reader: EntryReader, keep: int = 5
) -> LiveScan:
    """One pass over `replies()` without a set of field names (digests only, see
    LiveReducer); only when some digest came twice (HSCAN repeated a field: the hash shrank
    mid-scan) is the hash read again, with the exact set of names."""
    scan = LiveScan(key=key, kind="hash", keep=keep)
    reduce = LiveReducer(scan, reader, exact=False)
    for items in replies():
        reduce(items)
    if not reduce.repeated():
        return scan.finish()
    scan = LiveScan(key=key, kind="hash", keep=keep)
    reduce = LiveReducer(scan, reader, exact=True)
    for items in replies():
        reduce(items)
    return scan.finish()


class LiveReducer:
    """Feeds HSCAN replies into a LiveScan, a whole reply at a time where it can.

    A million fields leave no room for Python work per field. In a reply whose fields are all
    new, the values of the usual line shape (EntryReader.lines) are taken by a handful of
    C-level calls: one regex findall over the joined values, float conversion by map, array
    extends; the others (and every value of a reply that repeats a field or cannot be joined)
    are read one by one, fast regex else json, the first reading of a field winning. Either
    way the scan holds the same entries, start times with their owners, malformed samples
    and oldest few as adding each field in turn would; only the order of the start-time
    arrays may differ, and nothing reads that order (evaluate counts; the oldest few are the
    smallest (start, id), whatever the order).

    Exact mode keeps the set of field names seen (~90 MB for a million fields) and skips a
    field seen before. Digest mode (read_live's first pass) keeps 8 bytes per field and a
    nothing else, adds every field, and says afterwards whether any field may have come
    twice (`repeated`); the caller then reads the hash again in exact mode.
    """

    def __init__(self, scan: LiveScan, reader: EntryReader, exact: bool = True) -> None:
        self.scan = scan
        self.reader = reader
        self.exact = exact
        self.seen: set[Any] = set()
        self.owner_ids: dict[bytes, int] = {}  # matched owner bytes ("": none) -> owner index
        # digest mode: hash() of every field name, 8 bytes each, in parts by value
        self.digests = [array("q") for _ in range(DIGEST_PARTS)] if not exact else []

    def __call__(self, items: list[Any]) -> None:
        names, values = items[0::2], items[1::2]
        if len(names) != len(values):
            raise ValueError("HSCAN reply with an odd number of elements")
        if not names:
            return
        if not self.exact:  # no names kept: repeats are found from the digests at the end
            self._note(names)
            fresh = True
        else:
            seen = self.seen
            fresh = seen.isdisjoint(names)
            if fresh:
                before = len(seen)
                seen.update(names)
                if len(seen) - before != len(names):  # a field twice in one reply: go slowly
                    seen.difference_update(names)
                    fresh = False
        rows = self._rows(values) if fresh else None
        if rows is None:
            self._one_by_one(names, values, range(len(names)), check_seen=not fresh)
            return
        rest = self._bulk(names, rows)
        if rest:
            self._one_by_one(names, values, rest, check_seen=False)

    def _note(self, names: list[Any]) -> None:
        """Record the names' digests (hash(), 8 bytes each), split by value into
        DIGEST_PARTS arrays so that `repeated` can check one part at a time."""
        digests = sorted(map(hash, names))
        start = 0
        for part, bound in zip(self.digests, DIGEST_BOUNDS, strict=False):
            end = bisect.bisect_left(digests, bound, start)
            part.extend(digests[start:end])
            start = end
        self.digests[-1].extend(digests[start:])

    def repeated(self) -> bool:
        """Whether some field name's digest came twice in this pass: HSCAN repeated a field
        (then the pass must be read again with exact names), or, as rarely as 1 in 2**64 per
        pair, two names share a digest (read again too). Always False when exact.

        A digest repeats only within its part, so the check builds one part's set at a
        time: an eighth of the digests (about 10 MB for a million fields)."""
        return any(len(set(part)) != len(part) for part in self.digests)

    def _rows(self, values: list[Any]) -> list[tuple[bytes, bytes]] | None:
        """(number, owner) per value, b"" where absent; both b"" when the value is not of
        the line shape. None when the reply cannot be read this way."""
        lines = self.reader.lines
        if lines is None or type(values[0]) is not bytes:
            return None
        joined = b"\n".join(values)
        if joined.count(b"\n") != len(values) - 1:  # a value holds a newline
            return None
        rows: list[tuple[bytes, bytes]] = lines.findall(joined)
        return rows if len(rows) == len(values) else None

    def _bulk(self, names: list[Any], rows: list[tuple[bytes, bytes]]) -> Sequence[int]:
        """Add the rows of the line shape; the indexes of the others, for the caller to
        read one by one."""
        numbers: Sequence[bytes]
        owners: Sequence[bytes]
        numbers, owners = zip(*rows, strict=True)
        rest: list[int] = []
        if b"" in numbers:  # a few values of another shape: find them (C-speed index)
            at = numbers.index(b"")
            try:
                while True:
                    rest.append(at)
                    at = numbers.index(b"", at + 1)
            except ValueError:
                pass
            if len(rest) == len(rows):
                return rest
            names, numbers, owners = list(names), list(numbers), list(owners)
            for at in reversed(rest):
                del names[at], numbers[at], owners[at]
        starts = list(map(float, numbers))  # json's int or float, as a float: the same value
        if max(starts) >= MS_THRESHOLD:  # epoch milliseconds, as parse_instant reads them
            starts = [s if s < MS_THRESHOLD else s / 1000.0 for s in starts]
            if max(starts) >= MS_THRESHOLD:
                return range(len(rows))  # out of range: all through the full reading
        indexes = list(map(self.owner_ids.get, owners))
        if None in indexes:
            indexes = [self._owner_id(raw) for raw in owners]
        scan = self.scan
        scan.starts.extend(starts)
        scan.owners.extend(indexes)  # type: ignore[arg-type]
        bound = scan.keep_below()
        if min(starts) <= bound:
            owner_names = scan.owner_names
            # only the few at or below the bound (found at C speed; it only falls)
            for i in compress(range(len(starts)), map(le, starts, repeat(bound))):
                started = starts[i]
                if started <= bound:
                    index = indexes[i]
                    owner = owner_names[index] if index >= 0 else None  # type: ignore[operator,index]
                    bound = scan.keep_old(started, names[i], owner)
        return rest

    def _owner_id(self, raw: bytes) -> int:
        index = self.owner_ids.get(raw)
        if index is None:
            owner = self.reader.owner_of(raw or None)
            index = -1 if owner is None else self.scan.owner_index(owner)
            if len(self.owner_ids) < 4096:
                self.owner_ids[raw] = index
        return index

    def _one_by_one(
        self,
        names: list[Any],
        values: list[Any],
        which: Iterable[int],
        check_seen: bool,
    ) -> None:
        seen, add, reader = self.seen, self.scan.add_values, self.reader
        for i in which:
            name = names[i]
            if check_seen:
                if name in seen:
                    continue
                seen.add(name)
            add(name, *reader(values[i]))


@dataclass(frozen=True)
class Stale:
    """A field judged stale, with the exact value that was judged (for compare-and-delete)."""

    field: bytes
    value: bytes
    reason: str
    age_s: float | None
    owner: str | None

    @property
    def name(self) -> str:
        return _text(self.field)


def find_stale(
    r: redis.Redis,
    key: str,
    now: float,
    max_age: float,
    *,
    count: int = SCAN_COUNT,
    started_field: str = "started_at",
    owner_field: str | None = "host",
    assume_tz: tzinfo | None = None,
    include_malformed: bool = True,
) -> tuple[int, list[Stale]]:
    """(entries scanned, the stale ones with their values). The key must be a hash."""
    total = 0
    out: list[Stale] = []
    read = EntryReader(started_field, owner_field, assume_tz)
    for f, v in scan_hash(r, key, count):
        total += 1
        started, problem, owner = read(v)
        reason = stale_reason(started, problem, now, max_age)
        if not reason or (not include_malformed and reason.startswith("malformed")):
            continue
        age = None if started is None else now - started
        out.append(Stale(f, v, reason, age, owner))
    return total, out


def reap(
    r: redis.Redis,
    key: str,
    stale: Iterable[Stale],
    batch: int = 200,
    batch_bytes: int = 64 * 1024,
    calls_per_round_trip: int = 8,
) -> int:
    """Delete each stale field whose value is unchanged; the number actually removed.

    Batches keep every script call short on the server (a few hundred HGET+HDEL pairs).
    """
    script = r.register_script(REAP_LUA)
    batches: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for s in stale:
        current += [s.field, s.value]
        size += len(s.field) + len(s.value)
        if len(current) >= 2 * batch or size >= batch_bytes:
            batches.append(current)
            current, size = [], 0
    if current:
        batches.append(current)
    removed = 0
    for i in range(0, len(batches), calls_per_round_trip):
        pipe = r.pipeline(transaction=False)
        for args in batches[i : i + calls_per_round_trip]:
            script(keys=[key], args=args, client=pipe)
        removed += sum(int(n) for n in pipe.execute())
    return removed


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw


def describe_kind(key: str, kind: str) -> str:
    return f"{key} is a {kind}, not a hash"


def jsonable_oldest(scan: LiveScan) -> list[dict[str, Any]]:
    return [{"id": n, "started_at": s, "owner": o} for s, n, o in scan.oldest]


MATCH_WALL = 600.0  # incident 1: every match has a hard 600 s wall
MAX_SHARE = 0.5  # reap-live refuses to delete more than this share of the hash


def guard(
    total: int,
    stale: Sequence[Stale],
    max_age: float,
    match_wall: float,
    started_field: str,
    malformed_counted: bool = True,
) -> tuple[list[str], list[str]]:
    """(what the guard saw, why it refuses) for deleting `stale` out of `total` entries
    (pure). Each refusal is a sign of a wrong setting rather than of many zombies: a
    `started_field` no entry has, a `max_age` typed as minutes, a wipe of most of the hash."""
    lacking = (f"malformed: no {started_field}", "malformed: not JSON", "malformed: not a JSON")
    missing = sum(1 for s in stale if s.reason.startswith(lacking))
    share = len(stale) / total if total else 0.0
    seen = [
        f"{len(stale)} of {total} entries would be deleted ({share:.0%}; the limit is "
        f"{MAX_SHARE:.0%})",
        f"{started_field} present in {total - missing} of {total} entries"
        if malformed_counted
        else f"{started_field} not counted (malformed entries kept)",
        f"max_age {max_age:g}s against the match wall {match_wall:g}s",
    ]
    refusals = []
    if total and malformed_counted and missing == total:
        refusals.append(
            f"{started_field} appears in no entry (is started_field right?): every entry "
            "would count as malformed"
        )
    if max_age < match_wall:
        refusals.append(
            f"max_age {max_age:g}s is below the match wall {match_wall:g}s: live matches "
            "would be deleted (--max-age takes a duration: 15m, not 15)"
        )
    if total and share > MAX_SHARE:
        refusals.append(f"it would delete {share:.0%} of the hash (more than {MAX_SHARE:.0%})")
    return seen, refusals


def reap_live_command(
    fleet: FleetConfig,
    *,
    key: str | None = None,
    max_age: float | None = None,
    apply: bool = False,
    force: bool = False,
    keep_malformed: bool = False,
    show: int = 20,
    out: TextIO | None = None,
    now: float | None = None,
    between: Callable[[list[Stale]], None] | None = None,
) -> int:
    """`fleetcheck reap-live`: list (and with `apply`, delete) the stale live-hash entries.

    Settings come from `[checks.live_hash]` when present, overridden by the arguments. Returns
    the exit code: 0 done, 3 when the broker or the key could not be read, or when the guard
    refuses (see `guard`; `force` overrides it), with the message on stderr.
    `between` runs after the scan and before the delete (tests use it to play the race).
    """
    import sys
    import time

    from fleetcheck.parse.duration import format_duration
    from fleetcheck.transport.redis import connect, describe_error

    out = out or sys.stdout
    cfg: Any = fleet.checks.get("live_hash")
    key = key or str(getattr(cfg, "key", "arena:live"))
    age_limit = max_age if max_age is not None else float(getattr(cfg, "max_age", 900.0))
    started_field = getattr(cfg, "started_field", "started_at")
    match_wall = float(getattr(cfg, "match_wall", MATCH_WALL))
    owner_field = getattr(cfg, "owner_field", "host") or None
    count = int(getattr(cfg, "scan_count", SCAN_COUNT))
    tz = None
    if getattr(cfg, "naive_tz", None):
        from zoneinfo import ZoneInfo

        tz = ZoneInfo(cfg.naive_tz)

    def error(message: str) -> int:
        print(f"fleetcheck: error: {message}", file=sys.stderr)
        return 3

    try:
        r = connect(fleet.broker)
    except Exception as e:
        return error(f"broker {fleet.broker.address}: {describe_error(e, fleet.broker)}")
    try:
        try:
            r.ping()
        except Exception as e:
            return error(
                f"broker {fleet.broker.address} unreachable: {describe_error(e, fleet.broker)}"
            )
        try:
            kind = key_type(r, key)
            if kind == "none":
                print(f"{key}: absent, nothing to reap", file=out)
                return 0
            if kind != "hash":
                return error(describe_kind(key, kind) + ": nothing deleted")
            t = time.time() if now is None else now
            total, stale = find_stale(
                r,
                key,
                t,
                age_limit,
                count=count,
                started_field=started_field,
                owner_field=owner_field,
                assume_tz=tz,
                include_malformed=not keep_malformed,
            )
        except Exception as e:
            return error(f"reading {key}: {describe_error(e, fleet.broker)}")
        malformed = sum(1 for s in stale if s.reason.startswith("malformed"))
        print(
            f"{key}: {total} entries scanned, {len(stale)} stale "
            f"({len(stale) - malformed} older than {format_duration(age_limit)}, "
            f"{malformed} malformed{', malformed kept' if keep_malformed else ''})",
            file=out,
        )
        ordered = sorted(stale, key=lambda s: (s.age_s is None, -(s.age_s or 0.0)))  # oldest first
        listed = ordered if show <= 0 else ordered[:show]
        for s in listed:
            age = format_duration(s.age_s) if s.age_s is not None else "-"
            owner = f"  owner {s.owner}" if s.owner else ""
            print(f"  {s.name}  age {age}{owner}  {s.reason}", file=out)
        if len(listed) < len(ordered):
            print(f"  ... and {len(ordered) - len(listed)} more (--show 0 lists all)", file=out)
        seen, refusals = guard(
            total, stale, age_limit, match_wall, started_field, not keep_malformed
        )
        for line in seen:
            print(f"guard: {line}", file=out)
        for line in refusals:
            print(
                f"guard: REFUSES: {line}" + (" (overridden by --force)" if force else ""), file=out
            )
        if not apply:
            hint = " (add --force: the guard refuses)" if refusals and not force else ""
            print(
                f"dry run: nothing deleted (run with --apply to delete these {len(stale)}){hint}",
                file=out,
            )
            return 0
        if refusals and not force and stale:
            return error(
                f"reap-live refuses: {refusals[0]}; nothing deleted (check the settings; "
                "--force overrides)"
            )
        if between is not None:
            between(stale)
        try:
            removed = reap(r, key, stale)
        except Exception as e:
            return error(f"deleting from {key}: {describe_error(e, fleet.broker)}")
        kept = len(stale) - removed
        note = f" ({kept} changed since the scan and were kept)" if kept else ""
        print(f"removed {removed} of {len(stale)} stale entries from {key}{note}", file=out)
        return 0
    finally:
        r.close()
