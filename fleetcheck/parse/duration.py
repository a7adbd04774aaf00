"""Durations as operators write them: "900s", "15m", "1h30m", "250ms" or plain seconds."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(value: object) -> float:
    """Seconds from a duration string or number. Raises ValueError on anything else.

    Negative, NaN, infinite and empty values are refused: a timeout or age of those makes no
    sense and would silently disable a check.
    """
    if isinstance(value, bool):
        raise ValueError(f"bad duration {value!r}: use 900s, 15m, 1h30m or plain seconds")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        else:
            pos, seconds = 0, 0.0
            for m in _PART.finditer(text):
                if m.start() != pos:
                    break
                seconds += float(m.group(1)) * _UNITS[m.group(2)]
                pos = m.end()
            if pos != len(text) or not text:
                raise ValueError(f"bad duration {value!r}: use 900s, 15m, 1h30m or plain seconds")
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
