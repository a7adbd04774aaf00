"""--format table: a rich table for a terminal. rich honours NO_COLOR by itself.

The rows worst first, then one line per place that is not OK naming its checks (never
repeating a row's summary), then the footer. Lines carry no trailing spaces (rich pads cells
and wrapped text to the width; print() strips them).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, RenderableType
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from fleetcheck.core.model import Report, Status, place
from fleetcheck.render import footer, problem_lines, since_cell

STYLES = {
    Status.OK: "green",
    Status.WARN: "yellow",
    Status.CRIT: "bold red",
    Status.UNKNOWN: "magenta",
}


def build(report: Report, problems: bool = False) -> Group:
    """The detail table, the problem lines and the footer, as one renderable; `problems`:
    only the rows that are not OK (the footer still counts every row)."""
    remembered = any(r.since for r in report.results)
    table = Table(show_lines=False, header_style="bold", expand=False)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("HOST", no_wrap=True)
    table.add_column("CHECK", no_wrap=True)
    if remembered:
        table.add_column("SINCE", no_wrap=True)
    table.add_column("SUMMARY", overflow="fold")
    shown = [r for r in report.sorted_results() if not (problems and r.status is Status.OK)]
    for r in shown:
        cells: list[Any] = [
            Text(r.status.label, style=STYLES[r.status]),
            Text(place(r.host), style="bold" if r.status is not Status.OK else ""),
            Text(r.check),
        ]
        if remembered:
            cells.append(Text(since_cell(r, report)))
        cells.append(Text(" ".join(r.summary.split())))
        table.add_row(*cells)
    parts: list[RenderableType] = []
    if shown:
        parts.append(table)
    elif problems and report.results:
        parts.append(Text("no problems: every row is OK", style=STYLES[Status.OK]))
    else:
        parts.append(Text("(no checks ran)"))
    lines = problem_lines(report)
    if lines:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for status, where, what in lines:
            grid.add_row(Text(status.label, style=STYLES[status]), Text(f"{where}:"), Text(what))
        parts += [Text(""), grid]
    parts += [Text(""), Text(footer(report), style=STYLES[report.status])]
    return Group(*parts)


def _rstrip(line: list[Segment]) -> list[Segment]:
    """The line without trailing whitespace (styles kept on what is left)."""
    out = list(line)
    while out:
        seg = out[-1]
        if seg.control:
            out.pop()
            continue
        text = seg.text.rstrip()
        if text:
            out[-1] = Segment(text, seg.style, seg.control)
            break
        out.pop()
    return out


def print_stripped(console: Console, renderable: RenderableType) -> None:
    """console.print(renderable) without the spaces rich pads lines with."""
    for line in console.render_lines(renderable, pad=False):
        console.print(Segments([*_rstrip(line), Segment.line()]), soft_wrap=True, end="")


def render(report: Report, console: Console, problems: bool = False) -> None:
    print_stripped(console, build(report, problems))
