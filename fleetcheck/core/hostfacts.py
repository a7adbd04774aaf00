"""Facts several checks read: the queues the fleet serves (`fleet_queues`), where a host's
broker connections come from (`addrs`, with `min_clients`) and which logs it writes (`tz`,
`logs`). Their settings types live here, in the core, so a check that needs another check's
host keys imports this module, never the other check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fleetcheck.config import Duration, FleetConfig, HostConfig, InvalidValue, IpAddress
from fleetcheck.config import zone as config_zone
from fleetcheck.core.judge import AgeLimit, check_count, check_duration


@dataclass(frozen=True)
class ClientsHostConfig:
    """Keys of a [[hosts]] table (or [defaults], [groups.NAME])."""

    # the addresses it shows in CLIENT LIST (WSL2 NAT can add one); config check: IPs only
    addrs: tuple[IpAddress, ...] = ()
    min_clients: int = 1  # fewer broker connections: WARN; none: CRIT
    # every connection idle this long, none waiting in a pop or subscribed: silent (WARN;
    # CRIT while the queues hold jobs). Unset: learned from the host's own rounds (three
    # times the longest quiet it showed, at least the [checks.clients] silent_after); 0: off
    silent_after: Duration | None = None

    def __post_init__(self) -> None:
        check_count("min_clients", self.min_clients)
        check_duration("silent_after", self.silent_after, positive=False)


def addrs_of(host: HostConfig) -> tuple[str, ...]:
    """The addresses `host` claims in CLIENT LIST (other checks read them too)."""
    return host.settings(ClientsHostConfig).addrs


def claimed_addrs(fleet: FleetConfig) -> frozenset[str]:
    """Every address some host claims, normalised (asked once a patrol, not once a row)."""
    from fleetcheck.parse.clientlist import normalise_ip

    return frozenset(
        normalise_ip(a) for h in fleet.hosts for a in (*addrs_of(h), *h.inventory_addrs)
    )


def fleet_queues(fleet: FleetConfig) -> tuple[str, ...]:
    """The lists that hold the fleet's jobs, once each: every key a configured check's
    settings name as a queue (a settings type declares them with a `queues()` method, as
    `[checks.queue_depth]` does with its `keys`). Checks read this, never each other's config."""
    out: list[str] = []
    for settings in fleet.checks.values():
        declared = getattr(settings, "queues", None)
        if callable(declared):
            out += [q for q in declared() if isinstance(q, str) and q not in out]
    return tuple(out)


JOURNAL_FIELD = r"[A-Z0-9_]+"  # journal field names: upper case, digits, underscore


