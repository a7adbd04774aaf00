"""Issue 22, items 4 and 12: heartbeat and Alertmanager delivery against hostile HTTP servers.

Item 4: one overall bound per delivery (connect, send, the whole answer), not a per-read
timeout. Each server below is a real loopback socket server that keeps the connection alive
with a byte now and then, or holds it silent, for as long as the test lasts: urllib's
per-operation timeout never fires against the dripping ones, so before the fix the delivery
hung until the server let go (each test here failed so: the delivery thread was still running
at its join limit).

Item 12: a server that echoes the request's headers (Basic credentials included) in its
reason phrase, its headers and its body, with terminal escapes: nothing of that reaches the
message or stderr (before the fix the body and the reason phrase were echoed, base64
credentials and ESC included)."""

from __future__ import annotations

import base64
import contextlib
import re
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fleetcheck.core.model import Report, Result, Status
from fleetcheck.rounds import alerting
from fleetcheck.rounds.alerting import DeliveryError
from tests.cli import fleetcheck
from tests.hang import Hung, returns_within
from tests.lab import Lab

BOUND = 1.0  # the delivery bound the unit tests pass
DRIP = 0.2  # seconds between the dripping servers' bytes: well inside any per-read timeout
USER, PASSWORD = "ops", "Sekr3tPw"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
PATH_TOKEN = "tok-5e5b4a8c"


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback only: an inherited proxy must not route the test traffic elsewhere."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)


Behaviour = Callable[[socket.socket, bytes, threading.Event], None]


def read_request(conn: socket.socket) -> bytes:
    """The request's head (and whatever of its body came with it)."""
    data = b""
    conn.settimeout(5)
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def drip(conn: socket.socket, data: bytes, stop: threading.Event) -> None:
    for i in range(len(data)):
        if stop.wait(DRIP):
            return
        conn.sendall(data[i : i + 1])


def endless_headers() -> Iterator[bytes]:
    n = 0
    while True:
        n += 1
        yield f"X-Pad-{n}: {'a' * 20}\r\n".encode()


# ---------------------------------------------------------------- the hostile servers
def drip_status_line(conn: socket.socket, _: bytes, stop: threading.Event) -> None:
    """One byte every DRIP seconds, from the status line on, never ending its head."""
    drip(conn, b"HTTP/1.1 200 OK\r\n", stop)
    for line in endless_headers():
        if stop.is_set():
            return
        drip(conn, line, stop)


def drip_headers(conn: socket.socket, _: bytes, stop: threading.Event) -> None:
    """The status line at once, then a header line every DRIP seconds, forever."""
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for line in endless_headers():
        if stop.wait(DRIP):
            return
        conn.sendall(line)


def headers_then_stall(conn: socket.socket, _: bytes, stop: threading.Event) -> None:
    """A complete head announcing a body, then silence."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
    stop.wait()


def drip_body(conn: socket.socket, _: bytes, stop: threading.Event) -> None:
    """A complete head announcing a huge body, then one body byte every DRIP seconds."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n")
    while not stop.wait(DRIP):
        conn.sendall(b"x")


def drip_error_body(conn: socket.socket, _: bytes, stop: threading.Event) -> None:
    """An error status whose body drips (the old code read error bodies too)."""
    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 100000\r\n\r\n")
    while not stop.wait(DRIP):
        conn.sendall(b"e")


def drip_tls_record(conn: socket.socket, _: bytes, stop: threading.Event) -> None:
    """For https://: a TLS handshake record header announcing 16 KB, then its bytes dripped.
    CPython already bounds a handshake as a whole by the socket timeout, so this one held
    before the fix too: it guards the TLS path of the new connection classes."""
    conn.sendall(b"\x16\x03\x03\x40\x00")
    while not stop.wait(DRIP):
        conn.sendall(b"\x00")


def silent(conn: socket.socket, _: bytes, stop: threading.Event) -> None:
    """Accepts, reads the request, never answers."""
    stop.wait()


