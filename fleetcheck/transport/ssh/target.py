"""Where and as whom to connect: a host's `ssh` value resolved as OpenSSH resolves it.

hosts.toml's `ssh = "user@host:port"` acts like ssh's command line, ssh_config (read like
`ssh -F`, fleetcheck.transport.ssh_config) comes next, then `[ssh]`, then OpenSSH's defaults;
jump hosts become a chain of Targets. Nothing here connects or looks a name up, so
`config check --ssh` can show the result without touching the network."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetcheck.core.errors import TransportError

if TYPE_CHECKING:
    from fleetcheck.config import SshConfig

MAX_JUMPS = 4
DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")


@dataclass(frozen=True)
class Target:
    """Where and as whom to connect, after hosts.toml, ssh_config and [ssh] are merged.

    `via` is the chain of jump hosts, nearest first, each a Target itself (so a jump host's
    own ProxyJump is part of its `via`); equal Targets share one jump connection per patrol.
    """

    alias: str  # what the fleet config says (`ssh = ...`), for messages
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    proxy_command: str | None = None
    via: tuple[Target, ...] = ()
    host_key_alias: str | None = None
    user_known_hosts: tuple[str, ...] = ()  # from ssh_config; empty: [ssh] known_hosts
    global_known_hosts: tuple[str, ...] = DEFAULT_GLOBAL_KNOWN_HOSTS
    accept_new: bool = False  # ssh_config StrictHostKeyChecking accept-new
    identities_only: bool = False
    connect_timeout: float | None = None  # ssh_config ConnectTimeout (beats [ssh])
    # ssh_config Ciphers / MACs / KexAlgorithms: (keyword, where, value), applied by handshake
    crypto: tuple[tuple[str, str, str], ...] = ()

    @property
    def proxy_jump(self) -> tuple[str, ...]:
        return tuple(t.label for t in self.via)

    @property
    def known_hosts_name(self) -> str:
        """The name this host is looked up by in known_hosts, as OpenSSH does: a HostKeyAlias
        as it is, lower-cased and never with a port; otherwise `[host]:port` off port 22."""
        if self.host_key_alias:
            return self.host_key_alias.lower()
        h = self.hostname.lower()
        return h if self.port == 22 else f"[{h}]:{self.port}"

    @property
    def label(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


def split_destination(spec: str) -> tuple[str, str | None, int | None]:
    """'[user@]host[:port]', '[user@][v6addr]:port' or 'ssh://user@host:port' as
    (host, user, port); what ssh's command line would take from it."""
    s = spec.strip().removeprefix("ssh://")
    user = None
    if "@" in s:
        user, s = s.rsplit("@", 1)
    port = None
    if s.startswith("[") and "]" in s:
        inner, _, rest = s[1:].partition("]")
        if rest.startswith(":") and rest[1:].isascii() and rest[1:].isdigit():
            port = int(rest[1:])
        s = inner
    elif s.count(":") == 1:
        host_part, _, port_part = s.partition(":")
        if port_part.isascii() and port_part.isdigit():
            s, port = host_part, int(port_part)
    return s, user or None, port


def load_ssh_config(path: str) -> Any:
    """The ssh_config resolver for `path` (a missing file is an empty config)."""
    from fleetcheck.transport.ssh_config import resolver

    return resolver(path)


def resolve_target(
    alias: str,
    cfg: SshConfig,
    ssh_config: Any,
    user: str | None = None,
    port: int | None = None,
    _depth: int = 0,
    identity_file: str | None = None,
    jump: str | None = None,
) -> Target:
    """OpenSSH's precedence: what hosts.toml says for the host (`ssh = "user@host:port"`, its
    `user`, `port`) acts like ssh's command line and wins; then ssh_config (first value
    wins); then the fleet-wide `[ssh]` defaults; then OpenSSH's own defaults. A host's
    `identity_file` and `proxy_jump` (from an inventory) act like ssh's -i and -J."""
    from fleetcheck.transport.ssh_config import SshConfigError

    if _depth > MAX_JUMPS:
        raise TransportError(f"ProxyJump chain of {alias} longer than {MAX_JUMPS} hops (a loop?)")
    host, inline_user, inline_port = split_destination(alias)
    user = user or inline_user
    port = port or inline_port
    try:
        r = ssh_config.resolve(host, user=user, port=port)
    except SshConfigError as e:
        raise TransportError(f"ssh config: {e}") from None
    final_user = r.user if r.user_set else (cfg.user or r.user)
    final_port = r.port if r.port_set else (cfg.port or r.port)
    identity: list[str] = [str(Path(identity_file).expanduser())] if identity_file else []
    if r.identity_files_set:
        identity += r.identity_files
    if cfg.identity_file:
        identity.append(str(Path(cfg.identity_file).expanduser()))
    if not identity:  # OpenSSH's default keys, those that exist
        identity = [p for p in r.identity_files if os.path.exists(p)]
    via: tuple[Target, ...] = ()
    hops = r.jumps
    if jump is not None:  # ssh -J: the command line beats ProxyJump in ssh_config
        hops = () if jump.lower() == "none" else tuple(j for j in jump.split(",") if j.strip())
    if hops:
        first = resolve_target(hops[0], cfg, ssh_config, _depth=_depth + 1)
        chain = [*first.via, first]
        for spec in hops[1:]:
            h, u, p = split_destination(spec)
            hop = resolve_target(h, cfg, ssh_config, u, p, _depth=_depth + 1)
            chain.append(replace(hop, via=tuple(chain), proxy_command=None))
        if len(chain) > MAX_JUMPS:
            raise TransportError(f"ProxyJump chain of {alias} longer than {MAX_JUMPS} hops")
        via = tuple(chain)
    proxy_command = r.proxy_command if not via else None
    if proxy_command:
        # sshconnect.c expand_proxy_command: %h %k %n %p %r and %%; any other token refuses
        from fleetcheck.transport.ssh_config import percent_expand

        tokens = {
            "h": r.hostname,
            "k": r.host_key_alias or host,
            "n": host,
            "p": str(final_port),
            "r": final_user,
        }
        try:
            proxy_command = percent_expand(proxy_command, tokens, "ProxyCommand")
        except SshConfigError as e:
            raise TransportError(f"ssh config: {e}") from None
    return Target(
        alias=alias,
        hostname=r.hostname,
        port=final_port,
        user=final_user,
        identity_files=tuple(dict.fromkeys(identity)),
        proxy_command=proxy_command,
        via=via,
        host_key_alias=r.host_key_alias,
        user_known_hosts=r.user_known_hosts if r.user_known_hosts_set else (),
        global_known_hosts=tuple(r.global_known_hosts),
        accept_new=r.strict_host_key_checking == "accept-new",
        identities_only=r.identities_only,
        connect_timeout=r.connect_timeout,
        crypto=r.crypto,
    )
