"""Finding hosts.toml and loading it: the top-level tables, each check's table, and each host
merged from [defaults] and its [groups.NAME] (a host's own value wins, then its groups in the
order it lists them, then [defaults])."""

from __future__ import annotations

import dataclasses
import os
import tomllib
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import fleetcheck.config.tables as tables
from fleetcheck.config.builder import (
    BARE_DURATIONS,
    build,
    convert,
    hints_of,
    kind_of,
    placed,
    top_key,
)
from fleetcheck.config.tables import FleetConfig, HostConfig
from fleetcheck.config.values import (
    MAX_HOST_NAME,
    SAFE_NAME,
    SAFE_NAME_TEXT,
    SEARCH_HINT,
    ConfigError,
    InvalidValue,
)


def find_config(explicit: str | None) -> Path:
    """The config file by precedence; ConfigError when none exists."""
    env = os.environ.get("FLEETCHECK_CONFIG")
    for given, whence in ((explicit, ""), (env, " (from $FLEETCHECK_CONFIG)")):
        if given:
            path = Path(given).expanduser()
            if not path.is_file():
                raise ConfigError(f"{given}: no such config file{whence}")
            return path
    for candidate in (Path("hosts.toml"), Path("~/.config/fleetcheck/hosts.toml").expanduser()):
        if candidate.is_file():
            return candidate
    raise ConfigError(f"no config file found (looked at {SEARCH_HINT})")


CheckConfigLookup = Callable[[str], type | None]
HostTypesLookup = Callable[[Collection[str] | None], Mapping[str, type]]
"""{check name: its host_config_type} for the named checks (None: every registered check)."""

TOP_LEVEL: tuple[str, ...] = ("broker", "ssh", "patrol", "defaults", "groups", "hosts")
TOP_LEVEL += ("inventory", "checks")
TOP_LEVEL += ("outputs", "notify", "serve", "silences")  # messages, the console's address, silences
NOT_SHARED = ("name", "groups")  # host keys [defaults] and [groups.NAME] cannot set
# the top-level tables built as they are, in the order their errors are found
TABLES: dict[str, type] = {
    "broker": tables.BrokerConfig,
    "ssh": tables.SshConfig,
    "patrol": tables.PatrolConfig,
    "outputs": tables.OutputsConfig,
    "notify": tables.NotifyConfig,
    "serve": tables.ServeConfig,
    "silences": tables.SilencesConfig,
}


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
    token = BARE_DURATIONS.set(bare)
    try:
        tops = {key: build(cls, data.get(key, {}), file, key) for key, cls in TABLES.items()}
        raw_checks = data.get("checks", {})
        if not isinstance(raw_checks, dict):
            raise ConfigError(f"{file}: checks: expected a table ([checks.NAME])")
        inventory = _read_inventory(data, file, tops["ssh"])
        hosts = _build_hosts(data, file, list(raw_checks), host_config_types, inventory)
        checks = _build_checks(raw_checks, file, check_config_type)
    finally:
        BARE_DURATIONS.reset(token)
    return FleetConfig(
        path=file,
        hosts=tuple(hosts),
        checks=checks,
        notes=tuple(dict.fromkeys(text for _, _, text in bare)),
        inventory=tuple(inventory),
        **tops,
    )


def _read_inventory(data: dict[str, Any], file: str, ssh: tables.SshConfig) -> list[Any]:
    """Each [[inventory]] table validated, then every source read (or its last good list)."""
    raw = data.get("inventory", [])
    if not isinstance(raw, list):
        raise ConfigError(f"{file}: inventory: expected an array of tables ([[inventory]])")
    if not raw:
        return []
    from fleetcheck.config.inventory import InventorySpec

    specs: list[InventorySpec] = []
    for i, table in enumerate(raw):
        if not isinstance(table, dict):
            raise ConfigError(f"{file}: [inventory[{i}]] must be a table, not {kind_of(table)}")
        spec = build(InventorySpec, table, file, f"inventory[{i}]")
        if any(s.label == spec.label for s in specs):
            raise ConfigError(
                f"{file}: [inventory[{i}]]: a second source {spec.label!r} (give it a name)"
            )
        specs.append(spec)
    from fleetcheck.config.inventory_cache import collect

    return collect(specs, file, ssh.config_file)


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
        for cls in (HostConfig, *self.types.values()):
            hints = hints_of(cls)
            for key in _key_fields(cls):
                self.hints.setdefault(key, []).append(hints[key])

    def known(self) -> str:
        checks = sorted(k for k in self.hints if k not in self.core)
        return ", ".join(self.core + checks)


