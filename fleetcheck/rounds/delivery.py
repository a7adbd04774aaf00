"""One HTTP request to an alerting endpoint, bounded as a whole and reported without secrets.

Why a whole-request bound: urllib's `timeout` bounds each socket operation, not the request.
A server that drips a byte every few seconds, sends its headers and stalls, or drips a TLS
record, resets that timer on every byte and holds `run` (and so `run --every`, cron's
`flock -n` and a systemd unit's TimeoutStartSec) for as long as it likes. Here the exchange
(name lookup, connect, TLS handshake, send, status, headers and the bounded body read) runs
in a worker thread; the caller waits `timeout` seconds in all, then shuts the sockets down
(which wakes the worker) and reports the timeout. A name lookup cannot be interrupted: its
worker finishes in the background when the resolver gives up, the caller does not wait.

Why so little of the answer is shown: the peer is not trusted. An error body, a reason
phrase or a header may echo what we sent (a server that echoes request headers puts the
Basic credentials on stderr) or carry terminal escapes. A warning names the target as
scheme://host:port, the status code and the standard reason phrase for that code; nothing
from the body, no header but a redirect's target (shown as scheme://host:port), and every
piece of it through `printable` with the URL's secrets scrubbed. Redirects are never followed
(urllib would drop a POST's body and forward credentials)."""

from __future__ import annotations

import base64
import http
import http.client
import re
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from fleetcheck.core.safe_text import one_line

USER_AGENT = "fleetcheck"
BODY_BYTES = 65536  # what is read of a successful answer (then the connection is closed)


class DeliveryError(Exception):
    """An alert or heartbeat could not be delivered. `str()` is one secret-free line."""


def redact(url: str) -> str:
    """`https://user:pw@hc-ping.com/uuid?k=v` -> `https://hc-ping.com/...`."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(unparsable URL)"
    if not parts.scheme or not host:
        return "(not an http:// URL)"
    if ":" in host:
        host = f"[{host}]"
    shown = f"{parts.scheme}://{host}" + (f":{port}" if port else "")
    if parts.path.strip("/") or parts.query or parts.fragment:
        shown += "/..."
    return shown


def _split_userinfo(url: str) -> tuple[str, str | None]:
    """(URL without user:password@, Basic Authorization header or None): urllib would take the
    userinfo for part of the host name."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(
        f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode()
    ).decode()
    return urllib.parse.urlunsplit(parts._replace(netloc=hostport)), f"Basic {token}"


def _secrets(url: str, auth: str | None) -> list[str]:
    """What of the URL must never appear in a message: the password (raw and decoded), the
    Basic token, the path's segments and the query's values (healthchecks.io puts its UUID in
    the path, others a token in the query)."""
    parts = urllib.parse.urlsplit(url)
    found: list[str] = []
    if auth is not None:
        found.append(auth.split(" ", 1)[1])
    if parts.password:
        found += [parts.password, urllib.parse.unquote(parts.password)]
    found += [urllib.parse.unquote(s) for s in parts.path.split("/")]
    for _, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        found.append(value)
    # short pieces ("v2", "api") would blank out ordinary words; secrets are longer
    return sorted({s for s in found if len(s) >= 6}, key=len, reverse=True)


def _safe(text: str, secrets: list[str], limit: int = 120) -> str:
    """Peer-supplied `text` as one printable line, secrets of our URL replaced, bounded.

    Secrets are replaced before the cut: a secret straddling the limit would no longer
    match whole, and its first part would be shown."""
    text = " ".join(text.split())
    for secret in secrets:
        text = re.sub(re.escape(secret), "(redacted)", text, flags=re.IGNORECASE)
    return one_line(text)[:limit]


