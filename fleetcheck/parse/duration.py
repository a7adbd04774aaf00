"""Durations as operators write them: "900s", "15m", "1h30m", "250ms" or plain seconds."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_PARTS = re.compile(rf"(?:{_PART.pattern})+")


def parse_duration(value: object) -> float:
    """Seconds from a duration string or number. Raises ValueError on anything else.

    Negative, NaN, infinite and empty values are refused: a timeout or age of those makes no
    sense and would silently disable a check.
    """
    text = value.strip().lower().replace(" ", "") if isinstance(value, str) else ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif re.fullmatch(r"\d+(?:\.\d+)?", text):
        seconds = float(text)
    elif _PARTS.fullmatch(text):
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(text))
    else:
        raise ValueError(f"bad duration {value!r}: use 900s, 15m, 1h30m or plain seconds")
    if not (seconds >= 0) or seconds == float("inf"):
        raise ValueError(f"bad duration {value!r}: must be a finite, non-negative length")
    return seconds


def format_duration(seconds: float) -> str:
    """Short human form: 45s, 3m12s, 2h31m, 3d4h."""
    s = int(round(abs(seconds)))
    sign = "-" if seconds < 0 else ""
    if s < 60:
        if abs(seconds) < 10 and seconds != int(seconds):
            return f"{sign}{abs(seconds):.1f}s"
        return f"{sign}{s}s"
    if s < 3600:
        return f"{sign}{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{sign}{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{sign}{s // 86400}d{(s % 86400) // 3600}h"
