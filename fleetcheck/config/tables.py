"""The config tables as frozen dataclasses, each validated in `__post_init__`: [broker],
[outputs], [ssh], [patrol], a [[hosts]] entry, and the whole fleet."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Any, TypeVar

from fleetcheck.config.values import (
    MAX_HOST_NAME,
    SAFE_NAME,
    SAFE_NAME_TEXT,
    Duration,
    InvalidValue,
    LocalFile,
    check_at_most,
    check_port,
    check_span,
    normalise_broker_url,
    ssh_target_problem,
)


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
    tls: bool = False  # with sentinels: TLS to them and to the master they name (ca_file...)
    sentinel_username: str | None = None  # the sentinels' own ACL user, when they have one
    sentinel_password_env: str | None = None  # ... and the variable holding its password

    def __post_init__(self) -> None:
        if self.sentinels:
            if self.url is not None:
                raise InvalidValue("url", "give either url or sentinels, not both")
            if not self.service:
                raise InvalidValue("service", "sentinels need service (the master's name)")
            for s in self.sentinels:
                host, sep, port = s.rpartition(":")
                if not sep or not host or not (port.isascii() and port.isdigit()):
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
        if not self.sentinels:
            for key in ("tls", "sentinel_username", "sentinel_password_env"):
                if getattr(self, key):
                    raise InvalidValue(key, "goes with sentinels (a url says rediss:// instead)")
        if self.sentinel_username and not self.sentinel_password_env:
            raise InvalidValue("sentinel_username", "goes with sentinel_password_env")
        tls = parts.scheme == "rediss" or self.tls
        for key in ("ca_file", "cert_file", "key_file"):
            if getattr(self, key) is not None and not tls:
                raise InvalidValue(
                    key, "goes with a rediss:// (or valkeys://) url, or tls = true with sentinels"
                )
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
        check_span("connect_timeout", self.connect_timeout, 600, "10m")
        check_span("socket_timeout", self.socket_timeout, 600, "10m")

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
        urls = [(f"alertmanager[{i}]", url) for i, url in enumerate(self.alertmanager)]
        for key, url in [*urls, ("heartbeat", self.heartbeat)]:
            problem = http_url_problem(url) if url is not None else None
            if problem:
                raise InvalidValue(key, problem)
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


STATUS_LABELS = ("OK", "WARN", "CRIT", "UNKNOWN")


@dataclass(frozen=True)
class NotifyTarget:
    """One [notify] URL with what it wants: rows of these statuses, groups, hosts and checks
    (empty: all). Broker-wide rows concern every host, so host and group filters pass them."""

    url: str
    statuses: tuple[str, ...] = ("WARN", "CRIT", "UNKNOWN")
    groups: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problem = notify_url_problem(self.url)
        if problem:
            raise InvalidValue("url", problem)
        for status in self.statuses:
            if status not in STATUS_LABELS[1:]:
                raise InvalidValue("statuses", f"{status!r}: use WARN, CRIT or UNKNOWN")


def notify_url_problem(url: str) -> str | None:
    """Why `url` cannot be an Apprise URL (None when it may be; Apprise itself judges the rest
    when a patrol starts). Never repeats the URL: it carries tokens."""
    if not url.strip():
        return "empty URL"
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        return "contains spaces or control characters"
    if "://" not in url:
        return "not an Apprise URL (SCHEME://...: mailto://, json://, mmost://, slack://, ...)"
    return None


@dataclass(frozen=True)
class NotifyConfig:
    """[notify]: chat, e-mail and webhook messages through Apprise, one per round that changed
    something. URLs carry tokens: `urls_env` (an environment variable holding URLs separated
    by spaces or commas) and `urls_file` (one URL a line, # comments) keep them out of here."""

    urls: tuple[NotifyTarget | str, ...] = ()
    urls_env: str | None = None
    urls_file: LocalFile | None = None
    remind_every: Duration = 4 * 3600.0  # 0: never remind
    timeout: Duration = 5.0  # each delivery's bound, all of it

    def __post_init__(self) -> None:
        for i, item in enumerate(self.urls):
            problem = notify_url_problem(item) if isinstance(item, str) else None
            if problem:
                raise InvalidValue(f"urls[{i}]", problem)
        urls = tuple(NotifyTarget(u) if isinstance(u, str) else u for u in self.urls)
        object.__setattr__(self, "urls", urls)
        if self.urls_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.urls_env):
            raise InvalidValue("urls_env", f"{self.urls_env!r} is not an environment variable name")
        if self.remind_every < 0:
            raise InvalidValue("remind_every", "must be 0 (never) or longer")
        if not 0 < self.timeout <= 60:
            raise InvalidValue("timeout", "must be longer than 0s and at most 1m")

    @property
    def targets(self) -> tuple[NotifyTarget, ...]:
        return tuple(t for t in self.urls if isinstance(t, NotifyTarget))

    @property
    def enabled(self) -> bool:
        return bool(self.urls or self.urls_env or self.urls_file)


