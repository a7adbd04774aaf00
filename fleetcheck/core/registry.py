"""Which checks exist: the built-in modules of fleetcheck.checks plus third-party ones from the
entry-point group `fleetcheck.checks` (one that fails to load is a warning, never a crash;
built-ins win over plugins of the same name).

A patrol imports only the checks its config names (`find`), and reads the entry points only
for a name no built-in has. A built-in package may declare its settings types in its
`__init__` (`CONFIG_TYPE`, `HOST_CONFIG_TYPE`) and put the check (`CHECK`) in its `check`
module, so validating a config does not import the checks' probes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Collection, Iterable
from functools import cache
from typing import Any

from fleetcheck.core import stderr
from fleetcheck.core.check import Check, CheckCommand

ENTRY_POINT_GROUP = "fleetcheck.checks"


def _builtin_names() -> list[str]:
    import pkgutil

    import fleetcheck.checks as package

    modules = pkgutil.iter_modules(package.__path__)
    return sorted(info.name for info in modules if not info.name.startswith("_"))


def _module(name: str) -> Any:
    """The module of built-in check `name` imported, or None when there is none."""
    module_name = f"fleetcheck.checks.{name}"
    if not name.isidentifier() or name.startswith("_"):
        return None
    if module_name not in sys.modules and importlib.util.find_spec(module_name) is None:
        return None
    return importlib.import_module(module_name)


@cache
def builtin(name: str) -> Check | None:
    """The built-in check of that module name, or None (its module is imported only here)."""
    module = _module(name)
    if module is not None and "CHECK" not in vars(module) and "CONFIG_TYPE" in vars(module):
        module = importlib.import_module(f"{module.__name__}.check")  # the check in `.check`
    check = getattr(module, "CHECK", None)
    return check if isinstance(check, Check) else None


@cache
def _declared_types(name: str) -> tuple[type, type | None] | None:
    """(settings type, per-host settings type) of built-in check `name` as its package declares
    them without the check (see above), or None (then the check is asked)."""
    module = _module(name)
    if module is None:
        return None
    declared = vars(module)
    config_type = declared.get("CONFIG_TYPE")
    if not isinstance(config_type, type):
        return None
    host_type = declared.get("HOST_CONFIG_TYPE")
    return config_type, host_type if isinstance(host_type, type) else None


@cache
def plugins() -> dict[str, Check]:
    """Third-party checks by their own name (the entry points are read here, once)."""
    from importlib.metadata import entry_points

    found: dict[str, Check] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            check = obj() if isinstance(obj, type) else obj
            if not isinstance(check, Check):
                raise TypeError("not a fleetcheck Check")
        except Exception as e:  # a broken plugin must not take the patrol down
            stderr.warn(f"check plugin {ep.name!r} not loaded: {e}")
            continue
        found.setdefault(check.name, check)
    return found


@cache
def builtins() -> dict[str, Check]:
    """Every check of fleetcheck.checks (what this repository's docs describe)."""
    found: dict[str, Check] = {}
    for name in _builtin_names():
        check = builtin(name)
        if check is not None:
            found[check.name] = check
    return found


@cache
def available() -> dict[str, Check]:
    """Every check, built-in and third-party (for listings)."""
    found = dict(builtins())
    for name, check in plugins().items():
        found.setdefault(name, check)
    return found


def find(name: str) -> Check | None:
    """The check called `name`, importing as little as possible; None when there is none."""
    check = builtin(name)
    if check is not None and check.name == name:
        return check
    for module in _builtin_names():  # a built-in named otherwise than its module
        if _declared_types(module) is not None:  # named as its module (a contract test)
            continue
        check = builtin(module)
        if check is not None and check.name == name:
            return check
    return plugins().get(name)


def select(names: Iterable[str]) -> dict[str, Check]:
    """{name: check} for those of `names` that exist (the unknown ones are left out, for the
    caller's own error message)."""
    out: dict[str, Check] = {}
    for name in names:
        check = find(name)
        if check is not None:
            out[name] = check
    return out


def _types(name: str) -> tuple[type, type | None] | None:
    """(settings type, per-host settings type) of check `name` (None: no such check),
    importing the check itself only when its package does not declare them apart."""
    declared = _declared_types(name)
    if declared is not None:
        return declared
    check = find(name)
    return (check.config_type, check.host_config_type) if check else None


def config_type(name: str) -> type | None:
    """The settings type of check `name` (None: no such check)."""
    types = _types(name)
    return types[0] if types else None


def host_config_types(names: Collection[str] | None = None) -> dict[str, type]:
    """{check name: its per-host settings type} for `names` (None: every check, plugins too)."""
    if names is None:
        checks = available()
        return {n: c.host_config_type for n, c in checks.items() if c.host_config_type is not None}
    found = {name: _types(name) for name in names}
    return {name: t[1] for name, t in found.items() if t is not None and t[1] is not None}


# ------------------------------------------------------------ commands checks add to the CLI
def check_command(name: str) -> CheckCommand | None:
    """The declaration of check command `name` (importing only the module that declares it;
    for a name no built-in declares, the plugins' modules); None when no check has it."""
    from fleetcheck.core.command_index import command_listing

    listed = command_listing().get(name)
    modules = [listed[1]] if listed else [type(c).__module__ for c in plugins().values()]
    for module in modules:
        for cmd in getattr(importlib.import_module(module), "COMMANDS", ()):
            if isinstance(cmd, CheckCommand) and cmd.name == name:
                return cmd
    return None


# ------------------------------------------------------------ what checks declare for the framework
def declared(attr: str, names: Iterable[str] | None = None) -> list[tuple[str, Any]]:
    """(check name, declaration) for each of the declarations `attr` ("clues", "causes",
    "peer_metrics", "correlations", "charts": fleetcheck.core.declarations) of the checks
    called `names`, in the order given (None: every check, by name), each check's in its own
    order. A name no check has declares nothing."""
    checks = available() if names is None else select(dict.fromkeys(names))
    return [(name, d) for name, check in checks.items() for d in getattr(check, attr, ())]
