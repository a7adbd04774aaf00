"""groups: is a pool of machines judged as a pool? (incident 4, the field notes' autoscaled fleet)

An autoscaled pool is healthy when enough of its machines are at work, whichever they are: a
`[groups.NAME]` table with `min_hosts` (how many of its hosts must have at least one broker
connection) and/or `min_group_clients` (how many broker connections the group must hold in
all) gets one line in this check's broker-wide row, "8 of 10 workers connected to the
broker", naming the hosts that are missing (their own `clients` rows still say why). A group
that falls below `min_hosts` is WARN, below `crit_share` of it (or with no host connected)
CRIT. The group's hosts are every host listing it, from `[[hosts]]` or from an
[[inventory]] source that reports the group; a host's broker addresses are its `addrs`, or the
addresses its inventory reports. (`min_clients` in a `[groups.NAME]` table keeps its meaning:
each member's own minimum.)

Its settings ([checks.groups]) are here, the check in `.check` (why: fleetcheck.core.registry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fleetcheck.config import InvalidValue
from fleetcheck.core.judge import check_count

if TYPE_CHECKING:
    from fleetcheck.config import HostConfig


@dataclass(frozen=True)
class GroupsConfig:
    crit_share: float = 0.5  # CRIT when fewer than this share of min_hosts are connected

    def __post_init__(self) -> None:
        if not 0 <= self.crit_share <= 1:
            raise InvalidValue("crit_share", "a share between 0 and 1 (0.5: half)")


@dataclass(frozen=True)
class GroupsHostConfig:
    """Keys of a [groups.NAME] table (read from its members, where the loader put them)."""

    min_hosts: int = 0  # hosts of the group with a broker connection: fewer is WARN
    min_group_clients: int = 0  # broker connections of the group's hosts in all: fewer, WARN

    def __post_init__(self) -> None:
        check_count("min_hosts", self.min_hosts)
        check_count("min_group_clients", self.min_group_clients)

    def check_host(self, host: HostConfig) -> None:
        for key in ("min_hosts", "min_group_clients"):
            where = host.sources.get(key)
            if where is not None and not where.startswith("groups.") and getattr(self, key):
                raise InvalidValue(key, "a group's expectation: set it in a [groups.NAME] table")


CONFIG_TYPE = GroupsConfig
HOST_CONFIG_TYPE = GroupsHostConfig