def _build_hosts(
    data: dict[str, Any],
    file: str,
    enabled: list[str],
    host_types: HostTypesLookup,
    inventory: list[Any] | None = None,
) -> list[HostConfig]:
    raw_hosts = data.get("hosts", [])
    if not isinstance(raw_hosts, list):
        raise ConfigError(f"{file}: hosts: expected an array of tables ([[hosts]])")
    found: dict[str, Any] = {}
    own_count = len(raw_hosts)
    if inventory:
        from fleetcheck.config.inventory import merge

        raw_hosts, found = merge(inventory, raw_hosts)
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ConfigError(f"{file}: [defaults] must be a table, not {kind_of(defaults)}")
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
            raise ConfigError(f"{file}: [groups.{gname}] must be a table, not {kind_of(table)}")
        tables[f"groups.{gname}"] = table

    keys = _HostKeys(host_types(enabled))
    used = {k for t in tables.values() for k in t}
    used |= {k for h in raw_hosts if isinstance(h, dict) for k in h}
    for f in found.values():  # groups a source reports need no [groups.NAME] table
        for g in f.groups:
            tables.setdefault(f"groups.{g}", {})
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
                convert(value, hint, file, where, key)

    hosts: list[HostConfig] = []
    seen: dict[str, int] = {}
    for i, h in enumerate(raw_hosts):
        label = f"hosts[{i}]"
        name = h.get("name") if isinstance(h, dict) else None
        if isinstance(name, str) and len(name) <= MAX_HOST_NAME and SAFE_NAME.fullmatch(name):
            label = f"hosts[{i}] {h['name']}"
        if not isinstance(h, dict):
            raise ConfigError(f"{file}: [{label}] must be a table, not {kind_of(h)}")
        origin = found.get(name) if isinstance(name, str) else None
        if origin is not None:
            try:
                where = label if i < own_count else f"host {name} from {origin.origin}"
                host = _build_host(h, file, where, tables, keys)
            except ConfigError as e:
                if i < own_count:
                    raise  # a [[hosts]] table's own mistake stops the load as always
                _inventory_problem(inventory or [], origin.origin, f"{e}; left out")
                continue
            own = data["hosts"][i] if i < own_count else {}
            marked = {
                k: (origin.origin if k in origin.keys and k not in own else v)
                for k, v in host.sources.items()
            }
            host = dataclasses.replace(
                host,
                origin=origin.origin + (" and [[hosts]]" if own else ""),
                inventory_addrs=tuple(origin.addrs),
                sources=marked,
            )
        else:
            host = _build_host(h, file, label, tables, keys)
        if host.name in seen:
            raise ConfigError(
                f"{file}: [{label}] name: duplicate host name {host.name!r} "
                f"(also hosts[{seen[host.name]}])"
            )
        seen[host.name] = i
        hosts.append(host)
    return hosts


def _inventory_problem(inventory: list[Any], origin: str, line: str) -> None:
    """A host a source reports that the loader cannot use: one line on its source's status."""
    for status in inventory:
        if origin.startswith(status.label):
            status.problems.append(line)
            return
    if inventory:
        inventory[-1].problems.append(line)


def _build_host(
    h: dict[str, Any], file: str, label: str, tables: dict[str, Any], keys: _HostKeys
) -> HostConfig:
    unknown = sorted(set(h) - set(keys.hints))
    if unknown:
        raise ConfigError(
            f"{file}: [{label}] {unknown[0]}: unknown key (known keys: {keys.known()})"
        )
    joined = convert(h.get("groups", []), tuple[str, ...], file, label, "groups")
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
    bare = BARE_DURATIONS.get()
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
                raise ConfigError(placed(file, label, e, sources)) from None
    if bare is not None:  # echo a bare number once, where it was written
        bare[mark:] = [b for b in bare[mark:] if sources.get(top_key(b, label)) == "hosts"]
    return host
