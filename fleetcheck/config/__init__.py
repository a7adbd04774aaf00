"""Typed, validated configuration: hosts.toml into frozen dataclasses.

Every error names the file, the table and the key, and is raised as ConfigError before any
network step: a typo must never become a silent no-op (goss's failure mode) nor a traceback.
A check's own table is validated against that check's config dataclass with the same builder;
a host's table against HostConfig (how to reach it) plus the per-host settings each check
declares (`Check.host_config_type`): this module knows no check's keys. [defaults] and
[groups.NAME] hold the same per-host keys; a host's own value wins, then its groups in the
order it lists them, then [defaults].
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
import types
import typing
from collections.abc import Callable, Collection, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import tzinfo
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from fleetcheck.parse.duration import parse_duration

DURATION = "duration"
Duration = Annotated[float, DURATION]
"""Seconds; written in TOML as "900s", "15m", "1h30m" or a plain number."""

LOCAL_FILE = "local file"
LocalFile = Annotated[str, LOCAL_FILE]
"""A path on the machine that runs fleetcheck (`config check` verifies it can be read)."""

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
    password_file: LocalFile | None = None
    connect_timeout: Duration = 3.0
    socket_timeout: Duration = 5.0
    retries: int = 1
    protocol: int = 2
    client_name: str = "fleetcheck"
    ca_file: LocalFile | None = None  # rediss://: the CA that signed the broker's certificate
    cert_file: LocalFile | None = None  # rediss://: client certificate (mutual TLS)
    key_file: LocalFile | None = None  # rediss://: its private key
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
    known_hosts: LocalFile | tuple[LocalFile, ...] = "~/.ssh/known_hosts"  # one file or a list
    identity_file: LocalFile | None = None
    config_file: LocalFile = "~/.ssh/config"
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


S = TypeVar("S")


@dataclass(frozen=True)
class HostConfig:
    """One `[[hosts]]` table: the keys every host has (how to reach it), plus the per-host
    settings the checks declare (`Check.host_config_type`), each built from the same table
    and read with `host.settings(TheType)`. This module knows no check's keys."""

    name: str
    ssh: str | None = None
    user: str | None = None
    port: int | None = None
    groups: tuple[str, ...] = ()  # named [groups.NAME] tables whose values this host takes
    # not host keys: filled in by the loader
    checks_settings: Mapping[type, Any] = field(
        default_factory=dict, compare=False, hash=False, repr=False, metadata={"key": False}
    )
    # where each effective key's value came from: "hosts", "groups.NAME" or "defaults"
    sources: Mapping[str, str] = field(
        default_factory=dict, compare=False, hash=False, repr=False, metadata={"key": False}
    )

    def __post_init__(self) -> None:
        if not self.name or not self.name.strip():
            raise InvalidValue("name", "must not be empty")
        if not SAFE_NAME.fullmatch(self.name):
            raise InvalidValue("name", f"{self.name!r}: use only {SAFE_NAME_TEXT}")
        check_port("port", self.port)

    def settings(self, cls: type[S]) -> S:
        """This host's settings of one check's `host_config_type` (its defaults when the
        host sets none of its keys and the check was not loaded with the config)."""
        found = self.checks_settings.get(cls)
        return found if found is not None else cls()

    def with_settings(self, *values: Any) -> HostConfig:
        """A copy with these per-host settings (one instance per type) added or replaced."""
        merged = dict(self.checks_settings)
        merged.update({type(v): v for v in values})
        return dataclasses.replace(self, checks_settings=merged)

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
    # what `config check` echoes: durations written as bare numbers, with their unit
    notes: tuple[str, ...] = ()

    def host(self, name: str) -> HostConfig:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)


# ---------------------------------------------------------------- the generic builder


@cache
def _hints(cls: type) -> dict[str, Any]:
    """A config class's resolved annotations: resolving them evaluates each string again,
    and a fleet builds the same few classes once per host."""
    return get_type_hints(cls, include_extras=True)


def build(
    cls: type, data: Any, file: str, table: str, sources: Mapping[str, str] | None = None
) -> Any:
    """Build dataclass `cls` from a TOML table, rejecting unknown keys and wrong types.
    `sources` says where a host's merged keys were written ([defaults], [groups.NAME])."""
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: [{table}] must be a table, not {_kind(data)}")
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.metadata.get("key", True)}
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
        raise ConfigError(_placed(file, table, e, sources or {})) from None