@dataclass(frozen=True)
class LogSpec:
    """One log source on a host whose recency the `logs` check judges: a text file, a
    JSON-lines file (`format = "json"`, also detected), or the journal (`journal`, a unit,
    and/or `journal_match`, journalctl matches)."""

    path: str | None = None
    max_age: Duration = 600.0
    crit_age: Duration | None = None
    format: str | None = None
    regex: str | None = None
    error_regex: str = "ERROR|Traceback|Exception"
    max_error_lines: int | None = None  # WARN when more error lines than this are in the tail
    tail_bytes: int = 65536
    max_error_rate: float = 10.0  # WARN past this many error lines per minute; 0 turns it off
    time_field: str | None = None  # JSON lines: the one field holding the time (dotted ok)
    journal: str | None = None  # a systemd unit, e.g. "worker.service"
    journal_match: tuple[str, ...] = ()  # journalctl matches, e.g. "SYSLOG_IDENTIFIER=rater"
    journal_dir: str | None = None  # journalctl --directory (journals kept elsewhere)
    entries: int | None = None  # journal: newest entries read (journalctl -n), default 300

    def __post_init__(self) -> None:
        is_journal = self.is_journal
        if self.path is None and not is_journal:
            raise InvalidValue(
                "path", "missing: a log needs path (a file) or journal / journal_match"
            )
        if self.path is not None and is_journal:
            key = "journal" if self.journal is not None else "journal_match"
            raise InvalidValue(key, "a log reads either a file (path) or the journal, not both")
        if self.path is not None and not self.path:
            raise InvalidValue("path", "must not be empty")
        if self.journal is not None and (
            not self.journal.strip() or any(c.isspace() or ord(c) < 32 for c in self.journal)
        ):
            raise InvalidValue("journal", f"{self.journal!r} is not a unit name")
        for i, m in enumerate(self.journal_match):
            if m != "+" and not re.fullmatch(JOURNAL_FIELD + r"=.*", m, re.S):
                raise InvalidValue(
                    f"journal_match[{i}]",
                    f"{m!r} is not FIELD=VALUE (an upper-case journal field such as "
                    "SYSLOG_IDENTIFIER=rater) or +",
                )
        if self.journal_match[:1] == ("+",) or self.journal_match[-1:] == ("+",):
            raise InvalidValue("journal_match", "'+' (or) must stand between two matches")
        if self.journal_dir is not None and not is_journal:
            raise InvalidValue(
                "journal_dir", "only for a journal source (journal or journal_match)"
            )
        if self.journal_dir is not None and not self.journal_dir.startswith("/"):
            raise InvalidValue("journal_dir", "must be an absolute path")
        if is_journal:
            for key in ("format", "regex", "time_field"):
                if getattr(self, key) is not None:
                    raise InvalidValue(
                        key, "not for a journal source (its times and priorities are fields)"
                    )
        if self.entries is not None and not is_journal:
            raise InvalidValue("entries", "only for a journal source (files: tail_bytes)")
        check_count("entries", self.entries, minimum=1, maximum=100000)
        self.age_limit.validate()
        check_count("tail_bytes", self.tail_bytes, minimum=256, maximum=16 * 1024 * 1024)

        for key in ("regex", "error_regex"):
            pattern = getattr(self, key)
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise InvalidValue(key, f"not a valid regular expression: {e}") from None
        if self.regex is not None and "ts" not in re.compile(self.regex).groupindex:
            raise InvalidValue("regex", "needs a named group (?P<ts>...) around the timestamp")
        if self.format == "json":
            if self.regex is not None:
                raise InvalidValue("regex", 'not with format = "json" (the time is a field)')
        elif self.format is not None:
            from fleetcheck.parse.timestamps import FormatError, format_regex

            try:
                format_regex(self.format)
            except FormatError as e:
                raise InvalidValue("format", str(e)) from None
        if self.time_field is not None and not self.time_field.strip():
            raise InvalidValue("time_field", "must not be empty")
        if self.time_field is not None and (
            self.regex is not None or self.format not in (None, "json")
        ):
            raise InvalidValue("time_field", 'only for JSON lines (format = "json" or detected)')
        check_count("max_error_lines", self.max_error_lines)
        check_count("max_error_rate", self.max_error_rate, zero_means="off")

    @property
    def is_journal(self) -> bool:
        return self.journal is not None or bool(self.journal_match)

    @property
    def label(self) -> str:
        """How rows and metrics name this source: the file's path, or what the journal
        query selects (`worker.service`, `SYSLOG_IDENTIFIER=rater`)."""
        if self.path is not None:
            return self.path
        parts = ([self.journal] if self.journal else []) + list(self.journal_match)
        return " ".join(parts)

    @property
    def journal_entries(self) -> int:
        return self.entries if self.entries is not None else 300

    @property
    def title(self) -> str:
        """The label as `config check` lists it: the path, or `journal UNIT/MATCHES`."""
        return f"journal {self.label}" if self.is_journal else self.label

    def __str__(self) -> str:
        from fleetcheck.parse.duration import format_duration

        return f"{self.title} (max_age {format_duration(self.max_age)})"

    @property
    def age_limit(self) -> AgeLimit:
        """max_age (WARN) and crit_age (CRIT, default three times max_age) as one limit."""
        return AgeLimit(self.max_age, self.crit_age)


@dataclass(frozen=True)
class LogsHostConfig:
    """Keys of a [[hosts]] table (or [defaults], [groups.NAME])."""

    tz: str | None = None  # the zone its log files are written in; "auto" asks the host
    logs: tuple[LogSpec, ...] = ()

    def __post_init__(self) -> None:
        if self.tz is not None and self.tz != "auto":
            config_zone(self.tz)
        if any(log.path is not None for log in self.logs) and self.tz is None:
            # journal times are UTC by construction: only log files need the writer's zone
            raise InvalidValue(
                "tz",
                "a host with logs needs tz (an IANA zone such as 'America/New_York', or "
                "'auto' to ask the host): fleetcheck never guesses a log's zone",
            )

    def check_host(self, host: HostConfig) -> None:
        if self.logs and host.ssh is None:
            raise InvalidValue("ssh", "a host with logs needs ssh (an address, alias or 'local')")


def logs_of(host: HostConfig) -> tuple[LogSpec, ...]:
    """The logs `host` declares (other checks read them too)."""
    return host.settings(LogsHostConfig).logs
