"""A harness case: a known_hosts file (a template over fleet.Keys), the target host,
port, HostKeyAlias, jump host and StrictHostKeyChecking, and what the real OpenSSH 9.2
client does with them (asserted on every run, so the corpus cannot drift from the oracle).

Scenarios from OpenSSH's regress/cert-hostkey.sh, knownhosts.sh and keygen-knownhosts.sh,
sshd(8)'s SSH_KNOWN_HOSTS FILE FORMAT and the rules of hostfile.c / sshconnect.c /
sshconnect2.c (check_host_key, order_hostkeyalgs). `documented` marks a case where
fleetcheck refuses on purpose although ssh connects (it is strict: no TOFU); docs/ssh.md
lists each one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.ssh_diff_hostkeys.fleet import Keys

CONNECT, REFUSE = "connect", "refuse"
OTHER = "198.18.254.254"  # a name no lab host has


@dataclass(frozen=True)
class Case:
    id: str
    family: str
    known_hosts: Callable[[Keys], str]
    openssh: str  # what `ssh -o BatchMode=yes` does: CONNECT or REFUSE
    target: str = "multi"
    port: int = 22
    alias: str | None = None
    jump: bool = False
    strict: str = "yes"
    documented: str | None = None  # why fleetcheck refuses where ssh connects
    security: str | None = None  # the issue-23 security item this case pins


TOFU_NEW = "an unknown key is never trusted on first sight (no TOFU; `accept_new` adds it)"
TOFU_CHANGED = "a changed key is CRIT (ssh connects with password auth and forwarding off)"
TOFU_REVOKED = "a @revoked key is CRIT (ssh connects with password auth and forwarding off)"