_BARE_DURATIONS: ContextVar[list[tuple[str, str, str]] | None] = ContextVar(
    "bare_durations", default=None
)


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
                seconds = parse_duration(value)
            except ValueError as e:
                raise ConfigError(f"{file}: [{table}] {key}: {e}") from None
            bare = _BARE_DURATIONS.get()
            if bare is not None and not isinstance(value, str):
                note = f"[{table}] {key} {value:g}s (a bare number means seconds)"
                bare.append((table, key, note))
            return seconds
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
HostTypesLookup = Callable[[Collection[str] | None], Mapping[str, type]]
"""{check name: its host_config_type} for the named checks (None: every registered check)."""

TOP_LEVEL = ("broker", "ssh", "patrol", "defaults", "groups", "hosts", "checks", "outputs")
NOT_SHARED = ("name", "groups")  # host keys [defaults] and [groups.NAME] cannot set


def load(
    path: Path | str,
    check_config_type: CheckConfigLookup,
    host_config_types: HostTypesLookup,
) -> FleetConfig:
    """Read and validate a config file. `check_config_type(name)` gives a check's config
    dataclass, or None for a name no installed check has; `host_config_types` the checks'
    per-host settings (the registry passes both: this module knows no check)."""
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
    return from_dict(data, file, check_config_type, host_config_types)


def _key_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init and f.metadata.get("key", True)]


def from_dict(
    data: dict[str, Any],
    file: str,
    check_config_type: CheckConfigLookup,
    host_config_types: HostTypesLookup,
) -> FleetConfig:
    unknown = sorted(set(data) - set(TOP_LEVEL))
    if unknown:
        raise ConfigError(
            f"{file}: {unknown[0]}: unknown top-level key (known: {', '.join(TOP_LEVEL)})"
        )
    if "broker" not in data:
        raise ConfigError(f"{file}: [broker] url: missing (required)")
    bare: list[tuple[str, str, str]] = []
    token = _BARE_DURATIONS.set(bare)
    try:
        broker = build(BrokerConfig, data["broker"], file, "broker")
        ssh = build(SshConfig, data.get("ssh", {}), file, "ssh")
        patrol = build(PatrolConfig, data.get("patrol", {}), file, "patrol")
        outputs = build(OutputsConfig, data.get("outputs", {}), file, "outputs")
        raw_checks = data.get("checks", {})
        if not isinstance(raw_checks, dict):
            raise ConfigError(f"{file}: checks: expected a table ([checks.NAME])")
        hosts = _build_hosts(data, file, list(raw_checks), host_config_types)
        checks = _build_checks(raw_checks, file, check_config_type)
    finally:
        _BARE_DURATIONS.reset(token)
    notes = list(dict.fromkeys(text for _, _, text in bare))
    return FleetConfig(
        path=file,
        broker=broker,
        ssh=ssh,
        patrol=patrol,
        hosts=tuple(hosts),
        checks=checks,
        outputs=outputs,
        notes=tuple(notes),
    )


def _build_checks(
    raw_checks: dict[str, Any], file: str, check_config_type: CheckConfigLookup
) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    for name, table in raw_checks.items():
        if not SAFE_NAME.fullmatch(name):
            raise ConfigError(f"{file}: [checks.{name!r}]: a check name uses only {SAFE_NAME_TEXT}")
        cfg_type = check_config_type(name)
        if cfg_type is None:
            raise ConfigError(f"{file}: [checks.{name}]: unknown check (see `fleetcheck checks`)")
        checks[name] = build(cfg_type, table, file, f"checks.{name}")
    return checks


class _HostKeys:
    """Which type reads each per-host key: HostConfig's own, or the checks' settings."""

    def __init__(self, types: Mapping[str, type]) -> None:
        self.types = dict(sorted(types.items()))  # by check name: one order in every listing
        self.core = _key_fields(HostConfig)
        self.hints: dict[str, list[Any]] = {}
        core_hints = _hints(HostConfig)
        for key in self.core:
            self.hints[key] = [core_hints[key]]
        for cls in self.types.values():
            hints = _hints(cls)
            for key in _key_fields(cls):
                self.hints.setdefault(key, []).append(hints[key])

    def known(self) -> str:
        checks = sorted(k for k in self.hints if k not in self.core)
        return ", ".join(self.core + checks)


