"""`fleetcheck history`: a per-host timeline, one cell per round, coloured by status, so the
round where a machine went dark stands out at a glance."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from fleetcheck.model import Status

CELL = {Status.OK: "█", Status.WARN: "▆", Status.UNKNOWN: "?", Status.CRIT: "▁"}
PLAIN = {Status.OK: ".", Status.WARN: "w", Status.UNKNOWN: "?", Status.CRIT: "X"}
STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.UNKNOWN: "magenta", Status.CRIT: "red"}


def render(
    rounds: list[Any],
    lines: list[tuple[str, list[Status | None]]],
    console: Console,
    unreadable: int = 0,
) -> None:
    from fleetcheck.history import went_dark

    if not rounds:
        console.print("no rounds in that period")
        return
    fancy = console.is_terminal and not console.no_color
    cells = CELL if fancy else PLAIN
    first, last = rounds[0].started_at, rounds[-1].started_at
    console.print(
        f"{len(rounds)} rounds, {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC "
        f"(one cell per round; {' '.join(f'{v}={k.label}' for k, v in PLAIN.items())}, "
        "blank = not checked)"
    )
    width = max(len(h) for h, _ in lines) if lines else 0
    for host, statuses in lines:
        text = Text(host.ljust(width) + "  ")
        for s in statuses:
            if s is None:
                text.append(" ")
            else:
                text.append(cells[s], style=STYLE[s] if fancy else "")
        dark = went_dark(rounds, host)
        if dark is not None:
            text.append(f"  not OK since {dark:%Y-%m-%d %H:%M} UTC")
        console.print(text, soft_wrap=True)
    if unreadable:
        console.print(f"({unreadable} unreadable history lines skipped)")
