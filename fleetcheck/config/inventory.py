"""`[[inventory]]`: hosts taken from where operators already describe their fleet (an Ansible
inventory, their ssh_config, a command printing JSON, Tailscale), merged with `[[hosts]]`.

Sources merge in the order they are written, a later source's value winning key by key, and a
`[[hosts]]` table of the same name wins over all of them; groups are the union. A source that
cannot be read never empties the fleet: its last good answer (`inventory_cache`) is used with
its age, and its `SourceStatus` says why. A host that cannot be used is left out with one line
naming the host and the variable.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.config.values import (
    MAX_HOST_NAME,
    SAFE_NAME,
    SAFE_NAME_TEXT,
    Duration,
    InvalidValue,
    check_span,
)

SOURCES = ("ansible", "ssh_config", "command", "tailscale")
# keys each source takes besides the common ones
SOURCE_KEYS = {
    "ansible": {"path", "saved", "program"},
    "ssh_config": {"path"},
    "command": {"run"},
    "tailscale": {"saved", "program", "include_self", "online_only"},
}
VAR_PREFIX = "fleetcheck_"  # a variable fleetcheck_KEY sets the host key KEY


@dataclass(frozen=True)
class InventorySpec:
    """One `[[inventory]]` table."""

    source: str
    name: str | None = None  # how rows name it (default: the source and its path or command)
    match: str | None = None  # a glob on host names: only those hosts
    groups: tuple[str, ...] = ()  # groups every host of this source joins
    timeout: Duration = 30.0  # a program (ansible-inventory, the command, tailscale) is cut here
    max_age: Duration = 86400.0  # the last good answer, when the source fails: UNKNOWN past this
    max_drop: float = 0.5  # a fall by more than this share at once: WARN, the last good kept
    path: str | None = None  # ansible: the inventory (-i); ssh_config: the file
    saved: str | None = None  # ansible / tailscale: their saved JSON output instead of running
    program: str | None = None  # ansible / tailscale: the executable (default: found in PATH)
    run: tuple[str, ...] = ()  # command: argv
    include_self: bool = False  # tailscale: the machine fleetcheck runs on as a host too
    online_only: bool = False  # tailscale: leave out peers Tailscale reports offline

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise InvalidValue("source", f"{self.source!r}: one of {', '.join(SOURCES)}")
        allowed = SOURCE_KEYS[self.source]
        for key in ("path", "saved", "program", "run", "include_self", "online_only"):
            default = InventorySpec.__dataclass_fields__[key].default
            if getattr(self, key) != default and key not in allowed:
                raise InvalidValue(key, f"not a key of a {self.source} source")
        if self.source == "ansible" and (self.path is None) == (self.saved is None):
            raise InvalidValue("path", "an ansible source needs path (an inventory) or saved")
        if self.source == "command" and not self.run:
            raise InvalidValue("run", "a command source needs run (the command and arguments)")
        check_span("timeout", self.timeout, 600, "10m")
        if self.max_age <= 0:
            raise InvalidValue("max_age", "must be longer than 0s")
        if not 0 < self.max_drop <= 1:
            raise InvalidValue("max_drop", "a share above 0 and at most 1 (0.5: half)")
        for g in self.groups:
            if not SAFE_NAME.fullmatch(g):
                raise InvalidValue("groups", f"{g!r}: a group name uses only {SAFE_NAME_TEXT}")

    @property
    def label(self) -> str:
        """How rows, notes and the cache name this source."""
        if self.name:
            return self.name
        if self.source == "command":
            return "command " + " ".join(self.run)
        where = self.path or self.saved
        return f"{self.source} {where}" if where else self.source


@dataclass
class Found:
    """One host as a source reports it."""

    name: str
    keys: dict[str, Any] = field(default_factory=dict)  # [[hosts]] keys: ssh, user, port, ...
    groups: list[str] = field(default_factory=list)
    addrs: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)
    origin: str = ""  # the source, and the file and line or command where known

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("name", "keys", "groups", "addrs", "origin")}

    @classmethod
    def from_json(cls, data: Any) -> Found | None:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return None

        def texts(key: str) -> list[str]:
            value = data.get(key)
            return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

        keys = dict(data["keys"]) if isinstance(data.get("keys"), dict) else {}
        origin = str(data.get("origin", ""))
        return cls(data["name"], keys, texts("groups"), texts("addrs"), origin=origin)


class SourceFailed(Exception):
    """A source could not be read at all (the program failed or hung, its output is not
    what the source speaks): one line saying why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class SourceStatus:
    """What one source gave this time: its hosts, the lines about hosts it could not use, and
    whether it failed (then `hosts` are its last good answer, from `cached_at`)."""

    spec: InventorySpec
    hosts: list[Found] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    error: str | None = None  # the source failed (or returned nothing, or fell too far)
    cached_at: str | None = None  # ISO instant of the last good answer used instead
    age_s: float | None = None

    @property
    def label(self) -> str:
        return self.spec.label


