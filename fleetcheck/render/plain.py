"""--format plain: for cron mail and pipes. No colour, no box drawing, no trailing spaces.

The rows, worst first (the summary last, so nothing pads it, wrapped to the width under its
column: the terminal's, 100 columns off a terminal), rows that share one cause under a line
telling the cause once with how many rows and hosts it broke; then one line per place that
is not OK naming its checks (a cause over several places: one line), then the footer with
the counts. Weak evidence is said in words after a row's summary.
"""

from __future__ import annotations

import shutil
import textwrap

from fleetcheck import render as common
from fleetcheck.core.model import Report, Result, place
from fleetcheck.render.causes import CauseGroup

INDENT = 8  # where a wrapped problem line continues: under the place, past the status
GAP = "  "  # between columns, as tabulate's "simple" format
MIN_SUMMARY = 30  # the summary column is never narrower (a long word still overflows)
MEMBER = "  "  # a grouped row's check, indented under its cause


def width() -> int:
    """The terminal's width ($COLUMNS, then the terminal), 100 off a terminal."""
    return max(40, shutil.get_terminal_size((100, 24)).columns)


def problems_block(report: Report, columns: int) -> list[str]:
    out = []
    for status, where, what in common.problem_lines(report):
        line = f"{status.label:<{INDENT - 1}} {where}: {what}"
        out += textwrap.wrap(
            line, columns, subsequent_indent=" " * INDENT, break_on_hyphens=False
        ) or [line]
    return out


def grid(headers: list[str], rows: list[list[str]], columns: int) -> list[str]:
    """tabulate's "simple" layout with the last column wrapped to what `columns` leaves it
    (never under MIN_SUMMARY), continuation lines under that column."""
    fixed = len(headers) - 1
    widths = [max(len(x[i]) for x in [headers, *rows]) for i in range(fixed)]
    lead = sum(w + len(GAP) for w in widths)
    room = max(columns - lead, MIN_SUMMARY)
    out = [
        GAP.join(h.ljust(w) for h, w in zip(headers, widths, strict=False)) + GAP + headers[-1],
        GAP.join("-" * w for w in widths)
        + GAP
        + "-" * min(room, max(len(x[-1]) for x in [headers, *rows])),
    ]
    for row in rows:
        pieces = textwrap.wrap(row[-1], room, break_long_words=False, break_on_hyphens=False) or [
            ""
        ]
        cells = GAP.join(c.ljust(w) for c, w in zip(row, widths, strict=False))
        out.append(f"{cells}{GAP}{pieces[0]}".rstrip())
        out += [" " * lead + piece for piece in pieces[1:]]
    return out


def render(report: Report, problems: bool = False, columns: int | None = None) -> str:
    """The report as text; `problems`: only the rows that are not OK (the footer still counts
    every row)."""
    columns = columns or width()
    remembered = report.remembered
    headers = ["STATUS", "HOST", "CHECK"] + (["SINCE"] if remembered else []) + ["SUMMARY"]

    def line(r: Result, text: str, member: bool = False) -> list[str]:
        row = [r.status.label, place(r.host), (MEMBER if member else "") + common.short_label(r)]
        if remembered:
            row.append(common.since_cell(r, report))
        return [*row, common.with_strength(r, text)]

    rows = []
    for entry, text, member in common.grid_lines(report, problems):
        if isinstance(entry, CauseGroup):
            places = entry.places
            head = [entry.status.label, places[0] if len(places) == 1 else "one cause"]
            head += [f"{len(entry.rows)} rows"] + ([""] if remembered else [])
            rows.append([*head, text])
        else:
            rows.append(line(entry, text, member))
    out = grid(headers, rows, columns) if rows else [common.nothing_shown(report, problems)]
    bad = problems_block(report, columns)
    if bad:
        out += ["", *bad]
    out.append("")
    for text in common.footer(report).splitlines():
        out += textwrap.wrap(text, columns, subsequent_indent=" " * INDENT) or [text]
    return "\n".join(line.rstrip() for line in out)
