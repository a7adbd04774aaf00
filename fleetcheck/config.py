"""Typed, validated configuration: hosts.toml into frozen dataclasses.

Every error names the file, the table and the key, and is raised as ConfigError before any
network step: a typo must never become a silent no-op (goss's failure mode) nor a traceback.
A check's own table is validated against that check's config dataclass with the same builder.
"""

from __future__ import annotations

import dataclasses
import os
import re
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


SAFE_NAME = re.compile(r"[A-Za-z0-9._:@-]+")
"""Host and check names: they end up in Nagios status lines (where `|` starts the perfdata),
Prometheus and Alertmanager labels, file names and shell-quoted fragments."""
SAFE_NAME_TEXT = "letters, digits, '.', '_', '-', ':' and '@'"
URL_SCHEMES = {"redis": "redis", "rediss": "rediss", "unix": "unix"}
URL_ALIASES = {"valkey": "redis", "valkeys": "rediss"}  # what Valkey's own clients accept
RESERVED_IN_USERINFO = "/?#[]@"


def check_port(key: str, port: int | None) -> None:
    if port is not None and not 1 <= port <= 65535:
        raise InvalidValue(key, f"port {port} is out of range (1-65535)")


def normalise_broker_url(url: str, key: str = "url") -> str:
    """The URL with its scheme lower-cased and Valkey's aliases mapped (valkey:// is redis://,
    valkeys:// is rediss://); InvalidValue otherwise. No message ever repeats the URL's
    userinfo: a password typed into the URL must not reach cron mail or the journal."""
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if not m:
        raise InvalidValue(
            key,
            "not a broker URL: expected redis://HOST:PORT/DB, rediss:// (TLS), "
            "valkey://, valkeys:// or unix:///PATH",
        )
    given = m.group(1)
    scheme = URL_ALIASES.get(given.lower(), given.lower())
    if scheme not in URL_SCHEMES:
        raise InvalidValue(
            key,
            f"unsupported scheme {given}://: use redis://, rediss:// (TLS), valkey://, "
            "valkeys:// or unix://",
        )
    rest = url[m.end() :]
    if "@" in rest:
        userinfo = rest.rsplit("@", 1)[0]
        if any(c in userinfo for c in RESERVED_IN_USERINFO) or any(
            c.isspace() or ord(c) < 32 for c in userinfo
        ):
            raise InvalidValue(
                key,
                "the user name or password holds a character that must be percent-encoded "
                "(/ as %2F, ? as %3F, # as %23, @ as %40, [ ] as %5B %5D), or move the "
                "password to password_env or password_file",
            )
        if re.search(r"%(?![0-9A-Fa-f]{2})", userinfo):
            raise InvalidValue(
                key, "the user name or password has a '%' not followed by two hex digits"
            )
    normal = f"{scheme}://{rest}"
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(normal)
        port = parts.port
    except ValueError:
        raise InvalidValue(key, "the port is not a number between 1 and 65535") from None
    if scheme == "unix":
        if not parts.path:
            raise InvalidValue(
                key, "a unix:// URL needs the socket's path (unix:///run/redis.sock)"
            )
        return normal
    if not parts.hostname:
        raise InvalidValue(key, "no host name")
    if port is not None:
        check_port(key, port)
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise InvalidValue(key, "the path must be a database number (/0)")
    return normal


