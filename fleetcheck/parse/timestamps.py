"""Find the timestamp in a log line and turn it into UTC, with the zone always explicit.

Pure. Never the checker's own zone: an offset in the line (`Z`, `+05:30`, `UTC`) is used,
epoch values are UTC, and any other wall time needs the writer's zone from the caller.
Abbreviations such as "EST" are kept as text, never trusted (IST is three zones). The
leftmost match in a line wins, the longer at the same position; a per-log strptime `format`
(no `%Z`) or a `regex` with a group `ts` overrides the recognisers. DST edges are decided
explicitly and reported (`Resolved.note`): a repeated hour is read nearest the file's
mtime, a skipped hour with the offset before the change."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from dateutil.tz import datetime_exists

from fleetcheck.parse.logformats.catalog import BY_NAME
from fleetcheck.parse.logformats.fields import Stamp, stamp_from

# the library's shapes a stamp is found in anywhere in a line (a JSON time value, a `regex`
# group without a `format`): the general ones, never a program's own
GENERAL = ("iso8601", "ctime", "syslog-rfc3164", "day-month-year", "common-log", "epoch")


@dataclass(frozen=True)
class Resolved:
    """A stamp placed in time: UTC, and the writer's local time with its zone label."""

    utc: datetime
    local: datetime  # aware, in the writer's zone (or the written offset)
    zone: str  # what decided it: the IANA name, or "offset -05:00", or "epoch"
    note: str | None = None  # how an ambiguity was resolved (DST, missing year)

    @property
    def local_label(self) -> str:
        """`02:21:00 EST`, `02:21:00 +0530`."""
        name = self.local.tzname() or ""
        if not name or name[0] in "+-" or (name.startswith("UTC") and len(name) > 3):
            name = self.local.strftime("%z")
        return f"{self.local:%H:%M:%S} {name}"


class FormatError(ValueError):
    """A per-log strptime `format` that cannot be used."""


# ---------------------------------------------------------------- finding


def find_stamp(line: str) -> Stamp | None:
    """The leftmost recognised timestamp in `line` (the longer one at the same position)."""
    best: tuple[tuple[int, int], Stamp] | None = None
    for fmt in map(BY_NAME.__getitem__, GENERAL):
        for m in fmt.pattern.finditer(line):
            key = (m.start(), -(m.end() - m.start()))
            if best is not None and key >= best[0]:
                break
            stamp = stamp_from(fmt.name, m, line)
            if stamp is not None:
                best = (key, stamp)
                break
    return best[1] if best else None


# ---------------------------------------------------------------- per-log overrides

# what each strptime directive may match: numbers unpadded, names by their letters
_DIRECTIVES = dict.fromkeys("mdHIMS", r"\d{1,2}") | dict.fromkeys("bha", r"[A-Za-z]{3}")
_DIRECTIVES |= {"Y": r"\d{4}", "y": r"\d{2}", "f": r"\d{1,6}", "j": r"\d{1,3}", "%": "%"}
_DIRECTIVES |= {"B": r"[A-Za-z]+", "A": r"[A-Za-z]+", "p": r"(?:AM|PM|am|pm)"}
_DIRECTIVES |= {"z": r"(?:Z|[+-]\d{2}(?::?\d{2})?)"}


def format_regex(fmt: str) -> re.Pattern[str]:
    """A regex that finds text written with strptime format `fmt` inside a longer line."""
    out = []
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c == "%":
            if i + 1 >= len(fmt):
                raise FormatError("format ends with a lone '%'")
            d = fmt[i + 1]
            if d == "Z":
                raise FormatError(
                    "%Z (a zone name) is not supported: names like EST or IST are ambiguous; "
                    "use %z for a numeric offset, or let the host's tz apply"
                )
            if d not in _DIRECTIVES:
                raise FormatError(f"unsupported directive %{d}")
            out.append(_DIRECTIVES[d])
            i += 2
        elif c.isspace():
            out.append(r"\s+")
            while i < len(fmt) and fmt[i].isspace():
                i += 1
        else:
            out.append(re.escape(c))
            i += 1
    if not any(d in fmt for d in ("%H", "%I")):
        raise FormatError("format has no hour (%H or %I)")
    if not any(d in fmt for d in ("%d", "%j")):
        raise FormatError("format has no day (%d or %j)")
    return re.compile("".join(out))


def parse_with_format(text: str, fmt: str) -> Stamp | None:
    """Parse `text` (exactly) with strptime `fmt`; a missing year is left to `infer_year`."""
    year_known = "%Y" in fmt or "%y" in fmt
    try:
        if year_known:
            dt = datetime.strptime(text, fmt)
        else:  # add a leap year so that Feb 29 parses; the real year is inferred later
            dt = datetime.strptime(f"{text} 2000", f"{fmt} %Y")
    except ValueError:
        return None
    offset = dt.utcoffset()
    return Stamp("format", text, dt.replace(tzinfo=None), offset, year_known)


