"""--format plain: for cron mail and pipes. No colour, no box drawing, no trailing spaces.

The rows, worst first (the summary last, so nothing pads it), then one line per place that is
not OK naming its checks (wrapped to the width, never repeating a row's summary), then the
footer with the counts.
"""

from __future__ import annotations

import shutil
import textwrap

from tabulate import tabulate

from fleetcheck.core.model import Report, Status, place
from fleetcheck.render import footer, problem_lines, since_cell

INDENT = 8  # where a wrapped problem line continues: under the place, past the status


def width() -> int:
    """The terminal's width ($COLUMNS, then the terminal), 100 off a terminal."""
    return max(40, shutil.get_terminal_size((100, 24)).columns)


def problems_block(report: Report, columns: int) -> list[str]:
    out = []
    for status, where, what in problem_lines(report):
        line = f"{status.label:<{INDENT - 1}} {where}: {what}"
        out += textwrap.wrap(
            line, columns, subsequent_indent=" " * INDENT, break_on_hyphens=False
        ) or [line]
    return out


def render(report: Report, problems: bool = False, columns: int | None = None) -> str:
    """The report as text; `problems`: only the rows that are not OK (the footer still counts
    every row)."""
    columns = columns or width()
    remembered = any(r.since for r in report.results)
    headers = ["STATUS", "HOST", "CHECK"] + (["SINCE"] if remembered else []) + ["SUMMARY"]
    rows = []
    for r in report.sorted_results():
        if problems and r.status is Status.OK:
            continue
        row = [r.status.label, place(r.host), r.check]
        if remembered:
            row.append(since_cell(r, report))
        rows.append([*row, " ".join(r.summary.split())])
    out: list[str] = []
    if rows:
        table = tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True)
        out += [line.rstrip() for line in table.splitlines()]
    elif problems and report.results:
        out.append("no problems: every row is OK")
    else:
        out.append("(no checks ran)")
    bad = problems_block(report, columns)
    if bad:
        out += ["", *bad]
    out += ["", *footer(report).splitlines()]
    return "\n".join(line.rstrip() for line in out)