@dataclass(frozen=True)
class BrokerConfig:
    url: str | None = None  # required unless sentinels are given
    username: str | None = None  # ACL user (or in the URL: redis://USER:PASSWORD@host)
    password_env: str | None = None
    password_file: str | None = None
    connect_timeout: Duration = 3.0
    socket_timeout: Duration = 5.0
    retries: int = 1
    protocol: int = 2
    client_name: str = "fleetcheck"
    ca_file: str | None = None  # rediss://: the CA that signed the broker's certificate
    cert_file: str | None = None  # rediss://: client certificate (mutual TLS)
    key_file: str | None = None  # rediss://: its private key
    check_hostname: bool = True  # rediss://: the certificate must name the host in the URL
    sentinels: tuple[str, ...] = ()  # "host:26379" each: ask them for the current master
    service: str | None = None  # the master's name at the sentinels

    def __post_init__(self) -> None:
        if self.sentinels:
            if self.url is not None:
                raise InvalidValue("url", "give either url or sentinels, not both")
            if not self.service:
                raise InvalidValue("service", "sentinels need service (the master's name)")
            for s in self.sentinels:
                host, sep, port = s.rpartition(":")
                if not sep or not host or not port.isdigit():
                    raise InvalidValue("sentinels", f"{s!r}: expected HOST:PORT")
                check_port("sentinels", int(port))
        else:
            if self.url is None:
                raise InvalidValue("url", "missing (required)")
            if self.service is not None:
                raise InvalidValue("service", "goes with sentinels")
            object.__setattr__(self, "url", normalise_broker_url(self.url))
        from urllib.parse import urlsplit

        parts = urlsplit(self.url or "")
        if self.username is not None and parts.username:
            raise InvalidValue("username", "given both here and in url: keep one")
        sources = [k for k in ("password_env", "password_file") if getattr(self, k)]
        if parts.password is not None:
            sources.insert(0, "url")
        if len(sources) > 1:
            raise InvalidValue(
                sources[1], f"password given both in {sources[0]} and here: keep one"
            )
        tls = parts.scheme == "rediss"
        for key in ("ca_file", "cert_file", "key_file"):
            if getattr(self, key) is not None and not tls:
                raise InvalidValue(key, "goes with a rediss:// (or valkeys://) url")
        if (self.cert_file is None) != (self.key_file is None):
            raise InvalidValue(
                "key_file" if self.key_file is None else "cert_file",
                "cert_file and key_file go together",
            )
        if not re.fullmatch(r"[!-~]{1,64}", self.client_name):
            raise InvalidValue("client_name", "1-64 printable characters without spaces")
        if self.protocol not in (2, 3):
            raise InvalidValue("protocol", "must be 2 (RESP2) or 3 (RESP3)")
        if not 0 <= self.retries <= 5:
            raise InvalidValue("retries", "must be between 0 and 5")
        for key in ("connect_timeout", "socket_timeout"):
            if getattr(self, key) <= 0:
                raise InvalidValue(key, "must be longer than 0s")

    @property
    def address(self) -> str:
        """Where the broker is, for messages: host:port, the socket path, or the sentinel
        service. Never includes credentials."""
        if self.sentinels:
            return f"{self.service} (via sentinels {', '.join(self.sentinels)})"
        from urllib.parse import urlsplit

        parts = urlsplit(self.url or "")
        if parts.scheme == "unix":
            return parts.path
        host = parts.hostname or "?"
        if ":" in host:
            host = f"[{host}]"
        return f"{host}:{parts.port or 6379}"

    @property
    def host(self) -> str | None:
        """The broker's host name or address (None for a socket or sentinel-managed)."""
        if not self.url or self.url.startswith("unix://"):
            return None
        from urllib.parse import urlsplit

        return urlsplit(self.url).hostname


@dataclass(frozen=True)
class OutputsConfig:
    """Where each patrol's results go besides stdout. Each URL may instead come from an
    environment variable (`*_env`) so tokens stay out of argv, `ps` and unit files."""

    alertmanager: tuple[str, ...] = ()  # base URLs; every one gets every alert (a cluster)
    alertmanager_env: tuple[str, ...] = ()  # names of env vars holding such URLs
    heartbeat: str | None = None  # URL to GET after each completed patrol
    heartbeat_env: str | None = None
    textfile: str | None = None  # node_exporter textfile collector file (.prom)

    def __post_init__(self) -> None:
        for i, url in enumerate(self.alertmanager):
            problem = http_url_problem(url)
            if problem:
                raise InvalidValue(f"alertmanager[{i}]", problem)
        if self.heartbeat is not None:
            problem = http_url_problem(self.heartbeat)
            if problem:
                raise InvalidValue("heartbeat", problem)
        if self.heartbeat is not None and self.heartbeat_env is not None:
            raise InvalidValue("heartbeat_env", "give heartbeat or heartbeat_env, not both")
        for key in ("alertmanager_env", "heartbeat_env"):
            value = getattr(self, key)
            for name in value if isinstance(value, tuple) else [value] if value else []:
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                    raise InvalidValue(key, f"{name!r} is not an environment variable name")
        if self.textfile is not None and not self.textfile.endswith(".prom"):
            raise InvalidValue("textfile", "must end in .prom (node_exporter reads only those)")


