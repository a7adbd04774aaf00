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
from fleetcheck.core.declarations import Cause, ChartSpec, Clue, PeerMetric
from fleetcheck.core.errors import CheckError
from fleetcheck.core.hostfacts import LogsHostConfig, logs_of
from fleetcheck.core.model import Result, Status

if TYPE_CHECKING:  # the demo's lab and the parsers: loaded only when a patrol needs them
    from fleetcheck.core.discovery import Draft, Sample
    from fleetcheck.lab.demo import DemoFleet
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


# `explain`: a log whose last line is older than this is called silent since that line:
# shorter gaps are how any log reads between two writes (a row WARN for its errors, written a
# minute ago, is not silent)
SILENT_S = 300


class LogsCheck(HostCheck[LogsConfig, LogsFacts]):
    name = "logs"
    description = "log-tail recency normalised to UTC, zone cross-check, error floods"
    host_config_type = LogsHostConfig
    headline = "age_s"
    example = """\
[checks.logs]
max_clock_skew = "60s"           # WARN when the host's clock differs from ours by more than this
zone_check = true                # WARN when newest line and file mtime differ by whole hours
"""
    host_example = """\
tz = "America/New_York"                      # zone its logs are written in; "auto" asks the host
logs = [
  { path = "/var/log/arena/worker.log", max_age = "10m" },
  # a JSON-lines log (structlog, pino, bunyan, zap, logrus, Docker json-file); also detected
  { path = "/var/log/arena/api.jsonl", format = "json", max_age = "10m" },
  # a systemd unit's journal (errors: PRIORITY <= 3); or journal_match = ["SYSLOG_IDENTIFIER=rater"]
  { journal = "rater.service", max_age = "10m" },
  # every log key:
  # { path = "/var/log/arena/rater.log",    # the file to watch
  #   max_age = "10m",                      # last line older: WARN
  #   crit_age = "30m",                     # older still: CRIT (default 3 x max_age)
  #   format = "%Y-%m-%d %H:%M:%S",         # strptime format (overrides detection; %z ok, %Z no)
  #   regex = '^\\[(?P<ts>[^\\]]+)\\]',        # or a regex with a group named ts
  #   error_regex = "ERROR|Traceback|Exception",  # lines counted as errors in the tail
  #   max_error_lines = 1000,               # more error lines in tail: WARN (unset: report only)
  #   max_error_rate = 10.0,                # WARN past this many error lines a minute; 0: off
  #   tail_bytes = 65536,                   # how much of the file's end is read
  #   time_field = "ts" },                  # JSON lines: the time field (default: time, ts,
  #                                         #   timestamp, @timestamp, t; dotted paths ok)
  # every journal key (instead of path):
  # { journal = "worker.service",           # a systemd unit (journalctl -u)
  #   journal_match = ["SYSLOG_IDENTIFIER=rater"],  # and/or journalctl matches ("+" = or)
  #   journal_dir = "/var/log/journal",     # journalctl --directory (journals kept elsewhere)
  #   entries = 300,                        # newest entries read (journalctl -n)
  #   max_age = "10m", crit_age = "30m", max_error_lines = 100, max_error_rate = 10.0 },
]
"""
    no_targets_reason = "no host has logs configured"
    clues = (
        Clue("log silent since its last line: {line}", "age_s", SILENT_S, None, "last_line_at",
             line=(("last_line",), ("logs", 0, "last_line"))),  # an item's; a host row's
        Clue("error lines from {at}: {value:g} in the window read", "error_lines", 1),
    )  # fmt: skip
    causes = (
        Cause(
            "its program stopped writing its log (stopped, hung, or logging elsewhere)",
            "the process on the host, and whether it writes another file",
            "age_s",
            SILENT_S,
            upstream=30,
        ),
        Cause(
            "its log shows errors: {summary}",
            "the error lines themselves in the log",
            "error_lines",
            1,
            upstream=30,
        ),
    )
    peer_metrics = (
        PeerMetric("error_rate_per_s", "error lines a second", "higher", 0.05, 1.0, "/s",
                   "error_lines"),
        PeerMetric("age_s", "since its last log line", "higher", 600, 2.0, "s"),
    )  # fmt: skip
    charts = (
        ChartSpec(
            "logs",
            "Log age per host against max_age",
            "a line above max_age: that machine's log stopped moving (judged in UTC)",
            unit="seconds",
            per_host="age_s",
            pick="most",
            picked="oldest logs",
            items="logs",
            limit_label="max_age",
            place=40,
        ),
    )
    demo_meaning = (
        "this machine's log stopped moving; read in the writer's own zone and compared in "
        "UTC, so it is really silent, not a time-zone illusion (incidents 3, 6)"
    )

    def discover_draft(self, sample: Sample) -> Draft | None:
        from fleetcheck.core.discovery import Draft

        return Draft(("# [checks.logs]  # TODO: enable once hosts have logs",))

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """Logs in three zones; mini's stopped 2.5 hours ago.

        n8 writes US Eastern without an offset: a naive reader comparing its last line with a
        UTC clock calls it 5 hours stale. laptop writes classic syslog in Asia/Kolkata.
        """
        from fleetcheck.zones import zone_named

        iso, syslog = "%Y-%m-%dT%H:%M:%SZ", "%b %d %H:%M:%S laptop worker[311]:"
        for host, zone, fmt, ago, text in (
            ("n8", "America/New_York", "%Y-%m-%d %H:%M:%S,%f", (300, 180, 60), "INFO match done"),
            ("laptop", "Asia/Kolkata", syslog, (240, 120), "match done"),
            ("mini", "UTC", iso, (9060, 9000), "INFO match done"),  # stopped 2.5 hours ago
            ("broker", "UTC", iso, (30,), "INFO rater loop tick"),
        ):
            times = [fleet.now - a for a in ago]
            stamps = [datetime.fromtimestamp(t, zone_named(zone)).strftime(fmt) for t in times]
            written = [f"{st[:-3] if fmt.endswith('%f') else st} {text}" for st in stamps]
            path = fleet.write_log(host, written, times[-1])
            fleet.host_keys(
                host, f'tz = "{zone}"', f'logs = [{{ path = "{path}", max_age = "10m" }}]'
            )
        return ""

    def demo_explain(self, result: Result) -> str | None:
        if result.host == "n8" and result.status is Status.OK:
            return (
                "n8 logs in US Eastern time without an offset. Its last line "
                "reads about 5 hours behind UTC, which a naive reader would call 5 hours silent; "
                "read in its declared zone it was written a minute ago (incident 6)."
            )
        return super().demo_explain(result)

    def chart_focus(self, host: HostConfig) -> tuple[str, float] | None:
        """The log-age chart follows a host's first configured log (its row's item), against
        its max_age."""
        logs = logs_of(host)
        if not logs:
            return None
        first = logs[0]
        item = first.path if first.path is not None else f"journal:{first.label}"
        return item, float(first.max_age)

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
        if facts.clock_problem is not None:  # no age on the host's clock can be computed
            raise CheckError(facts.clock_problem)
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
    ) -> list[Result]:
        from fleetcheck.checks.logs.judging import item_rows

        own = host.settings(LogsHostConfig)
        if len(facts.logs) != len(own.logs):
            raise CheckError("facts do not match the configured logs")
        return item_rows(own.logs, facts, config, host, now, self.result)


CHECK = LogsCheck()
