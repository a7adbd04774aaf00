"""`fleetcheck history`: a per-host timeline, one cell per round, coloured by status, so the
round where a machine went dark stands out at a glance."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from fleetcheck.core.model import Status
from fleetcheck.core.safe_text import printable

# Severity orders the prominence: the worse the status, the taller and bolder its cell, so a
# CRIT round stands out of a row of OKs even without colour. The legend is printed from the
# same tables the cells are drawn from, so the two cannot disagree.
CELL = {Status.OK: "▁", Status.WARN: "▄", Status.UNKNOWN: "▆", Status.CRIT: "█"}
PLAIN = {Status.OK: ".", Status.WARN: "w", Status.UNKNOWN: "?", Status.CRIT: "X"}
STYLE = {
    Status.OK: "dim green",
    Status.WARN: "yellow",
    Status.UNKNOWN: "magenta",
    Status.CRIT: "bold red",
}


def render(
    rounds: list[Any],
    lines: list[tuple[str, list[Status | None]]],
    console: Console,
    unreadable: int = 0,
) -> None:
    from fleetcheck.rounds.history import went_dark

    if not rounds:
        console.print("no rounds in that period")
        return
    fancy = console.is_terminal and not console.no_color
    cells = CELL if fancy else PLAIN
    first, last = rounds[0].started_at, rounds[-1].started_at
    legend = Text(
        f"{len(rounds)} rounds, {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC "
        "(one cell per round; "
    )
    for status in sorted(Status, key=lambda s: s.rank):
        legend.append(cells[status], style=STYLE[status] if fancy else "")
        legend.append(f"={status.label} ")
    legend.append("blank = not checked)")
    console.print(legend, soft_wrap=True)
    # host names as the history file spells them (an old or hostile file can hold controls)
    shown = {host: printable(host) for host, _ in lines}
    width = max(len(h) for h in shown.values()) if lines else 0
    for host, statuses in lines:
        text = Text(shown[host].ljust(width) + "  ")
        for s in statuses:
            if s is None:
                text.append(" ")
            else:
                text.append(cells[s], style=STYLE[s] if fancy else "")
        dark = went_dark(rounds, host)
        if dark is not None:
            text.append(f"  not OK since {dark:%Y-%m-%d %H:%M} UTC")
        text.rstrip()
        console.print(text, soft_wrap=True)
    if unreadable:
        console.print(f"({unreadable} unreadable history lines skipped)")
