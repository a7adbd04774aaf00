"""--format table: a rich table for a terminal. rich honours NO_COLOR by itself."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from fleetcheck.model import Report, Status
from fleetcheck.render import footer, host_verdicts, since_text

STYLES = {
    Status.OK: "green",
    Status.WARN: "yellow",
    Status.CRIT: "bold red",
    Status.UNKNOWN: "magenta",
}


def build(report: Report) -> Group:
    """The verdict lines, the detail table and the footer, as one renderable."""
    remembered = any(r.since for r in report.results)
    table = Table(show_lines=False, header_style="bold", expand=False)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("HOST", no_wrap=True)
    table.add_column("CHECK", no_wrap=True)
    table.add_column("SUMMARY", overflow="fold")
    if remembered:
        table.add_column("SINCE", no_wrap=True)
    for r in report.sorted_results():
        cells: list[Any] = [
            Text(r.status.label, style=STYLES[r.status]),
            Text(r.host or "(broker)", style="bold" if r.status is not Status.OK else ""),
            r.check,
            r.summary,
        ]
        if remembered:
            cells.append(since_text(r, report))
        table.add_row(*cells)
    parts: list[Text | Table] = [
        Text(text, style=STYLES[status]) for _, status, text in host_verdicts(report)
    ]
    parts.append(table)
    parts.append(Text(footer(report), style=STYLES[report.status]))
    return Group(*parts)


def render(report: Report, console: Console) -> None:
    console.print(build(report))
