"""Typed, validated configuration: hosts.toml into frozen dataclasses.

Every error names the file, the table and the key, and is raised as ConfigError before any
network step: a typo must never become a silent no-op (goss's failure mode) nor a traceback.
A check's own table is validated against that check's config dataclass with the same builder.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin, get_type_hints

from fleetcheck.parse.duration import parse_duration

DURATION = "duration"
Duration = Annotated[float, DURATION]
"""Seconds; written in TOML as "900s", "15m", "1h30m" or a plain number."""

SEARCH_HINT = "--config/-c, $FLEETCHECK_CONFIG, ./hosts.toml, ~/.config/fleetcheck/hosts.toml"


class ConfigError(Exception):
    """A config problem, already phrased for the operator: 'FILE: [TABLE] KEY: what is wrong'."""


class InvalidValue(ValueError):
    """Raised by a config dataclass's __post_init__: which key is wrong, and why."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


@dataclass(frozen=True)
class BrokerConfig:
    url: str
    password_env: str | None = None
    connect_timeout: Duration = 3.0
    socket_timeout: Duration = 5.0
    retries: int = 1
    protocol: int = 2
    client_name: str = "fleetcheck"

    def __post_init__(self) -> None:
        if not self.url.startswith(("redis://", "rediss://", "unix://")):
            raise InvalidValue("url", f"{self.url!r} is not a redis://, rediss:// or unix:// URL")
        if self.protocol not in (2, 3):
            raise InvalidValue("protocol", "must be 2 (RESP2) or 3 (RESP3)")
        if not 0 <= self.retries <= 5:
            raise InvalidValue("retries", "must be between 0 and 5")
        for key in ("connect_timeout", "socket_timeout"):
            if getattr(self, key) <= 0:
                raise InvalidValue(key, "must be longer than 0s")


@dataclass(frozen=True)
class SshConfig:
    user: str | None = None
    port: int | None = None
    known_hosts: str | tuple[str, ...] = "~/.ssh/known_hosts"  # one file or a list
    identity_file: str | None = None
    config_file: str = "~/.ssh/config"
    connect_timeout: Duration = 5.0
    command_timeout: Duration = 10.0
    accept_new: bool = False
    use_agent: bool = True
    max_output_bytes: int = 8 * 1024 * 1024
    # a long-running patrol (run --every) keeps each host's connection between rounds when
    # they are at most this far apart; 0 never keeps one
    keep_alive_for: Duration = 300.0

    @property
    def known_hosts_files(self) -> tuple[str, ...]:
        kh = self.known_hosts
        return (kh,) if isinstance(kh, str) else kh

    def __post_init__(self) -> None:
        if not self.known_hosts_files:
            raise InvalidValue("known_hosts", "must name at least one file")
        for key in ("connect_timeout", "command_timeout"):
            if getattr(self, key) <= 0:
                raise InvalidValue(key, "must be longer than 0s")
        if self.max_output_bytes < 4096:
            raise InvalidValue("max_output_bytes", "must be at least 4096")


@dataclass(frozen=True)
class PatrolConfig:
    every: Duration = 900.0
    deadline: Duration = 60.0
    concurrency: int = 128  # the upper bound on hosts in flight
    adaptive: bool = True  # find the number in flight from handshake latency (else fixed)
    fail_after: int = 1
    flap_changes: int = 4
    flap_window: int = 10

    def __post_init__(self) -> None:
        if self.fail_after < 1:
            raise InvalidValue("fail_after", "must be 1 or more")
        if not 2 <= self.flap_window <= 1000:
            raise InvalidValue("flap_window", "must be between 2 and 1000")
        if not 1 <= self.flap_changes < self.flap_window:
            raise InvalidValue("flap_changes", "must be at least 1 and below flap_window")
        if self.deadline <= 0:
            raise InvalidValue("deadline", "must be longer than 0s")
        if self.every <= 0:
            raise InvalidValue("every", "must be longer than 0s")
        if not 1 <= self.concurrency <= 1024:
            raise InvalidValue("concurrency", "must be between 1 and 1024")


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
    time_field: str | None = None  # JSON lines: the field holding the time, tried first
    journal: str | None = None  # a systemd unit, e.g. "worker.service"
    journal_match: tuple[str, ...] = ()  # journalctl matches, e.g. "SYSLOG_IDENTIFIER=rater"
    journal_dir: str | None = None  # journalctl --directory (journals kept elsewhere)
    entries: int | None = None  # journal: newest entries read (journalctl -n), default 300

    def __post_init__(self) -> None:
        import re

        is_journal = self.journal is not None or bool(self.journal_match)
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
        if self.entries is not None and not 1 <= self.entries <= 100000:
            raise InvalidValue("entries", "must be between 1 and 100000")
        if self.max_age <= 0:
            raise InvalidValue("max_age", "must be longer than 0s")
        if self.crit_age is not None and self.crit_age < self.max_age:
            raise InvalidValue("crit_age", "must not be shorter than max_age")
        if not 256 <= self.tail_bytes <= 16 * 1024 * 1024:
            raise InvalidValue("tail_bytes", "must be between 256 and 16777216")

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
        if self.max_error_lines is not None and self.max_error_lines < 0:
            raise InvalidValue("max_error_lines", "must be 0 or more")
        if self.max_error_rate < 0:
            raise InvalidValue("max_error_rate", "must be 0 (off) or more")

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

    @property
    def effective_crit_age(self) -> float:
        return self.crit_age if self.crit_age is not None else 3 * self.max_age


