"""--format table: a rich table for a terminal. rich honours NO_COLOR by itself."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fleetcheck.model import Report, Status

STYLES = {
    Status.OK: "green",
    Status.WARN: "yellow",
    Status.CRIT: "bold red",
    Status.UNKNOWN: "magenta",
}


def build(report: Report) -> Table:
    table = Table(show_lines=False, header_style="bold", expand=False)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("HOST", no_wrap=True)
    table.add_column("CHECK", no_wrap=True)
    table.add_column("SUMMARY", overflow="fold")
    for r in report.sorted_results():
        table.add_row(
            Text(r.status.label, style=STYLES[r.status]),
            r.host or "(broker)",
            r.check,
            r.summary,
        )
    return table


def render(report: Report, console: Console) -> None:
    from fleetcheck.render import footer, hosts_not_ok

    bad = hosts_not_ok(report)
    if bad:
        line = Text("Hosts not OK: ")
        for i, (host, status) in enumerate(bad):
            if i:
                line.append(", ")
            line.append(f"{host} {status.label}", style=STYLES[status])
        console.print(line)
    console.print(build(report))
    console.print(Text(footer(report), style=STYLES[report.status]))
