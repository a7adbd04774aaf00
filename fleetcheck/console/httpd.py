"""A small HTTP/1.1 server that a slow or hostile client cannot starve: what `serve` runs on.

Why not `http.server.ThreadingHTTPServer`: it gives every connection a thread before a byte is
read, its timeout is per `recv` (a client dripping a byte every 29 s holds a thread forever),
it checks nothing until the headers are in, it never reads a body (on keep-alive the body of a
refused POST is parsed as the next request: a desync behind a proxy), and at EMFILE its accept
loop spins, printing a traceback per attempt. Here:

- one thread owns every socket (`selectors`, non-blocking); a connection costs a file
  descriptor and at most `max_head` bytes of buffer, never a thread;
- a request reaches the worker pool (a few threads: rendering is CPU work) only once it is
  whole, so slow clients wait in the selector, not in the pool;
- every request has one deadline for all of it, head and body (and every response one for all
  of its sending), however the bytes trickle in;
- the application's `early` hook (auth, method) runs the moment the head is in, before any body
  is read; a refused request gets `Connection: close`, so a body it carried is never parsed as
  a request; an accepted one has its body read (up to `max_body`) and dropped;
- open connections are capped (from the file-descriptor limit); at the cap, or at EMFILE,
  the oldest connection still waiting for its request is closed to make room, and if none can
  be, accepting pauses for a moment instead of spinning;
- a failed connection is closed quietly; unexpected errors print one bounded line, at most
  one a minute.
"""

from __future__ import annotations

import errno
import selectors
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus

from fleetcheck.core.safe_text import one_line

_HEAD, _BODY, _BUSY, _WRITE, _LINGER = range(5)
_OUT_OF_FDS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
LINGER_S = 2.0  # after a refusal: drain what the client still sends so it sees our answer
LINGER_BYTES = 1 << 20


@dataclass(frozen=True)
class Limits:
    """How much any one client may take. The defaults suit a console read by people and a
    scraper: their requests arrive whole in milliseconds."""

    request_deadline: float = 10.0  # seconds for a whole request (head and body), idle included
    write_deadline: float = 30.0  # seconds to send a whole response
    max_head: int = 16 * 1024  # request line and headers
    max_body: int = 64 * 1024  # a body larger than this is refused (413), not read
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


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    version: str
    headers: dict[str, str]  # lower-case names; a repeated header's values joined by ", "

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def keep_alive(self) -> bool:
        tokens = {t.strip().lower() for t in (self.header("connection") or "").split(",")}
        return self.version == "HTTP/1.1" and "close" not in tokens


@dataclass(frozen=True)
class Response:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    head: bool = False  # a HEAD request: the headers of `body`, not the body
    close: bool = False  # end the connection after this response


def text_response(status: int, text: str, close: bool = False) -> Response:
    return Response(
        status, [("Content-Type", "text/plain; charset=utf-8")], text.encode(), close=close
    )


def serialize(resp: Response, close: bool) -> bytes:
    try:
        phrase = HTTPStatus(resp.status).phrase
    except ValueError:
        phrase = "Unknown"
    lines = [
        f"HTTP/1.1 {resp.status} {phrase}",
        "Server: fleetcheck",
        f"Date: {formatdate(usegmt=True)}",
        *(f"{k}: {v}" for k, v in resp.headers),
        f"Content-Length: {len(resp.body)}",
    ]
    if close:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
    return head if resp.head else head + resp.body


class BadRequest(ValueError):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status