def host_name_problem(name: Any) -> str | None:
    """Why `name` cannot be a fleetcheck host name (None when it can)."""
    if not isinstance(name, str) or not name:
        return "an empty name"
    if len(name) > MAX_HOST_NAME:
        return f"a name of {len(name)} characters (at most {MAX_HOST_NAME})"
    if not SAFE_NAME.fullmatch(name):
        return f"{name!r} is not a host name fleetcheck can use ({SAFE_NAME_TEXT})"
    return None


def group_name(raw: str) -> str | None:
    """A source's group name as a fleetcheck group (None when it cannot be one)."""
    return raw if SAFE_NAME.fullmatch(raw) and len(raw) <= MAX_HOST_NAME else None


def var_keys(name: str, variables: dict[str, Any], problems: list[str], label: str) -> dict:
    """The host keys its variables set: `fleetcheck_KEY = VALUE` is `KEY = VALUE`
    (the loader validates them like any [[hosts]] key)."""
    keys: dict[str, Any] = {}
    for var, value in variables.items():
        if isinstance(var, str) and var.startswith(VAR_PREFIX) and len(var) > len(VAR_PREFIX):
            key = var[len(VAR_PREFIX) :]
            if key in ("name", "groups"):
                problems.append(f"{label}: host {name}: {var}: not a key a variable can set")
                continue
            keys[key] = value
    return keys


def select(spec: InventorySpec, hosts: list[Found]) -> list[Found]:
    """`match` applied, the source's own `groups` added."""
    out = []
    for h in hosts:
        if spec.match is not None and not fnmatch.fnmatchcase(h.name, spec.match):
            continue
        for g in spec.groups:
            if g not in h.groups:
                h.groups.append(g)
        out.append(h)
    return out


def merge(statuses: list[SourceStatus], raw_hosts: list[Any]) -> tuple[list[Any], dict[str, Found]]:
    """The `[[hosts]]` list with every source's hosts merged in: sources in order (a later
    value wins key by key), then hosts.toml's table of the same name over them; groups joined
    (hosts.toml's first, then the sources'). Returns the raw host tables (hosts.toml's order,
    then new names in the order the sources report them) and {name: the merged Found}."""
    merged: dict[str, Found] = {}
    for st in statuses:
        for h in st.hosts:
            have = merged.get(h.name)
            if have is None:
                merged[h.name] = Found(
                    h.name, dict(h.keys), list(h.groups), list(h.addrs), dict(h.vars), h.origin
                )
                continue
            have.keys.update(h.keys)
            have.groups += [g for g in h.groups if g not in have.groups]
            have.addrs += [a for a in h.addrs if a not in have.addrs]
            have.origin = f"{have.origin}; {h.origin}" if h.origin else have.origin
    for each in merged.values():
        # the addresses a source reports are where the machine connects from, unless a
        # variable or its [[hosts]] table says otherwise (`addrs`)
        if each.addrs and "addrs" not in each.keys:
            each.keys["addrs"] = list(each.addrs)
    out: list[Any] = []
    seen: set[str] = set()
    for table in raw_hosts:
        name = table.get("name") if isinstance(table, dict) else None
        found = merged.get(name) if isinstance(name, str) else None
        if found is None:
            out.append(table)
            continue
        seen.add(found.name)
        joined = dict(found.keys)
        joined.update(table)
        own = table.get("groups", [])
        if isinstance(own, list):
            joined["groups"] = list(own) + [g for g in found.groups if g not in own]
        out.append(joined)
    for name, found in merged.items():
        if name not in seen:
            out.append({"name": name, **found.keys, "groups": list(found.groups)})
    return out, merged
