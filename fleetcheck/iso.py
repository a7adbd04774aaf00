"""ISO 8601 instants as fleetcheck writes and reads them (reports, state, history, alerts):
UTC with a `Z`, milliseconds. Values workers write into the broker are parse/instant.py's."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(moment: datetime, timespec: str = "milliseconds") -> str:
    """`2026-11-29T06:21:00.000Z` (an aware `moment`, any zone)."""
    return moment.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def parse_iso(text: str) -> datetime:
    """The instant of an ISO 8601 text (`Z` or an offset; naive when it has neither).
    Raises ValueError (TypeError for a non-string)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
