"""logs: is each host's log still moving, judged in UTC? (incidents 3, 4, 6)

Every timestamp is placed in UTC with an explicit zone (an offset in the line, else the host's
`tz`, else what the host says with `tz = "auto"`), and that zone is cross-checked against the
file's zone-free mtime. The error count runs here, not on the host, so `error_regex` means the
same everywhere; a flood's rate comes from the error lines' own times. The parsers of what
the host printed are in parse/logtail.py and parse/journal.py; this module judges."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from fleetcheck.checks.logs.config import LogsConfig, LogsFacts
from fleetcheck.checks.logs.fragments import ZONE_FRAGMENT, journal_fragment, log_fragment

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.core.check import HostCheck
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.errors import CheckError
from fleetcheck.core.hostfacts import LogsHostConfig, logs_of
from fleetcheck.core.model import Result

if TYPE_CHECKING:  # the parsers load only when a patrol reads a log
    from fleetcheck.parse.journal import JournalFacts
    from fleetcheck.parse.logtail import LogFacts

__all__ = [
    "CHECK",
    "ZONE_FRAGMENT",
    "LogsCheck",
    "LogsConfig",
    "LogsFacts",
    "journal_fragment",
    "log_fragment",
]


class LogsCheck(HostCheck[LogsConfig, LogsFacts]):
    name = "logs"
    description = "log-tail recency normalised to UTC, zone cross-check, error floods"
    config_type = LogsConfig
    host_config_type = LogsHostConfig

    def targets(self, fleet: FleetConfig, config: LogsConfig) -> list[HostConfig | None]:
        return [h for h in fleet.hosts if h.ssh is not None and logs_of(h)]

    def remote_commands(
        self, host: HostConfig, config: LogsConfig, fleet: FleetConfig
    ) -> dict[str, str]:
        own = host.settings(LogsHostConfig)
        out = {
            f"log{i}": journal_fragment(spec) if spec.is_journal else log_fragment(spec)
            for i, spec in enumerate(own.logs)
        }
        if own.tz == "auto":
            out["tz"] = ZONE_FRAGMENT
        return out

    def probe_host(self, ctx: PatrolContext, host: HostConfig, config: LogsConfig) -> LogsFacts:
        from fleetcheck.parse.journal import parse_journal_facts
        from fleetcheck.parse.logtail import parse_log_output, parse_zone_output

        own = host.settings(LogsHostConfig)
        facts = ctx.host_facts(host, self)
        logs: list[LogFacts | JournalFacts] = []
        for i, spec in enumerate(own.logs):
            frag = facts.get(f"log{i}")
            if spec.is_journal:
                logs.append(parse_journal_facts(spec.label, frag.rc, frag.text))
            else:
                assert spec.path is not None
                logs.append(parse_log_output(spec.path, frag.rc, frag.output))
        zone = None
        if own.tz == "auto":
            zone = parse_zone_output(facts.get("tz").text)
        return LogsFacts(tuple(logs), facts.clock_skew_s, zone)

    def evaluate_host(
        self, facts: LogsFacts, config: LogsConfig, host: HostConfig, now: datetime
    ) -> Result:
        from fleetcheck.checks.logs.judging import host_row

        own = host.settings(LogsHostConfig)
        if len(facts.logs) != len(own.logs):
            raise CheckError("facts do not match the configured logs")
        status, summary, metrics, evidence = host_row(own.logs, facts, config, host, now)
        return self.result(host, status, summary, metrics=metrics, evidence=evidence)


CHECK = LogsCheck()
