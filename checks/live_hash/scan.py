"""The live hash of running matches (incident 1): the staleness rule, reading the hash, and
deleting the stale entries. Shared by the live_hash check and `fleetcheck reap-live`.

Invariants: read with HSCAN and a small COUNT, never HGETALL (a million fields; no command we
send may hold the server for more than milliseconds), the next HSCAN in flight while the last
reply is decoded; memory bounded (typed arrays, the oldest few kept whole); delete only by a
Lua compare-and-delete per batch, so a field re-written since the scan keeps its new value.
"""

from __future__ import annotations

import bisect
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from itertools import compress, repeat
from operator import gt, le, or_, sub
from typing import TYPE_CHECKING, Any

from fleetcheck.parse.duration import format_duration
from fleetcheck.parse.instant import MS_THRESHOLD
from fleetcheck.parse.live_entry import EntryReader

if TYPE_CHECKING:
    import redis

SCAN_COUNT = 500
# value ranges of hash() (64-bit) that the repeat check takes one by one: 32 keep each
# part's set small enough to stay in the CPU's caches (~2 MB for a million fields)
DIGEST_PARTS = 32
DIGEST_BATCH = 4000  # digests sorted into the parts together (fewer, longer calls)
DIGEST_BOUNDS = [-(2**63) + k * 2**64 // DIGEST_PARTS for k in range(1, DIGEST_PARTS)]
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


def stale_flags(starts: Sequence[float], now: float, max_age: float) -> tuple[bytes, bytes | None]:
    """The staleness rule, at C speed over many start times (a million in a fraction of a
    second): per start, 1 when it is older than max_age (`now - start > max_age`: its match
    is certainly over), and, None when no start qualifies, 1 when it lies more than max_age
    in the future (a writer with a wrong clock or unit: such an entry would never age out, so
    it counts as malformed, hence stale too). A start that is missing or unreadable is
    malformed as well; that is decided where the value is read."""
    old = bytes(map(gt, map(sub, repeat(now), starts), repeat(max_age)))
    # -(now - s) is exactly s - now in floating point, and grows with s
    if not starts or max(starts) - now <= max_age:
        return old, None
    return old, bytes(map(gt, map(sub, starts, repeat(now)), repeat(max_age)))


def stale_reason(started_at: float | None, problem: str | None, now: float, max_age: float) -> str:
    """Why one entry is stale by `stale_flags`, or '' when it may be alive (pure)."""
    if problem is not None or started_at is None:
        return f"malformed: {problem or 'no start time'}"
    old, future = stale_flags((started_at,), now, max_age)
    if old[0]:
        return f"older than max_age ({format_duration(now - started_at)})"
    if future:
        return f"malformed: started_at {format_duration(started_at - now)} in the future"
    return ""


def stale_counts(scan: LiveScan, now: float, max_age: float) -> tuple[int, int, Counter[str]]:
    """(older than max_age, starting more than max_age in the future, stale per owner with
    the malformed ones) over a scan, by `stale_flags` (pure)."""
    starts = scan.starts
    old_flags, future_flags = stale_flags(starts, now, max_age)
    stale_flags_: Iterable[int] = old_flags
    future = 0
    if future_flags is not None:
        future = future_flags.count(1)
        stale_flags_ = map(or_, old_flags, future_flags)
    by_index = Counter(compress(scan.owners, stale_flags_))
    stale_by_owner: Counter[str] = Counter(scan.malformed_owners)
    names = scan.owner_names
    for index, n in by_index.items():
        if index >= 0:
            stale_by_owner[names[index]] += n
    return old_flags.count(1), future, stale_by_owner


def any_stale(scan: LiveScan, now: float, max_age: float) -> bool:
    """Whether `stale_counts` would find a stale entry, from the scan's edges alone: its
    malformed count, its oldest start (kept) and its newest."""
    if scan.malformed:
        return True
    if not scan.starts:
        return False
    first = scan.oldest[0][0] if scan.oldest else min(scan.starts)
    old, future = stale_flags((first, scan.newest), now, max_age)
    return bool(old[0]) or future is not None


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
    newest: float = float("-inf")  # the latest start time seen
    malformed_samples: list[tuple[str, str, str | None]] = field(default_factory=list)
    malformed_owners: dict[str, int] = field(default_factory=dict)
    keep: int = 5
    _owner_index: dict[str, int] = field(default_factory=dict, repr=False)
    _kept: list[tuple[float, str, str | None]] = field(default_factory=list, repr=False)

    @property
    def entries(self) -> int:
        return len(self.starts) + self.malformed

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
        self.newest = max(self.newest, started)
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
        if self.keep <= 0:
            return float("-inf")
        return float("inf") if len(kept) < self.keep else kept[-1][0]

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
    new, the values are taken by a handful of C-level calls: the exact writer shapes
    (EntryReader.columns) by one finditer, one replace and one split over the joined values,
    else the usual line shape (EntryReader.lines) by one regex findall; then float
    conversion by map and array fromlist. The others (and every value of a reply that
    repeats a field or cannot be joined) are read one by one, fast regex else json, the
    first reading of a field winning. Either
    way the scan holds the same entries, start times with their owners, malformed samples
    and oldest few as adding each field in turn would; only the order of the start-time
    arrays may differ, and nothing reads that order (evaluate counts; the oldest few are the
    smallest (start, id), whatever the order).

    Exact mode keeps the set of field names seen (~90 MB for a million fields) and skips a
    field seen before. Digest mode (read_live's first pass) keeps 8 bytes per field and
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
        self.pending: list[int] = []  # digests not yet sorted into their parts

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
        cut = self._cut(values) if fresh else None
        if cut is None:
            self._one_by_one(names, values, range(len(names)), check_seen=not fresh)
            return
        odd, numbers, owners = cut
        taken = names
        if odd:
            taken = list(names)
            for at in reversed(odd):
                del taken[at]
        if numbers and not self._bulk(taken, numbers, owners):
            odd = range(len(names))  # out of range: all through the full reading
        if odd:
            self._one_by_one(names, values, odd, check_seen=False)

    def _cut(self, values: list[Any]) -> tuple[Sequence[int], list[bytes], list[bytes]] | None:
        """(indexes of the values of no common shape, the start numbers and owners (b"":
        none) of the others, in order), or None when the reply is not for cutting (a value
        holds a newline or is not bytes). The exact writer shapes are cut out by
        EntryReader.columns (one finditer, one replace and one split for the whole reply),
        else the line shape by the findall of EntryReader.lines."""
        if type(values[0]) is not bytes:
            return None
        joined = b"\n".join(values)
        if joined.count(b"\n") != len(values) - 1:  # a value holds a newline
            return None
        for shape in self.reader.columns:
            if shape.prefix in joined:  # json.dumps's first: the compact prefix is in it too
                cut = shape.split(values, joined)
                if cut is not None:
                    return cut
                break
        lines = self.reader.lines
        if lines is None:
            return None
        rows: list[tuple[bytes, bytes]] = lines.findall(joined)
        if len(rows) != len(values):
            return None
        numbers: list[bytes]
        owners: list[bytes]
        numbers, owners = map(list, zip(*rows, strict=True))
        odd: list[int] = []
        if b"" in numbers:  # a few values of another shape: find them (C-speed index)
            at = numbers.index(b"")
            try:
                while True:
                    odd.append(at)
                    at = numbers.index(b"", at + 1)
            except ValueError:
                pass
            for at in reversed(odd):
                del numbers[at], owners[at]
        return odd, numbers, owners

    def _note(self, names: list[Any]) -> None:
        """Record the names' digests (hash(), 8 bytes each), split by value into
        DIGEST_PARTS arrays so that `repeated` can check one part at a time; a few
        replies' worth at a time."""
        self.pending.extend(map(hash, names))
        if len(self.pending) >= DIGEST_BATCH:
            self._file()

    def _file(self) -> None:
        digests = sorted(self.pending)
        self.pending = []
        start = 0
        for part, bound in zip(self.digests, DIGEST_BOUNDS, strict=False):
            end = bisect.bisect_left(digests, bound, start)
            part.fromlist(digests[start:end])
            start = end
        self.digests[-1].fromlist(digests[start:])

    def repeated(self) -> bool:
        """Whether some field name's digest came twice in this pass: HSCAN repeated a field
        (then the pass must be read again with exact names), or, as rarely as 1 in 2**64 per
        pair, two names share a digest (read again too). Always False when exact.

        A digest repeats only within its part, so the check builds one part's set at a
        time: a 32nd of the digests (about 2 MB for a million fields)."""
        if self.pending:
            self._file()
        return any(len(set(part)) != len(part) for part in self.digests)

    def _bulk(self, names: list[Any], numbers: list[bytes], owners: list[bytes]) -> bool:
        """Add the values whose start numbers and owners (b"": none) were cut out; False
        (nothing added) when some start is out of range (the caller reads them in full)."""
        starts = list(map(float, numbers))  # json's int or float, as a float: the same value
        top = max(starts)
        if top >= MS_THRESHOLD:  # epoch milliseconds, as parse_instant reads them
            starts = [s if s < MS_THRESHOLD else s / 1000.0 for s in starts]
            top = max(starts)
            if top >= MS_THRESHOLD:
                return False
        indexes = list(map(self.owner_ids.get, owners))
        if None in indexes:
            indexes = [self._owner_id(raw) for raw in owners]
        scan = self.scan
        scan.newest = max(scan.newest, top)
        scan.starts.fromlist(starts)  # fromlist: sized once, half the time of extend
        scan.owners.fromlist(indexes)  # type: ignore[arg-type]
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
        return True

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
