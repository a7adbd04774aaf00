"""The SSH transport: paramiko connections, strict about host keys, shared through jump hosts.

Invariants (each tested against a real OpenSSH sshd):
- Every stage of connecting shares ONE budget, enforced by a watchdog that closes the socket:
  a frozen sshd costs exactly that long. Each failure is one precise line; a CHANGED or
  REVOKED host key is CRIT and never connects.
- Host keys and ssh_config are read as OpenSSH reads them (known_hosts.py, ssh_config.py).
- One shared connection per jump host per patrol, at most JUMP_HANDSHAKES handshakes at once.
- A command runs as `/bin/sh -s` with the script on stdin (the login shell never parses it),
  under a hard monotonic deadline and a byte bound.
- TCP_NODELAY, and TCP_QUICKACK re-armed after reads: sshd's two small packets after auth
  would otherwise wait ~40 ms per host for our delayed ACK.
paramiko is imported inside functions: `fleetcheck --help` must not pay for it.

One module per concern, in the order a connect goes through them:
  target     where and as whom (hosts.toml, ssh_config, [ssh] merged); describe: what
             `config check --ssh` prints about it
  budget     one deadline for all stages, and the watchdog thread that enforces deadlines
  connect    the patrol's Connector: targets once, shared jump hosts, hosts in flight
  streams    TCP, ProxyCommand and jump-host tunnels the handshake runs over
  handshake  banner, key exchange, throttled handshakes retried
  hostkeys   known_hosts, revoked keys, host certificates, accept-new
  auth       key files and the agent
  session    SshShell: one command under a deadline and a byte bound
  lazy, util paramiko imported once; quiet closing and one-line errors
This package exports what the rest of fleetcheck uses."""

from __future__ import annotations

from fleetcheck.transport.limiter import fd_bound
from fleetcheck.transport.ssh.budget import Budget
from fleetcheck.transport.ssh.connect import JUMP_HANDSHAKES, Connector, open_shell
from fleetcheck.transport.ssh.describe import describe_targets
from fleetcheck.transport.ssh.session import SshShell, StaleConnection
from fleetcheck.transport.ssh.target import (
    Target,
    load_ssh_config,
    resolve_target,
    split_destination,
)

__all__ = [
    "JUMP_HANDSHAKES",
    "Budget",
    "Connector",
    "SshShell",
    "StaleConnection",
    "Target",
    "describe_targets",
    "fd_bound",
    "load_ssh_config",
    "open_shell",
    "resolve_target",
    "split_destination",
]
