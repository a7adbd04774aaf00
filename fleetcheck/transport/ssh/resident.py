"""A resident shell on a kept connection: one `/bin/sh -s` started on a channel in the first
round, fed every later round's gathered script on its stdin, so the login shell's start and
its rc files (Debian's bash sources ~/.bashrc for every command sshd runs: a `pyenv init`
is ~90 ms of host CPU) are paid once per connection, not once per round.

Each round is framed by a marker drawn fresh for that round (128 random bits): the shell
prints `@@MARK begin` on stdout and stderr, runs the script in a subshell with stdin from
/dev/null (it cannot eat the next round's input), then prints `@@MARK end RC` on stdout and
`@@MARK end` on stderr. The marker is printed from two halves joined by printf, so a shell
that echoes its input never shows it whole; a log line cannot forge it, not knowing it.

A resident shell is never trusted beyond what it proves in the round: any byte before the
begin marker (a banner, an echo, leftovers of an earlier round), no begin marker within the
open timeout (silent, confused), the channel closed or EOF before the end marker (killed on
the host) make it broken: the channel is closed and the round runs as a fresh exec on the
same connection (`SshShell.run`: a real exit status, and StaleConnection as today when the
connection itself is gone). A shell that printed something unframed is not tried again on
that connection (it would do it again); one that died is, in the next round.

The deadline and the byte bound are the exec's: the script carries the same watchdog, which
kills the resident shell's process group at command_timeout (the shell dies with the round,
and the connection, not healthy, is not kept); output past max_bytes is discarded while the
end marker is still looked for, so a truncated round still ends with its exit status."""

from __future__ import annotations

import re
import secrets
import select
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from fleetcheck.transport.shell import ExecResult
from fleetcheck.transport.ssh.budget import watchdog
from fleetcheck.transport.ssh.session import SshShell, StaleConnection, drain
from fleetcheck.transport.ssh.util import quiet_close


@dataclass
class Counts:
    """How resident shells fared in this process, for the bench and the tests."""

    started: int = 0  # resident shells started
    rounds: int = 0  # rounds run through a resident shell
    broken: int = 0  # rounds whose resident shell was broken: ran as a fresh exec instead
    refused: int = 0  # connections whose shell printed unframed output: exec from then on


counts = Counts()
_lock = threading.Lock()
_residents: weakref.WeakKeyDictionary[SshShell, Any] = weakref.WeakKeyDictionary()
_refused: weakref.WeakSet[SshShell] = weakref.WeakSet()


class _Broken(Exception):
    def __init__(self, reason: str, unframed: bool = False) -> None:
        super().__init__(reason)
        self.unframed = unframed


def run(
    shell: SshShell,
    command: str,
    timeout: float,
    max_bytes: int,
    open_timeout: float | None = None,
) -> ExecResult:
    """`command` through the connection's resident shell (started on first use), or as a
    fresh exec when the resident shell is broken or the connection refused one. Raises
    StaleConnection when the connection cannot open a channel, as SshShell.run does."""
    with _lock:
        refused = shell in _refused or bool(shell.target.via)
        chan = None if refused else _residents.pop(shell, None)
    if refused:
        return shell.run(command, timeout, max_bytes, open_timeout=open_timeout)
    start = time.monotonic()
    deadline = start + timeout
    # the begin marker comes at once from a live shell; a silent one is replaced as fast as
    # a kept connection that cannot open a channel
    opened_by = deadline if open_timeout is None else min(deadline, start + open_timeout)
    fresh = chan is None
    try:
        if chan is None:
            chan = _open(shell, opened_by, deadline)
        result = _round(chan, command, start, deadline, opened_by, max_bytes)
    except StaleConnection:
        raise
    except _Broken as e:
        if chan is not None:
            quiet_close(chan)
        with _lock:
            counts.broken += 1
            if e.unframed:
                counts.refused += 1
                _refused.add(shell)
        if not shell.transport.is_active():
            raise StaleConnection(f"connection to {shell.target.label} is closed") from None
        return shell.run(command, timeout, max_bytes, open_timeout=open_timeout)
    with _lock:
        counts.rounds += 1
        counts.started += fresh
        if result.rc is not None and not chan.closed:
            _residents[shell] = chan  # the next round's shell
        else:
            quiet_close(chan)
    return result


def forget(shell: SshShell) -> None:
    """Close the connection's resident shell, if it has one."""
    with _lock:
        chan = _residents.pop(shell, None)
        _refused.discard(shell)
    if chan is not None:
        quiet_close(chan)


def _open(shell: SshShell, opened_by: float, deadline: float) -> Any:
    chan = shell.open_channel(opened_by)
    # exec_command waits for the server's reply without a timeout: closed at the deadline
    dog = watchdog.schedule(deadline, lambda: quiet_close(chan))
    try:
        chan.exec_command("/bin/sh -s")
    except Exception as e:
        quiet_close(chan)
        raise _Broken(f"the resident shell did not start: {e}") from None
    finally:
        watchdog.cancel(dog)
    return chan


