"""`heartbeat`: is each worker host's heartbeat in the broker recent? (a sample check)

A newcomer's check written as ONE file by docs/CONTRIBUTING.md, kept here and copied into
`checks/` of a copy of the repository by tests/test_new_check.py, whose suite must then pass
with no other file touched but those `python -m tests.catalog` generates. It is not
installed: nothing in fleetcheck names it.

Workers SET a key of their own, `prefix` + the host's name (default `arena:hb:HOST`), to the
epoch time of their last loop. Every host gets a row: OK while that time is at most `max_age`
old (default 2m), CRIT past it or when the key is missing, WARN when it is more than
`max_ahead` (default 30s) in the future (the worker's clock is ahead). Metric `age_s` (the
headline); limits `max_age_s`, `max_ahead_s`. It only reads: `probe_all` GETs every host's
key in one pipelined round trip for the whole fleet, and `evaluate` judges each row from its
own reply. The console charts each host's heartbeat age against its max_age, and
`fleetcheck explain` names a stopped worker as the likely cause of a stale one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fleetcheck.config import Duration, FleetConfig, HostConfig, InvalidValue
from fleetcheck.core.check import Check, Commands, Key, cmd
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

    def broker_commands(self, fleet: FleetConfig, config: HeartbeatConfig) -> Commands:
        return tuple(cmd("GET", Key(config.prefix + h.name)) for h in fleet.hosts)

    def discover_draft(self, sample: Sample) -> Draft | None:
        from fleetcheck.core.discovery import Draft

        return Draft(("[checks.heartbeat]", 'prefix = "arena:hb:"  # key: this + host name'))

    def probe_all(
        self, ctx: PatrolContext, targets: Sequence[HostConfig | None], config: HeartbeatConfig
    ) -> dict[str | None, float | None | Exception]:
        """Every host's heartbeat in one pipelined round trip: {host: its epoch time, None
        when missing, or the error of its key alone (a refused key is that row's UNKNOWN)}."""
        names = [h.name for h in targets if h is not None]  # targets() gives hosts only
        try:
            pipe = ctx.broker().pipeline(transaction=False)
            for name in names:
                pipe.get(config.prefix + name)
            replies = pipe.execute(raise_on_error=False)
        except Exception as e:  # the batch failed: every row's UNKNOWN, with this reason
            raise ctx.broker_error(e) from None
        out: dict[str | None, float | None | Exception] = {}
        for name, raw in zip(names, replies, strict=True):
            if isinstance(raw, Exception):  # that key's own error (refused by the ACL)
                out[name] = ctx.broker_error(raw)
            else:
                try:
                    out[name] = None if raw is None else float(raw)
                except ValueError:
                    out[name] = CheckError(f"{config.prefix}{name}: not an epoch time")
        return out

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