def parse_head(block: bytes) -> Request:
    """The request line and headers (without the blank line). Raises BadRequest."""
    lines = block.decode("latin-1").split("\n")
    parts = lines[0].rstrip("\r").split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[1]:
        raise BadRequest(400, "bad request line")
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(505, "only HTTP/1.0 and HTTP/1.1")
    headers: dict[str, str] = {}
    for raw in lines[1:]:
        line = raw.rstrip("\r")
        name, sep, value = line.partition(":")
        # no folded lines, no space before the colon: ambiguities proxies read differently
        if not sep or not name or name != name.strip() or " " in name or "\t" in name:
            raise BadRequest(400, "malformed header line")
        key, value = name.lower(), value.strip()
        if key in headers:
            if key in ("content-length", "host", "authorization", "transfer-encoding"):
                raise BadRequest(400, f"repeated {name} header")
            value = headers[key] + ", " + value
        headers[key] = value
    return Request(method, target, version, headers)


class _Conn:
    __slots__ = (
        "sock", "fd", "inbuf", "out", "sent", "state", "deadline", "events",
        "body_left", "close_after", "request", "drained",
    )  # fmt: skip

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.inbuf = bytearray()
        self.out = b""
        self.sent = 0
        self.state = _HEAD
        self.deadline = deadline
        self.events = 0
        self.body_left = 0
        self.close_after = False
        self.request: Request | None = None
        self.drained = 0


Early = Callable[[Request], Response | None]
Handle = Callable[[Request], Response]


