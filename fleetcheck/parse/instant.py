"""Instants as workers (Python, Node, shell) write them into the broker (`started_at`...):
epoch seconds, a number or a string (1e11 or more cannot be seconds, the year 5138: it is
read as milliseconds, what `Date.now()` and Java write), or ISO 8601 with a zone. An ISO
time without a zone means nothing until its writer's zone is known: refused unless the
caller names one. Anything else is refused with a ValueError saying why."""

from __future__ import annotations

import math
import re
from datetime import datetime, tzinfo

MS_THRESHOLD = 1e11  # epoch values at or above this are milliseconds

_NUMBER = re.compile(r"[+]?\d+(?:\.\d*)?(?:[eE][+]?\d+)?")


def parse_instant(value: object, assume_tz: tzinfo | None = None) -> float:
    """Epoch seconds (UTC) of `value`. Raises ValueError with a short reason.

    `assume_tz` is the zone of ISO strings written without an offset; None refuses them.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError(f"not a time: {value!r}")
    if isinstance(value, int | float):
        try:
            return _epoch(float(value), value)
        except OverflowError:  # an int too large for a float (JSON allows any length)
            raise ValueError(f"epoch {str(value)[:20]}... is out of range") from None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("not a time: undecodable bytes") from None
    if not isinstance(value, str):
        raise ValueError(f"not a time: a {type(value).__name__}")
    text = value.strip()
    if not text:
        raise ValueError("not a time: empty")
    if _NUMBER.fullmatch(text):
        return _epoch(float(text), value)
    return _iso(text, assume_tz)


def _epoch(seconds: float, original: object) -> float:
    if math.isnan(seconds) or math.isinf(seconds):
        raise ValueError(f"not a time: {original!r}")
    if seconds < 0:
        raise ValueError(f"negative epoch {original!r}")
    if seconds >= MS_THRESHOLD:
        seconds /= 1000.0
        if seconds >= MS_THRESHOLD:
            raise ValueError(f"epoch {original!r} is out of range")
    return seconds


def _iso(text: str, assume_tz: tzinfo | None) -> float:
    short = text if len(text) <= 40 else text[:37] + "..."
    try:  # Python 3.11 reads ISO 8601's basic and extended forms, any fraction
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not epoch seconds or ISO 8601: {short!r}") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        if assume_tz is None:
            raise ValueError(f"ISO time without a zone: {short!r}")
        moment = moment.replace(tzinfo=assume_tz)
    return moment.timestamp()
