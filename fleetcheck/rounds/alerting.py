"""Feeding the alerting stack: Alertmanager (API v2) and a dead man's switch (heartbeat).

Alertmanager gets every row each patrol, so this side stays stateless: a row that should
alert fires with `endsAt` = now + expires_after (alerts lapse if patrols stop), every other
row and severity is sent resolved. Severity is a label, so a row going WARN -> CRIT ends its
warning alert. The heartbeat is one GET after each completed patrol, whatever the fleet's
status: it says fleetcheck is patrolling, not that the fleet is well.

Redirects are never followed (urllib would drop a POST's body and forward credentials).
Every failure is a DeliveryError of one line without secrets: URLs shown as scheme://host:port."""

from __future__ import annotations

import base64
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetcheck.core.model import Report, Result, Status, place
from fleetcheck.iso import iso_utc, parse_iso

ALERTNAME = "FleetcheckCheck"
SEVERITIES = {Status.WARN: "warning", Status.CRIT: "critical", Status.UNKNOWN: "unknown"}
DEFAULT_EXPIRES_AFTER = 2700.0  # 3 x the default 15-minute patrol interval
USER_AGENT = "fleetcheck"


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


def check_url(url: str, what: str = "URL") -> None:
    """Raise DeliveryError unless `url` is an http(s) URL with a host (for early validation)."""
    from fleetcheck.config import http_url_problem

    problem = http_url_problem(url)
    if problem is not None:
        raise DeliveryError(f"{what}: {problem}")


def _labels(
    check: str, host: str | None, severity: str, extra: Mapping[str, str]
) -> dict[str, str]:
    labels = {k: v for k, v in extra.items() if v}
    labels.update({"alertname": ALERTNAME, "check": check, "severity": severity})
    if host:
        labels["host"] = host
    return labels


def _subject(check: str, host: str | None) -> str:
    return f"{place(host)} {check}"


def build_alerts(
    report: Report,
    resolved: Iterable[tuple[str, str | None]] = (),
    now: datetime | None = None,
    expires_after: float = DEFAULT_EXPIRES_AFTER,
    extra_labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The Alertmanager v2 `postableAlerts` body for a report (pure; see the module doc)."""
    now = now or datetime.now(UTC)
    extra = dict(extra_labels or {})
    ends = iso_utc(now)
    alerts: list[dict[str, Any]] = []
    rows: set[tuple[str, str | None]] = set()

    def resolve(check: str, host: str | None, keep: str | None, summary: str) -> None:
        for severity in SEVERITIES.values():
            if severity != keep:
                alerts.append(
                    {
                        "labels": _labels(check, host, severity, extra),
                        "annotations": {"summary": summary, "status": "OK"},
                        "startsAt": ends,
                        "endsAt": ends,
                    }
                )

    for r in report.sorted_results():
        if (r.check, r.host) in rows:
            continue
        rows.add((r.check, r.host))
        subject = f"{_subject(r.check, r.host)}: {r.summary}"
        if r.should_alert and r.status in SEVERITIES:
            severity = SEVERITIES[r.status]
            alerts.append(_firing(r, severity, subject, now, expires_after, extra))
            resolve(r.check, r.host, severity, subject)
        else:
            resolve(r.check, r.host, None, subject)
    for check, host in resolved:
        if (check, host) not in rows:
            rows.add((check, host))
            resolve(check, host, None, f"{_subject(check, host)}: no longer checked")
    return alerts


def _firing(
    r: Result,
    severity: str,
    subject: str,
    now: datetime,
    expires_after: float,
    extra: Mapping[str, str],
) -> dict[str, Any]:
    annotations = {"summary": subject, "status": r.status.label}
    starts = now
    if r.since is not None:
        annotations["since"] = r.since
        annotations["bad_rounds"] = str(r.bad_rounds)
        try:
            starts = min(now, parse_iso(r.since))
        except ValueError:
            pass
    return {
        "labels": _labels(r.check, r.host, severity, extra),
        "annotations": annotations,
        "startsAt": iso_utc(starts),
        "endsAt": iso_utc(now + timedelta(seconds=expires_after)),
    }


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


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse every redirect: the 3xx reaches the caller as an HTTPError."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _request(
    what: str, url: str, data: bytes | None, timeout: float, headers: dict[str, str]
) -> None:
    check_url(url, what)
    shown = redact(url)
    url, auth = _split_userinfo(url)
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    request.add_header("User-Agent", USER_AGENT)
    if auth is not None:
        request.add_header("Authorization", auth)
    for key, value in headers.items():
        request.add_header(key, value)
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            response.read(65536)
    except urllib.error.HTTPError as e:
        if 300 <= e.code < 400:
            target = urllib.parse.urljoin(url, e.headers.get("Location") or "")
            raise DeliveryError(
                f"{what} {shown}: HTTP {e.code} redirect to {redact(target)} not followed "
                "(a redirected POST loses its body): configure the final URL"
            ) from None
        detail = ""
        try:
            body = e.read(2048).decode("utf-8", "replace")
            detail = " ".join(body.split())[:200]
        except OSError:
            pass
        raise DeliveryError(
            f"{what} {shown}: HTTP {e.code} {e.reason}" + (f": {detail}" if detail else "")
        ) from None
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, TimeoutError | socket.timeout):
            message = f"timed out after {timeout:g}s"
        elif isinstance(reason, OSError):
            message = reason.strerror or type(reason).__name__
        else:
            message = " ".join(str(reason).split())
        raise DeliveryError(f"{what} {shown}: {message}") from None
    except TimeoutError:
        raise DeliveryError(f"{what} {shown}: timed out after {timeout:g}s") from None
    except OSError as e:
        raise DeliveryError(f"{what} {shown}: {e.strerror or type(e).__name__}") from None
    except ValueError as e:  # e.g. a malformed URL urllib cannot open
        raise DeliveryError(f"{what} {shown}: {' '.join(str(e).split())[:120]}") from None


def push_alerts(
    url: str,
    report: Report,
    resolved: Iterable[tuple[str, str | None]] = (),
    timeout: float = 5,
    expires_after: float = DEFAULT_EXPIRES_AFTER,
    extra_labels: Mapping[str, str] | None = None,
) -> None:
    """POST the report's alerts (firing and resolved) to Alertmanager at `url` (its base URL,
    e.g. http://alertmanager:9093). Raises DeliveryError."""
    alerts = build_alerts(report, resolved, expires_after=expires_after, extra_labels=extra_labels)
    if not alerts:
        return
    endpoint = url.rstrip("/") + "/api/v2/alerts"
    body = json.dumps(alerts).encode()
    _request("alertmanager", endpoint, body, timeout, {"Content-Type": "application/json"})


def ping_heartbeat(url: str, timeout: float = 5) -> None:
    """GET the dead man's switch `url` after a completed patrol, whatever the fleet's status
    (it proves the patrol ran, not that the fleet is well). Raises DeliveryError."""
    _request("heartbeat", url, None, timeout, {})
