"""The values ssh_config resolution deals in: a config line, a resolved host, the one error
type, and the permission rule every file read must pass.

Why apart from the reader: they are plain data (and one stat), shared by the reader
(ssh_config.py), its callers (ssh/target.py, discover.py) and the differential tests, and
keeping them here keeps the reader under one screenful of concerns."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field


class SshConfigError(ValueError):
    """A config line we cannot honour; the message names the file and line."""


@dataclass(frozen=True)
class Line:
    keyword: str  # lower case
    args: tuple[str, ...]
    file: str
    lineno: int
    rest: str = ""  # the text after the keyword, as ssh hands it to Match/ProxyCommand
    error: str | None = None  # why ssh refuses this line before looking at its keyword
    known: bool = True  # a keyword of OpenSSH 9.2
    refusal: str | None = None  # why ssh refuses its arguments (checked once per file change)

    @property
    def where(self) -> str:
        return f"{self.file} line {self.lineno}"


@dataclass(frozen=True)
class Resolved:
    """What ssh would use for one host argument (like `ssh -G`), tokens not yet expanded in
    `identity_files_raw` (as `ssh -G` prints them) and expanded everywhere else."""

    host: str  # the argument as given (ssh -G's `host`)
    hostname: str
    user: str
    port: int
    identity_files_raw: tuple[str, ...]  # as written (ssh -G shows them so)
    identity_files: tuple[str, ...]  # ~, tokens and ${VAR} expanded
    identity_files_set: bool  # False: OpenSSH's default list
    identities_only: bool
    proxy_jump: str | None  # as ssh -G prints it, e.g. "j1,alice@j2:2222"
    proxy_command: str | None
    connect_timeout: float | None
    host_key_alias: str | None  # lower-cased, as ssh uses it
    user_known_hosts: tuple[str, ...]  # expanded; ("none",) for none
    user_known_hosts_set: bool
    global_known_hosts: tuple[str, ...]
    strict_host_key_checking: str  # true, false, ask, accept-new
    user_set: bool = False  # by the command line or the file (not the local default)
    port_set: bool = False
    server_alive_interval: int = 0
    server_alive_count_max: int = 3
    sources: tuple[str, ...] = field(default=(), compare=False)  # files read
    # (keyword, where, value as written) of Ciphers / MACs / KexAlgorithms, first value each
    crypto: tuple[tuple[str, str, str], ...] = ()

    @property
    def jumps(self) -> tuple[str, ...]:
        if not self.proxy_jump or self.proxy_jump.lower() == "none":
            return ()
        return tuple(j.strip() for j in self.proxy_jump.split(",") if j.strip())


def check_permissions(path: str, where: str) -> os.stat_result | None:
    """readconf.c's check for ~/.ssh/config and every Included file: owned by root or by us,
    and not writable by group or others. Otherwise anyone who can write it could make the
    patrol run a ProxyCommand: ssh stops with "Bad owner or permissions", and so do we.
    Returns the file's stat (None when it cannot be stat'ed: opening it tells why)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if (st.st_uid not in (0, os.getuid())) or (st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)):
        raise SshConfigError(
            f"{where}: Bad owner or permissions on {path} (owner uid {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):04o}; ssh refuses it: make it yours and chmod go-w)"
        )
    return st