# HOST, CHECK, HOST/CHECK, or HOST/CHECK/ITEM (an item, e.g. a log's path, may hold any
# printable character but a control)
SILENCE_TARGET = re.compile(r"[A-Za-z0-9._:@*-]+(/[A-Za-z0-9._:@*-]+(/[^\x00-\x1f\x7f]+)?)?")
DAILY = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])-([01][0-9]|2[0-3]):([0-5][0-9])")


def silence_target_problem(text: str) -> str | None:
    """Why `text` is not HOST, CHECK, HOST/CHECK or HOST/CHECK/ITEM (`*` for any), None when
    it is."""
    if not SILENCE_TARGET.fullmatch(text):
        return f"{text!r}: expected HOST, CHECK, HOST/CHECK or HOST/CHECK/ITEM (* for any)"
    return None


@dataclass(frozen=True)
class SilenceWindow:
    """A recurring silence: `match` (HOST, CHECK, HOST/CHECK) every day `daily` (HH:MM-HH:MM,
    UTC; a window may cross midnight)."""

    match: str
    daily: str
    reason: str

    def __post_init__(self) -> None:
        problem = silence_target_problem(self.match)
        if problem:
            raise InvalidValue("match", problem)
        m = DAILY.fullmatch(self.daily)
        if not m:
            raise InvalidValue("daily", f"{self.daily!r}: expected HH:MM-HH:MM (UTC)")
        if self.daily[:5] == self.daily[6:]:
            raise InvalidValue("daily", f"{self.daily!r}: the window is empty")
        if not self.reason.strip():
            raise InvalidValue("reason", "say why (it shows on every silenced row)")

    def minutes(self) -> tuple[int, int]:
        """(start, end) in minutes after 00:00 UTC."""
        m = DAILY.fullmatch(self.daily)
        assert m is not None
        a, b, c, d = (int(x) for x in m.groups())
        return a * 60 + b, c * 60 + d


@dataclass(frozen=True)
class SilencesConfig:
    """[silences]: recurring windows ([[silences.windows]]); one-off silences are made with
    `fleetcheck silence` and kept next to the state file."""

    windows: tuple[SilenceWindow, ...] = ()


