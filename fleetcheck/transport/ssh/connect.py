"""Connecting a host: its target resolved once per patrol, jump hosts shared (one
authenticated connection per jump host per patrol, what ControlMaster gives, at most
JUMP_HANDSHAKES handshakes through it at once), the adaptive limit on hosts in flight, and
what the operator should hear about (slow-downs, throttled handshakes).

Every stage of one connect shares one Budget: a frozen sshd or jump host costs exactly the
connect timeout, and the failure is one precise line."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from fleetcheck.core.errors import HOST_UNREACHABLE, TransportError
from fleetcheck.core.model import Status
from fleetcheck.transport.limiter import AdaptiveLimiter, fd_bound
from fleetcheck.transport.ssh.budget import Budget
from fleetcheck.transport.ssh.handshake import connect_one
from fleetcheck.transport.ssh.hostkeys import known_keys, verify_host_key
from fleetcheck.transport.ssh.lazy import load_paramiko, quiet_paramiko_logging
from fleetcheck.transport.ssh.session import SshShell
from fleetcheck.transport.ssh.streams import direct_tcpip, proxy_command
from fleetcheck.transport.ssh.target import Target, load_ssh_config, resolve_target
from fleetcheck.transport.ssh.util import describe, quiet_close

if TYPE_CHECKING:
    from fleetcheck.config import HostConfig, SshConfig

JUMP_HANDSHAKES = 8  # per jump host at once: below stock sshd's MaxStartups 10
MAX_JUMP_LOGINS = 4  # a shared jump connection that dies is re-established at most 3 times


class _Jump:
    """One jump host's shared connection for the patrol (what ControlMaster gives)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.transport: Any = None
        self.error: TransportError | None = None
        self.logins = 0
        self.handshakes = threading.BoundedSemaphore(JUMP_HANDSHAKES)


def behind_jump(e: TransportError, jump: Target, entry: _Jump) -> TransportError:
    """A host's failure because its jump host failed: the jump host is the cause every host
    behind it shares (one grouped problem, not a row per host), worded the same for each of
    them. The hosts themselves were not seen: a jump host gone from the network makes them
    "could not look" (UNKNOWN, not the CRIT of a host that does not answer), and nothing
    about them is marked unreachable; a refusal at the jump host (its key changed, say)
    keeps its own status."""
    why = (
        entry.error.reason
        if entry.error is not None
        else "no connection within its connect timeout"
    )
    cause = f"jump host {jump.alias} ({jump.hostname}:{jump.port}): {why}"
    status = e.status
    if isinstance(e.evidence, dict) and HOST_UNREACHABLE in e.evidence:
        status = Status.UNKNOWN
    return TransportError(e.reason, status, cause=cause)