def echo_headers(conn: socket.socket, request: bytes, stop: threading.Event) -> None:
    """401 with the request's head echoed in the reason phrase, in headers and in the body,
    with terminal escapes around it."""
    head = request.split(b"\r\n\r\n", 1)[0]
    auth = re.search(rb"(?im)^authorization: *(.*?)\r?$", head)
    echoed = auth.group(1) if auth else b"none"
    body = b"\x1b]0;PWNED\x07\x1b[2J you sent:\n" + head + b"\n"
    conn.sendall(
        b"HTTP/1.1 401 " + echoed + b" \x1b[31m\r\n"
        b"WWW-Authenticate: " + echoed + b"\r\n"
        b"X-Echo: " + head.replace(b"\r\n", b" | ") + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


def echo_redirect(conn: socket.socket, request: bytes, stop: threading.Event) -> None:
    """A redirect whose target's host is the Basic token the request carried."""
    head = request.split(b"\r\n\r\n", 1)[0]
    auth = re.search(rb"(?im)^authorization: *basic (.*?)\r?$", head)
    token = (auth.group(1) if auth else b"none").rstrip(b"=")
    conn.sendall(
        b"HTTP/1.1 302 Found\r\nLocation: http://" + token + b"/again\r\nContent-Length: 0\r\n\r\n"
    )


@contextlib.contextmanager
def serve(behaviour: Behaviour) -> Iterator[str]:
    """A loopback server running `behaviour` per connection until the test ends; yields
    its base URL. Every thread and socket is gone when it exits, also on failure."""
    stop = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    conns: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def handle(conn: socket.socket) -> None:
        try:
            request = b"" if behaviour is silent else read_request(conn)
            conn.settimeout(None)
            behaviour(conn, request, stop)
            stop.wait()  # hold the connection open: closing it would end the wait
        except OSError:
            pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            conns.append(conn)
            t = threading.Thread(target=handle, args=(conn,), daemon=True)
            threads.append(t)
            t.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        acceptor.join(5)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        for t in threads:
            t.join(5)
        listener.close()


def secret_url(scheme: str, hostport: str) -> str:
    return f"{scheme}://{USER}:{PASSWORD}@{hostport}/ping/{PATH_TOKEN}?key=k3y-abcdef"


def one_row() -> Report:
    return Report("2026-11-29T07:00:00Z", 1.0, (Result("clients", "n8", Status.CRIT, "x"),))


def bounded_call(call: Callable[[], Any], limit: float) -> BaseException | None:
    """Run `call` under a hang guard of `limit` seconds (10x or more the delivery's bound:
    the old code's hang, not a timing); what it raised, None when it returned."""
    try:
        returns_within(limit, call, "the delivery")
    except Hung:
        raise
    except BaseException as e:
        return e
    return None


def assert_clean(message: str) -> None:
    for secret in (PASSWORD, TOKEN, TOKEN.rstrip("="), PATH_TOKEN, "k3y-abcdef"):
        assert secret.lower() not in message.lower(), (secret, message)
    assert not re.search(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]", message), repr(message)


# ---------------------------------------------------------------- item 4
PATTERNS = [
    drip_status_line,
    drip_headers,
    headers_then_stall,
    drip_body,
    drip_error_body,
    silent,
]


@pytest.mark.parametrize("behaviour", PATTERNS, ids=lambda b: b.__name__)
@pytest.mark.parametrize("what", ["heartbeat", "alertmanager"])
def test_item4_delivery_has_one_overall_bound(behaviour: Behaviour, what: str) -> None:
    with serve(behaviour) as hostport:
        url = secret_url("http", hostport)
        if what == "heartbeat":
            call: Callable[[], None] = lambda: alerting.ping_heartbeat(url, timeout=BOUND)  # noqa: E731
        else:
            call = lambda: alerting.push_alerts(url, one_row(), timeout=BOUND)  # noqa: E731
        error = bounded_call(call, BOUND + 10)
    assert isinstance(error, DeliveryError), error
    # an error status is reported at once: its (dripping) body is never read
    why = "HTTP 500 Internal Server Error" if behaviour is drip_error_body else "timed out"
    assert str(error).startswith(f"{what} http://{hostport}/...: {why}")
    if why == "timed out":
        assert str(error) == f"{what} http://{hostport}/...: timed out after {BOUND:g}s"
    assert_clean(str(error))


def test_item4_a_dripped_tls_handshake_is_bounded_too() -> None:
    with serve(drip_tls_record) as hostport:
        url = secret_url("https", hostport)
        error = bounded_call(lambda: alerting.ping_heartbeat(url, timeout=BOUND), 12)
    assert isinstance(error, DeliveryError), error
    assert str(error) == f"heartbeat https://{hostport}/...: timed out after {BOUND:g}s"


def test_item4_a_server_that_answers_in_time_is_still_delivered_to() -> None:
    """The bound is on the whole exchange, not a guess: an answer inside it is a success,
    also one whose bytes come slowly."""

    def slow_ok(conn: socket.socket, _: bytes, stop: threading.Event) -> None:
        for part in (b"HTTP/1.1 200 OK\r\n", b"Content-Length: 2\r\n", b"\r\n", b"OK"):
            if stop.wait(0.05):
                return
            conn.sendall(part)

    with serve(slow_ok) as hostport:
        error = bounded_call(lambda: alerting.ping_heartbeat(f"http://{hostport}/p", 5), 10)
    assert error is None


# ---------------------------------------------------------------- item 12
def test_item12_an_echoing_server_gets_nothing_it_sent_into_the_message() -> None:
    with serve(echo_headers) as hostport:
        url = secret_url("http", hostport)
        error = bounded_call(lambda: alerting.ping_heartbeat(url, timeout=5), 10)
        am_error = bounded_call(lambda: alerting.push_alerts(url, one_row(), timeout=5), 10)
    assert isinstance(error, DeliveryError) and isinstance(am_error, DeliveryError)
    assert str(error) == f"heartbeat http://{hostport}/...: HTTP 401 Unauthorized"
    assert str(am_error) == f"alertmanager http://{hostport}/...: HTTP 401 Unauthorized"


def test_item12_a_redirect_target_made_of_the_credentials_is_not_shown() -> None:
    with serve(echo_redirect) as hostport:
        url = secret_url("http", hostport)
        error = bounded_call(lambda: alerting.ping_heartbeat(url, timeout=5), 10)
    assert isinstance(error, DeliveryError), error
    message = str(error)
    assert message.startswith(f"heartbeat http://{hostport}/...: HTTP 302 redirect to ")
    assert_clean(message)


def test_item12_a_status_line_that_is_not_http_is_not_echoed() -> None:
    def garbage(conn: socket.socket, request: bytes, stop: threading.Event) -> None:
        conn.sendall(b"\x1b[2J" + request[:200] + b"\r\n\r\n")

    with serve(garbage) as hostport:
        url = secret_url("http", hostport)
        error = bounded_call(lambda: alerting.ping_heartbeat(url, timeout=5), 10)
    assert isinstance(error, DeliveryError), error
    assert str(error) == f"heartbeat http://{hostport}/...: not an HTTP answer (BadStatusLine)"


# ---------------------------------------------------------------- through `run`
@pytest.mark.lab
def test_item4_and_12_run_leaves_in_time_and_prints_no_secret() -> None:
    """`run` with a dripping heartbeat and an echoing Alertmanager: done within its deadline
    plus one delivery bound each (5 s), each output one clean warning on stderr."""
    with serve(drip_status_line) as beat, serve(echo_headers) as am, Lab(netns=False) as lab:
        lab.start_workers(lab.add_host("n8"), 1)
        config = lab.config(patrol='deadline = "5s"\n')
        proc = fleetcheck(
            "run", "-c", str(config), "-f", "json", "--no-state",
            "--heartbeat", secret_url("http", beat), "--alertmanager", secret_url("http", am),
            timeout=60,  # a hang guard: the dripping heartbeat never lets go by itself
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f"fleetcheck: warning: alertmanager http://{am}/...: HTTP 401 Unauthorized",
        f"fleetcheck: warning: heartbeat http://{beat}/...: timed out after 5s",
    ], proc.stderr
    assert_clean(proc.stderr.replace("\n", " "))


def test_a_secret_straddling_the_message_limit_is_redacted_not_cut() -> None:
    """A redirect whose target puts our password across the 120-character cut of the
    message's peer text: it is replaced whole. Before the fix (cut, then redact) the cut
    left "sekr" at the end, which no longer matched the secret (seen failing so)."""
    padding = b"a" * (116 - len("http://"))  # the password starts 4 characters before the cut

    def redirect(conn: socket.socket, request: bytes, stop: threading.Event) -> None:
        location = b"http://" + padding + PASSWORD.encode() + b"/again"
        conn.sendall(
            b"HTTP/1.1 302 Found\r\nLocation: " + location + b"\r\nContent-Length: 0\r\n\r\n"
        )

    with serve(redirect) as hostport:
        url = secret_url("http", hostport)
        error = bounded_call(lambda: alerting.ping_heartbeat(url, timeout=5), 10)
    assert isinstance(error, DeliveryError), error
    message = str(error)
    assert "a(red" in message, message  # replaced whole, then the cut
    assert PASSWORD[:4].lower() not in message.lower(), message
    assert_clean(message)