def http_url_problem(url: str) -> str | None:
    """Why `url` is not an http(s) URL with a host (None when it is). Never repeats the URL:
    its userinfo, path and query may carry tokens."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError on a bad port)
    except ValueError:
        return "not a valid URL (bad host or port)"
    if not parts.scheme:
        return "no scheme: write it as http://HOST:PORT/... or https://..."
    if parts.scheme.lower() not in ("http", "https"):
        return f"unsupported scheme {parts.scheme}://: use http:// or https://"
    if not parts.hostname:
        return "no host name"
    if any(ord(c) < 33 for c in url):
        return "contains spaces or control characters"
    return None


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
        check_port("port", self.port)
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
    time_field: str | None = None  # JSON lines: the one field holding the time (dotted ok)
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
        if not SAFE_NAME.fullmatch(self.name):
            raise InvalidValue("name", f"{self.name!r}: use only {SAFE_NAME_TEXT}")
        check_port("port", self.port)
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
    """zones.zone_named for a config value: InvalidValue naming `key` when there is none."""
    from fleetcheck.zones import UnknownZone, zone_named

    try:
        return zone_named(name)
    except UnknownZone as e:
        raise InvalidValue(key, str(e)) from None


@dataclass(frozen=True)
class FleetConfig:
    path: str
    broker: BrokerConfig
    ssh: SshConfig
    patrol: PatrolConfig
    hosts: tuple[HostConfig, ...]
    checks: Mapping[str, Any] = field(default_factory=dict)
    outputs: OutputsConfig = field(default_factory=OutputsConfig)

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
    known = {"broker", "ssh", "patrol", "hosts", "checks", "outputs"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"{file}: {unknown[0]}: unknown top-level key (known: broker, ssh, patrol, hosts, "
            "checks, outputs)"
        )
    if "broker" not in data:
        raise ConfigError(f"{file}: [broker] url: missing (required)")
    broker = build(BrokerConfig, data["broker"], file, "broker")
    ssh = build(SshConfig, data.get("ssh", {}), file, "ssh")
    patrol = build(PatrolConfig, data.get("patrol", {}), file, "patrol")
    outputs = build(OutputsConfig, data.get("outputs", {}), file, "outputs")
    raw_hosts = data.get("hosts", [])
    if not isinstance(raw_hosts, list):
        raise ConfigError(f"{file}: hosts: expected an array of tables ([[hosts]])")
    hosts: list[HostConfig] = []
    seen: dict[str, int] = {}
    for i, h in enumerate(raw_hosts):
        label = f"hosts[{i}]"
        name = h.get("name") if isinstance(h, dict) else None
        if isinstance(name, str) and SAFE_NAME.fullmatch(name):
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
        if not SAFE_NAME.fullmatch(name):
            raise ConfigError(f"{file}: [checks.{name!r}]: a check name uses only {SAFE_NAME_TEXT}")
        cfg_type = check_config_type(name)
        if cfg_type is None:
            raise ConfigError(f"{file}: [checks.{name}]: unknown check (see `fleetcheck checks`)")
        checks[name] = build(cfg_type, table, file, f"checks.{name}")
    return FleetConfig(
        path=file,
        broker=broker,
        ssh=ssh,
        patrol=patrol,
        hosts=tuple(hosts),
        checks=checks,
        outputs=outputs,
    )