class Connector:
    """A patrol's SSH side: targets resolved once, one shared connection per jump host, the
    adaptive limit on hosts in flight, and what the operator should hear about (slow-downs,
    throttled handshakes). Close it at the end of the patrol (closes the jump connections).

    The public surface: `target(host)`, `open(host)`, `limiter`, `notes()`, `close()`.
    """

    def __init__(self, cfg: SshConfig, concurrency: int = 1024, adaptive: bool = True) -> None:
        self.cfg = cfg
        self._lock = threading.Lock()
        self._jumps: dict[Target, _Jump] = {}
        self._resolver: Any = None
        self._targets: dict[tuple[Any, ...], Target | TransportError] = {}
        self.throttled = 0  # handshakes retried after the server dropped them
        self.closed = False
        self.limiter = AdaptiveLimiter(max_limit=min(concurrency, fd_bound()), adaptive=adaptive)

    # ------------------------------------------------------------ resolving
    def target(self, host: HostConfig) -> Target:
        if host.ssh is None:
            raise TransportError(f"{host.name}: no ssh configured")
        key = (host.ssh, host.user, host.port, host.identity_file, host.proxy_jump)
        with self._lock:
            hit = self._targets.get(key)
        if hit is None:
            try:
                if self._resolver is None:
                    self._resolver = load_ssh_config(self.cfg.config_file)
                hit = resolve_target(
                    host.ssh,
                    self.cfg,
                    self._resolver,
                    host.user,
                    host.port,
                    identity_file=host.identity_file,
                    jump=host.proxy_jump,
                )
            except TransportError as e:
                hit = e
            with self._lock:
                self._targets[key] = hit
        if isinstance(hit, TransportError):
            raise TransportError(hit.reason, hit.status)
        return hit

    def reusable(self, host: HostConfig, shell: SshShell) -> bool:
        """Whether a connection kept from an earlier round may serve `host` in this one: the
        host still resolves to the same target (ssh_config, read anew each patrol, may have
        moved it: another HostName, port, user, jump, identity or known_hosts file), and the
        key that server showed still passes known_hosts as the files are now (a key revoked
        or replaced there since must not ride on an old connection). False: close it and
        connect anew, which says precisely what is wrong, if anything."""
        try:
            target = self.target(host)
            if target != shell.target:
                return False
            key = shell.transport.get_remote_server_key()
            verify_host_key(target, self.cfg, known_keys(self.cfg, target), key, target.label)
        except Exception:
            return False
        return True

    # ------------------------------------------------------------ connecting
    def open(self, host: HostConfig) -> SshShell:
        """Connect to `host` and return its shell; one precise TransportError otherwise."""
        load_paramiko()  # fail early and clearly if it is missing
        quiet_paramiko_logging()
        target = self.target(host)
        start = time.monotonic()
        budget = Budget(target.connect_timeout or self.cfg.connect_timeout)
        try:
            t = self._connect(target, budget)
        finally:
            budget.done()
        if self.closed:  # the patrol ended while we connected: never leak it
            quiet_close(t)
            raise TransportError("patrol already over")
        shell = SshShell(target, [t])
        shell.connect_s = time.monotonic() - start
        return shell

    def _connect(self, target: Target, budget: Budget) -> Any:
        try:
            if target.via:
                jump = target.via[-1]
                entry = self._jump_entry(jump)
                try:
                    jt = self._jump_transport(jump, budget)
                    if not entry.handshakes.acquire(timeout=budget.left()):
                        raise budget.timeout_error()
                except TransportError as e:
                    raise behind_jump(e, jump, entry) from None
                try:
                    chan = direct_tcpip(jt, (target.hostname, target.port), budget, jump.alias)
                    return self._handshake(target, budget, chan)
                finally:
                    entry.handshakes.release()
            sock = proxy_command(target, budget) if target.proxy_command else None
            return self._handshake(target, budget, sock)
        except TransportError:
            raise
        except Exception as e:
            if budget.expired:
                raise budget.timeout_error() from None
            raise TransportError(f"ssh to {target.label} failed: {describe(e)}") from None

    def _jump_entry(self, jump: Target) -> _Jump:
        with self._lock:
            entry = self._jumps.get(jump)
            if entry is None:
                entry = self._jumps[jump] = _Jump()
            return entry

    def _jump_transport(self, jump: Target, budget: Budget) -> Any:
        """The shared, authenticated connection to `jump` (connected by the first caller;
        the others wait for it within their own budget)."""
        entry = self._jump_entry(jump)
        if not entry.lock.acquire(timeout=budget.left()):
            raise budget.timeout_error()
        try:
            t = entry.transport
            if t is not None and t.is_active():
                return t
            if entry.error is not None:
                raise TransportError(entry.error.reason, entry.error.status)
            if entry.logins >= MAX_JUMP_LOGINS:
                raise TransportError(f"jump host {jump.alias}: connection lost too often")
            if self.closed:
                raise TransportError("patrol already over")
            role = f"jump host {jump.alias}"
            own = Budget(jump.connect_timeout or self.cfg.connect_timeout)
            try:
                if jump.via:
                    parent = self._jump_transport(jump.via[-1], own)
                    sock = direct_tcpip(parent, (jump.hostname, jump.port), own, jump.via[-1].alias)
                else:
                    sock = proxy_command(jump, own) if jump.proxy_command else None
                entry.logins += 1
                t = self._handshake(jump, own, sock, role)
            except TransportError as e:
                if not own.expired:
                    entry.error = e  # a refusal is the same for every host behind it
                raise
            except Exception as e:
                if own.expired:
                    raise own.timeout_error() from None
                raise TransportError(f"{role} failed: {describe(e)}") from None
            finally:
                own.done()
            entry.transport = t
            return t
        finally:
            entry.lock.release()

    def _handshake(self, target: Target, budget: Budget, sock: Any, role: str | None = None) -> Any:
        return connect_one(
            target, self.cfg, budget, sock, role=role, on_throttled=self._count_throttled
        )

    def _count_throttled(self) -> None:
        with self._lock:
            self.throttled += 1

    # ------------------------------------------------------------ reporting and closing
    def notes(self) -> list[str]:
        out = self.limiter.notes()
        if self.throttled:
            out.append(
                f"{self.throttled} SSH handshake(s) dropped by a busy sshd (MaxStartups?) "
                "were retried"
            )
        return out

    def close(self) -> None:
        with self._lock:
            self.closed = True
            jumps = list(self._jumps.values())
        for entry in reversed(jumps):
            if entry.transport is not None:
                quiet_close(entry.transport)


def open_shell(host: HostConfig, cfg: SshConfig, connector: Connector | None = None) -> SshShell:
    """Connect to `host` (its `ssh` value: address, alias or user@host:port) and return its
    shell. Without a patrol's `connector`, a private one is closed with the shell."""
    own = connector is None
    conn = connector or Connector(cfg)
    try:
        shell = conn.open(host)
    except BaseException:
        if own:
            conn.close()
        raise
    if own:
        shell._owned = conn
    return shell