def _build_hosts(
    data: dict[str, Any], file: str, enabled: list[str], host_types: HostTypesLookup
) -> list[HostConfig]:
    raw_hosts = data.get("hosts", [])
    if not isinstance(raw_hosts, list):
        raise ConfigError(f"{file}: hosts: expected an array of tables ([[hosts]])")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ConfigError(f"{file}: [defaults] must be a table, not {_kind(defaults)}")
    groups = data.get("groups", {})
    if not isinstance(groups, dict):
        raise ConfigError(f"{file}: [groups] must be a table of [groups.NAME] tables")
    tables: dict[str, Any] = {"defaults": defaults}
    for gname, table in groups.items():
        if not SAFE_NAME.fullmatch(gname):
            raise ConfigError(
                f"{file}: [groups.{gname!r}]: a group name uses only {SAFE_NAME_TEXT}"
            )
        if not isinstance(table, dict):
            raise ConfigError(f"{file}: [groups.{gname}] must be a table, not {_kind(table)}")
        tables[f"groups.{gname}"] = table

    keys = _HostKeys(host_types(enabled))
    used = {k for t in tables.values() for k in t}
    used |= {k for h in raw_hosts if isinstance(h, dict) for k in h}
    if used - set(keys.hints):  # a key of a check not enabled (entry points included)?
        keys = _HostKeys({**host_types(None), **keys.types})

    for where, table in tables.items():
        for key, value in table.items():
            if key in NOT_SHARED:
                raise ConfigError(
                    f"{file}: [{where}] {key}: not allowed here (set it in each [[hosts]] table)"
                )
            if key not in keys.hints:
                raise ConfigError(
                    f"{file}: [{where}] {key}: unknown key (known keys: {keys.known()})"
                )
            for hint in keys.hints[key]:
                _convert(value, hint, file, where, key)

    hosts: list[HostConfig] = []
    seen: dict[str, int] = {}
    for i, h in enumerate(raw_hosts):
        label = f"hosts[{i}]"
        name = h.get("name") if isinstance(h, dict) else None
        if isinstance(name, str) and SAFE_NAME.fullmatch(name):
            label = f"hosts[{i}] {h['name']}"
        if not isinstance(h, dict):
            raise ConfigError(f"{file}: [{label}] must be a table, not {_kind(h)}")
        host = _build_host(h, file, label, tables, keys)
        if host.name in seen:
            raise ConfigError(
                f"{file}: [{label}] name: duplicate host name {host.name!r} "
                f"(also hosts[{seen[host.name]}])"
            )
        seen[host.name] = i
        hosts.append(host)
    return hosts


def _build_host(
    h: dict[str, Any], file: str, label: str, tables: dict[str, Any], keys: _HostKeys
) -> HostConfig:
    unknown = sorted(set(h) - set(keys.hints))
    if unknown:
        raise ConfigError(
            f"{file}: [{label}] {unknown[0]}: unknown key (known keys: {keys.known()})"
        )
    joined = _convert(h.get("groups", []), tuple[str, ...], file, label, "groups")
    for g in joined:
        if f"groups.{g}" not in tables:
            known = ", ".join(t.split(".", 1)[1] for t in tables if t != "defaults") or "none"
            raise ConfigError(f"{file}: [{label}] groups: unknown group {g!r} (known: {known})")
    # the host's own value wins, then its groups in the order it lists them, then [defaults]
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for where in ["defaults", *(f"groups.{g}" for g in reversed(joined)), "hosts"]:
        for key, value in (h if where == "hosts" else tables[where]).items():
            merged[key] = value
            sources[key] = where
    bare = _BARE_DURATIONS.get()
    mark = len(bare) if bare is not None else 0

    def build_part(cls: type, names: list[str]) -> Any:
        part = {k: merged[k] for k in names if k in merged}
        return build(cls, part, file, label, sources)

    host = build_part(HostConfig, keys.core)
    values = [build_part(cls, _key_fields(cls)) for cls in keys.types.values()]
    host = dataclasses.replace(host.with_settings(*values), sources={k: sources[k] for k in merged})
    for value in values:
        check_host = getattr(value, "check_host", None)
        if check_host is not None:
            try:
                check_host(host)
            except InvalidValue as e:
                raise ConfigError(_placed(file, label, e, sources)) from None
    if bare is not None:  # echo a bare number once, where it was written
        bare[mark:] = [b for b in bare[mark:] if sources.get(_top_key(b, label)) == "hosts"]
    return host


def _top_key(note: tuple[str, str, str], label: str) -> str:
    table, key, _ = note
    if table == label:
        return key
    return re.split(r"[.\[]", table[len(label) + 1 :], maxsplit=1)[0]


