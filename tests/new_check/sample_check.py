"""`heartbeat`: is each worker host's heartbeat in the broker recent? (a sample check)

A newcomer's check written as ONE file by docs/CONTRIBUTING.md, kept here and copied into
`checks/` of a copy of the repository by tests/test_new_check.py, whose suite must then pass
with no other file touched. It is not installed: nothing in fleetcheck names it.

Workers SET a key of their own to the epoch time of their last loop. Each host that names one
with `heartbeat_key` gets a row: OK while that time is at most `max_age` old (default 2m),
WARN past it, CRIT when the key is missing. Metric `age_s` (the headline); limit `max_age_s`.
It only reads (one GET per host). The console charts each host's heartbeat age against its
max_age, and `fleetcheck explain` names a stopped worker as the likely cause of a stale one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fleetcheck.config import Duration, FleetConfig, HostConfig, InvalidValue
from fleetcheck.core.check import Check, Scope
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.declarations import Cause, ChartSpec
from fleetcheck.core.errors import CheckError
from fleetcheck.core.model import Result, Status
from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.lab.demo import DemoFleet


@dataclass(frozen=True)
class HeartbeatConfig:
    max_age: Duration = 120.0  # WARN when a heartbeat is older than this

    def __post_init__(self) -> None:
        if self.max_age <= 0:
            raise InvalidValue("max_age", "must be more than 0s")


@dataclass(frozen=True)
class HeartbeatHostConfig:
    heartbeat_key: str | None = None  # the broker key this host's worker sets to its epoch time


class HeartbeatCheck(Check[HeartbeatConfig, "float | None"]):
    name = "heartbeat"
    description = "each worker host's heartbeat key in the broker is recent"
    scope = Scope.BROKER
    config_type = HeartbeatConfig
    host_config_type = HeartbeatHostConfig
    headline = "age_s"
    example = """\
[checks.heartbeat]
max_age = "2m"                   # WARN when a host's heartbeat is older than this
"""
    host_example = 'heartbeat_key = "arena:heartbeat:n8"   # the key its worker sets (epoch time)'
    no_targets_reason = "no host names a heartbeat_key"
    demo_meaning = "this machine's worker stopped beating: its heartbeat key is old or gone"
    # what the console and `fleetcheck explain` do with its rows
    charts = (
        ChartSpec(
            "heartbeat",
            "Heartbeat age per host against max_age",
            "a line above max_age: that host's worker stopped beating",
            unit="seconds",
            per_host="age_s",
            pick="most",
            picked="oldest heartbeats",
            limit="max_age_s",
            limit_label="max_age",
        ),
    )
    causes = (
        Cause(
            "its worker stopped beating (stopped, hung, or cut off from the broker)",
            "whether its worker process runs, and whether it reaches the broker",
        ),
    )

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """n8 beat a moment ago; mini, the dead machine, 2.5 hours ago."""
        r = fleet.lab.client()
        for host, age in (("n8", 5), ("mini", 9000)):
            r.set(f"arena:heartbeat:{host}", str(fleet.now - age))
            fleet.host_keys(host, f'heartbeat_key = "arena:heartbeat:{host}"')
        r.close()
        return ""

    def targets(self, fleet: FleetConfig, config: HeartbeatConfig) -> list[HostConfig | None]:
        return [h for h in fleet.hosts if h.settings(HeartbeatHostConfig).heartbeat_key]

    def probe(
        self, ctx: PatrolContext, host: HostConfig | None, config: HeartbeatConfig
    ) -> float | None:
        assert host is not None  # targets() gives hosts only
        try:
            raw = ctx.broker().get(host.settings(HeartbeatHostConfig).heartbeat_key or "")
        except Exception as e:
            raise ctx.broker_error(e) from None
        try:
            return None if raw is None else float(raw)
        except ValueError:
            raise CheckError(
                f"{host.settings(HeartbeatHostConfig).heartbeat_key}: not an epoch time"
            ) from None

    def evaluate(
        self, facts: float | None, config: HeartbeatConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        key = host.settings(HeartbeatHostConfig).heartbeat_key if host else None
        limits = {"max_age_s": config.max_age}
        if facts is None:
            return self.result(host, Status.CRIT, f"no heartbeat: {key} is missing", limits=limits)
        age = max(0.0, now.timestamp() - facts)
        status = Status.OK if age <= config.max_age else Status.WARN
        summary = f"{key}: last beat {format_duration(age)} ago"
        if status is Status.WARN:
            summary += f" (max_age {format_duration(config.max_age)})"
        return self.result(host, status, summary, metrics={"age_s": round(age, 3)}, limits=limits)


CHECK = HeartbeatCheck()
