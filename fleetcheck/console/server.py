"""`fleetcheck serve`: the read-only ops console over HTTP.

Guarantees: only GET and HEAD are answered (anything else is 405) and no handler writes
anything; it binds 127.0.0.1 unless told otherwise; with a token or a basic-auth pair every
path needs it (compared in constant time); every page carries a Content-Security-Policy that
allows no script at all, so even a rendering bug cannot run a log line.

`App` is the console as a WSGI application; `console/wsgi.py` serves it on waitress, with the
limits that keep slow or idle clients from starving it (docs/console.md).
"""

from __future__ import annotations

import base64
import hmac
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

from fleetcheck.console.charts import Focus
from fleetcheck.console.source import Source
from fleetcheck.core.context import utcnow
from fleetcheck.core.safe_text import one_line

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# what prometheus_client's generate_latest writes (newer clients label their default 1.0.0,
# a format older Prometheus servers do not know)
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def parse_listen(text: str) -> tuple[str, int]:
    """'ADDR:PORT', '[v6]:PORT' or ':PORT' (all interfaces). Raises ValueError."""
    host, sep, port_text = text.rpartition(":")
    if (
        not sep
        or not (port_text.isascii() and port_text.isdigit())
        or not 0 <= int(port_text) <= 65535
    ):
        raise ValueError(f"--listen {text}: expected ADDR:PORT, e.g. 127.0.0.1:8470")
    host = host.strip("[]") if host.startswith("[") else host
    if ":" in host and not text.startswith("["):
        raise ValueError(f"--listen {text}: write an IPv6 address in brackets, e.g. [::1]:8470")
    return host or "0.0.0.0", int(port_text)


@dataclass(frozen=True)
class Auth:
    """What a request must carry: a bearer token, a basic-auth pair, or either (both set)."""

    token: str | None = None
    basic: str | None = None  # "user:password"

    @property
    def required(self) -> bool:
        return bool(self.token or self.basic)

    def allows(self, header: str | None) -> bool:
        if not self.required:
            return True
        if not header:
            return False
        scheme, _, value = header.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and self.token:
            return hmac.compare_digest(value.encode(), self.token.encode())
        if scheme.lower() == "basic" and self.basic:
            try:
                given = base64.b64decode(value, validate=True)
            except ValueError:
                return False
            return hmac.compare_digest(given, self.basic.encode())
        return False

    def challenge(self) -> str:
        if self.basic:
            return 'Basic realm="fleetcheck", charset="UTF-8"'
        return 'Bearer realm="fleetcheck"'


