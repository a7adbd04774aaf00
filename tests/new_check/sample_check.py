"""`heartbeat`: is each worker host's heartbeat in the broker recent? (a sample check)

A newcomer's check written as ONE file by docs/CONTRIBUTING.md, kept here and copied into
`checks/` of a copy of the repository by tests/test_new_check.py, whose suite must then pass
with no other file touched but those `python -m tests.catalog` generates. It is not
installed: nothing in fleetcheck names it.

Workers SET a key of their own, `prefix` + the host's name (default `arena:hb:HOST`), to the
epoch time of their last loop. Every host gets a row: OK while that time is at most `max_age`
old (default 2m), CRIT past it or when the key is missing, WARN when it is more than
`max_ahead` (default 30s) in the future (the worker's clock is ahead). Metric `age_s` (the
headline); limits `max_age_s`, `max_ahead_s`. It only reads: one pipelined GET of every host's
key, in one round trip for the whole fleet, shared by the rows. The console charts each
host's heartbeat age against its max_age, and `fleetcheck explain` names a stopped worker as
the likely cause of a stale one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fleetcheck.config import Duration, FleetConfig, HostConfig, InvalidValue
from fleetcheck.core.check import BrokerCommand, Check, Key, Scope, cmd
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.declarations import Cause, ChartSpec
from fleetcheck.core.errors import CheckError
from fleetcheck.core.model import Result, Status
from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:  # for the hooks' types only (never imported at run time)
    from fleetcheck.core.discovery import Draft, Sample
    from fleetcheck.lab.demo import DemoFleet


@dataclass(frozen=True)
class HeartbeatConfig:
    prefix: str = "arena:hb:"  # each host's key is this followed by the host's name
    max_age: Duration = 120.0  # CRIT when a heartbeat is older than this
    max_ahead: Duration = 30.0  # WARN when a heartbeat is further than this in the future

    def __post_init__(self) -> None:
        if not self.prefix:
            raise InvalidValue("prefix", "must not be empty")
        if self.max_age <= 0:
            raise InvalidValue("max_age", "must be more than 0s")
        if self.max_ahead < 0:
            raise InvalidValue("max_ahead", "must not be negative")


class HeartbeatCheck(Check[HeartbeatConfig, "float | None"]):
    name = "heartbeat"
    description = "each worker host's heartbeat key in the broker is recent"
    scope = Scope.BROKER
    config_type = HeartbeatConfig
    headline = "age_s"
    example = """\
[checks.heartbeat]
prefix = "arena:hb:"             # each host's key: this and its name (its worker SETs epoch time)
max_age = "2m"                   # CRIT when a host's heartbeat is older than this, or missing
max_ahead = "30s"                # WARN when it is further than this in the future
"""
    no_targets_reason = "no host to look for: the fleet has no hosts"
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
        """Every machine beat a moment ago but mini, the dead one: 2.5 hours ago."""
        r = fleet.lab.client()
        for host in fleet.hosts:
            r.set(f"arena:hb:{host}", str(fleet.now - (9000 if host == "mini" else 5)))
        r.close()
        return ""

    def targets(self, fleet: FleetConfig, config: HeartbeatConfig) -> list[HostConfig | None]:
        return list(fleet.hosts)

    def broker_commands(
        self, fleet: FleetConfig, config: HeartbeatConfig
    ) -> tuple[BrokerCommand, ...]:
        return tuple(cmd("GET", Key(config.prefix + h.name)) for h in fleet.hosts)

    def discover_draft(self, sample: Sample) -> Draft | None:
        from fleetcheck.core.discovery import Draft

        return Draft(("[checks.heartbeat]", 'prefix = "arena:hb:"  # key: this + host name'))

    def probe(
        self, ctx: PatrolContext, host: HostConfig | None, config: HeartbeatConfig
    ) -> float | None:
        assert host is not None  # targets() gives hosts only
        beats = ctx.once("heartbeat:beats", lambda: self._read_all(ctx, config))
        raw = beats.get(host.name)
        if isinstance(raw, Exception):
            raise ctx.broker_error(raw)
        try:
            return None if raw is None else float(raw)
        except ValueError:
            raise CheckError(f"{config.prefix}{host.name}: not an epoch time") from None

    def _read_all(self, ctx: PatrolContext, config: HeartbeatConfig) -> dict[str, Any]:
        """Every host's heartbeat in one pipelined round trip: {host: value or its error}."""
        names = [h.name for h in ctx.fleet.hosts]
        try:
            pipe = ctx.broker().pipeline(transaction=False)
            for name in names:
                pipe.get(config.prefix + name)
            return dict(zip(names, pipe.execute(raise_on_error=False), strict=True))
        except Exception as e:
            raise ctx.broker_error(e) from None

    def evaluate(
        self, facts: float | None, config: HeartbeatConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        key = f"{config.prefix}{host.name if host else ''}"
        limits = {"max_age_s": config.max_age, "max_ahead_s": config.max_ahead}
        if facts is None:
            return self.result(host, Status.CRIT, f"no heartbeat: {key} is missing", limits=limits)
        age = now.timestamp() - facts
        metrics = {"age_s": round(age, 3)}
        if age < -config.max_ahead:
            summary = f"{key}: heartbeat {format_duration(-age)} in the future (clock ahead?)"
            return self.result(host, Status.WARN, summary, metrics=metrics, limits=limits)
        summary = f"{key}: last beat {format_duration(max(0.0, age))} ago"
        if age > config.max_age:
            summary += f" (max_age {format_duration(config.max_age)})"
            return self.result(host, Status.CRIT, summary, metrics=metrics, limits=limits)
        return self.result(host, Status.OK, summary, metrics=metrics, limits=limits)


CHECK = HeartbeatCheck()
