"""A third-party check as a newcomer would write one, in one file: its check-wide table, a
per-host key, a shell fragment, a pure evaluate. Loaded only through the entry-point group
`fleetcheck.checks` (tests/test_check_contract.py makes one visible); nothing in fleetcheck
names it.

`[checks.example_marker]` enables it; each host that sets `marker = "/path"` (in its own
table, a group or [defaults]) gets a row: OK when that file exists on the host, WARN when not.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fleetcheck.config import FleetConfig, HostConfig, InvalidValue
from fleetcheck.core.check import HostCheck
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.model import Result, Status

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.lab.demo import DemoFleet


@dataclass(frozen=True)
class MarkerConfig:
    missing_is: str = "WARN"  # the status of a row whose marker file is absent

    def __post_init__(self) -> None:
        if self.missing_is not in ("WARN", "CRIT"):
            raise InvalidValue("missing_is", "must be WARN or CRIT")


@dataclass(frozen=True)
class MarkerHostConfig:
    marker: str | None = None  # a file that must exist on the host

    def __post_init__(self) -> None:
        if self.marker is not None and not self.marker.startswith("/"):
            raise InvalidValue("marker", "must be an absolute path")


class MarkerCheck(HostCheck[MarkerConfig, bool]):
    name = "example_marker"
    description = "example plugin: a marker file exists on each host that names one"
    config_type = MarkerConfig
    host_config_type = MarkerHostConfig
    headline = "markers_present"
    example = """\
[checks.example_marker]
missing_is = "WARN"              # the status of a row whose marker file is absent (WARN or CRIT)
"""
    host_example = 'marker = "/etc/fleetcheck.marker"   # a file that must exist on the host'
    no_targets_reason = "no host names a marker file"
    demo_meaning = "the marker file this host names is missing"

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """Every demo host names a marker; only n8's exists (a WARN row on the others)."""
        for name, host in fleet.hosts.items():
            marker = host.dir / "marker"
            if name == "n8":
                marker.write_text("")
            fleet.host_keys(name, f'marker = "{marker}"')
        return ""

    def targets(self, fleet: FleetConfig, config: MarkerConfig) -> list[HostConfig | None]:
        return [h for h in fleet.hosts if h.ssh and h.settings(MarkerHostConfig).marker]

    def remote_commands(
        self, host: HostConfig, config: MarkerConfig, fleet: FleetConfig
    ) -> dict[str, str]:
        path = shlex.quote(host.settings(MarkerHostConfig).marker or "/")
        return {"marker": f"if [ -e {path} ]; then echo yes; else echo no; fi"}

    def probe_host(self, ctx: PatrolContext, host: HostConfig, config: MarkerConfig) -> bool:
        return ctx.host_facts(host, self).get("marker").text.strip() == "yes"

    def evaluate_host(
        self, facts: bool, config: MarkerConfig, host: HostConfig, now: datetime
    ) -> Result:
        path = host.settings(MarkerHostConfig).marker
        status = Status.OK if facts else Status.parse(config.missing_is)
        summary = f"marker {path} {'present' if facts else 'missing'}"
        return self.result(host, status, summary, metrics={"markers_present": int(facts)})


CHECK = MarkerCheck()
