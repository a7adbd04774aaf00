"""A connected host: one command at a time as `/bin/sh -s` with the script on stdin (the
login shell never parses it), under a hard monotonic deadline and a byte bound.

The watchdog closes the channel at the deadline (and the connection a second later if even
that hangs), so a host that stops answering costs command_timeout and no more; an ended
session says as precisely as it can why (the account's shell refused the login, the server
closed the connection, ...). A connection that cannot open a channel raises
StaleConnection, the sign for a kept connection to be replaced.

Closing the channel ends our wait, not the command: without a pty the host signals nothing
to it. The gathered script therefore carries its own watchdog (fleetcheck.transport.gather),
which kills the exec on the host at the same command_timeout."""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from fleetcheck.core.errors import TransportError
from fleetcheck.transport.shell import ExecResult
from fleetcheck.transport.ssh.budget import watchdog
from fleetcheck.transport.ssh.util import describe, quiet_close

if TYPE_CHECKING:
    import paramiko

    from fleetcheck.transport.ssh.target import Target


class _Closable(Protocol):
    def close(self) -> None: ...


class StaleConnection(TransportError):
    """The connection could not open a channel (closed, or silent past `open_timeout`):
    for a connection kept from an earlier round, the sign to replace it."""


class SshShell:
    """The patrol's connection to one host."""

    def __init__(self, target: Target, transports: list[Any]) -> None:
        self.target = target
        self._transports = transports  # this host's own connection (jump hosts are shared)
        self._owned: _Closable | None = None  # a private Connector, closed with the shell
        self.connect_s: float | None = None  # TCP + handshake + auth, for the limiter

    @property
    def transport(self) -> paramiko.Transport:
        return self._transports[-1]

    def run(
        self, command: str, timeout: float, max_bytes: int, open_timeout: float | None = None
    ) -> ExecResult:
        start = time.monotonic()
        deadline = start + timeout
        t = self.transport
        chan = self.open_channel(
            deadline if open_timeout is None else min(deadline, start + open_timeout)
        )
        # exec_command waits for the server's reply without a timeout: a watchdog closes the
        # channel (and, one second later, the whole connection) if the host stops answering.
        cut = threading.Event()
        fired = threading.Event()

        def hard_stop() -> None:
            if cut.is_set():
                return
            fired.set()
            quiet_close(chan)
            if not cut.wait(1.0):
                quiet_close(t)

        dog = watchdog.schedule(deadline, hard_stop)
        out, err = bytearray(), bytearray()
        truncated = False
        timed_out = False
        rc: int | None = None
        early: BaseException | None = None  # the remote side stopped taking our script
        try:
            try:
                chan.exec_command("/bin/sh -s")
                chan.settimeout(max(deadline - time.monotonic(), 0.001))
                chan.sendall(command.encode())
                chan.shutdown_write()
            except Exception as e:
                if time.monotonic() >= deadline:
                    timed_out = True
                else:
                    # a login refused by the account's shell (nologin, a ForceCommand) exits
                    # before reading its stdin: what it printed and its exit status are the
                    # precise reason, so read them rather than report "Socket is closed"
                    early = e
            if not timed_out:
                chan.settimeout(0.0)
                poller = select.poll()  # not select(): fds past 1023 are normal in a patrol
                poller.register(chan.fileno(), select.POLLIN)
                while True:
                    truncated |= _drain(chan, out, err, max_bytes)
                    if chan.exit_status_ready() and (chan.eof_received or chan.closed):
                        truncated |= _drain(chan, out, err, max_bytes)
                        if not (chan.recv_ready() or chan.recv_stderr_ready()):
                            rc = chan.recv_exit_status()
                            break
                    if chan.closed and not chan.exit_status_ready():
                        timed_out = time.monotonic() >= deadline
                        if not timed_out:
                            raise TransportError(self._lost(t, early, out, err))
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        timed_out = True
                        break
                    if chan.eof_received:
                        chan.status_event.wait(min(left, 0.25))
                    else:
                        poller.poll(min(left, 0.25) * 1000)
        finally:
            cut.set()
            watchdog.cancel(dog)
            quiet_close(chan)
        if fired.is_set():
            timed_out = True  # the watchdog closed the channel: whatever rc we saw is not real
        return ExecResult(
            rc=None if timed_out else rc,
            stdout=bytes(out),
            stderr=bytes(err),
            truncated=truncated,
            duration_s=time.monotonic() - start,
        )

    def open_channel(self, opened_by: float) -> Any:
        """A session channel, opened by the time.monotonic() instant `opened_by`; raises
        StaleConnection when the connection is closed or cannot open one."""
        t = self.transport
        if not t.is_active():
            raise StaleConnection(f"connection to {self.target.label} is closed")
        try:
            return t.open_session(timeout=max(opened_by - time.monotonic(), 0.001))
        except Exception as e:
            raise StaleConnection(
                f"{self.target.hostname} refused to open a session: {describe(e)}"
            ) from None

    def _lost(self, t: Any, early: BaseException | None, out: bytearray, err: bytearray) -> str:
        """Why the session ended without an exit status, as precisely as we can tell."""
        said = (bytes(err) or bytes(out)).decode("utf-8", "replace").strip().splitlines()
        if said:
            return f"{self.target.hostname}: the session ended at once: {said[-1][:200]}"
        why = t.get_exception() if hasattr(t, "get_exception") else None
        if not t.is_active():
            reason = f": {describe(why)}" if why is not None else ""
            return f"{self.target.hostname}: the server closed the connection after login{reason}"
        if early is not None:
            return (
                f"{self.target.hostname}: the server closed the session before taking the "
                f"command ({describe(early)}): login refused by the account or a ForceCommand?"
            )
        return f"{self.target.hostname}: connection lost while running commands"

    def close(self) -> None:
        for t in reversed(self._transports):
            quiet_close(t)
        if self._owned is not None:
            self._owned.close()


def drain(chan: Any, on_out: Callable[[bytes], None], on_err: Callable[[bytes], None]) -> None:
    """Hand each chunk the channel has ready now (stdout, then stderr) to its callback."""
    for ready, recv, feed in (
        (chan.recv_ready, chan.recv, on_out),
        (chan.recv_stderr_ready, chan.recv_stderr, on_err),
    ):
        while ready():
            try:
                chunk = recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            feed(chunk)


def _drain(chan: Any, out: bytearray, err: bytearray, max_bytes: int) -> bool:
    """`drain` into two buffers of at most `max_bytes`; whether anything was cut."""
    truncated = False

    def into(buf: bytearray) -> Callable[[bytes], None]:
        def feed(chunk: bytes) -> None:
            nonlocal truncated
            room = max_bytes - len(buf)
            if len(chunk) > room:
                truncated = True
                chunk = chunk[: max(room, 0)]
            buf.extend(chunk)

        return feed

    drain(chan, into(out), into(err))
    return truncated
