"""The live hash of running matches: reading it safely, judging its entries, reaping zombies.

FIELD-NOTES 1: `arena:live` holds one field per running match (HSET at start, HDEL at the end);
workers SIGKILLed by a deploy leak their entries forever because a hash field has no TTL before
Redis 7.4 / Valkey 9 (HEXPIRE). An entry older than the match wall (plus margin) is certainly
dead; one whose start time is missing or unreadable cannot prove it is alive and is stale too.

Reading: HSCAN with a small COUNT, never HGETALL (the hash may hold a million fields and no
command we send may hold the server for more than a few milliseconds). Deleting (only when the
operator asks, `reap-live --apply`): a Lua script per batch that deletes a field only if its
value is still byte-for-byte the one judged stale, so a worker that re-HSETs the same id in
between keeps its entry.
"""

from __future__ import annotations

import heapq
import json
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import TYPE_CHECKING, Any, TextIO

from fleetcheck.parse.instant import MS_THRESHOLD, parse_instant

if TYPE_CHECKING:
    import redis

    from fleetcheck.config import FleetConfig

SCAN_COUNT = 500
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


_decode_json = json.JSONDecoder().decode


def read_entry(
    value: bytes | str,
    started_field: str = "started_at",
    owner_field: str | None = "host",
    assume_tz: tzinfo | None = None,
) -> tuple[float | None, str | None, str | None]:
    """parse_entry as a plain (started_at, problem, owner) tuple: the scan's hot path, run once
    per field of a hash that may hold a million."""
    try:
        doc = _decode_json(value.decode("utf-8") if isinstance(value, bytes) else value)
    except (ValueError, UnicodeDecodeError):
        return None, "not JSON", None
    if type(doc) is not dict:
        return None, f"not a JSON object ({type(doc).__name__})", None
    owner = None
    if owner_field:
        raw_owner = doc.get(owner_field)
        if type(raw_owner) is str and raw_owner:
            owner = raw_owner.strip()[:OWNER_MAX] or None
    raw = doc.get(started_field, _MISSING)
    if raw is _MISSING:
        return None, f"no {started_field}", owner
    if (type(raw) is float or type(raw) is int) and 0 <= raw < MS_THRESHOLD:
        return float(raw), None, owner  # plain epoch seconds: the common case, no NaN here
    try:
        return parse_instant(raw, assume_tz), None, owner
    except ValueError as e:
        return None, f"{started_field}: {e}", owner


_MISSING = object()


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


def scan_hash(r: redis.Redis, key: str, count: int = SCAN_COUNT) -> Iterator[tuple[bytes, bytes]]:
    """Every (field, value) of a hash via HSCAN, each field once.

    HSCAN may return a field twice while the server rehashes; the first reading wins.
    """
    seen: set[bytes] = set()
    cursor: int = 0
    while True:
        reply: Any = r.hscan(key, cursor, count=count)
        cursor, chunk = reply
        for f, v in chunk.items():
            if f in seen:
                continue
            seen.add(f)
            yield f, v
        if int(cursor) == 0:
            return


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
    _heap: list[tuple[float, str, str | None]] = field(default_factory=list, repr=False)

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
        self.owners.append(-1 if owner is None else self._index(owner))
        heap = self._heap
        if len(heap) < self.keep:  # max-heap on start (negated): keeps the oldest
            heapq.heappush(heap, (-started, _text(name), owner))
        elif -started > heap[0][0]:
            heapq.heapreplace(heap, (-started, _text(name), owner))

    def _index(self, owner: str) -> int:
        index = self._owner_index.get(owner)
        if index is None:
            index = self._owner_index[owner] = len(self.owner_names)
            self.owner_names.append(owner)
        return index

    def finish(self) -> LiveScan:
        self.oldest = sorted(((-s, n, o) for s, n, o in self._heap), key=lambda t: t[0])
        return self


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
    scan = LiveScan(key=key, kind=kind, keep=keep)
    if kind != "hash":
        return scan
    add = scan.add_values
    for f, v in scan_hash(r, key, count):
        add(f, *read_entry(v, started_field, owner_field, assume_tz))
    return scan.finish()


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
    for f, v in scan_hash(r, key, count):
        total += 1
        started, problem, owner = read_entry(v, started_field, owner_field, assume_tz)
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


def reap_live_command(
    fleet: FleetConfig,
    *,
    key: str | None = None,
    max_age: float | None = None,
    apply: bool = False,
    keep_malformed: bool = False,
    show: int = 20,
    out: TextIO | None = None,
    now: float | None = None,
    between: Callable[[list[Stale]], None] | None = None,
) -> int:
    """`fleetcheck reap-live`: list (and with `apply`, delete) the stale live-hash entries.

    Settings come from `[checks.live_hash]` when present, overridden by the arguments. Returns
    the exit code: 0 done, 3 when the broker or the key could not be read (message on stderr).
    `between` runs after the scan and before the delete (tests use it to play the race).
    """
    import sys
    import time

    from fleetcheck.parse.duration import format_duration
    from fleetcheck.transport.redis import broker_address, connect, describe_error

    out = out or sys.stdout
    cfg: Any = fleet.checks.get("live_hash")
    key = key or str(getattr(cfg, "key", "arena:live"))
    age_limit = max_age if max_age is not None else float(getattr(cfg, "max_age", 900.0))
    started_field = getattr(cfg, "started_field", "started_at")
    owner_field = getattr(cfg, "owner_field", "host") or None
    count = int(getattr(cfg, "scan_count", SCAN_COUNT))
    tz = None
    if getattr(cfg, "naive_tz", None):
        from zoneinfo import ZoneInfo

        tz = ZoneInfo(cfg.naive_tz)

    def error(message: str) -> int:
        print(f"fleetcheck: error: {message}", file=sys.stderr)
        return 3

    r = connect(fleet.broker)
    try:
        try:
            r.ping()
        except Exception as e:
            return error(
                f"broker {broker_address(fleet.broker.url)} unreachable: "
                f"{describe_error(e, fleet.broker)}"
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
        if not apply:
            print(
                f"dry run: nothing deleted (run with --apply to delete these {len(stale)})",
                file=out,
            )
            return 0
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