class _Sockets:
    """The sockets one delivery opened, so that the caller can shut them down at the
    deadline: a shutdown wakes a worker blocked in recv/send (plain or TLS) at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self.aborted = False

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.append(sock)
            aborted = self.aborted
        if aborted:  # the deadline passed while this one was being opened
            _shut(sock)

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            socks = list(self._socks)
        for sock in socks:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # closed already, never connected, or detached into its TLS wrapper


def _handlers(sockets: _Sockets) -> list[Any]:
    """urllib handlers whose connections register their sockets with `sockets`; TLS is
    set up without the implicit handshake so that the socket is registered before it."""

    class Plain(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            sockets.add(self.sock)

    class Tls(http.client.HTTPSConnection):
        def connect(self) -> None:
            http.client.HTTPConnection.connect(self)
            sockets.add(self.sock)
            context: ssl.SSLContext = getattr(self, "_context")  # noqa: B009 (private)
            server_hostname = getattr(self, "_tunnel_host", None) or self.host
            tls = context.wrap_socket(
                self.sock, server_hostname=server_hostname, do_handshake_on_connect=False
            )
            self.sock = tls
            sockets.add(tls)
            tls.do_handshake()

    class PlainHandler(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(Plain, req)

    class TlsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            return self.do_open(Tls, req, context=getattr(self, "_context", None))

    return [PlainHandler(), TlsHandler(), _NoRedirect()]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse every redirect: the 3xx reaches the caller as an HTTPError."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> None:
        return None


def _phrase(code: int) -> str:
    """The standard reason phrase for `code` (never the server's own: it is peer text that
    may echo the request), empty for a code without one."""
    try:
        return " " + http.HTTPStatus(code).phrase
    except ValueError:
        return ""


def deliver(
    what: str,
    url: str,
    data: bytes | None,
    timeout: float,
    headers: dict[str, str],
    suffix: str = "",
) -> None:
    """GET (`data` None) or POST `url` + `suffix` (an API path such as /api/v2/alerts: it is
    no secret, `url`'s own path may be), the whole exchange within `timeout` seconds.

    Raises DeliveryError: `what`, the target as scheme://host:port and why, on one line."""
    from fleetcheck.config import http_url_problem

    problem = http_url_problem(url)
    if problem is not None:
        raise DeliveryError(f"{what}: {problem}")
    secrets = _secrets(url, _split_userinfo(url)[1])
    if suffix:
        url = url.rstrip("/") + suffix
    shown = redact(url)
    plain_url, auth = _split_userinfo(url)
    request = urllib.request.Request(
        plain_url, data=data, method="POST" if data is not None else "GET"
    )
    request.add_header("User-Agent", USER_AGENT)
    if auth is not None:
        request.add_header("Authorization", auth)
    for key, value in headers.items():
        request.add_header(key, value)
    sockets = _Sockets()
    outcome: list[BaseException | None] = []

    def exchange() -> None:
        try:
            opener = urllib.request.build_opener(*_handlers(sockets))
            with opener.open(request, timeout=timeout) as response:
                response.read(BODY_BYTES)
            outcome.append(None)
        except BaseException as e:  # handed to the caller, which words it
            outcome.append(e)

    worker = threading.Thread(target=exchange, name=f"fleetcheck {what}", daemon=True)
    worker.start()
    worker.join(timeout)
    if not outcome:
        sockets.abort()
        raise DeliveryError(f"{what} {shown}: timed out after {timeout:g}s")
    error = outcome[0]
    if error is None:
        return
    raise DeliveryError(f"{what} {shown}: {_why(error, plain_url, timeout, secrets)}") from None


def _why(e: BaseException, url: str, timeout: float, secrets: list[str]) -> str:
    """One line for a failed exchange: the status and standard phrase, a redirect's target
    as scheme://host:port, or the local error; never a body or a header's text."""
    if isinstance(e, urllib.error.HTTPError):
        try:
            e.close()  # its body is not read: nothing of it is shown
        except Exception:
            pass
        if 300 <= e.code < 400:
            location = (e.headers.get("Location") or "") if e.headers is not None else ""
            target = _safe(redact(urllib.parse.urljoin(url, location)), secrets)
            return (
                f"HTTP {e.code} redirect to {target} not followed "
                "(a redirected POST loses its body): configure the final URL"
            )
        return f"HTTP {e.code}{_phrase(e.code)}"
    if isinstance(e, urllib.error.URLError):
        reason = e.reason
        if isinstance(reason, BaseException):  # what urllib wrapped: said as itself
            return _why(reason, url, timeout, secrets)
        return _safe(str(reason), secrets)
    if isinstance(e, TimeoutError | socket.timeout):
        return f"timed out after {timeout:g}s"
    if isinstance(e, http.client.HTTPException):
        return _not_http(e)
    if isinstance(e, ssl.SSLError):
        return "TLS failed: " + _safe(e.reason or type(e).__name__, secrets)
    if isinstance(e, OSError):
        return e.strerror or type(e).__name__
    if isinstance(e, ValueError):  # e.g. a malformed URL urllib cannot open
        return _safe(str(e), secrets)
    return f"internal error ({type(e).__name__})"


def _not_http(e: http.client.HTTPException) -> str:
    """A peer that did not answer in HTTP: say so, without its bytes (BadStatusLine carries
    the raw line it sent)."""
    if isinstance(e, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(e, http.client.IncompleteRead):
        return "the server closed the connection in the middle of its answer"
    return f"not an HTTP answer ({type(e).__name__})"
