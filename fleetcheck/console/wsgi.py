"""The console's HTTP server: waitress, with the console's limits and three small additions.

Waitress hands the pool only whole requests (slow clients wait in its one-thread socket map)
and caps heads and bodies. This module adds:
- a deadline for a whole request (`channel_timeout` is idle time: a client dripping a byte a
  second would never be cut);
- at the connection cap (and at EMFILE) the oldest connection still waiting for its request
  is closed to make room, rather than accepting stopping until a cleanup pass;
- a response the application marks with `environ[CLOSE]` (401, 405) ends the connection;
and its log goes to stderr as one bounded line, at most one a minute, never a traceback.
"""

from __future__ import annotations

import errno
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import WSGITask

from fleetcheck.console.server import CLOSE
from fleetcheck.core.safe_text import one_line

_OUT_OF_FDS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


@dataclass(frozen=True)
class Limits:
    """How much any one client may take. The defaults suit a console read by people and a
    scraper: their requests arrive whole in milliseconds."""

    request_deadline: int = 10  # seconds for a whole request; and for an idle connection
    max_head: int = 16 * 1024  # request line and headers (waitress: 431 past it)
    max_body: int = 64 * 1024  # a larger body is refused (413); a smaller one read and dropped
    workers: int = 4  # threads that build responses
    max_connections: int | None = None  # None: from the file-descriptor limit


def connection_cap(reserve: int = 64, ceiling: int = 1024) -> int:
    """Open connections allowed: the fd soft limit minus room for files, the pool, patrols."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return ceiling
    return max(8, min(ceiling, soft - max(reserve, soft // 8)))


def raise_fd_limit() -> tuple[int, int]:
    """Raise the fd soft limit to the hard limit (a console behind `ulimit -n 1024` would run
    out long before its connection cap). Returns (before, after)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft, soft
        return soft, target
    return soft, soft


class _Task(WSGITask):
    def build_response_header(self) -> bytes:
        if self.environ is not None and self.environ.get(CLOSE):
            self.set_close_on_finish()  # adds `Connection: close`
        header: bytes = super().build_response_header()
        return header


class _Channel(HTTPChannel):
    task_class = _Task
    request_started = 0.0  # time.time() of the first byte of the request being read

    def received(self, data: bytes) -> bool:
        if self.request is None and data:
            self.request_started = time.time()
        done: bool = super().received(data)
        return done


class _Server(TcpWSGIServer):
    channel_class = _Channel
    next_channel_cleanup = 0.0
    paused_until = 0.0

    def readable(self) -> bool:
        # waitress's own, less its pause at `connection_limit` (handle_accept makes room)
        now = time.time()
        if now >= self.next_channel_cleanup:
            self.next_channel_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        return bool(self.accepting) and now >= self.paused_until

    def maintenance(self, now: float) -> None:
        super().maintenance(now)  # idle for channel_timeout: closed
        cutoff = now - self.adj.channel_timeout
        for channel in self.active_channels.values():
            if not channel.requests and channel.request is not None:
                if channel.request_started < cutoff:  # a request still unfinished
                    channel.will_close = True

    def handle_accept(self) -> None:
        if len(self.active_channels) >= self.adj.connection_limit and not self.evict_oldest():
            pair = self.accept()  # every connection is being answered: come back later
            if pair is not None:
                pair[0].close()
            return
        super().handle_accept()

    def accept(self) -> tuple[Any, Any] | None:
        try:
            pair: tuple[Any, Any] | None = super().accept()
        except OSError as e:
            if e.errno not in _OUT_OF_FDS:
                raise
            if not self.evict_oldest():
                self.paused_until = time.time() + 0.25
            self.logger.warning(
                "out of file descriptors with %d connections open (raise `ulimit -n`)",
                len(self.active_channels),
            )
            return None
        return pair

    def shut(self) -> None:
        """After `run()`: stop the workers (a response being built has 2 s), close every socket."""
        self.task_dispatcher.shutdown(timeout=2)
        wasyncore.close_all(self._map)

    def evict_oldest(self) -> bool:
        """Close the oldest connection that is neither being answered nor sent an answer."""
        for channel in self.active_channels.values():  # insertion order: oldest first
            if not channel.requests and not channel.total_outbufs_len:
                channel.handle_close()
                return True
        return False


class _OneLine(logging.Handler):
    """waitress's warnings as one line of at most 300 characters, at most one a minute."""

    def __init__(self, write: Callable[[str], None]) -> None:
        super().__init__(logging.WARNING)
        self.write = write
        self.last = -1e9
        self.suppressed = 0

    def emit(self, record: logging.LogRecord) -> None:
        now = time.monotonic()
        if now - self.last < 60:
            self.suppressed += 1
            return
        more = f" ({self.suppressed} more like it suppressed)" if self.suppressed else ""
        self.last, self.suppressed = now, 0
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is still one line
            text = str(record.msg)
        self.write(f"fleetcheck: warning: serve: {one_line(text)[:300]}{more}")


def _quiet_log(write: Callable[[str], None]) -> None:
    log = logging.getLogger("waitress")
    log.handlers[:] = [_OneLine(write)]
    log.setLevel(logging.WARNING)
    log.propagate = False
    # "Task queue depth is N": requests waiting for a worker, as they do under any burst
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)


def make_server(
    app: Callable[..., Any],
    host: str,
    port: int,
    limits: Limits | None = None,
    log: Callable[[str], None] | None = None,
) -> Any:
    """Bind (raises OSError, or ValueError for an address that does not resolve) and return
    the server: `run()` serves until SIGINT (or a KeyboardInterrupt raised by a handler),
    `shut()` after. Its bound address: `effective_host`, `effective_port`."""
    limits = limits or Limits()
    _quiet_log(log or (lambda line: print(line, file=sys.stderr, flush=True)))
    return _Server(
        app,
        host=host,
        port=port,
        threads=limits.workers,
        connection_limit=limits.max_connections or connection_cap(),
        channel_timeout=limits.request_deadline,
        cleanup_interval=1,
        max_request_header_size=limits.max_head,
        max_request_body_size=limits.max_body + 1,  # waitress refuses a body >= this
        ident="fleetcheck",
        asyncore_use_poll=True,  # select() fails past fd 1024
        log_socket_errors=False,  # a reset connection is the client's business
        expose_tracebacks=False,
    )
