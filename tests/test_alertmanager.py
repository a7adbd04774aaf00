"""--alertmanager and --heartbeat: a real Alertmanager (Debian prometheus-alertmanager) on
loopback receives firing alerts, then sees them resolve; delivery failures are one clean line.
The heartbeat is checked against a small HTTP server on loopback that records what it got."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.core.model import Report, Result, Standing, Status
from fleetcheck.rounds import alerting, delivery
from fleetcheck.rounds.alerting import DeliveryError, build_alerts, push_alerts
from tests.hang import returns_within
from tests.lab import free_port, wait_for
from tests.standing import Row, recorded

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
NOW = datetime(2026, 11, 29, 7, 0, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback only: an inherited http_proxy must not route our test traffic elsewhere."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)


def report(*results: Row) -> Report:
    return recorded("2026-11-29T07:00:00Z", 1.0, results)


# ------------------------------------------------------------------ the payload (pure)
def test_payload_firing_and_resolved() -> None:
    r = report(
        Result("clients", "n8", Status.CRIT, "no broker connections"),
        Result("logs", "mini", Status.WARN, "log silent 12m"),
        Result("queue_depth", None, Status.UNKNOWN, "broker unreachable"),
        Result("clients", "n9", Status.OK, "9 connections"),
        # bad, but not for fail_after rounds yet: not firing
        (Result("logs", "n9", Status.CRIT, "log silent 2h"), Standing("x", alerting=False)),
    )
    alerts = build_alerts(r, now=NOW, expires_after=600)
    firing = [a for a in alerts if a["endsAt"] != "2026-11-29T07:00:00.000Z"]
    resolved = [a for a in alerts if a["endsAt"] == "2026-11-29T07:00:00.000Z"]
    assert sorted((a["labels"].get("host", ""), a["labels"]["severity"]) for a in firing) == [
        ("", "unknown"),
        ("mini", "warning"),
        ("n8", "critical"),
    ]
    n8 = next(a for a in firing if a["labels"].get("host") == "n8")
    assert n8["labels"] == {
        "alertname": "FleetcheckCheck",
        "check": "clients",
        "host": "n8",
        "severity": "critical",
    }
    assert n8["annotations"] == {"summary": "n8 clients: no broker connections", "status": "CRIT"}
    assert n8["startsAt"] == "2026-11-29T07:00:00.000Z"
    assert n8["endsAt"] == "2026-11-29T07:10:00.000Z"
    broker = next(a for a in firing if "host" not in a["labels"])
    assert broker["annotations"]["summary"] == "* broker-wide queue_depth: broker unreachable"
    # every firing row resolves its other two severities; every other row all three
    assert len(resolved) == 3 * 2 + 2 * 3
    assert {a["labels"]["severity"] for a in resolved if a["labels"].get("host") == "n8"} == {
        "warning",
        "unknown",
    }
    assert all(a["startsAt"] == a["endsAt"] for a in resolved)


def test_payload_since_extra_labels_and_gone_rows() -> None:
    since = (NOW - timedelta(hours=2, minutes=31)).isoformat().replace("+00:00", "Z")
    r = report((Result("clients", "mini", Status.CRIT, "none"), Standing(since, 11, alerting=True)))
    alerts = build_alerts(
        r,
        resolved=[("logs", "gone", None), ("clients", "mini", None)],
        now=NOW,
        extra_labels={"env": "lab"},
    )
    first = alerts[0]
    assert first["startsAt"] == "2026-11-29T04:29:00.000Z"
    assert first["annotations"]["since"] == since and first["annotations"]["bad_rounds"] == "11"
    assert first["labels"]["env"] == "lab"
    gone = [a for a in alerts if a["labels"].get("host") == "gone"]
    assert len(gone) == 3 and all(a["endsAt"] == a["startsAt"] for a in gone)
    assert gone[0]["annotations"]["summary"] == "gone logs: no longer checked"
    # a pair in `resolved` that is also in the report is not resolved twice
    assert len([a for a in alerts if a["labels"].get("host") == "mini"]) == 3


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://127.0.0.1:9093", "http://127.0.0.1:9093"),
        ("https://user:s3cret@am.example.org/api", "https://am.example.org/..."),
        ("https://hc-ping.com/0e2bbc4a-uuid-secret", "https://hc-ping.com/..."),
        ("http://h:8080/?token=s3cret", "http://h:8080/..."),
        ("http://[::1]:9093/", "http://[::1]:9093"),
        ("http://h:99999999/", "(unparsable URL)"),
        ("hc-ping.com/abc-secret", "(not an http:// URL)"),  # never ":///..."
    ],
)
def test_redact(url: str, shown: str) -> None:
    assert delivery.redact(url) == shown


@pytest.mark.parametrize(
    "url, problem",
    [
        ("file:///etc/passwd", "unsupported scheme file://"),
        ("127.0.0.1:9093", "no scheme"),
        ("localhost:9093", "unsupported scheme localhost://"),
        ("hc-ping.com/abc", "no scheme"),
        ("http://", "no host name"),
        ("http://h:notaport/", "not a valid URL"),
    ],
)
def test_bad_urls_are_refused_before_any_traffic(url: str, problem: str) -> None:
    with pytest.raises(DeliveryError) as e:
        push_alerts(url, report(Result("c", "h", Status.CRIT, "x")))
    assert problem in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------------ a real Alertmanager
@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    """A real Alertmanager on a free loopback port (see run_alertmanager)."""
    with run_alertmanager(tmp_path) as base:
        yield base


@contextlib.contextmanager
def run_alertmanager(tmp_path: Path) -> Iterator[str]:
    """A real Alertmanager on a free loopback port: own storage, clustering off (so it gossips
    with nobody), a receiver that sends nothing. Its process group is killed at the end."""
    binary = ALERTMANAGER
    if binary is None:
        message = "prometheus-alertmanager is not installed (apt-get install ...)"
        if os.environ.get("FLEETCHECK_REQUIRE_LAB") == "1":
            pytest.fail(message)
        pytest.skip(message)
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "alertmanager.yml"
    config.write_text('route:\n  receiver: "null"\nreceivers:\n  - name: "null"\n')
    port = free_port()
    log = open(tmp_path / "alertmanager.log", "wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError((tmp_path / "alertmanager.log").read_text())
        with urllib.request.urlopen(base + "/-/ready", timeout=2) as response:
            return response.status == 200

    try:
        wait_for(ready, timeout=20, what="alertmanager to be ready")
        yield base
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
        log.close()


def active(base: str) -> dict[tuple[str, str | None], str]:
    """(check, host) -> severity of the alerts Alertmanager holds as active."""
    with urllib.request.urlopen(base + "/api/v2/alerts?active=true", timeout=5) as response:
        alerts = json.load(response)
    out = {}
    for a in alerts:
        assert a["status"]["state"] == "active"
        assert a["labels"]["alertname"] == "FleetcheckCheck"
        out[(a["labels"]["check"], a["labels"].get("host"))] = a["labels"]["severity"]
    return out


def summaries(base: str) -> dict[str, str]:
    with urllib.request.urlopen(base + "/api/v2/alerts", timeout=5) as response:
        return {
            a["labels"].get("host", ""): a["annotations"]["summary"] for a in json.load(response)
        }


def test_alerts_fire_change_severity_and_resolve(alertmanager: str) -> None:
    base = alertmanager
    push_alerts(
        base,
        report(
            Result("clients", "n8", Status.CRIT, "no broker connections"),
            (Result("logs", "mini", Status.WARN, "log silent 12m"), Standing("x", alerting=False)),
            Result("queue_depth", None, Status.WARN, "inbox 120 jobs (cap 100)"),
            Result("clients", "n9", Status.OK, "9 connections"),
        ),
    )
    assert active(base) == {("clients", "n8"): "critical", ("queue_depth", None): "warning"}
    assert summaries(base)["n8"] == "n8 clients: no broker connections"

    # next round: n8 improves to WARN (its critical alert must end), mini reaches fail_after
    push_alerts(
        base,
        report(
            Result("clients", "n8", Status.WARN, "3 connections (< 10)"),
            (Result("logs", "mini", Status.WARN, "log silent 27m"), Standing("x", alerting=True)),
            Result("queue_depth", None, Status.WARN, "inbox 130 jobs (cap 100)"),
            Result("clients", "n9", Status.OK, "9 connections"),
        ),
    )
    assert active(base) == {
        ("clients", "n8"): "warning",
        ("logs", "mini"): "warning",
        ("queue_depth", None): "warning",
    }

    # everything healthy again; mini's logs check was removed from the config meanwhile
    push_alerts(
        base,
        report(
            Result("clients", "n8", Status.OK, "12 connections"),
            Result("queue_depth", None, Status.OK, "inbox 3 jobs"),
            Result("clients", "n9", Status.OK, "9 connections"),
        ),
        resolved=[("logs", "mini", None)],
    )
    assert active(base) == {}


def test_unresolved_rows_stay_firing_until_they_expire(alertmanager: str) -> None:
    base = alertmanager
    push_alerts(base, report(Result("clients", "n8", Status.CRIT, "none")), expires_after=2)
    assert active(base) == {("clients", "n8"): "critical"}
    # no further patrol: the alert lapses by itself at endsAt (fleetcheck died; the heartbeat
    # reports that), it does not fire forever
    wait_for(lambda: active(base) == {}, timeout=15, what="the alert to expire")


def test_http_error_is_one_clean_line(alertmanager: str) -> None:
    # a label name Alertmanager refuses: its 400 and reason come back in one line
    with pytest.raises(DeliveryError) as e:
        push_alerts(
            alertmanager,
            report(Result("clients", "n8", Status.CRIT, "none")),
            extra_labels={"bad-label": "x"},
        )
    message = str(e.value)
    assert message.startswith(f"alertmanager {alertmanager}/...: HTTP 400")
    assert "\n" not in message and "Traceback" not in message
    # a wrong base path: 404
    with pytest.raises(DeliveryError) as e:
        push_alerts(alertmanager + "/nope", report(Result("c", "h", Status.CRIT, "x")))
    assert "HTTP 404" in str(e.value)


def test_nothing_listening_is_one_secret_free_line() -> None:
    port = free_port()
    url = f"http://ops:s3cret@127.0.0.1:{port}/am?token=t0ken"
    with pytest.raises(DeliveryError) as e:
        push_alerts(url, report(Result("clients", "n8", Status.CRIT, "none")), timeout=2)
    message = str(e.value)
    assert message == f"alertmanager http://127.0.0.1:{port}/...: Connection refused"
    assert "s3cret" not in message and "t0ken" not in message and "ops" not in message


def test_a_silent_server_times_out_within_the_timeout() -> None:
    with socket.socket() as listener:  # accepts connections (backlog), never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        row = report(Result("clients", "n8", Status.CRIT, "x"))
        with pytest.raises(DeliveryError) as e:  # the message names the bound that ended it
            returns_within(
                20,  # a hang guard, 40x the timeout: unbounded, the wait never ends
                lambda: push_alerts(f"http://127.0.0.1:{port}", row, timeout=0.5),
                "push_alerts to a server that never answers (timeout 0.5s)",
            )
    assert str(e.value) == f"alertmanager http://127.0.0.1:{port}/...: timed out after 0.5s"


# ------------------------------------------------------------------ heartbeat
@pytest.fixture
def recorder() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that records request paths: 200 on /ping/*, 404 elsewhere."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            seen.append(f"{self.command} {self.path}")
            auth = self.headers.get("Authorization")
            if auth:
                seen.append(auth)
            code = 200 if self.path.startswith("/ping/") else 404
            body = b"OK" if code == 200 else b"not found\n(no such check)"
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_heartbeat_is_one_get(recorder: tuple[str, list[str]]) -> None:
    base, seen = recorder
    uuid = "0e2bbc4a-5e5b-4a8c-9b1d-6c0f5d3f1a2b"
    alerting.ping_heartbeat(f"{base}/ping/{uuid}")
    assert seen == [f"GET /ping/{uuid}"]


def test_userinfo_becomes_basic_auth(recorder: tuple[str, list[str]]) -> None:
    base, seen = recorder
    url = base.replace("http://", "http://ops:s%40cret@") + "/ping/x"
    alerting.ping_heartbeat(url)
    assert seen == ["GET /ping/x", "Basic " + base64.b64encode(b"ops:s@cret").decode()]


def test_heartbeat_errors(recorder: tuple[str, list[str]]) -> None:
    base, _ = recorder
    with pytest.raises(DeliveryError) as e:
        alerting.ping_heartbeat(f"{base}/wrong/secret-uuid")
    message = str(e.value)
    # item 12 of issue 22: the body is not echoed, only the status and its standard phrase
    assert message == f"heartbeat {base}/...: HTTP 404 Not Found"
    assert "secret-uuid" not in message
    port = free_port()
    with pytest.raises(DeliveryError) as e:
        alerting.ping_heartbeat(f"http://127.0.0.1:{port}/ping/x", timeout=2)
    assert str(e.value) == f"heartbeat http://127.0.0.1:{port}/...: Connection refused"