def find_with(line: str, fmt: str | None, regex: re.Pattern[str] | None) -> Stamp | None:
    """The stamp in `line` under a log's overrides: `regex` (group `ts`) and/or `format`."""
    if regex is not None:
        m = regex.search(line)
        if not m or m.group("ts") is None:
            return None
        text = m.group("ts")
        if fmt:
            return parse_with_format(text.strip(), fmt)
        return find_stamp(text)
    if fmt:
        for m in format_regex(fmt).finditer(line):
            stamp = parse_with_format(m.group(0), fmt)
            if stamp is not None:
                return stamp
        return None
    return find_stamp(line)


# ---------------------------------------------------------------- placing in time


YEAR_SLACK = timedelta(days=1)  # a line may sit this far after its reference (zones, clocks)


def infer_year(
    stamp: Stamp, zone: tzinfo, now: datetime, hint: datetime | None = None
) -> tuple[datetime, str | None]:
    """The wall time with the year (or, for a time of day alone, the date) that puts it at or
    just before the reference: the file's mtime `hint` when there is one (a log's newest
    line is written at its mtime, so a file last written a year ago reads as last year's),
    else `now`; never more than a day after it. The note states the assumption, every time."""
    if stamp.year_known and stamp.date_known:
        return stamp.wall, None
    ref = hint if hint is not None else now
    local_ref = ref.astimezone(zone)
    if stamp.date_known:
        candidates = []
        for year in (local_ref.year - 1, local_ref.year, local_ref.year + 1):
            try:
                candidates.append(stamp.wall.replace(year=year))
            except ValueError:  # Feb 29 in a common year
                continue
        if not candidates:  # Feb 29 with no leap year near: the last one before
            year = local_ref.year - 1
            while not calendar.isleap(year):
                year -= 1
            candidates = [stamp.wall.replace(year=year)]
    else:
        day = local_ref.date()
        candidates = [
            datetime.combine(day + timedelta(days=k), stamp.wall.time()) for k in (-1, 0, 1)
        ]
    best: tuple[float, datetime] | None = None
    for wall in candidates:
        if stamp.offset is not None:
            moment = wall.replace(tzinfo=UTC) - stamp.offset
        else:
            moment = wall.replace(tzinfo=zone)
        ahead = (moment - ref).total_seconds()
        if ahead > YEAR_SLACK.total_seconds():
            continue
        if best is None or abs(ahead) < best[0]:
            best = (abs(ahead), wall)
    chosen = best[1] if best is not None else min(candidates)
    by = "the file's mtime" if hint is not None else "now"
    if not stamp.date_known:
        return chosen, f"no date in the line: read as {chosen:%Y-%m-%d} (by {by})"
    return chosen, f"no year in the line: read as {chosen.year} (by {by})"


def resolve(
    stamp: Stamp,
    zone: tzinfo,
    zone_name: str,
    now: datetime,
    hint: datetime | None = None,
) -> Resolved:
    """Place `stamp` in time. `zone` applies only when the text has no offset; `hint` (the
    file's mtime, UTC) picks the occurrence of a wall time repeated by a DST change."""
    wall, year_note = infer_year(stamp, zone, now, hint)
    if stamp.year_from:
        year_note = f"year {wall.year} taken from {stamp.year_from!r} on the line"
    if stamp.kind == "epoch":
        utc = wall.replace(tzinfo=UTC)
        return Resolved(utc, utc.astimezone(zone), "epoch", None)
    if stamp.offset is not None:
        local = wall.replace(tzinfo=timezone(stamp.offset))
        return Resolved(local.astimezone(UTC), local, f"offset {local:%z} in the line", year_note)
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    note = year_note
    if first.utcoffset() == second.utcoffset():
        chosen = first
    else:
        when = f"{wall:%H:%M:%S} on {wall:%Y-%m-%d}"
        if datetime_exists(wall, zone):  # offsets differ: a repeated hour, or a skipped one
            if hint is not None:
                # the line was written no later than the file's mtime: the occurrence at or
                # before it and nearest to it
                candidates = [c for c in (first, second) if c.astimezone(UTC) <= hint + _SLACK]
                pool = candidates or [first, second]
                chosen = min(pool, key=lambda c: abs((hint - c.astimezone(UTC)).total_seconds()))
                why = "the one nearest the file's modification time"
            else:
                chosen = first
                why = "the first (no modification time to decide)"
            which = "first" if chosen is first else "second"
            note = (
                f"{when} occurs twice in {zone_name} (DST ended): read as the {which} "
                f"occurrence, {chosen.tzname()} (UTC{chosen:%z}), {why}"
            )
        else:
            chosen = first  # PEP 495: the offset in force before the change
            note = (
                f"{when} does not exist in {zone_name} (clocks skipped it for DST): read with "
                f"the offset before the change, UTC{first:%z}"
            )
    if stamp.zone_text and chosen.tzname() != stamp.zone_text:
        named = (
            f"the line names zone {stamp.zone_text}, read in {zone_name} ({chosen.tzname()}): "
            "abbreviations are ambiguous, the declared zone decides"
        )
        note = f"{note}; {named}" if note else named
    return Resolved(chosen.astimezone(UTC), chosen, zone_name, note)


_SLACK = timedelta(seconds=120)
