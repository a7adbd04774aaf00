"""Values of the live hash, read (pure): a JSON object naming when the match started and,
optionally, which host runs it. A start that is missing or unreadable is a problem, never a
guess."""

from __future__ import annotations

import json
from datetime import tzinfo
from typing import Any

from fleetcheck.parse.instant import MS_THRESHOLD, parse_instant

OWNER_MAX = 64  # characters of an owner name we keep

Reading = tuple[float | None, str | None, str | None]  # (started_at, problem, owner)
# a value the JSON parser cannot take (nested too deep): one entry unreadable, never the
# whole scan failing (one worker could otherwise hide every zombie)
UNREADABLE = "unreadable: nested too deep for the JSON parser"

_decode_json = json.JSONDecoder().decode
_MISSING = object()


def read_entry(
    value: bytes | str,
    started_field: str = "started_at",
    owner_field: str | None = "host",
    assume_tz: tzinfo | None = None,
) -> Reading:
    """(start, problem, owner) of one value: exactly one of start and problem is set."""
    try:
        doc = _decode_json(value.decode("utf-8") if isinstance(value, bytes) else value)
    except (ValueError, UnicodeDecodeError):
        return None, "not JSON", None
    except RecursionError:  # nested deeper than the parser goes: this entry alone
        return None, UNREADABLE, None
    if type(doc) is not dict:
        return None, f"not a JSON object ({type(doc).__name__})", None
    owner = _owner(doc.get(owner_field)) if owner_field else None
    raw = doc.get(started_field, _MISSING)
    if raw is _MISSING:
        return None, f"no {started_field}", owner
    return _started(raw, owner, started_field, assume_tz)


def _owner(raw: object) -> str | None:
    if type(raw) is str and raw:
        return raw.strip()[:OWNER_MAX] or None
    return None


def _started(raw: Any, owner: str | None, started_field: str, assume_tz: tzinfo | None) -> Reading:
    if (type(raw) is float or type(raw) is int) and 0 <= raw < MS_THRESHOLD:
        return float(raw), None, owner  # plain epoch seconds: the common case, no NaN here
    try:
        return parse_instant(raw, assume_tz), None, owner
    except ValueError as e:  # parse_instant also refuses ints too large for a float
        return None, f"{started_field}: {e}", owner
