"""Incidents the tests and the demo plant in the broker (the live hash's zombie entries)."""

from __future__ import annotations

import json


def incident_live_hash(
    now: float, owner_old: str = "mini", owner_fresh: str = "big"
) -> dict[str, str]:
    """incident 1 as data: 263 entries of `arena:live`, 44 fresh (minutes old), 200 old
    (hours old, left by SIGKILLed workers of `owner_old`) and 19 malformed (not JSON, no
    started_at, unreadable or zone-less started_at). Starts mix epoch seconds and ISO 8601."""
    from datetime import UTC, datetime

    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).isoformat()

    out: dict[str, str] = {}
    for i in range(44):
        start = now - 30 - 10 * i  # up to ~8 minutes old
        value = start if i % 2 else iso(start)
        out[f"match:fresh:{i}"] = json.dumps({"started_at": value, "host": owner_fresh})
    for i in range(200):
        start = now - 3600 - 60 * i  # 1 to ~4.3 hours old
        value = start if i % 3 else iso(start)
        out[f"match:old:{i}"] = json.dumps({"started_at": value, "host": owner_old})
    malformed = (
        ["not json at all", "{truncated", "", "[1, 2, 3]", '"a string"']
        + [json.dumps({"host": owner_old, "pid": i}) for i in range(6)]
        + [json.dumps({"started_at": v, "host": owner_old}) for v in ("soon", None, True, "")]
        + [json.dumps({"started_at": "2026-11-29T06:21:00"})] * 2  # no zone: means nothing
        + [json.dumps({"started_at": now + 86400})]  # a day in the future
        + [json.dumps({"started_at": {"t": now}})]
    )
    assert len(malformed) == 19
    for i, value in enumerate(malformed):
        out[f"match:bad:{i}"] = value
    return out