@dataclass(frozen=True)
class HostConfig:
    name: str
    ssh: str | None = None
    addrs: tuple[str, ...] = ()
    min_clients: int = 1
    tz: str | None = None
    logs: tuple[LogSpec, ...] = ()
    user: str | None = None
    port: int | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.strip():
            raise InvalidValue("name", "must not be empty")
        if self.min_clients < 0:
            raise InvalidValue("min_clients", "must be 0 or more")
        if self.tz is not None and self.tz != "auto":
            zone(self.tz)
        if any(log.path is not None for log in self.logs) and self.tz is None:
            # journal times are UTC by construction: only log files need the writer's zone
            raise InvalidValue(
                "tz",
                "a host with logs needs tz (an IANA zone such as 'America/New_York', or "
                "'auto' to ask the host): fleetcheck never guesses a log's zone",
            )
        if self.logs and self.ssh is None:
            raise InvalidValue("ssh", "a host with logs needs ssh (an address, alias or 'local')")

    @property
    def is_local(self) -> bool:
        return self.ssh == "local"


def zone(name: str, key: str = "tz") -> tzinfo:
    """The IANA zone `name`; InvalidValue naming `key` when this machine's tzdata lacks it."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidValue(
            key, f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin'"
        ) from None


@dataclass(frozen=True)
class FleetConfig:
    path: str
    broker: BrokerConfig
    ssh: SshConfig
    patrol: PatrolConfig
    hosts: tuple[HostConfig, ...]
    checks: Mapping[str, Any] = field(default_factory=dict)

    def host(self, name: str) -> HostConfig:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)


# ---------------------------------------------------------------- the generic builder


def build(cls: type, data: Any, file: str, table: str) -> Any:
    """Build dataclass `cls` from a TOML table, rejecting unknown keys and wrong types."""
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: [{table}] must be a table, not {_kind(data)}")
    hints = get_type_hints(cls, include_extras=True)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"{file}: [{table}] {unknown[0]}: unknown key (known keys: {', '.join(fields)})"
        )
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], file, table, name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{file}: [{table}] {name}: missing (required)")
    try:
        return cls(**kwargs)
    except InvalidValue as e:
        raise ConfigError(f"{file}: [{table}] {e.key}: {e.message}") from None


def _kind(value: Any) -> str:
    return {dict: "a table", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}"
    )


def _convert(value: Any, hint: Any, file: str, table: str, key: str) -> Any:
    def fail(expected: str) -> ConfigError:
        return ConfigError(f"{file}: [{table}] {key}: expected {expected}, got {value!r}")

    origin = get_origin(hint)
    if origin is Annotated:
        base, *meta = get_args(hint)
        if DURATION in meta:
            try:
                return parse_duration(value)
            except ValueError as e:
                raise ConfigError(f"{file}: [{table}] {key}: {e}") from None
        return _convert(value, base, file, table, key)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        errors: list[ConfigError] = []
        for option in options:
            try:
                return _convert(value, option, file, table, key)
            except ConfigError as e:
                # a list's error from the list option ("known_hosts[0]: ..."), not "a string"
                if isinstance(value, list) and get_origin(option) is tuple:
                    errors.insert(0, e)
                else:
                    errors.append(e)
        raise errors[0]
    if origin is Literal:
        if value not in get_args(hint):
            raise fail("one of " + ", ".join(repr(a) for a in get_args(hint)))
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise fail("a list")
        (item,) = get_args(hint)[:1]
        out = []
        for i, v in enumerate(value):
            if dataclasses.is_dataclass(item):
                out.append(build(item, v, file, f"{table}.{key}[{i}]"))  # type: ignore[arg-type]
            else:
                out.append(_convert(v, item, file, table, f"{key}[{i}]"))
        return tuple(out)
    if origin is dict:
        if not isinstance(value, dict):
            raise fail("a table")
        _, vt = get_args(hint)
        return {k: _convert(v, vt, file, table, f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return build(hint, value, file, f"{table}.{key}")  # type: ignore[arg-type]
    if hint is bool:
        if not isinstance(value, bool):
            raise fail("true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail("a whole number")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise fail("a number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise fail("a string")
        return value
    if hint is Any:
        return value
    raise TypeError(f"config field type {hint!r} is not supported by the builder")


# ---------------------------------------------------------------- finding and loading


def find_config(explicit: str | None) -> Path:
    """The config file by precedence; ConfigError when none exists."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"{explicit}: no such config file")
        return path
    env = os.environ.get("FLEETCHECK_CONFIG")
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise ConfigError(f"{env}: no such config file (from $FLEETCHECK_CONFIG)")
        return path
    for candidate in (Path("hosts.toml"), Path("~/.config/fleetcheck/hosts.toml").expanduser()):
        if candidate.is_file():
            return candidate
    raise ConfigError(f"no config file found (looked at {SEARCH_HINT})")


