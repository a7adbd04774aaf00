"""SSH connections kept between the rounds of one long-running process (`run --every`), so a
round does not pay every host's sshd a new key exchange and login.

Kept only while idle for at most `keep_for` (with SSH keepalives), a bounded number, and only
healthy ones: a connection whose exec timed out or was cut, whose transport died, or that runs
through a jump host is closed, never kept. A kept connection found dead is replaced within
the round, host key verified as for any new one.

On a kept connection every round's gathered script goes to one resident shell started in the
connection's first round (`Keeper.run`, fleetcheck.transport.ssh.resident), so the login
shell's start and its rc files are paid once per connection; a resident shell that is dead or
prints anything unframed is replaced by a fresh exec within the round."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from fleetcheck.config import HostConfig
from fleetcheck.transport.shell import ExecResult

DEFAULT_KEEPALIVE = 30.0  # seconds between SSH keepalives on an idle kept connection


def identity(host: HostConfig) -> tuple[Any, ...]:
    """What a kept connection was made for: the same host entry, the same destination."""
    return (host.name, host.ssh, host.user, host.port)


class Keeper:
    def __init__(
        self,
        keep_for: float,
        max_idle: int | None = None,
        keepalive: float = DEFAULT_KEEPALIVE,
        resident: bool = True,
    ) -> None:
        if max_idle is None:
            from fleetcheck.transport.limiter import fd_bound

            max_idle = max(1, fd_bound() // 2)  # the other half for the round's own needs
        self.keep_for = keep_for
        self.max_idle = max_idle
        self.keepalive = keepalive
        self.resident = resident  # False: one exec a round (the bench's before)
        self._lock = threading.Lock()
        self._idle: OrderedDict[tuple[Any, ...], tuple[float, Any]] = OrderedDict()
        self.closed = False
        # counts, for the bench and the tests
        self.reused = 0  # rounds that took a kept connection
        self.kept = 0  # connections handed back and kept
        self.dropped = 0  # handed back but closed (unhealthy, over the bound, or too old)
        self.replaced = 0  # kept connections found dead when used

    def take(self, host: HostConfig, usable: Callable[[Any], bool] | None = None) -> Any | None:
        """The host's kept connection (an SshShell), if one is idle, still fresh, alive, and
        `usable` (the round's own judgement: still where the host resolves, its key still
        passing known_hosts); one that is not is closed and counted as replaced."""
        now = time.monotonic()
        stale: list[Any] = []
        with self._lock:
            self._expire(now, stale)
            hit = self._idle.pop(identity(host), None)
        for shell in stale:
            _close(shell)
        if hit is None:
            return None
        shell = hit[1]
        alive = _active(shell) and (usable is None or usable(shell))
        with self._lock:
            if alive:
                self.reused += 1
            else:
                self.replaced += 1
        if not alive:
            _close(shell)
            return None
        shell.connect_s = None  # no handshake this round: nothing for the adaptive limiter
        return shell

    def give_back(self, host: HostConfig, shell: Any, healthy: bool) -> None:
        """Keep `shell` for the next round when it is healthy, kept connections are wanted
        and the bound leaves room; close it otherwise.

        Past the bound the connection handed back is the one closed, not the oldest idle
        one: rounds walk the fleet in one order, so dropping the oldest would close each
        kept connection just before its host's turn, and a fleet larger than the bound
        would reuse none."""
        keep = healthy and _active(shell) and not shell.target.via
        if keep:
            try:
                shell.transport.set_keepalive(int(max(1, self.keepalive)))
            except Exception:
                keep = False
        if not keep:
            with self._lock:
                self.dropped += 1
            _close(shell)
            return
        now = time.monotonic()
        out: list[Any] = []
        with self._lock:
            if self.closed:
                out.append(shell)
            else:
                old = self._idle.pop(identity(host), None)
                if old is not None:
                    out.append(old[1])
                if len(self._idle) < self.max_idle:
                    self._idle[identity(host)] = (now, shell)
                    self.kept += 1
                else:
                    out.append(shell)
                    self.dropped += 1
        for s in out:
            _close(s)

    def run(
        self,
        shell: Any,
        command: str,
        timeout: float,
        max_bytes: int,
        open_timeout: float | None = None,
    ) -> ExecResult:
        """`command` on `shell` as a round of this process runs it: on an SSH connection,
        through its resident shell (fleetcheck.transport.ssh.resident: the login shell and
        its rc files paid once per connection, not once per round); a fresh exec otherwise.
        Raises StaleConnection as SshShell.run does."""
        from fleetcheck.transport.ssh.session import SshShell

        if not (self.resident and isinstance(shell, SshShell)):
            return shell.run(command, timeout, max_bytes)
        from fleetcheck.transport.ssh import resident

        return resident.run(shell, command, timeout, max_bytes, open_timeout=open_timeout)

    def discard(self, shell: Any) -> None:
        """A kept connection that failed when used: closed, counted as replaced."""
        with self._lock:
            self.replaced += 1
        _close(shell)

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            shells = [s for _, s in self._idle.values()]
            self._idle.clear()
        for shell in shells:
            _close(shell)

    def _expire(self, now: float, out: list[Any]) -> None:
        for key in [k for k, (since, _) in self._idle.items() if now - since > self.keep_for]:
            out.append(self._idle.pop(key)[1])
            self.dropped += 1


def _active(shell: Any) -> bool:
    try:
        return bool(shell.transport.is_active())
    except Exception:
        return False


def _close(shell: Any) -> None:
    try:
        shell.close()
    except Exception:
        pass
