"""The files a config names (`config check` verifies this machine can read them) and a host's
effective settings with where each comes from."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

from fleetcheck.config.builder import hints_of
from fleetcheck.config.tables import FleetConfig, HostConfig
from fleetcheck.config.values import LOCAL_FILE


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
    hints = hints_of(type(value))
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
                    and f.name in ("user", "port", "groups", "identity_file", "proxy_jump")
                    and f.name not in host.sources
                ):
                    continue
                out.append((f.name, getattr(part, f.name), host.sources.get(f.name, "")))
    return out
