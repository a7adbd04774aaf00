"""Where [notify] sends: each target (an Apprise URL with its filters) from the config, an
environment variable or a file, every URL checked by Apprise itself when read; and the one place
Apprise is loaded, its log kept per thread instead of on stderr (it may quote a server's words).
What each message says and its delivery are fleetcheck.rounds.notify's."""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetcheck.core.model import Result


class NotifyError(ValueError):
    """A [notify] setting that cannot work, named by its key (a usage error, exit 3)."""


@dataclass(frozen=True)
class Target:
    """One URL to notify and what it wants. `number` is its place in the list of all URLs
    (config, then urls_env, then urls_file): how every message about it names it."""

    number: int
    url: str
    where: str
    service: str = "?"
    statuses: tuple[str, ...] = ("WARN", "CRIT", "UNKNOWN")
    groups: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"notify #{self.number} ({self.service})"

    def wants_place(self, r: Result, groups_of: Mapping[str, tuple[str, ...]]) -> bool:
        """The host, group and check filters (broker-wide rows concern every host)."""
        if self.checks and r.check not in self.checks:
            return False
        if r.host is None:
            return True
        if self.hosts and r.host in self.hosts:
            return True
        if self.groups and set(groups_of.get(r.host, ())) & set(self.groups):
            return True
        return not self.hosts and not self.groups


@dataclass(frozen=True)
class Settings:
    targets: tuple[Target, ...]
    remind_every: float = 4 * 3600.0
    timeout: float = 5.0
    public_url: str | None = None
    groups_of: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# ---------------------------------------------------------------- resolving the targets


def resolve(fleet: Any, environ: Mapping[str, str] | None = None) -> Settings | None:
    """The targets of `fleet`'s [notify] (None when it has none), each URL checked by Apprise
    now, before any patrol. Raises NotifyError naming the key, never the URL."""
    cfg = fleet.notify
    if not cfg.enabled:
        return None
    env = os.environ if environ is None else environ
    found: list[tuple[str, Any]] = []  # (where, NotifyTarget or a bare URL)
    for i, t in enumerate(cfg.targets):
        found.append((f"[notify] urls[{i}]", t))
    if cfg.urls_env is not None:
        value = env.get(cfg.urls_env, "").strip()
        if not value:
            raise NotifyError(f"[notify] urls_env {cfg.urls_env}: not set in the environment")
        for j, url in enumerate(u for u in re.split(r"[\s,]+", value) if u):
            found.append((f"[notify] urls_env {cfg.urls_env} (URL {j + 1})", url))
    if cfg.urls_file is not None:
        path = Path(cfg.urls_file).expanduser()
        if not path.is_absolute():
            path = Path(fleet.path).parent / path
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
            raise NotifyError(f"[notify] urls_file {cfg.urls_file}: cannot read: {why}") from None
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if line and not line.startswith("#"):
                found.append((f"[notify] urls_file {cfg.urls_file} line {n}", line))
    if not found:
        raise NotifyError("[notify]: no URL (urls, urls_env or urls_file)")
    known_groups = {g for h in fleet.hosts for g in h.groups}
    known_hosts = {h.name for h in fleet.hosts}
    targets = []
    for number, (where, item) in enumerate(found, 1):
        url = item if isinstance(item, str) else item.url
        from fleetcheck.config.tables import notify_url_problem

        problem = notify_url_problem(url)
        if problem is None:
            plugin = instantiate(url)
            problem = None if plugin is not None else _unusable(url)
        if problem is not None:
            raise NotifyError(f"{where}: {problem}")
        filters: dict[str, Any] = {}
        if not isinstance(item, str):
            for g in item.groups:
                if g not in known_groups:
                    raise NotifyError(f"{where} groups: no host is in group {g!r}")
            for h in item.hosts:
                if h not in known_hosts:
                    raise NotifyError(f"{where} hosts: no host {h!r} in the config")
            filters = {
                "statuses": item.statuses,
                "groups": item.groups,
                "hosts": item.hosts,
                "checks": item.checks,
            }
        targets.append(
            Target(number, url, where, str(getattr(plugin, "service_name", "?")), **filters)
        )
    return Settings(
        targets=tuple(targets),
        remind_every=cfg.remind_every,
        timeout=cfg.timeout,
        public_url=fleet.serve.public_url,
        groups_of={h.name: tuple(h.groups) for h in fleet.hosts},
    )


def _unusable(url: str) -> str:
    scheme = url.split("://", 1)[0].lower()
    if not re.fullmatch(r"[a-z0-9+.-]{1,32}", scheme):
        return "not an Apprise URL"
    return f"Apprise cannot use this {scheme}:// URL (see its wiki for the {scheme}:// form)"


_quiet = threading.Lock()
captured: dict[int, list[str]] = {}


class _Capture(logging.Handler):
    """Keeps Apprise's warnings per thread (the reason a delivery failed), instead of letting
    them reach stderr raw: they may quote a server's words."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            lines = captured.get(threading.get_ident())
            if lines is not None:
                try:
                    lines.append(record.getMessage())
                except Exception:
                    lines.append(record.msg if isinstance(record.msg, str) else "")


def load_apprise() -> Any:
    """The apprise module, its log kept off stderr (it is imported only when [notify] is
    used: loading its plugins costs a quarter second)."""
    import apprise

    with _quiet:
        log = logging.getLogger("apprise")
        if not any(isinstance(h, _Capture) for h in log.handlers):
            log.addHandler(_Capture())
            log.propagate = False
            log.setLevel(logging.WARNING)
    return apprise


def instantiate(url: str) -> Any:
    try:
        return load_apprise().Apprise.instantiate(url)
    except Exception:
        return None
