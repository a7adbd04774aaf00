"""--format nagios: a status line and performance data in the monitoring-plugins syntax.

Output, per the Monitoring Plugins development guidelines (the multi-line form):

    FLEETCHECK CRITICAL - 1 CRIT, 1 WARN, 7 OK; n8 clients: no broker connections | 'ok'=7;;;0 ...
    CRIT n8 clients: no broker connections
    WARN (broker) queue_depth: inbox 120 jobs (cap 100) | 'n8_clients_connections'=0;;;
    'n8_clients_duration'=0.0123s;;;0
    ...

The first line carries the verdict, the counts and the worst rows' summaries (short), then the
patrol's own perfdata (counts, duration). One long-output line follows per non-OK row, worst
first. The per-row perfdata comes after the second `|`, one item per line, so the first line
stays short however large the fleet.

Perfdata items are `'label'=value[UOM];[warn];[crit];[min];[max]` (trailing empty fields
dropped). Labels are always quoted;
`=` and `'` (not allowed in labels), `|` and control characters become `_`. Values are plain
decimals (never exponent notation, which the syntax does not allow); a value that is not a
finite number is written `U` (undetermined). Checks' metrics are flattened: nested maps join
their keys with `_` (`n8_clients_by_addr_198.18.0.10`), booleans become 0/1, anything else
(strings, lists, None) is skipped. Threshold fields stay empty: thresholds live in the checks'
configs, not in their metrics. The unit is derived from the metric's name: `_s`/`_seconds` s,
`_ms` ms, `_us` us, `_bytes` B, `_pct`/`_percent` %.

The renderer decides nothing: the process exit code stays the report's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from fleetcheck.model import Report, Result, Status

NAGIOS_WORDS = {
    Status.OK: "OK",
    Status.WARN: "WARNING",
    Status.CRIT: "CRITICAL",
    Status.UNKNOWN: "UNKNOWN",
}
MAX_HEADLINE_ROWS = 3
MAX_SUMMARY_CHARS = 80

_UNITS = (
    ("_seconds", "s"),
    ("_ms", "ms"),
    ("_us", "us"),
    ("_s", "s"),
    ("_bytes", "B"),
    ("_percent", "%"),
    ("_pct", "%"),
)
_BAD_LABEL_CHARS = re.compile(r"[='|\x00-\x1f\x7f]")


def text(value: str) -> str:
    """One line of plugin text: no newlines, and no `|` (it would start the perfdata)."""
    return " ".join(value.replace("|", "/").split())


def shorten(value: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    value = text(value)
    return value if len(value) <= limit else value[: limit - 3].rstrip() + "..."


def label(raw: str) -> str:
    """A perfdata label, sanitised and quoted: `'n8 clients_connections'`."""
    return "'" + _BAD_LABEL_CHARS.sub("_", raw) + "'"


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


def flatten(prefix: str, value: Any) -> Iterator[tuple[str, float | int]]:
    """Numeric leaves of a metric value as (name, number); maps join keys with `_`."""
    if isinstance(value, bool):
        yield prefix, int(value)
    elif isinstance(value, int | float):
        yield prefix, value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield from flatten(f"{prefix}_{key}", inner)


def row_prefix(result: Result) -> str:
    return f"{result.host}_{result.check}" if result.host is not None else result.check


def row_perfdata(result: Result) -> list[str]:
    prefix = row_prefix(result)
    items = []
    for key, value in result.metrics.items():
        for name, leaf in flatten(f"{prefix}_{key}", value):
            uom = unit_for(name)
            items.append(
                perf(
                    name,
                    leaf,
                    uom,
                    minimum=0 if uom == "%" else None,
                    maximum=100 if uom == "%" else None,
                )
            )
    items.append(perf(f"{prefix}_duration", round(result.duration_s, 6), "s", minimum=0))
    return items


def row_line(result: Result) -> str:
    return (
        f"{result.status.label} {result.host or '(broker)'} {result.check}: {text(result.summary)}"
    )


def headline(report: Report) -> str:
    counts = report.counts()
    order = sorted(Status, key=lambda s: -s.rank)
    parts = [f"{counts[s.label]} {s.label}" for s in order if counts[s.label]]
    head = f"FLEETCHECK {NAGIOS_WORDS[report.status]} - {', '.join(parts) or 'no checks ran'}"
    bad = [r for r in report.sorted_results() if r.status is not Status.OK]
    if bad:
        shown = [
            f"{r.host or '(broker)'} {r.check}: {shorten(r.summary)}"
            for r in bad[:MAX_HEADLINE_ROWS]
        ]
        more = len(bad) - len(shown)
        head += "; " + "; ".join(shown) + (f"; +{more} more" if more else "")
    return head


def patrol_perfdata(report: Report) -> list[str]:
    counts = report.counts()
    items = [perf(s.label.lower(), counts[s.label], minimum=0) for s in Status]
    items.append(perf("patrol_duration", round(report.duration_s, 6), "s", minimum=0))
    return items


def render(report: Report) -> str:
    lines = [headline(report) + " | " + " ".join(patrol_perfdata(report))]
    lines += [row_line(r) for r in report.sorted_results() if r.status is not Status.OK]
    rows = [item for r in report.sorted_results() for item in row_perfdata(r)]
    if rows:
        if len(lines) > 1:
            lines[-1] += " | " + rows[0]
        else:
            lines.append("| " + rows[0])
        lines += rows[1:]
    return "\n".join(lines)
