"""The service's environment file (`[patrol] environment_file`, default
/etc/default/fleetcheck), read by the CLI itself so `runuser -u fleetcheck -- fleetcheck run`,
the systemd unit (`EnvironmentFile=`) and the crontab line all see the same variables: the
broker password of `password_env`, the URLs of `[outputs] *_env`.

Read as systemd reads an EnvironmentFile: `KEY=VALUE` lines, `#` and `;` comment lines, blank
lines, single or double quotes around a value (backslash escapes inside double quotes), a
backslash at the end of a line continuing it. A variable already set in the environment wins
(as `Environment=` lines and the caller's own `env X=...` should). A line that is not an
assignment is one warning naming the file and line, never a crash; values are never printed
(they are secrets).
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Parsed:
    values: dict[str, str] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)  # (line number, why)


def _unquote(raw: str) -> tuple[str | None, str | None]:
    """(value, None) for the text after `=`, or (None, why) when a quote is left open."""
    out: list[str] = []
    i = 0
    raw = raw.strip()
    while i < len(raw):
        c = raw[i]
        if c == "'":
            end = raw.find("'", i + 1)
            if end < 0:
                return None, "a single quote is not closed"
            out.append(raw[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while True:
                if i >= len(raw):
                    return None, "a double quote is not closed"
                c = raw[i]
                if c == "\\" and i + 1 < len(raw):
                    nxt = raw[i + 1]
                    out.append(nxt if nxt in '"\\`$\n' else "\\" + nxt)
                    i += 2
                    continue
                if c == '"':
                    i += 1
                    break
                out.append(c)
                i += 1
        elif c == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out), None


def parse(text: str) -> Parsed:
    """The assignments of an environment file and its malformed lines (pure)."""
    parsed = Parsed()
    lines = text.splitlines()
    n = 0
    while n < len(lines):
        start = n + 1
        line = lines[n]
        n += 1
        while line.endswith("\\") and not line.endswith("\\\\") and n < len(lines):
            line = line[:-1] + lines[n]
            n += 1
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        key, sep, raw = stripped.partition("=")
        key = key.strip()
        if not sep:
            parsed.problems.append((start, "not a KEY=VALUE line, ignored"))
            continue
        if not NAME.fullmatch(key):
            parsed.problems.append((start, "the name before '=' is not a variable name, ignored"))
            continue
        value, why = _unquote(raw)
        if value is None:
            parsed.problems.append((start, f"{why}, ignored"))
            continue
        parsed.values[key] = value
    return parsed


def wanted(fleet: FleetConfig) -> list[str]:
    """The variables the config reads from the environment (password_env, [outputs] *_env)."""
    outputs = fleet.outputs
    names = [fleet.broker.password_env, *(outputs.alertmanager_env or ()), outputs.heartbeat_env]
    return [name for name in names if name]


def readable_fix(path: str) -> str:
    """The one command that lets this user read the file, run as root."""
    import grp

    try:
        group = grp.getgrgid(os.getgid()).gr_name
    except KeyError:
        group = str(os.getgid())
    return f"as root: chgrp {group} {path} && chmod 0640 {path}"


def load(path: str, names: list[str], environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Read `path` into the environment (variables already set win); the warnings to print.

    A missing file is no warning (the unit's `EnvironmentFile=-` reads it "if present"); an
    unreadable one is a warning only when a variable the config names is left unset by it."""
    env = os.environ if environ is None else environ
    if not path:
        return []
    try:
        raw = open(path, "rb").read()  # noqa: SIM115 (a small file, read whole)
    except FileNotFoundError:
        return []
    except IsADirectoryError:
        return [f"environment file {path}: is a directory, not read"]
    except OSError as e:
        missing = [n for n in names if not env.get(n)]
        if not missing:
            return []
        return [
            f"environment file {path}: cannot read ({e.strerror or e}), so "
            f"${missing[0]} is not set; {readable_fix(path)}"
        ]
    parsed = parse(raw.decode("utf-8", errors="replace"))
    for key, value in parsed.values.items():
        env.setdefault(key, value)
    return [f"environment file {path} line {line}: {why}" for line, why in parsed.problems]


def apply(fleet: FleetConfig) -> None:
    """Read the fleet's environment file into os.environ, warnings on stderr."""
    from fleetcheck.core.stderr import warn

    for line in load(fleet.patrol.environment_file, wanted(fleet)):
        warn(line)
