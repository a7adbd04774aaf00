"""Hostile parties for tests/test_hostile_text.py: text full of terminal controls, a loopback
"SSH server" that sends it before (instead of) a version string, a loopback RESP server whose
INFO values, client names and error replies carry it, a pty to run the CLI under, and the
checker every output goes through. Loopback only; every server stops at the end of its `with`.
"""

from __future__ import annotations

import os
import pty
import re
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
import tty
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# The sequences the security review used, and the ones it did not list: CSI, OSC with BEL and
# with ST, a hyperlink, DCS, a full reset, backspace, DEL, the C1 forms of CSI/OSC/ST, the bidi
# override and an isolate, and a line separator. No NUL, no line break and none of `,=:` so one
# string fits every channel (a file name, an INFO value, an SSH line, a hash field).
PAYLOAD = (
    "\x1b]0;PWNED\x07\x1b[2J\x1b[H\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\"
    "\x1bP1$r\x1b\\\x1bc\x08\x08\x7f\x9b31m\x9d0;t\x9c\u202egnp.exe\u2066x\u2069"
)
# ... and for channels that end at a line break only (an error reply, a shell's stderr): the
# other C0 controls too, a lone CR among them
PAYLOAD_C0 = PAYLOAD + "\r\x00\x01\x1f\x0b\x0c"
# what any output must show instead of the payload's first ESC: proof the text got there
ESCAPED = "\\x1b]0;PWNED\\x07"

# Forbidden in any output: C0 but tab (and the renderers' own line feeds, where allowed), DEL,
# C1, the line/paragraph separators and the bidi formatting characters. The test's own
# definition, independent of core.safe_text's.
_FORBIDDEN = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
FORBIDDEN_TEXT = re.compile(f"[{_FORBIDDEN}]")  # line feeds allowed: a text output's lines
FORBIDDEN_STRING = re.compile(f"[{_FORBIDDEN}\n]")  # one JSON string: not even a line feed


def bad_chars(text: str, allow_newline: bool = True) -> list[str]:
    """The forbidden characters in `text`, each with a little context (for the message)."""
    rx = FORBIDDEN_TEXT if allow_newline else FORBIDDEN_STRING
    return [repr(text[max(0, m.start() - 20) : m.end() + 20]) for m in rx.finditer(text)]


def decoded(data: bytes) -> str:
    """Bytes from a process as text; an invalid UTF-8 byte would hide a raw C1 byte, so it
    fails the test rather than being replaced."""
    return data.decode("utf-8")


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


# ---------------------------------------------------------------- servers on loopback
class _Listener:
    """A loopback TCP server: `serve(conn)` runs in a thread per connection."""

    def __init__(self, serve: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self._serve = serve
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            self._serve(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@contextmanager
def hostile_ssh() -> Iterator[int]:
    """A "host" whose sshd is a liar: 100 lines of controls where the version string should
    be (paramiko gives up after 100 and quotes the last one). Yields its loopback port."""

    def serve(conn: socket.socket) -> None:
        lines = [f"Welcome {i} {PAYLOAD}\r\n" for i in range(99)] + [f"NOT-SSH {PAYLOAD}\r\n"]
        conn.sendall("".join(lines).encode())
        try:
            conn.recv(4096)  # the client's own version string; then we hang up
        except OSError:
            pass

    server = _Listener(serve)
    try:
        yield server.port
    finally:
        server.close()


def _bulk(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _resp_error(text: str) -> bytes:
    return b"-" + text.encode() + b"\r\n"


def _read_command(f: Any) -> list[bytes] | None:
    """One RESP command (an array of bulk strings) from a socket file, None at EOF."""
    line = f.readline()
    if not line:
        return None
    if not line.startswith(b"*"):
        return line.split()
    out = []
    for _ in range(int(line[1:])):
        size = int(f.readline()[1:])
        out.append(f.read(size + 2)[:-2])
    return out


HOSTILE_INFO = {
    "redis_version": "7.2.4",
    "role": "slave",
    "master_host": "m" + PAYLOAD,
    "master_port": "6379",
    "master_link_status": "down" + PAYLOAD,
    "maxmemory_policy": "allkeys-lru" + PAYLOAD,
    "connected_clients": "3",
    "maxclients": "10000",
    "used_memory": "1000",
    "maxmemory": "0",
    "rejected_connections": "0",
    "blocked_clients": "0",
    "connected_slaves": "0",
}


def client_list_line(cid: int, name: str) -> str:
    return (
        f"id={cid} addr=127.0.0.1:{40000 + cid} laddr=127.0.0.1:6379 fd=8 name={name} age=10 "
        "idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 "
        "multi-mem=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=ping user=default "
        "redir=-1 resp=2 lib-name= lib-ver="
    )


@contextmanager
def hostile_broker() -> Iterator[int]:
    """A "broker" that answers PING and INFO (hostile values), CLIENT ID/LIST (client names
    full of controls), and every other command with an error reply full of them. Yields its
    loopback port."""
    info = "# Server\r\n" + "".join(f"{k}:{v}\r\n" for k, v in HOSTILE_INFO.items())
    clients = "\n".join(
        client_list_line(i, f"w{i}{PAYLOAD.replace(' ', '')}-worker") for i in range(2, 5)
    )

    def serve(conn: socket.socket) -> None:
        f = conn.makefile("rb")
        while True:
            cmd = _read_command(f)
            if cmd is None:
                return
            name = b" ".join(cmd[:2]).upper()
            if name.startswith(b"PING"):
                reply = b"+PONG\r\n"
            elif name.startswith(b"INFO"):
                reply = _bulk(info)
            elif name == b"CLIENT ID":
                reply = b":1\r\n"
            elif name == b"CLIENT LIST":
                reply = _bulk(client_list_line(1, "fleetcheck") + "\n" + clients + "\n")
            elif name.startswith((b"CLIENT SETNAME", b"CLIENT SETINFO", b"SELECT")):
                reply = b"+OK\r\n"
            else:
                # no CR or NUL: hiredis refuses those in a reply line (a protocol error)
                said = PAYLOAD + "\x01\x1f\x0b\x0c"
                reply = _resp_error(f"ERR {said} for {cmd[0].decode('ascii', 'replace')}")
            conn.sendall(reply)

    server = _Listener(serve)
    try:
        yield server.port
    finally:
        server.close()


# ---------------------------------------------------------------- the CLI under a pty
def run_in_pty(
    args: list[str], env: dict[str, str], timeout: float = 120, columns: int = 220
) -> tuple[int, bytes, bytes]:
    """`python -m fleetcheck ARGS` with stdout on a pty (raw mode: the line discipline adds no
    CR of its own, so every byte read is one the program wrote) and stderr on a pipe.
    (exit code, stdout bytes, stderr bytes); the process is killed on a timeout."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    fcntl_winsize = struct.pack("HHHH", 50, columns, 0, 0)
    import fcntl

    fcntl.ioctl(slave, termios.TIOCSWINSZ, fcntl_winsize)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetcheck", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"fleetcheck {args} still running after {timeout}s")
            ready, _, _ = select.select([master], [], [], min(left, 1.0))
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the program closed the pty
                    break
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        assert proc.stderr is not None
        err = proc.stderr.read()
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
        os.close(master)
    return rc, bytes(out), err
