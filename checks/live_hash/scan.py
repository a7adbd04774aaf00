"""The live hash of running matches (incident 1): the staleness rule, reading the hash, and
deleting the stale entries. Shared by the live_hash check and `fleetcheck reap-live`.

Invariants: read with HSCAN and a small COUNT, never HGETALL (the hash may hold a million
fields; no command we send may hold the server for more than milliseconds); memory bounded
(typed arrays, the oldest few kept whole); delete only by a Lua compare-and-delete per batch,
so a field re-written since the scan keeps its new value.
"""

from __future__ import annotations

import bisect
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from itertools import compress, repeat
from operator import gt, or_, sub
from typing import TYPE_CHECKING

from fleetcheck.parse.duration import format_duration
from fleetcheck.parse.live_entry import read_entry

if TYPE_CHECKING:
    import redis

SCAN_COUNT = 500
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
    """The staleness rule over many start times at once (C-level loops: the hash may hold a
    million): per start, 1 when it is older than max_age (`now - start > max_age`: its match
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


def first_seen(pairs: Iterable[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
    """Each (field, value) once: HSCAN may return a field twice while the server resizes
    the hash; the first reading wins."""
    seen: set[bytes] = set()
    for f, v in pairs:
        if f not in seen:
            seen.add(f)
            yield f, v


def scan_hash(r: redis.Redis, key: str, count: int = SCAN_COUNT) -> Iterator[tuple[bytes, bytes]]:
    """Every (field, value) of a hash via HSCAN, each field once."""
    return first_seen(r.hscan_iter(key, count=count))


@dataclass
class LiveScan:
    """What a scan of the live hash saw, reduced to plain values the check's evaluate judges.

    Compact for a million fields: start times and owner indexes in typed arrays, the oldest
    few entries kept whole for evidence (the `keep` smallest (start, id), whatever order the
    fields arrive in), malformed ones counted (a few kept).
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
        kept = self.oldest
        if len(kept) < self.keep or (kept and started <= kept[-1][0]):  # ties go by id
            bisect.insort(kept, (started, _text(name), owner), key=lambda row: row[:2])
            del kept[self.keep :]

    def owner_index(self, owner: str) -> int:
        index = self._owner_index.get(owner)
        if index is None:
            index = self._owner_index[owner] = len(self.owner_names)
            self.owner_names.append(owner)
        return index


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
    pairs = r.hscan_iter(key, count=count)
    return live_scan(key, pairs, started_field, owner_field, assume_tz, keep)


def live_scan(
    key: str,
    pairs: Iterable[tuple[bytes, bytes]],
    started_field: str = "started_at",
    owner_field: str | None = "host",
    assume_tz: tzinfo | None = None,
    keep: int = 5,
) -> LiveScan:
    """The hash's (field, value) pairs reduced, each field once (first reading wins)."""
    scan = LiveScan(key=key, kind="hash", keep=keep)
    for f, v in first_seen(pairs):
        scan.add_values(f, *read_entry(v, started_field, owner_field, assume_tz))
    return scan


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
) -> int:
    """Delete each stale field whose value is unchanged; the number actually removed.

    Batches keep every script call short on the server (a few hundred HGET+HDEL pairs, a
    bounded size however long the values).
    """
    script = r.register_script(REAP_LUA)
    removed, args, size = 0, [], 0
    for s in stale:
        args += [s.field, s.value]
        size += len(s.field) + len(s.value)
        if len(args) >= 2 * batch or size >= batch_bytes:
            removed += int(script(keys=[key], args=args))
            args, size = [], 0
    if args:
        removed += int(script(keys=[key], args=args))
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
