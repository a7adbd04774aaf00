"""Feeding the alerting stack: Alertmanager (API v2) and a dead man's switch (heartbeat).

Alertmanager gets every row each patrol, so this side stays stateless: a row that should
alert fires with `endsAt` = now + expires_after (alerts lapse if patrols stop), every other
row and severity is sent resolved. Severity is a label, so a row going WARN -> CRIT ends its
warning alert. The heartbeat is one GET after each completed patrol, whatever the fleet's
status: it says fleetcheck is patrolling, not that the fleet is well.
Each delivery is bounded as a whole and fails as one secret-free line (rounds.delivery)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetcheck.core.model import Report, Result, Standing, Status, place
from fleetcheck.iso import iso_utc, parse_iso
from fleetcheck.rounds.delivery import DeliveryError as DeliveryError
from fleetcheck.rounds.delivery import deliver

ALERTNAME = "FleetcheckCheck"
SEVERITIES = {Status.WARN: "warning", Status.CRIT: "critical", Status.UNKNOWN: "unknown"}
DEFAULT_EXPIRES_AFTER = 2700.0  # 3 x the default 15-minute patrol interval


Row = tuple[str, str | None, str | None]  # (check, host, item): what an alert is about


def _labels(row: Row, severity: str, extra: Mapping[str, str]) -> dict[str, str]:
    check, host, item = row
    labels = {k: v for k, v in extra.items() if v}
    labels.update({"alertname": ALERTNAME, "check": check, "severity": severity})
    if host:
        labels["host"] = host
    if item:
        labels["item"] = item
    return labels


def _subject(row: Row) -> str:
    check, host, item = row
    return f"{place(host)} {check}" + (f"[{item}]" if item else "")


def build_alerts(
    report: Report,
    resolved: Iterable[Row] = (),
    now: datetime | None = None,
    expires_after: float = DEFAULT_EXPIRES_AFTER,
    extra_labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The Alertmanager v2 `postableAlerts` body for a report (pure; see the module doc)."""
    now = now or datetime.now(UTC)
    extra = dict(extra_labels or {})
    ends = iso_utc(now)
    alerts: list[dict[str, Any]] = []
    rows: set[Row] = set()

    def resolve(row: Row, keep: str | None, summary: str) -> None:
        for severity in SEVERITIES.values():
            if severity != keep:
                alerts.append(
                    {
                        "labels": _labels(row, severity, extra),
                        "annotations": {"summary": summary, "status": "OK"},
                        "startsAt": ends,
                        "endsAt": ends,
                    }
                )

    for r in report.sorted_results():
        if r.key in rows:
            continue
        rows.add(r.key)
        subject = f"{_subject(r.key)}: {r.summary}"
        standing = report.standing_of(r)
        if standing.pages(r.status) and r.status in SEVERITIES:
            severity = SEVERITIES[r.status]
            alerts.append(_firing(r, standing, severity, subject, now, expires_after, extra))
            resolve(r.key, severity, subject)
        else:
            resolve(r.key, None, subject)
    for row in resolved:
        if row not in rows:
            rows.add(row)
            resolve(row, None, f"{_subject(row)}: no longer checked")
    return alerts


def _firing(
    r: Result,
    standing: Standing,
    severity: str,
    subject: str,
    now: datetime,
    expires_after: float,
    extra: Mapping[str, str],
) -> dict[str, Any]:
    annotations = {"summary": subject, "status": r.status.label}
    starts = now
    if standing.since is not None:
        annotations["since"] = standing.since
        annotations["bad_rounds"] = str(standing.bad_rounds)
        try:
            starts = min(now, parse_iso(standing.since))
        except ValueError:
            pass
    return {
        "labels": _labels(r.key, severity, extra),
        "annotations": annotations,
        "startsAt": iso_utc(starts),
        "endsAt": iso_utc(now + timedelta(seconds=expires_after)),
    }


def push_alerts(
    url: str,
    report: Report,
    resolved: Iterable[Row] = (),
    timeout: float = 5,
    expires_after: float = DEFAULT_EXPIRES_AFTER,
    extra_labels: Mapping[str, str] | None = None,
) -> None:
    """POST the report's alerts (firing and resolved) to Alertmanager at `url` (its base URL,
    e.g. http://alertmanager:9093), within `timeout` seconds in all. Raises DeliveryError."""
    alerts = build_alerts(report, resolved, expires_after=expires_after, extra_labels=extra_labels)
    if not alerts:
        return
    body = json.dumps(alerts).encode()
    headers = {"Content-Type": "application/json"}
    deliver("alertmanager", url, body, timeout, headers, suffix="/api/v2/alerts")


def ping_heartbeat(url: str, timeout: float = 5) -> None:
    """GET the dead man's switch `url` after a completed patrol, whatever the fleet's status
    (it proves the patrol ran, not that the fleet is well), within `timeout` seconds in all.
    Raises DeliveryError."""
    deliver("heartbeat", url, None, timeout, {})
