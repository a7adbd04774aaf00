"""Which checks exist: the built-in modules of fleetcheck.checks plus third-party ones from the
entry-point group `fleetcheck.checks`. A third-party check that fails to load is a warning,
never a crash."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from functools import cache

from fleetcheck.check import Check

ENTRY_POINT_GROUP = "fleetcheck.checks"


@cache
def available() -> dict[str, Check]:
    found: dict[str, Check] = {}
    import fleetcheck.checks as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"fleetcheck.checks.{info.name}")
        check = getattr(module, "CHECK", None)
        if isinstance(check, Check):
            found[check.name] = check
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            check = obj() if isinstance(obj, type) else obj
            if not isinstance(check, Check):
                raise TypeError("not a fleetcheck Check")
        except Exception as e:  # a broken plugin must not take the patrol down
            print(f"fleetcheck: warning: check plugin {ep.name!r} not loaded: {e}", file=sys.stderr)
            continue
        found.setdefault(check.name, check)
    return found


def config_type(name: str) -> type | None:
    check = available().get(name)
    return check.config_type if check else None
