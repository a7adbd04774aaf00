"""--format nagios: a status line and performance data in the monitoring-plugins syntax
(documented, with an example, in docs/outputs.md).

The first line: the verdict, the counts, the worst rows' summaries, then after its one `|`
every perfdata item: the rows per status with the thresholds that matter, the patrol's
duration, and ONE item per row, its declared headline metric (`Result.headline`, `U` when
not measured), labelled `host_check[_item]_metric`, never with a map's keys. One long-output
line follows per row that is not OK, worst first; rows of one cause under a line telling it
once. Output stays under MAX_BYTES (Nagios' 8 KB plugin-output buffer): what does not fit is
left out and a last line says how many. Labels are quoted, characters outside letters,
digits and `._:@-` made `_`; values are plain decimals (the syntax has no exponents), `U`
when not a finite number. The renderer decides nothing: the exit code stays the report's.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from fleetcheck.core.model import Report, Result, Status, place
from fleetcheck.render import absence_note, strength_words
from fleetcheck.render.causes import CauseGroup, layout, left_to_say

NAGIOS_WORDS = {
    Status.OK: "OK",
    Status.WARN: "WARNING",
    Status.CRIT: "CRITICAL",
    Status.UNKNOWN: "UNKNOWN",
}
MAX_HEADLINE_ROWS = 3
MAX_SUMMARY_CHARS = 80
MAX_LONG_CHARS = 120  # one long-output line
MAX_CAUSE_CHARS = 240  # the line telling a cause: the one place it is said, in full
MAX_BYTES = 8000  # under Nagios' 8 KB plugin output buffer
LONG_SHARE = 0.5  # of MAX_BYTES for the long-output lines; the perfdata gets the rest

_UNITS = (("_per_s", ""), ("_s", "s"), ("_bytes", "B"))
_BAD_LABEL_CHARS = re.compile(r"[^A-Za-z0-9._:@-]")


def text(value: str) -> str:
    """One line of plugin text: no newlines, and no `|` (it would start the perfdata)."""
    return " ".join(value.replace("|", "/").split())


def shorten(value: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    value = text(value)
    return value if len(value) <= limit else value[: limit - 3].rstrip() + "..."


def label(raw: str) -> str:
    """A perfdata label, sanitised and quoted: `'n8_clients_connections'`."""
    return "'" + _BAD_LABEL_CHARS.sub("_", raw) + "'"


def rounded(value: float | int) -> float | int:
    """A value rounded to its precision: ints as they are, floats to 4 significant digits
    (whole numbers from 1000 on)."""
    if isinstance(value, bool | int) or not math.isfinite(value):
        return value
    if abs(value) >= 1000:
        return round(value)
    return float(f"{value:.4g}")


def number(value: float | int) -> str:
    """A perfdata value: a plain decimal (`[-0-9.]+`), `U` when not a finite number."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return "U"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    out = format(Decimal(repr(value)), "f")
    return out.rstrip("0").rstrip(".") if "." in out else out


def unit_for(name: str) -> str:
    lowered = name.lower()
    for suffix, uom in _UNITS:
        if lowered.endswith(suffix):
            return uom
    return ""


def perf(
    name: str,
    value: float | int,
    uom: str = "",
    warn: str = "",
    crit: str = "",
    minimum: float | int | None = None,
    maximum: float | int | None = None,
) -> str:
    """One perfdata item: `'label'=value[UOM];[warn];[crit];[min];[max]`."""
    lo = "" if minimum is None else number(minimum)
    hi = "" if maximum is None else number(maximum)
    value_text = number(value)
    if value_text == "U":
        uom = ""
    return f"{label(name)}={value_text}{uom};{warn};{crit};{lo};{hi}".rstrip(";")


def headline_metric(result: Result) -> tuple[str, float | int] | None:
    """(name, value) of the row's declared headline metric (a value that is not a number:
    NaN, written `U`), or None when the row has no headline."""
    name = result.headline
    if name is None or name not in result.metrics:
        return None
    value = result.metrics[name]
    if isinstance(value, bool):
        return name, int(value)
    if isinstance(value, int | float):
        return name, value
    return name, math.nan


def row_prefix(result: Result) -> str:
    """`host_check` (broker-wide: `check`), then `_item` for a row of one item."""
    prefix = f"{result.host}_{result.check}" if result.host is not None else result.check
    return prefix if result.item is None else f"{prefix}_{result.item}"


