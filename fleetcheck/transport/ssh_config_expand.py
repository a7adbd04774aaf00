"""The expansions OpenSSH 9.2 applies to ssh_config values: `~`, `%` tokens and `${VAR}`.

Why its own module: which keyword gets which expansion, in which order, and what an
undefined variable does decides which file the patrol reads keys and known_hosts from; the
rules are misc.c's tilde_expand and vdollar_percent_expand, kept in one place so
ssh_config.py applies them the same way everywhere."""

from __future__ import annotations

import pwd
import socket
from collections.abc import Mapping

from fleetcheck.transport.ssh_config_model import SshConfigError


def expand_tilde(path: str, home: str, where: str = "") -> str:
    """misc.c tilde_expand: `~` and `~/x` are the home directory (with a trailing slash for a
    bare `~`), `~user/x` that user's; an unknown user is refused (SshConfigError, after
    `where`), as ssh refuses it."""
    if not path.startswith("~"):
        return path
    rest = path[1:]
    if rest == "" or rest.startswith("/"):
        base = home
        tail = rest.lstrip("/")
    else:
        name, slash, tail = rest.partition("/")
        tail = tail.lstrip("/") if slash else ""
        try:
            base = pwd.getpwnam(name).pw_dir
        except KeyError:
            prefix = f"{where}: " if where else ""
            raise SshConfigError(f"{prefix}no such user {name!r} in {path!r}") from None
    return base + ("" if base.endswith("/") else "/") + tail


def percent_expand(
    text: str,
    tokens: Mapping[str, str],
    where: str = "",
    env: Mapping[str, str] | None = None,
) -> str:
    """%-tokens (and `${VAR}` when `env` is given) as vdollar_percent_expand: `%%` is %, an
    unknown token, a trailing %, an unclosed `${` or an undefined variable is refused."""
    out: list[str] = []
    i = 0
    prefix = f"{where}: " if where else ""
    while i < len(text):
        c = text[i]
        if env is not None and text.startswith("${", i):
            end = text.find("}", i + 2)
            if end < 0:
                raise SshConfigError(f"{prefix}environment variable in {text!r} misses its '}}'")
            name = text[i + 2 : end]
            if not name:
                raise SshConfigError(f"{prefix}zero-length environment variable in {text!r}")
            if name not in env:
                raise SshConfigError(f"{prefix}environment variable ${{{name}}} is not set")
            out.append(env[name])
            i = end + 1
            continue
        if c != "%":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(text):
            raise SshConfigError(f"{prefix}invalid trailing % in {text!r}")
        t = text[i + 1]
        if t == "%":
            out.append("%")
        elif t in tokens:
            out.append(tokens[t])
        else:
            raise SshConfigError(f"{prefix}unknown token %{t} in {text!r}")
        i += 2
    return "".join(out)


def canonical_address(host: str) -> str | None:
    """The numeric form ssh gives an address it is handed (`10.1` is 10.0.0.1, `FE80::1`
    fe80::1), without any name lookup; None when `host` is not an address."""
    if ":" not in host and host.strip("0123456789.xXabcdefABCDEF"):
        return None  # cannot be an address (spares the call for every name)
    try:
        infos = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError, ValueError):
        return None
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            name, _ = socket.getnameinfo(sockaddr, socket.NI_NUMERICHOST | socket.NI_NUMERICSERV)
            return name
    return None