@dataclass
class Console:
    """What the handlers need: the data source, the fleet's settings, the auth."""

    source: Source
    every: float  # the patrol interval: /healthz is 503 past 2 x every
    window: float  # seconds of history the charts and timelines show
    window_text: str
    focus: Focus = field(default_factory=dict)  # per chart, each host's item (chart_focus)
    auth: Auth = field(default_factory=Auth)
    clock: Callable[[], datetime] = utcnow
    _cache: dict[tuple[Any, ...], bytes] = field(default_factory=dict, repr=False)
    _cache_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def cached(self, key: tuple[Any, ...], make: Callable[[], bytes]) -> bytes:
        """What depends only on the recorded rounds is built once per new round, not per
        request (the charts of a week of rounds take ~100 ms to draw)."""
        with self._cache_lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        value = make()
        with self._cache_lock:
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = value
        return value

    @property
    def stale_after(self) -> float:
        return 2 * self.every

    def route(self, path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET. Never writes anything."""
        from fleetcheck.console import html

        if path == "/static/console.css":
            return 200, "text/css; charset=utf-8", html.CSS.encode()
        if path in ("/static/favicon.svg", "/favicon.ico"):
            return 200, "image/svg+xml", html.FAVICON.encode()
        snap = self.source.snapshot()
        now = self.clock()
        if path == "/healthz":
            return self._healthz(snap.finished_at, now)
        if path == "/report.json":
            if snap.report is None:
                return 503, "application/json", b'{"error": "no round recorded yet"}\n'
            from fleetcheck.render import json as render_json

            report = snap.report
            body = self.cached(
                ("report", snap.version), lambda: (render_json.render(report) + "\n").encode()
            )
            return 200, "application/json", body
        if path == "/metrics":
            if snap.report is None:
                return 503, "text/plain; charset=utf-8", b"no round recorded yet\n"
            from fleetcheck.render import prometheus

            report = snap.report
            body = self.cached(
                ("metrics", snap.version), lambda: prometheus.render(report).encode()
            )
            return 200, METRICS_TYPE, body
        html_type = "text/html; charset=utf-8"
        since = now - timedelta(seconds=self.window)
        if path == "/":
            number = (query.get("page") or ["1"])[0]
            text = html.grid_page(
                snap,
                now,
                self.stale_after,
                int(number) if number.isascii() and number.isdigit() else 1,
            )
            return 200, html_type, text.encode()
        if path == "/charts":
            from fleetcheck.console.chart_reads import window_charts

            def draw() -> bytes:
                drawn, t0, t1 = window_charts(snap, since, self.focus, now)
                return html.sections_of(drawn, t0, t1).encode()

            key = ("charts", snap.version, *snap.window_key(since))
            sections = self.cached(key, draw).decode()
            text = html.charts_page(snap, sections, self.window_text, now, self.stale_after)
            return 200, html_type, text.encode()
        got: str | None = None
        if path == "/row":
            check = (query.get("check") or [""])[0]
            host = (query.get("host") or [""])[0] or None
            window = snap.host_window(since, host)  # from a database: this host's rows only
            got = html.row_page(snap, check, host, window, now, self.stale_after)
            missing = f"no row {check!r} for {host or 'the broker'} in the newest round"
        elif path == "/host":
            name = (query.get("host") or [""])[0]
            got = html.host_page(snap, name, now, self.stale_after)
            missing = f"no row of host {name!r} in the newest round"
        else:
            missing = f"no page {path}"
        if got is not None:
            return 200, html_type, got.encode()
        return 404, html_type, html.error_page(404, missing).encode()

    def _healthz(self, finished: datetime | None, now: datetime) -> tuple[int, str, bytes]:
        from fleetcheck.parse.duration import format_duration

        text_type = "text/plain; charset=utf-8"
        if finished is None:
            return 503, text_type, b"stale: no patrol round recorded yet\n"
        age = max(0.0, (now - finished).total_seconds())
        limit = self.stale_after
        if age > limit:
            msg = (
                f"stale: the newest round finished {format_duration(round(age))} ago; "
                f"expected one every {format_duration(self.every)} (limit "
                f"{format_duration(limit)})\n"
            )
            return 503, text_type, msg.encode()
        return 200, text_type, f"ok: newest round {format_duration(round(age))} ago\n".encode()


def _headers(status: int, ctype: str, auth: Auth) -> list[tuple[str, str]]:
    headers = [("Content-Type", ctype), *SECURITY_HEADERS.items()]
    if status == 401:
        headers.append(("WWW-Authenticate", auth.challenge()))
    if status == 405:
        headers.append(("Allow", "GET, HEAD"))
    return headers


# an environ key the application sets to ask the server to end the connection after its
# answer: a refused request's client gets one answer and a close (console/wsgi.py)
CLOSE = "fleetcheck.close_connection"
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


@dataclass(frozen=True)
class App:
    """The console as a WSGI application. The server hands it whole requests (a body, if
    any, already read; it is dropped). Auth first, then the method; a refusal carries
    `environ[CLOSE]`."""

    console: Console

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        status, ctype, body = self.answer(environ)
        headers = _headers(status, ctype, self.console.auth)
        headers.append(("Content-Length", str(len(body))))
        start_response(f"{status} {HTTPStatus(status).phrase}", headers)
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

    def answer(self, environ: dict[str, Any]) -> tuple[int, str, bytes]:
        text = "text/plain; charset=utf-8"
        if not self.console.auth.allows(environ.get("HTTP_AUTHORIZATION")):
            environ[CLOSE] = True
            return 401, text, b"authorization required\n"
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            environ[CLOSE] = True
            return 405, text, b"read-only: only GET and HEAD\n"
        try:
            path = environ.get("PATH_INFO") or "/"
            return self.console.route(path, parse_qs(environ.get("QUERY_STRING", "")))
        except Exception as e:  # a bug must be a 500 with one line, not a dropped connection
            return 500, text, (one_line(f"internal error: {type(e).__name__}: {e}") + "\n").encode()


def start_patrols(
    round_fn: Callable[[], Any], every: float, stop: threading.Event
) -> threading.Thread:
    """serve --every: patrol in the background, one round every `every` seconds."""
    from fleetcheck.rounds import patrol

    def loop() -> None:
        def safe_round() -> Any:
            try:
                return round_fn()
            except Exception as e:  # keep serving; the stale banner will show it
                from fleetcheck.core.stderr import warn

                warn(f"patrol failed: {e}")
                return None

        patrol.repeat(safe_round, every, None, lambda report, nxt: None, stop=stop)

    thread = threading.Thread(target=loop, name="fleetcheck-serve-patrol", daemon=True)
    thread.start()
    return thread
