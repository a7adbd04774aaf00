"""Everything one patrol shares: the broker client, one shell per host, the clock, and facts
fetched once however many checks read them (CLIENT LIST, INFO, each host's gathered commands).

Checks never open connections themselves; they ask the context, which opens at most one of
each per patrol and closes them all at the end (also when the deadline cut the patrol short).
The context is the one object checks and the runner hold; its parts each do one job:
fleetcheck.core.memo (once per patrol), fleetcheck.core.brokerlink (the broker and its
errors), fleetcheck.core.sessions (the hosts' shells and the gathered exec).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.core.brokerlink import BrokerLink, BrokerRefused
from fleetcheck.core.errors import CheckError
from fleetcheck.core.memo import Memo
from fleetcheck.core.model import row_id
from fleetcheck.core.sessions import HostFacts, HostSessions, Named
from fleetcheck.transport.shell import Shell

if TYPE_CHECKING:
    import redis

    from fleetcheck.parse.clientlist import ClientTable

# names checks and tests import from here, whose homes are now the context's parts
__all__ = ["TEST_CLOCK_ENV", "BrokerRefused", "HostFacts", "Named", "PatrolContext", "utcnow"]

TEST_CLOCK_ENV = "FLEETCHECK_TEST_CLOCK_OFFSET_S"


def utcnow() -> datetime:
    """The patrol's judging clock. The test suite shifts it (`$FLEETCHECK_TEST_CLOCK_OFFSET_S`
    seconds added to the wall clock) to run the zone-sensitive tests at a summer and a winter
    instant; clock-skew measurement keeps the real wall clock on both ends."""
    offset = os.environ.get(TEST_CLOCK_ENV)
    now = datetime.now(UTC)
    return now + timedelta(seconds=float(offset)) if offset else now


class PatrolContext:
    def __init__(
        self,
        fleet: FleetConfig,
        fragments: Callable[[HostConfig], dict[str, str]] | None = None,
        clock: Callable[[], datetime] = utcnow,
        carried: Mapping[str, Any] | None = None,
        keeper: Any = None,
    ) -> None:
        self.fleet = fleet
        self._carried = carried or {}
        self.clock = clock
        self._memo = Memo()
        self._broker = BrokerLink(fleet, self._memo)
        self._hosts = HostSessions(fleet, self._memo, fragments, keeper)

    @property
    def master(self) -> tuple[str, int] | None:
        """The master the sentinels named (None without sentinels, or before connecting)."""
        return self._broker.master

    @property
    def closed(self) -> bool:
        return self._hosts.closed

    @property
    def deadline_at(self) -> float | None:
        """Monotonic end of the patrol (the runner sets it): no host waits for a slot past it."""
        return self._hosts.deadline_at

    @deadline_at.setter
    def deadline_at(self, value: float | None) -> None:
        self._hosts.deadline_at = value

    # ------------------------------------------------------------ memory
    def carried(
        self, check: str, host: HostConfig | None, item: str | None = None
    ) -> dict[str, Any] | None:
        """What this row's previous round left for this one (counters, last seen limits), from
        the state file; None without state or on the first round."""
        value = self._carried.get(row_id(check, host.name if host else None, item))
        return dict(value) if isinstance(value, dict) else None

    # ------------------------------------------------------------ broker
    def broker(self) -> redis.Redis:
        """The patrol's one broker client, known to answer PING (see BrokerLink.broker)."""
        return self._broker.broker()

    def probe_broker(self) -> redis.Redis:
        """The rater probe's own connection (see BrokerLink.probe_broker)."""
        return self._broker.probe_broker()

    def broker_error(self, e: Exception) -> CheckError:
        """A redis-py error as a one-line, secret-free CheckError (or BrokerRefused)."""
        return self._broker.broker_error(e)

    def client_table(self) -> ClientTable:
        """CLIENT LIST as a table, read once per patrol (see BrokerLink.client_table)."""
        return self._broker.client_table()

    def info(self) -> dict[str, Any]:
        """INFO (all default sections), read once per patrol."""
        return self._broker.info()

    # ------------------------------------------------------------ hosts
    def notes(self) -> list[str]:
        """What the report should say about the patrol itself (it slowed down, ...)."""
        return self._hosts.notes()

    def shell(self, host: HostConfig) -> Shell:
        """The host's shell for the rest of this patrol (see HostSessions.shell)."""
        return self._hosts.shell(host)

    def host_facts(self, host: HostConfig, check: Named | None = None) -> HostFacts:
        """`check`'s fragments for `host` (all checks' when None), gathered once a patrol."""
        return self._hosts.host_facts(host, check)

    def close(self) -> None:
        """Close every shell, the SSH connector (jump hosts) and the broker connections."""
        self._hosts.close()
        self._broker.close()
