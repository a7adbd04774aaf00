"""clients: is every machine present in the broker's CLIENT LIST? (incident 4)

Global numbers hid a machine that was dead for 2.5 hours; a per-host count of broker
connections shows it within one patrol. A host may connect from several addresses (WSL2 NAT),
all counted as one host. One broker-wide row lists clients from addresses no host claims.

Its settings ([checks.clients]) are here, the check in `.check` (why: fleetcheck.core.registry).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetcheck.config import Duration
from fleetcheck.core.hostfacts import ClientsHostConfig
from fleetcheck.core.judge import check_count, check_duration


@dataclass(frozen=True)
class ClientsConfig:
    max_unknown: int = 0  # WARN when more clients than this come from unclaimed addresses
    ignore_names: tuple[str, ...] = ("fleetcheck",)  # client names never counted as unknown
    # the least a host's learned silence limit can be, and the limit after one round seen
    # with nothing learned (the first round teaches; a host's own silent_after overrides)
    silent_after: Duration = 30.0
    flap_count: int = 3  # this many reconnects of a host ...
    flap_window: Duration = 3600.0  # ... within this long: WARN (flapping)
    max_churn: float = 10.0  # broker-wide: WARN past this many short-lived connections a second

    def __post_init__(self) -> None:
        check_count("max_unknown", self.max_unknown)
        check_duration("silent_after", self.silent_after)
        check_count("flap_count", self.flap_count, minimum=2)
        check_duration("flap_window", self.flap_window)
        check_count("max_churn", self.max_churn, zero_means="off")


CONFIG_TYPE = ClientsConfig
HOST_CONFIG_TYPE = ClientsHostConfig