@dataclass(frozen=True)
class ServeConfig:
    """[serve]: what the console is known as from outside (messages link to its rows)."""

    public_url: str | None = None

    def __post_init__(self) -> None:
        if self.public_url is not None:
            problem = http_url_problem(self.public_url)
            if problem:
                raise InvalidValue("public_url", problem)
            from urllib.parse import urlsplit

            parts = urlsplit(self.public_url)
            if parts.username or parts.password:
                raise InvalidValue("public_url", "no user or password: messages show this URL")
            if parts.query or parts.fragment:
                raise InvalidValue("public_url", "no query or fragment: rows' links are added")


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
        check_span("connect_timeout", self.connect_timeout, 600, "10m")
        check_span("command_timeout", self.command_timeout, 3600, "1h")
        check_at_most("keep_alive_for", self.keep_alive_for, 86400, "1d")
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
    # the service's environment file (the unit's EnvironmentFile=), read by every fleetcheck
    # command when present, so runuser, the unit and cron see one environment; "" reads none
    environment_file: str = "/etc/default/fleetcheck"

    def __post_init__(self) -> None:
        if self.environment_file and not self.environment_file.startswith("/"):
            raise InvalidValue("environment_file", 'must be an absolute path (or "" for none)')
        if self.fail_after < 1:
            raise InvalidValue("fail_after", "must be 1 or more")
        if not 2 <= self.flap_window <= 1000:
            raise InvalidValue("flap_window", "must be between 2 and 1000")
        if not 1 <= self.flap_changes < self.flap_window:
            raise InvalidValue("flap_changes", "must be at least 1 and below flap_window")
        check_span("deadline", self.deadline, 86400, "1d")
        check_span("every", self.every, 7 * 86400, "7d")
        if not 1 <= self.concurrency <= 1024:
            raise InvalidValue("concurrency", "must be between 1 and 1024")


S = TypeVar("S")


@dataclass(frozen=True)
class HostConfig:
    """One `[[hosts]]` table: the keys every host has (how to reach it), plus the per-host
    settings the checks declare (`Check.host_config_type`), read with `host.settings(TheType)`."""

    name: str
    ssh: str | None = None
    user: str | None = None
    port: int | None = None
    groups: tuple[str, ...] = ()  # named [groups.NAME] tables whose values this host takes
    identity_file: LocalFile | None = None  # like ssh -i (an inventory's private key file)
    proxy_jump: str | None = None  # like ssh -J: "[user@]host[:port],...", or "none"
    # not host keys: filled in by the loader
    checks_settings: Mapping[type, Any] = field(
        default_factory=dict, compare=False, hash=False, repr=False, metadata={"key": False}
    )
    # where each effective key's value came from: "hosts", "groups.NAME" or "defaults"
    sources: Mapping[str, str] = field(
        default_factory=dict, compare=False, hash=False, repr=False, metadata={"key": False}
    )
    # where the host itself came from: "" for a [[hosts]] table, else the inventory source(s)
    # ("ansible /etc/ansible/hosts", with the file and line when known)
    origin: str = field(default="", compare=False, hash=False, metadata={"key": False})
    # the addresses its inventory reports for it (claimed in CLIENT LIST without `addrs`)
    inventory_addrs: tuple[str, ...] = field(
        default=(), compare=False, hash=False, metadata={"key": False}
    )

    def __post_init__(self) -> None:
        if not self.name or not self.name.strip():
            raise InvalidValue("name", "must not be empty")
        if len(self.name) > MAX_HOST_NAME:
            raise InvalidValue(
                "name", f"{len(self.name)} characters long (at most {MAX_HOST_NAME})"
            )
        if not SAFE_NAME.fullmatch(self.name):
            raise InvalidValue("name", f"{self.name!r}: use only {SAFE_NAME_TEXT}")
        if self.ssh is not None:
            problem = ssh_target_problem(self.ssh)
            if problem is not None:
                raise InvalidValue("ssh", problem)
        if self.user is not None and (
            not self.user or any(c.isspace() or not c.isprintable() for c in self.user)
        ):
            raise InvalidValue("user", f"{self.user!r} is not a user name")
        check_port("port", self.port)
        if self.proxy_jump is not None:
            hops = self.proxy_jump.split(",")
            for hop in hops:
                problem = ssh_target_problem(hop) if hop else "an empty hop"
                if problem is not None:
                    raise InvalidValue("proxy_jump", f"{hop!r}: {problem}")

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
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    silences: SilencesConfig = field(default_factory=SilencesConfig)
    # what `config check` echoes: durations written as bare numbers, with their unit
    notes: tuple[str, ...] = ()
    # each [[inventory]] source's answer this load (fleetcheck.config.inventory.SourceStatus)
    inventory: tuple[Any, ...] = ()

    def host(self, name: str) -> HostConfig:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)