def _placed(file: str, label: str, e: InvalidValue, sources: Mapping[str, str]) -> str:
    """The message for a host's invalid value, naming the table it was written in."""
    where = sources.get(re.split(r"[.\[]", e.key, maxsplit=1)[0], "hosts")
    if where == "hosts":
        return f"{file}: [{label}] {e.key}: {e.message}"
    return f"{file}: [{where}] {e.key}: {e.message} (for host {label.split(' ')[-1]})"


# ---------------------------------------------------------------- files the config names


@dataclass(frozen=True)
class FileProblem:
    """A file the config names that this machine cannot read. `error` False: a warning (the
    file may well exist where the patrol runs, or is not needed)."""

    table: str
    key: str
    path: str
    problem: str
    error: bool

    def text(self, file: str) -> str:
        return f"{file}: [{self.table}] {self.key}: {self.path}: {self.problem}"


def _has_marker(hint: Any, marker: str) -> bool:
    if get_origin(hint) is Annotated:
        return marker in get_args(hint)[1:] or _has_marker(get_args(hint)[0], marker)
    return any(_has_marker(a, marker) for a in get_args(hint))


def _local_files(table: str, value: Any) -> list[tuple[str, str, str, bool]]:
    """(table, key, path, written) for every LocalFile field of dataclass `value`; `written`
    is False when the path is the field's default."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return []
    hints = _hints(type(value))
    out = []
    for f in dataclasses.fields(value):
        if f.name not in hints or not _has_marker(hints[f.name], LOCAL_FILE):
            continue
        v = getattr(value, f.name)
        written = f.default is dataclasses.MISSING or v != f.default
        paths = [v] if isinstance(v, str) else list(v or ())
        for i, p in enumerate(paths):
            key = f.name if isinstance(v, str) else f"{f.name}[{i}]"
            out.append((table, key, p, written))
    return out


def _file_problem(path: Path) -> str | None:
    """Why `path` cannot be read as a file (never opened: a FIFO would block)."""
    import stat

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as e:
        return f"cannot be looked at: {e.strerror or e}"
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"  # (/dev/null is fine: `ssh -F /dev/null`)
    if not os.access(path, os.R_OK):
        return "not readable by this user (permission denied)"
    return None


def check_files(fleet: FleetConfig, elsewhere: bool = False) -> list[FileProblem]:
    """Every file the config names that cannot be read here, as an error when the patrol
    needs it on this machine, else (`elsewhere`: the patrol runs on another machine; a path
    left at its default; a file the patrol will create) as a warning saying why."""
    parts: list[tuple[str, Any]] = [
        ("broker", fleet.broker),
        ("ssh", fleet.ssh),
        ("outputs", fleet.outputs),
        *((f"checks.{name}", cfg) for name, cfg in fleet.checks.items()),
    ]
    for i, h in enumerate(fleet.hosts):
        parts.extend((f"hosts[{i}] {h.name}", s) for s in h.checks_settings.values())
    uses_ssh = any(h.ssh is not None and not h.is_local for h in fleet.hosts)
    problems = []
    for table, key, path, written in (f for t, v in parts for f in _local_files(t, v)):
        if table == "ssh" and not written and (key == "config_file" or not uses_ssh):
            continue  # like ssh: no ~/.ssh/config is no configuration, not an error
        problem = _file_problem(Path(path).expanduser())
        if problem is None:
            continue
        why = None
        if elsewhere:
            why = "--elsewhere: the patrol runs on another machine"
        elif table == "ssh" and key.startswith("known_hosts") and fleet.ssh.accept_new:
            why = "accept_new creates it on the first connection"
        elif table == "ssh" and not uses_ssh:
            why = "no host is reached over ssh"
        elif not written:
            why = "the default path; set the key if the file lives elsewhere"
        problems.append(
            FileProblem(table, key, path, problem + (f" ({why})" if why else ""), why is None)
        )
    return problems


def effective(host: HostConfig) -> list[tuple[str, Any, str]]:
    """(key, value, where it was written: hosts, groups.NAME, defaults or "" for a default)
    for the host's keys and every per-host setting the loader built for it."""
    out = []
    for part in (host, *host.checks_settings.values()):
        for f in dataclasses.fields(part):
            if f.metadata.get("key", True) and f.name != "name":
                if (
                    part is host
                    and f.name in ("user", "port", "groups")
                    and f.name not in host.sources
                ):
                    continue
                out.append((f.name, getattr(part, f.name), host.sources.get(f.name, "")))
    return out