CheckConfigLookup = Callable[[str], type | None]


def load(path: Path | str, check_config_type: CheckConfigLookup) -> FleetConfig:
    """Read and validate a config file. `check_config_type(name)` gives a check's config
    dataclass, or None for a name no installed check has."""
    path = Path(path)
    file = str(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{file}: cannot read: {e.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: invalid TOML: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{file}: invalid TOML: {e}") from None
    return from_dict(data, file, check_config_type)


def from_dict(data: dict[str, Any], file: str, check_config_type: CheckConfigLookup) -> FleetConfig:
    known = {"broker", "ssh", "patrol", "hosts", "checks"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"{file}: {unknown[0]}: unknown top-level key (known: broker, ssh, patrol, hosts, "
            "checks)"
        )
    if "broker" not in data:
        raise ConfigError(f"{file}: [broker] url: missing (required)")
    broker = build(BrokerConfig, data["broker"], file, "broker")
    ssh = build(SshConfig, data.get("ssh", {}), file, "ssh")
    patrol = build(PatrolConfig, data.get("patrol", {}), file, "patrol")
    raw_hosts = data.get("hosts", [])
    if not isinstance(raw_hosts, list):
        raise ConfigError(f"{file}: hosts: expected an array of tables ([[hosts]])")
    hosts: list[HostConfig] = []
    seen: dict[str, int] = {}
    for i, h in enumerate(raw_hosts):
        label = f"hosts[{i}]"
        if isinstance(h, dict) and isinstance(h.get("name"), str):
            label = f"hosts[{i}] {h['name']}"
        host = build(HostConfig, h, file, label)
        if host.name in seen:
            raise ConfigError(
                f"{file}: [{label}] name: duplicate host name {host.name!r} "
                f"(also hosts[{seen[host.name]}])"
            )
        seen[host.name] = i
        hosts.append(host)
    raw_checks = data.get("checks", {})
    if not isinstance(raw_checks, dict):
        raise ConfigError(f"{file}: checks: expected a table ([checks.NAME])")
    checks: dict[str, Any] = {}
    for name, table in raw_checks.items():
        cfg_type = check_config_type(name)
        if cfg_type is None:
            raise ConfigError(f"{file}: [checks.{name}]: unknown check (see `fleetcheck checks`)")
        checks[name] = build(cfg_type, table, file, f"checks.{name}")
    return FleetConfig(
        path=file, broker=broker, ssh=ssh, patrol=patrol, hosts=tuple(hosts), checks=checks
    )
