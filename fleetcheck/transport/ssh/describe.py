"""`fleetcheck config check --ssh`: what each host's `ssh` value resolves to (user, address,
port, jump chain or ProxyCommand, key files, known_hosts files, timeout), so an operator can
see why a host is reached the way it is before anything connects."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from fleetcheck.core.errors import TransportError
from fleetcheck.core.safe_text import printable
from fleetcheck.transport.ssh.connect import Connector
from fleetcheck.transport.ssh.hostkeys import known_hosts_paths

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig


def describe_targets(fleet: FleetConfig) -> tuple[str, bool]:
    """`fleetcheck config check --ssh`: every SSH host's resolved target, one block each,
    and whether all resolved. Nothing is connected and no name is looked up."""
    conn = Connector(fleet.ssh)
    lines = [f"ssh targets (ssh_config {fleet.ssh.config_file}; nothing connected):"]
    ok = True
    for h in fleet.hosts:
        if h.ssh is None or h.is_local:
            lines.append(f"  {h.name}: {'local' if h.is_local else 'no ssh'}")
            continue
        try:
            t = conn.target(h)
        except TransportError as e:
            ok = False
            lines.append(f"  {h.name}: cannot resolve {h.ssh!r}: {e.reason}")
            continue
        lines.append(f"  {h.name}: {t.user}@{t.hostname} port {t.port}")
        if t.via:
            lines.append("      jump chain: " + " -> ".join(j.label for j in t.via) + " -> here")
        elif t.proxy_command:
            lines.append(f"      proxy command: {t.proxy_command}")
        keys = [k + ("" if os.path.exists(k) else " (missing)") for k in t.identity_files]
        agent = fleet.ssh.use_agent and not t.identities_only
        lines.append(
            "      key files: " + (", ".join(keys) or "none") + ("; agent" if agent else "")
        )
        files = known_hosts_paths(fleet.ssh, t)
        shown = [f + ("" if os.path.exists(f) else " (missing)") for f in files]
        alias = f" (as {t.known_hosts_name})" if t.host_key_alias else ""
        lines.append(f"      known_hosts{alias}: " + ", ".join(shown))
        accept = fleet.ssh.accept_new or t.accept_new
        timeout = t.connect_timeout or fleet.ssh.connect_timeout
        lines.append(
            f"      connect timeout {timeout:g}s; unknown host keys "
            + ("added (accept-new)" if accept else "refused")
        )
    # ssh_config values (a ProxyCommand, a HostName) and resolution errors are printed as
    # read: made safe line by line, the block's own line breaks kept
    return "\n".join(printable(line) for line in lines), ok
