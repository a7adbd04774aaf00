"""`config discover`'s alias step: which ssh_config `Host` alias names a broker client's address.

Resolving an alias runs its `Match exec` commands (each up to 10 s), so with many aliases this
step alone could outlast the command's deadline. Every exec is bounded by what is left of that
deadline, and aliases not resolved by then are named to the caller: the step only suggests
names, so it is cut short rather than waited for.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from fleetcheck.parse.clientlist import normalise_ip
from fleetcheck.transport.ssh_config import Resolver, tokenize


def _aliases_in_order(main: str) -> list[str]:
    """Every `Host` alias of `main` and its Includes, in file order (at most 64 files)."""
    import glob

    home = os.path.expanduser("~")
    order: list[str] = []
    files: list[str] = [main]
    seen: set[str] = set()
    while files and len(seen) < 64:
        current = files.pop(0)
        if current in seen:
            continue
        seen.add(current)
        try:
            lines = tokenize(current)
        except (OSError, ValueError):
            continue
        for line in lines:
            if line.keyword == "host":
                order += [a for a in line.args if a not in order]
            elif line.keyword == "include":
                for arg in line.args:
                    base = os.path.expanduser(arg) if arg.startswith(("/", "~")) else arg
                    if not base.startswith("/"):
                        base = f"{home}/.ssh/{arg}"
                    files += sorted(glob.glob(base))
    return order


def ssh_aliases(
    path: str,
    addrs: Iterable[str],
    until: float | None = None,
    unresolved: list[str] | None = None,
) -> dict[str, str]:
    """addr -> the first `Host` alias (no wildcards, in file order, Includes followed) that
    resolves, as `ssh -G` would resolve it (fleetcheck.transport.ssh_config), to a HostName that
    is one of `addrs`. An unreadable file or entry is skipped: this only suggests names.

    With `until` (a time.monotonic() instant) the work ends there: the aliases not resolved
    by then are appended to `unresolved` (when given) and the answer is what was found."""
    wanted = set(addrs)
    main = os.path.expanduser(path)
    if not os.path.isfile(main):
        return {}
    res = Resolver(main)
    res.until = until
    out: dict[str, str] = {}
    candidates = [a for a in _aliases_in_order(main) if a and not any(ch in a for ch in "*?!")]
    for i, alias in enumerate(candidates):
        if until is not None and time.monotonic() >= until:
            if unresolved is not None:
                unresolved += candidates[i:]
            break
        try:
            hostname = res.resolve(alias).hostname
        except (OSError, ValueError):  # e.g. a Match criterion the reader refuses
            continue
        finally:
            cut, res.cut = res.cut, False
        if cut:  # a Match exec was ended at the deadline: this answer is not ssh's
            if unresolved is not None:
                unresolved += candidates[i:]
            break
        addr = normalise_ip(hostname)
        if addr in wanted and addr != alias:
            out.setdefault(addr, alias)
    return out
