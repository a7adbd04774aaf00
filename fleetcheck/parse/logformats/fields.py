"""A library format's match turned into a Stamp: the quirks of how stamps are written.

Named groups a format's pattern may use: `Y` (four-digit year), `y` (two-digit year: 69 and
below are 20xx), `m` (month number) or `b` (month name), `d`, `H`, `M`, `S` (any of them
unpadded), `f` (a fraction after `.`, `,` or `:`, its digits as written: `.5` is half a
second), `ms` (milliseconds as a number, `:6` is 6 ms, not 600), `p` (AM/PM), `z` (an offset:
`Z`, `UTC`, `GMT`, `+05:30`, `+0530`, `-05`), `zn` (a zone abbreviation: kept, never trusted),
`e` (epoch seconds, or milliseconds when 13 digits). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# (upper bound of the magnitude, seconds per unit, unit name)
EPOCH_UNITS = (
    (1e11, 1.0, "s"),
    (1e14, 1e-3, "ms"),
    (1e17, 1e-6, "us"),
    (float("inf"), 1e-9, "ns"),
)
NUMERIC = re.compile(r"\s*\d+(?:\.\d+)?\s*")

# a year written elsewhere on the line (`2005.11.09` beside a syslog stamp)
_LINE_DATE = re.compile(r"(?<![\d.])(?P<Y>(?:19|20)\d\d)[.\-/](?P<m>\d\d)[.\-/](?P<d>\d\d)(?!\d)")


@dataclass(frozen=True)
class Stamp:
    """A timestamp as written. `wall` is naive; its year is a placeholder when not known."""

    kind: str
    text: str
    wall: datetime
    offset: timedelta | None  # explicit offset in the text (epoch: 0)
    year_known: bool = True
    date_known: bool = True  # False: a time of day only (its date comes from the mtime)
    fmt: str = ""  # the library format that read it (fleetcheck.parse.logformats), if any
    zone_text: str | None = None  # a zone abbreviation written in the line (PDT, CET)
    year_from: str | None = None  # the text elsewhere on the line its year was taken from


def parse_offset(text: str) -> timedelta:
    """`Z`, `UTC`, `GMT`, `+05:30`, `+0530`, `-05` -> timedelta."""
    t = text.strip().upper()
    if t in ("Z", "UTC", "GMT"):
        return timedelta(0)
    sign = -1 if t[0] == "-" else 1
    digits = t[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    if hours > 23 or minutes > 59:
        raise ValueError(f"bad UTC offset {text!r}")
    return sign * timedelta(hours=hours, minutes=minutes)


def compiled(pattern: str, pieces: dict[str, str], flags: int = 0) -> re.Pattern[str]:
    """`pattern` with each `{NAME}` (upper case: a regex's own `{2}` stays) replaced by
    `pieces[NAME]`, compiled."""
    filled = re.sub(r"\{([A-Z][A-Z0-9_]*)\}", lambda m: pieces[m.group(1)], pattern)
    return re.compile(filled, flags)


def _num(groups: dict[str, str | None], key: str, default: int = 0) -> int:
    v = groups.get(key)
    return int(v) if v else default


def _micro(groups: dict[str, str | None]) -> int:
    frac = groups.get("f")
    if frac:
        return int(frac[:6].ljust(6, "0"))
    ms = groups.get("ms")
    return int(ms) * 1000 if ms else 0


def _year(groups: dict[str, str | None]) -> int | None:
    if groups.get("Y"):
        return int(groups["Y"] or 0)
    yy = groups.get("y")
    if yy:
        return (2000 if int(yy) <= 69 else 1900) + int(yy)
    return None


def stamp_from(fmt: str, m: re.Match[str], line: str, date_known: bool = True) -> Stamp | None:
    """The Stamp a format's match describes; None when the numbers are not a real time."""
    g = m.groupdict()
    try:
        if g.get("e"):
            frac = g.get("f")
            stamp = epoch_stamp(m.group("e") + (f".{frac}" if frac else ""))
            return None if stamp is None else replace(stamp, text=m.group("e"), fmt=fmt)
        year = _year(g)
        if not date_known:
            month = 1
        else:
            month = int(g["m"]) if g.get("m") else MONTHS.index((g.get("b") or "")[:3].lower()) + 1
        day = _num(g, "d", 1)
        hour = _num(g, "H")
        ampm = (g.get("p") or "").upper()
        if ampm:
            if not 1 <= hour <= 12:
                return None
            hour = hour % 12 + (12 if ampm == "PM" else 0)
        wall = datetime(
            year if year is not None else 2000,  # 2000 is a leap year: Feb 29 survives
            month if date_known else 1,
            day if date_known else 1,
            hour,
            _num(g, "M"),
            _num(g, "S"),
            _micro(g),
        )
        z = g.get("z")
        offset = parse_offset(z) if z else None
        year_from = None
        if year is None and date_known:
            found = _year_elsewhere(line, month, day)
            if found is not None:
                wall, year_from = wall.replace(year=found[0]), found[1]
        return Stamp(
            "epoch" if fmt.startswith("epoch") else fmt,
            m.group("ts") if "ts" in m.re.groupindex and m.group("ts") else m.group(0),
            wall,
            offset,
            year_known=year is not None or year_from is not None,
            date_known=date_known,
            fmt=fmt,
            zone_text=g.get("zn") or None,
            year_from=year_from,
        )
    except (ValueError, OverflowError, KeyError):
        return None


def epoch_unit(value: float) -> tuple[float, str]:
    """(seconds per unit, unit name) for an epoch number, by magnitude."""
    for bound, scale, name in EPOCH_UNITS:
        if abs(value) < bound:
            return scale, name
    raise AssertionError("unreachable")


def epoch_stamp(value: float | int | str) -> Stamp | None:
    """An epoch number in any of the four units; None outside 2000-2099."""
    text = str(value).strip()
    if isinstance(value, str):
        if not NUMERIC.fullmatch(value):
            return None
        whole, _, frac = text.partition(".")
        number = float(text)
    else:
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):  # JSON Infinity, NaN
            return None
    scale, unit = epoch_unit(number)
    if isinstance(value, str) and unit == "s":
        micro = int(whole) * 1_000_000 + int((frac or "0")[:6].ljust(6, "0"))
    elif isinstance(value, int) or (isinstance(value, str) and not frac):
        # exact integer arithmetic: a float cannot hold nanoseconds since 1970
        micro = int(text) * 1_000_000 // round(1 / scale)
    else:
        micro = round(number * scale * 1_000_000)
    try:
        moment = datetime(1970, 1, 1) + timedelta(microseconds=micro)
    except OverflowError:
        return None
    if not 2000 <= moment.year < 2100:
        return None
    return Stamp("epoch", f"{text} (epoch {unit})", moment, timedelta(0))


def _year_elsewhere(line: str, month: int, day: int) -> tuple[int, str] | None:
    """A full date elsewhere on the line with the same month and day: its year."""
    for m in _LINE_DATE.finditer(line):
        if int(m.group("m")) == month and int(m.group("d")) == day:
            return int(m.group("Y")), m.group(0)
    return None
