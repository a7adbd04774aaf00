"""Real receivers on loopback for the notification tests: an SMTP server (aiosmtpd), an HTTP
server that records what Apprise's json:// and mmost:// (Mattermost's Slack-style incoming
webhook) post, and one that accepts and never answers."""

from __future__ import annotations

import contextlib
import email
import email.policy
import http.server
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Mailbox:
    """What the SMTP server received: one parsed message each."""

    messages: list[email.message.EmailMessage] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self) -> list[str]:
        """Each message as its subject and its text (HTML parts included, undecoded tags)."""
        out = []
        with self.lock:
            for m in self.messages:
                parts = [m["Subject"] or ""]
                for part in m.walk():
                    if part.get_content_maintype() == "text":
                        parts.append(str(part.get_content()))
                out.append("\n".join(parts))
        return out


@contextlib.contextmanager
def smtp_server() -> Iterator[tuple[int, Mailbox]]:
    """aiosmtpd on 127.0.0.1 (its own thread), plain SMTP: (port, mailbox)."""
    from aiosmtpd.controller import Controller

    box = Mailbox()

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
            with box.lock:
                box.messages.append(msg)  # type: ignore[arg-type]
            return "250 OK"

    from tests.lab import free_port

    port = free_port()
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port, box
    finally:
        controller.stop()


@dataclass
class Posts:
    """What the HTTP receiver got: (path, parsed JSON body, headers) each."""

    items: list[tuple[str, Any, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on(self, path: str) -> list[Any]:
        with self.lock:
            return [body for p, body, _ in self.items if p == path]


@contextlib.contextmanager
def http_receiver() -> Iterator[tuple[int, Posts]]:
    """An HTTP server on 127.0.0.1 that answers 200 to every POST and keeps its JSON."""
    posts = Posts()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            with posts.lock:
                posts.items.append((self.path, body, dict(self.headers.items())))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], posts
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def hanging_receiver() -> Iterator[int]:
    """Accepts connections and never says a word, until the test ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        listener.close()
