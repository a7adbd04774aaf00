"""What reap-live and the live_hash check know about time and liveness before they call an
entry dead: the broker's clock, and which owners are connected right now.

Ages are judged on the broker's clock (`TIME`, read once per run), never on the patrol
machine's alone: with that machine's clock six minutes ahead, entries ten minutes old looked
sixteen and were deleted while their matches ran. The round trip of TIME bounds the
reading's error, and reap-live judges with that error in the entries' favour. A clock that
differs from the broker's by more than `max_clock_skew` is a machine to fix before deleting
anything, so reap-live refuses. A worker whose clock is behind writes starts that look old
however well the patrol's clock is set; its matches are kept because their owner is still
connected to the broker (CLIENT LIST, related to owners as the check relates them, and by
the names connections give: `worker:worker-17:3` relates owner `worker-17`). An owner that
can be related to no connection at all is unknown, not absent: its entries are named and kept
unless --force.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:
    import redis
    from fleetcheck.checks.live_hash.scan import Stale


@dataclass(frozen=True)
class BrokerClock:
    """The broker's clock against the patrol machine's, from one TIME."""

    offset_s: float  # the broker's clock minus the patrol machine's
    error_s: float  # half TIME's round trip: how far off the offset may be

    def now(self, local: float) -> float:
        """The broker's time when the patrol machine's clock reads `local`."""
        return local + self.offset_s

    def describe(self) -> str:
        """ "the patrol machine's clock is 6m00s ahead of the broker's (TIME, read to within
        0.3ms)"."""
        off = self.offset_s
        if abs(off) < 0.0005:
            where = "agrees with the broker's"
        else:
            side = "ahead of" if off < 0 else "behind"
            where = f"is {format_duration(abs(off))} {side} the broker's"
        return (
            f"the patrol machine's clock {where} (TIME, read to within {self.error_s * 1000:.1f}ms)"
        )


def read_broker_clock(r: redis.Redis, local: Callable[[], float]) -> BrokerClock:
    """One TIME; the patrol machine's clock (`local`) is read just before it, and the
    round trip (measured on the monotonic clock, which does not jump) places the broker's
    reading at its midpoint, half the round trip either way."""
    before = local()
    t0 = time.monotonic()
    seconds, micros = r.time()
    rtt = time.monotonic() - t0
    broker = int(seconds) + int(micros) / 1e6
    return BrokerClock(broker - (before + rtt / 2), rtt / 2)


def clock_refusal(clock: BrokerClock, max_skew: float) -> str | None:
    """Why reap-live must not delete on this clock, or None (pure). The error counts
    against the clock: a skew that may be past the limit is refused."""
    if abs(clock.offset_s) + clock.error_s <= max_skew:
        return None
    return (
        f"{clock.describe()}, more than max_clock_skew {format_duration(max_skew)}: "
        "fix the clock (NTP) before deleting"
    )


@dataclass(frozen=True)
class Connections:
    """Who holds broker connections right now (our own left out): their addresses and the
    names they gave with CLIENT SETNAME."""

    addresses: set[str]
    names: set[str]


def read_connections(r: redis.Redis) -> Connections:
    """One CLIENT LIST, without our own connection."""
    from fleetcheck.parse.clientlist import read_client_table

    pipe = r.pipeline(transaction=False)
    pipe.client_id()
    pipe.execute_command("CLIENT", "LIST")
    own_id, raw = pipe.execute()
    table = read_client_table(raw).without_own(own_id)
    return Connections(table.hosts(), {c.name for c in table.clients() if c.name})


_NAME_PARTS = re.compile(r"[:/@|,;= ]+")  # separators of `worker:worker-17:3`; not - or .


def named_in(owner: str, names: Iterable[str]) -> bool:
    """Whether `owner` is one of the parts of a connection's name (or the whole name):
    `worker-17` is in `worker:worker-17:3`, not in `worker:worker-170:3`."""
    return any(owner == n or owner in _NAME_PARTS.split(n) for n in names)


def relate_owners(
    presence: dict[str, bool | None], connections: Connections
) -> dict[str, bool | None]:
    """`presence` (from the addresses, `owner_presence`) with connection names added: an
    owner named by a connection is connected, whatever its addresses said."""
    return {
        owner: True if named_in(owner, connections.names) else known
        for owner, known in presence.items()
    }


def _owners(stale: list[Stale], show: int) -> str:
    """`w1 (3), w2 (1)`: the owners of `stale`, most entries first, at most `show` named."""
    per_owner = Counter(s.owner for s in stale if s.owner is not None)
    top = sorted(per_owner.items(), key=lambda kv: (-kv[1], kv[0]))
    names = ", ".join(f"{owner} ({n})" for owner, n in top[:show])
    if len(top) > show:
        names += f", ... and {len(top) - show} more owners"
    return names


def unknown_owner_line(unknown: list[Stale], force: bool, show: int = 10) -> str:
    """The guard's line naming the entries kept because their owner's liveness is unknown."""
    what = (
        f"{len(unknown)} entries whose owner cannot be related to any broker connection "
        f"(owners: {_owners(unknown, show)})"
    )
    if force:
        return f"{what} (deleted anyway: --force)"
    return f"keeps {what} (not seen is not proof of absence; --force deletes them)"


def split_live(
    stale: Iterable[Stale], presence: dict[str, bool | None]
) -> tuple[list[Stale], list[Stale], list[Stale]]:
    """(entries whose owner is known absent or not recorded, entries whose owner is
    connected, entries whose owner cannot be related to any connection). The last are not
    dead: unknown is not proof of absence."""
    dead: list[Stale] = []
    live: list[Stale] = []
    unknown: list[Stale] = []
    for s in stale:
        if s.owner is None:
            dead.append(s)  # no owner recorded: judged by its age alone, as before
        elif s.owner not in presence or presence[s.owner] is None:
            unknown.append(s)
        else:
            (live if presence[s.owner] else dead).append(s)
    return dead, live, unknown


def live_owner_line(live: list[Stale], force: bool, show: int = 10) -> str:
    """The guard's line naming the entries kept because their owner is connected."""
    names = _owners(live, show)
    what = f"{len(live)} stale entries whose owner is connected to the broker now: {names}"
    if force:
        return f"{what} (deleted anyway: --force)"
    return f"keeps {what} (their matches may be running; --force deletes them)"
