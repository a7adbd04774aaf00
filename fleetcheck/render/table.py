"""--format table: a rich table for a terminal. rich honours NO_COLOR by itself.

The rows worst first (rows that share one cause under one line telling it once, with how
many rows and hosts it broke; weak evidence said in words after a summary), then one line
per place that is not OK naming its checks (never repeating a row's summary), then the
footer. Lines carry no trailing spaces (rich pads cells
and wrapped text to the width; print() strips them).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, RenderableType
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

from fleetcheck import render as common
from fleetcheck.core.model import Report, Result, Status, place
from fleetcheck.render.causes import CauseGroup

STYLES = {
    Status.OK: "green",
    Status.WARN: "yellow",
    Status.CRIT: "bold red",
    Status.UNKNOWN: "magenta",
}


def build(report: Report, problems: bool = False) -> Group:
    """The detail table, the problem lines and the footer, as one renderable; `problems`:
    only the rows that are not OK (the footer still counts every row)."""
    remembered = report.remembered
    table = Table(show_lines=False, header_style="bold", expand=False)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("HOST", no_wrap=True)
    table.add_column("CHECK", no_wrap=True)
    if remembered:
        table.add_column("SINCE", no_wrap=True)
    table.add_column("SUMMARY", overflow="fold")
    lines = common.grid_lines(report, problems)

    def add(r: Result, text: str, member: bool = False) -> None:
        cells: list[Any] = [
            Text(r.status.label, style=STYLES[r.status]),
            Text(place(r.host), style="bold" if r.status is not Status.OK else ""),
            Text(("└ " if member else "") + common.short_label(r)),
        ]
        if remembered:
            cells.append(Text(common.since_cell(r, report)))
        summary = Text(text)
        words = common.strength_words(r)
        if words:
            summary.append(f"{' ' if text else ''}[{words}]", style="italic")
        cells.append(summary)
        table.add_row(*cells)

    for entry, text, member in lines:
        if isinstance(entry, CauseGroup):
            places = entry.places
            head: list[Any] = [
                Text(entry.status.label, style=STYLES[entry.status]),
                Text(places[0] if len(places) == 1 else "one cause", style="bold"),
                Text(f"{len(entry.rows)} rows"),
            ]
            table.add_row(*head, *([Text("")] if remembered else []), Text(text, style="bold"))
        else:
            add(entry, text, member)
    empty = common.nothing_shown(report, problems)
    ok_style = STYLES[Status.OK] if report.results else ""
    parts: list[RenderableType] = [table if lines else Text(empty, style=ok_style)]
    bad = common.problem_lines(report)
    if bad:
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for status, where, what in bad:
            grid.add_row(Text(status.label, style=STYLES[status]), Text(f"{where}:"), Text(what))
        parts += [Text(""), grid]
    parts += [Text(""), Text(common.footer(report), style=STYLES[report.status])]
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