def _frame(command: str, mark: str) -> tuple[bytes, bytes, bytes]:
    """The round's script, framed; and the begin markers stdout and stderr must start with.

    The script's text never holds the marker whole: printf joins its two halves."""
    a, b = mark[: len(mark) // 2], mark[len(mark) // 2 :]
    text = (
        f"printf '@@%s%s begin\\n' {a} {b}; printf '@@%s%s begin\\n' {a} {b} >&2\n"
        f"(\n{command}\n) </dev/null\n"
        f"printf '\\n@@%s%s end %d\\n' {a} {b} $?; printf '\\n@@%s%s end\\n' {a} {b} >&2\n"
    )
    begin = f"@@{mark} begin\n".encode()
    return text.encode(), begin, begin


class _Stream:
    """One of the channel's streams in one round: the begin marker first and nothing before
    it, then the body (kept up to the byte bound), then the end marker and nothing after."""

    def __init__(self, begin: bytes, end: re.Pattern[bytes], max_bytes: int) -> None:
        self.begin = begin
        self.end = end
        self.room = max_bytes
        self.pending = bytearray()
        self.body = bytearray()
        self.started = False
        self.done = False
        self.truncated = False
        self.rc: int | None = None
        self.hold = len(begin) + 8  # longer than any end marker: it may straddle two reads

    def feed(self, data: bytes) -> None:
        self.pending += data
        if self.done:
            if self.pending:
                raise _Broken("output after the end of the round", unframed=True)
            return
        if not self.started:
            n = min(len(self.pending), len(self.begin))
            if bytes(self.pending[:n]) != self.begin[:n]:
                raise _Broken("the shell printed something unframed", unframed=True)
            if len(self.pending) < len(self.begin):
                return
            del self.pending[: len(self.begin)]
            self.started = True
        m = self.end.search(self.pending)
        if m is not None:
            self._keep(self.pending[: m.start()])
            if m.groups():
                self.rc = int(m.group(1))
            self.done = True
            rest = self.pending[m.end() :]
            self.pending = bytearray()
            if rest:
                raise _Broken("output after the end of the round", unframed=True)
            return
        cut = max(0, len(self.pending) - self.hold)
        self._keep(self.pending[:cut])
        del self.pending[:cut]

    def _keep(self, data: bytes | bytearray) -> None:
        if len(data) > self.room:
            self.truncated = True
            data = data[: self.room]
        self.body += data
        self.room -= len(data)


def _round(
    chan: Any, command: str, start: float, deadline: float, opened_by: float, max_bytes: int
) -> ExecResult:
    mark = secrets.token_hex(16)
    script, out_begin, err_begin = _frame(command, mark)
    tag = re.escape(mark.encode())
    out = _Stream(out_begin, re.compile(rb"\n@@" + tag + rb" end (\d{1,3})\n"), max_bytes)
    err = _Stream(err_begin, re.compile(rb"\n@@" + tag + rb" end\n"), max_bytes)
    # stdout and stderr begin markers may still be in flight from the host, never before
    if chan.recv_ready() or chan.recv_stderr_ready():
        raise _Broken("the shell printed something between rounds", unframed=True)
    timed_out = False
    try:
        chan.settimeout(max(deadline - time.monotonic(), 0.001))
        chan.sendall(script)
    except Exception as e:
        if time.monotonic() >= deadline:
            timed_out = True
        else:
            raise _Broken(f"the resident shell took no script: {e}") from None
    if not timed_out:
        chan.settimeout(0.0)
        poller = select.poll()  # not select(): fds past 1023 are normal in a patrol
        poller.register(chan.fileno(), select.POLLIN)
        while True:
            _drain(chan, out, err)
            if out.done and err.done:
                break
            now = time.monotonic()
            if chan.closed or chan.eof_received or chan.exit_status_ready():
                _drain(chan, out, err)
                if out.done and err.done:
                    break
                if now >= deadline:
                    timed_out = True
                    break
                # killed on the host (or by its own watchdog, whose deadline is ours)
                if not out.started:
                    raise _Broken("the resident shell is gone")
                if _watchdog_fired(chan, deadline):
                    timed_out = True
                    break
                raise _Broken("the resident shell ended in the middle of a round")
            if not (out.started and err.started) and now >= opened_by:
                raise _Broken("the resident shell did not answer")
            if now >= deadline:
                timed_out = True
                break
            poller.poll(min(deadline - now, 0.25) * 1000)
    if timed_out:
        quiet_close(chan)
    return ExecResult(
        rc=None if timed_out else out.rc,
        stdout=bytes(out.body),
        stderr=bytes(err.body),
        truncated=out.truncated or err.truncated,
        duration_s=time.monotonic() - start,
    )


def _watchdog_fired(chan: Any, deadline: float) -> bool:
    """Whether the shell died of the script's own watchdog: at most a second before our
    deadline (its sleeps round to seconds), killed by SIGKILL."""
    return deadline - time.monotonic() <= 1.0 and chan.exit_status_ready()


def _drain(chan: Any, out: _Stream, err: _Stream) -> None:
    drain(chan, out.feed, err.feed)
