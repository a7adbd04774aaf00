"""Hostile brokers of our own on loopback (issue 22, item 11): a TCP server that speaks
enough RESP for a client to make progress, but slowly or not at all.

Modes:
- "silent": accepts, reads, never answers.
- "drip": answers every command correctly, one byte every `interval` seconds.
- "stall_mid_reply": answers the first `fast` commands at once, then sends half of the next
  reply and nothing more.
- "stall_after_auth": answers AUTH (and the handshake before it) at once, then never again.

Every socket and thread it starts ends when the context manager exits (also on failure):
pacing waits on the stop event, so teardown never waits out an interval.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType


def _reply(args: list[bytes], kind: bytes = b"hash") -> bytes:
    """A plausible answer to one command, enough for redis-py to carry on; every key is of
    type `kind`."""
    name = b" ".join(a.upper() for a in args[:2])
    head = args[0].upper() if args else b""
    if head == b"PING":
        return b"+PONG\r\n"
    if head == b"TIME":
        return b"*2\r\n$10\r\n1700000000\r\n$1\r\n0\r\n"
    if head == b"TYPE":
        return b"+" + kind + b"\r\n"
    if head in (b"HSCAN", b"SCAN"):
        return b"*2\r\n$1\r\n0\r\n*0\r\n"
    if name == b"CLIENT ID":
        return b":7\r\n"
    if name == b"CLIENT LIST" or head == b"INFO":
        return b"$0\r\n\r\n"
    if head in (b"LPUSH", b"RPUSH", b"LLEN", b"LREM", b"HLEN", b"EXISTS"):
        return b":0\r\n"
    return b"+OK\r\n"


def _commands(buf: bytearray) -> list[list[bytes]]:
    """Complete RESP arrays (or inline commands) taken off the front of `buf`."""
    out: list[list[bytes]] = []
    while True:
        if not buf:
            return out
        if buf[:1] != b"*":
            end = buf.find(b"\r\n")
            if end < 0:
                return out
            out.append(bytes(buf[:end]).split())
            del buf[: end + 2]
            continue
        at = buf.find(b"\r\n")
        if at < 0:
            return out
        n = int(buf[1:at])
        pos = at + 2
        args: list[bytes] = []
        for _ in range(n):
            end = buf.find(b"\r\n", pos)
            if end < 0 or buf[pos : pos + 1] != b"$":
                return out
            size = int(buf[pos + 1 : end])
            start = end + 2
            if len(buf) < start + size + 2:
                return out
            args.append(bytes(buf[start : start + size]))
            pos = start + size + 2
        out.append(args)
        del buf[:pos]


class DripServer:
    def __init__(
        self, mode: str = "drip", interval: float = 2.0, fast: int = 0, kind: str = "hash"
    ) -> None:
        assert mode in ("silent", "drip", "stall_mid_reply", "stall_after_auth"), mode
        self.mode, self.interval, self.fast, self.kind = mode, interval, fast, kind.encode()
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.accepted = threading.Event()  # a client connected
        self.commands: list[list[bytes]] = []  # what clients sent, in order

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def __enter__(self) -> DripServer:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        # shutdown, not close alone: it wakes a thread blocked in accept() or recv()
        for sock in [self._sock, *self._conns]:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for t in self._threads:
            t.join(timeout=5)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            self.accepted.set()
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _send(self, conn: socket.socket, data: bytes) -> bool:
        if self.mode != "drip":
            conn.sendall(data)
            return True
        for i in range(len(data)):
            if self._stop.wait(self.interval):
                return False
            conn.sendall(data[i : i + 1])
        return True

    def _serve(self, conn: socket.socket) -> None:
        buf = bytearray()
        answered = 0
        stalled = False
        try:
            while not self._stop.is_set():
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
                for args in _commands(buf):
                    self.commands.append(args)
                    if self.mode == "silent" or stalled:
                        continue
                    reply = _reply(args, self.kind)
                    if self.mode == "stall_mid_reply" and answered >= self.fast:
                        conn.sendall(reply[: max(1, len(reply) // 2)])
                        stalled = True
                        continue
                    if not self._send(conn, reply):
                        return
                    answered += 1
                    if (
                        self.mode == "stall_after_auth"
                        and args[:1]
                        and args[0].upper()
                        in (
                            b"AUTH",
                            b"HELLO",
                        )
                    ):
                        stalled = True
        except OSError:
            return