def row_perfdata(result: Result) -> str | None:
    """The row's one perfdata item (its headline metric), or None when it has none."""
    found = headline_metric(result)
    if found is None:
        return None
    name, value = found
    return perf(f"{row_prefix(result)}_{name}", rounded(value), unit_for(name))


def row_line(result: Result, summary: str | None = None, member: bool = False) -> str:
    """A row's long-output line: its weak evidence in words before the summary (so
    shortening never cuts it off); a row under its cause indented, saying only what the
    cause does not."""
    said = text(result.summary if summary is None else summary)
    words = strength_words(result)
    where = f"{result.status.label} {place(result.host)} {result.label}"
    if words:
        where += f" [{words}]"
    return shorten(
        ("  " if member else "") + (f"{where}: {said}" if said else where), MAX_LONG_CHARS
    )


def long_lines(report: Report) -> list[str]:
    """One line per row that is not OK, worst first; rows that share a cause under one line
    that tells it once (how many rows, on what)."""
    out = []
    for entry in layout(r for r in report.sorted_results() if r.status is not Status.OK):
        if isinstance(entry, CauseGroup):
            line = f"{entry.status.label} {entry.extent()}, one cause: {entry.cause}"
            out.append(shorten(line, MAX_CAUSE_CHARS))
            out += [row_line(r, left_to_say(r), member=True) for r in entry.rows]
        else:
            out.append(row_line(entry))
    return out


def headline(report: Report) -> str:
    counts = report.counts()
    order = sorted(Status, key=lambda s: -s.rank)
    parts = [f"{counts[s.label]} {s.label}" for s in order if counts[s.label]]
    head = f"FLEETCHECK {NAGIOS_WORDS[report.status]} - {', '.join(parts) or 'no checks ran'}"
    bad = layout(r for r in report.sorted_results() if r.status is not Status.OK)
    if bad:
        shown = [
            f"{shorten(e.cause)} ({len(e.rows)} rows)"
            if isinstance(e, CauseGroup)
            else f"{place(e.host)} {e.label}: {shorten(e.summary)}"
            for e in bad[:MAX_HEADLINE_ROWS]
        ]
        more = len(bad) - len(shown)
        head += "; " + "; ".join(shown) + (f"; +{more} more" if more else "")
    elif report.status is Status.OK:
        absence = absence_note(report)
        if absence:
            head += f"; {absence}"
    return head


# (status, warn, crit): a count that matters for the verdict alerts when above 0
_THRESHOLDS = {Status.CRIT: ("", "0"), Status.WARN: ("0", ""), Status.UNKNOWN: ("0", "")}


def patrol_perfdata(report: Report) -> list[str]:
    counts = report.counts()
    items = []
    for s in sorted(Status, key=lambda s: -s.rank):
        warn, crit = _THRESHOLDS.get(s, ("", ""))
        items.append(perf(s.label.lower(), counts[s.label], "", warn, crit, minimum=0))
    items.append(perf("patrol_duration", rounded(report.duration_s), "s", minimum=0))
    return items


def _fit(lines: list[str], budget: int) -> tuple[list[str], int]:
    """The first lines that fit in `budget` bytes (newlines counted), and how many did not."""
    used, kept = 0, []
    for line in lines:
        used += len(line.encode()) + 1
        if used > budget:
            break
        kept.append(line)
    return kept, len(lines) - len(kept)


def render(report: Report) -> str:
    first = headline(report)
    patrol = " ".join(patrol_perfdata(report))
    rows = report.sorted_results()
    budget = MAX_BYTES - len(first.encode()) - len(patrol.encode()) - 200  # 200: the note
    kept, long_left = _fit(long_lines(report), int(budget * LONG_SHARE))
    items = [item for item in map(row_perfdata, rows) if item is not None]
    used = sum(len(line.encode()) + 1 for line in kept)
    items, items_left = _fit(items, budget - used - 3)
    if long_left or items_left:
        kept.append(
            f"(left out to stay under {MAX_BYTES} bytes: {long_left} rows' lines, "
            f"{items_left} perfdata items; --format json has every row)"
        )
    # every perfdata item on the first line, after its one '|': Icinga 2 before 2.13.8 takes
    # perfdata only from a line holding a '|' and mangles the first item after a second one
    # (Icinga/icinga2#8912, #9379), so the guidelines' perfdata after the long output is lost
    # there; Nagios reads this form as well (tests/test_consumers_nagios.py runs both)
    return "\n".join([f"{first} | {' '.join([patrol, *items])}", *kept])