class Server:
    """Bind at construction (raises OSError); `serve_forever()` in the thread that owns the
    sockets; `shutdown()` from any thread; `server_close()` after."""

    def __init__(
        self,
        address: tuple[str, int],
        early: Early,
        handle: Handle,
        limits: Limits | None = None,
        family: socket.AddressFamily = socket.AF_INET,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.cap = self.limits.max_connections or connection_cap()
        self._early, self._handle = early, handle
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind(address)
            self._listener.listen(128)
        except OSError:
            self._listener.close()
            raise
        self._listener.setblocking(False)
        self.server_address = self._listener.getsockname()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._conns: dict[int, _Conn] = {}  # insertion order: oldest first
        self._done: deque[tuple[_Conn, Response]] = deque()
        self._pool = ThreadPoolExecutor(self.limits.workers, thread_name_prefix="fleetcheck-http")
        self._stop = threading.Event()
        self._paused_until = 0.0
        self._log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self._last_note = -1e9
        self._suppressed = 0

    # ------------------------------------------------------------ the loop

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        next_sweep = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            if self._paused_until and now >= self._paused_until:
                self._paused_until = 0.0
                self._sel.register(self._listener, selectors.EVENT_READ, None)
            timeout = (
                min(poll_interval, 0.1) if self._conns or self._paused_until else poll_interval
            )
            for key, mask in self._sel.select(timeout):
                if key.data is None:
                    try:
                        self._accept()
                    except Exception as e:  # never the loop: note it, accept again shortly
                        self._note(f"accept failed: {type(e).__name__}: {e}")
                        self._pause_accepting(0.25)
                elif key.data == "wake":
                    self._drain_wake()
                else:
                    self._ready(key.data, mask)
            self._finish_done()
            now = time.monotonic()
            if now >= next_sweep:
                self._sweep(now)
                next_sweep = now + 0.1

    def shutdown(self) -> None:
        self._stop.set()
        self._wake()

    def server_close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for c in list(self._conns.values()):
            self._close(c)
        for s in (self._listener, self._wake_r, self._wake_w):
            s.close()
        self._sel.close()

    def _ready(self, c: _Conn, mask: int) -> None:
        if c.fd not in self._conns:
            return
        try:
            if mask & selectors.EVENT_WRITE:
                self._on_write(c)
            if mask & selectors.EVENT_READ and c.fd in self._conns:
                self._on_read(c)
        except OSError:
            self._close(c)  # reset, broken pipe: the client's business
        except Exception as e:  # a bug here costs one connection and one line, never the loop
            self._note(f"connection failed: {type(e).__name__}: {e}")
            self._close(c)

    # ------------------------------------------------------------ accepting

    def _accept(self) -> None:
        for _ in range(64):  # then let the others have a turn
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in _OUT_OF_FDS:
                    if not self._evict_oldest():
                        self._pause_accepting(0.25)
                    self._note(
                        f"out of file descriptors with {len(self._conns)} connections open "
                        "(raise `ulimit -n`); closing the oldest idle one"
                    )
                    return
                if e.errno in (errno.ECONNABORTED, errno.EPROTO):
                    continue
                self._note(f"accept failed: {e.strerror or e}")
                self._pause_accepting(0.25)
                return
            sock.setblocking(False)
            if len(self._conns) >= self.cap and not self._evict_oldest():
                sock.close()  # every slot is answering a whole request: come back later
                continue
            c = _Conn(sock, time.monotonic() + self.limits.request_deadline)
            self._conns[c.fd] = c
            self._watch(c, selectors.EVENT_READ)

    def _evict_oldest(self) -> bool:
        """Close the oldest connection still waiting for (the rest of) its request."""
        for c in self._conns.values():
            if c.state in (_HEAD, _BODY, _LINGER):
                self._close(c)
                return True
        return False

    def _pause_accepting(self, seconds: float) -> None:
        if not self._paused_until:
            self._sel.unregister(self._listener)
        self._paused_until = time.monotonic() + seconds

    # ------------------------------------------------------------ reading

    def _on_read(self, c: _Conn) -> None:
        try:
            data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            self._close(c)
            return
        if c.state == _LINGER:
            c.drained += len(data)
            if c.drained > LINGER_BYTES:
                self._close(c)
            return
        c.inbuf += data
        self._advance(c)

    def _advance(self, c: _Conn) -> None:
        if c.state == _HEAD:
            while c.inbuf[:2] == b"\r\n" or c.inbuf[:1] == b"\n":  # CRLFs before a request
                del c.inbuf[: 2 if c.inbuf[:1] == b"\r" else 1]
            end, size = _head_end(c.inbuf)
            if end < 0:
                if len(c.inbuf) > self.limits.max_head:
                    self._respond(c, text_response(431, "request head too large\n"), True)
                return
            if end > self.limits.max_head:
                self._respond(c, text_response(431, "request head too large\n"), True)
                return
            block = bytes(c.inbuf[:end])
            del c.inbuf[: end + size]
            try:
                req = parse_head(block)
                length = _content_length(req)
            except BadRequest as e:
                self._respond(c, text_response(e.status, f"{e}\n"), True)
                return
            refusal = self._early(req)
            if refusal is not None:  # the body, if any, is never read, so never parsed
                self._respond(c, refusal, True)
                return
            if req.header("transfer-encoding") is not None:
                self._respond(
                    c, text_response(501, "chunked request bodies are not accepted\n"), True
                )
                return
            if length > self.limits.max_body:
                self._respond(c, text_response(413, "request body too large\n"), True)
                return
            c.request, c.body_left, c.state = req, length, _BODY
        if c.state == _BODY:
            take = min(len(c.inbuf), c.body_left)
            del c.inbuf[:take]  # read and dropped: no page takes a body
            c.body_left -= take
            if c.body_left:
                return
            self._dispatch(c)

    # ------------------------------------------------------------ the workers

    def _dispatch(self, c: _Conn) -> None:
        req = c.request
        assert req is not None
        c.state = _BUSY
        self._watch(c, 0)  # nothing more is read until this one is answered

        def work() -> None:
            try:
                resp = self._handle(req)
            except Exception as e:  # a bug must be a 500 with one line, not a dropped connection
                resp = text_response(
                    500, one_line(f"internal error: {type(e).__name__}: {e}") + "\n"
                )
            self._done.append((c, resp))
            self._wake()

        try:
            self._pool.submit(work)
        except RuntimeError:  # shutting down
            self._close(c)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except (BlockingIOError, OSError):
            pass  # already woken, or closed

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _finish_done(self) -> None:
        while self._done:
            c, resp = self._done.popleft()
            if self._conns.get(c.fd) is not c:
                continue  # closed meanwhile (server shutting down)
            req = c.request
            try:
                self._respond(c, resp, resp.close or req is None or not req.keep_alive)
            except OSError:
                self._close(c)
            except Exception as e:  # as in _ready: one connection and one line
                self._note(f"connection failed: {type(e).__name__}: {e}")
                self._close(c)

    # ------------------------------------------------------------ writing

    def _respond(self, c: _Conn, resp: Response, close: bool) -> None:
        c.out, c.sent, c.close_after = serialize(resp, close), 0, close
        c.state = _WRITE
        c.deadline = time.monotonic() + self.limits.write_deadline
        self._watch(c, selectors.EVENT_WRITE)
        self._on_write(c)

    def _on_write(self, c: _Conn) -> None:
        if c.state != _WRITE:
            return
        try:
            c.sent += c.sock.send(memoryview(c.out)[c.sent :])
        except (BlockingIOError, InterruptedError):
            return
        if c.sent < len(c.out):
            return
        c.out = b""
        if c.close_after:
            self._linger(c)
            return
        c.state, c.request = _HEAD, None
        c.deadline = time.monotonic() + self.limits.request_deadline
        self._watch(c, selectors.EVENT_READ)
        if c.inbuf:
            self._advance(c)  # a pipelined request

    def _linger(self, c: _Conn) -> None:
        """Half-close and drain: closing with unread bytes would reset the connection and
        could destroy the answer before the client read it."""
        c.state, c.inbuf = _LINGER, bytearray()
        c.deadline = time.monotonic() + LINGER_S
        try:
            c.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(c)
            return
        self._watch(c, selectors.EVENT_READ)

    # ------------------------------------------------------------ bookkeeping

    def _sweep(self, now: float) -> None:
        for c in [c for c in self._conns.values() if c.state != _BUSY and c.deadline <= now]:
            if c.state in (_HEAD, _BODY) and (c.inbuf or c.state == _BODY):
                try:  # best effort; a client that is not reading just loses it
                    c.sock.send(serialize(text_response(408, "request took too long\n"), True))
                except OSError:
                    pass
            self._close(c)

    def _watch(self, c: _Conn, events: int) -> None:
        if events == c.events:
            return
        if not c.events:
            self._sel.register(c.sock, events, c)
        elif not events:
            self._sel.unregister(c.sock)
        else:
            self._sel.modify(c.sock, events, c)
        c.events = events

    def _close(self, c: _Conn) -> None:
        if self._conns.get(c.fd) is not c:
            return
        del self._conns[c.fd]
        if c.events:
            self._sel.unregister(c.sock)
            c.events = 0
        c.sock.close()

    def _note(self, text: str) -> None:
        """One line, at most one a minute: a flood of failing clients must not flood stderr."""
        now = time.monotonic()
        if now - self._last_note < 60:
            self._suppressed += 1
            return
        more = f" ({self._suppressed} more like it suppressed)" if self._suppressed else ""
        self._last_note, self._suppressed = now, 0
        self._log(f"fleetcheck: warning: serve: {one_line(text)[:300]}{more}")

    @property
    def open_connections(self) -> int:
        return len(self._conns)


def _head_end(buf: bytearray) -> tuple[int, int]:
    """Where the head ends and how long its terminator is ((-1, 0) if not yet)."""
    crlf, lf = buf.find(b"\r\n\r\n"), buf.find(b"\n\n")
    if crlf >= 0 and (lf < 0 or crlf <= lf):
        return crlf, 4
    if lf >= 0:
        return lf, 2
    return -1, 0


def _content_length(req: Request) -> int:
    text = req.header("content-length")
    if text is None:
        return 0
    # ASCII digits only: "²".isdigit() is True (the head is decoded as latin-1) and int()
    # of it raises ValueError, which dropped the connection without an answer
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise BadRequest(400, "bad Content-Length")
    return int(text)
