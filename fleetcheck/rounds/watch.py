"""Patrol mode: `fleetcheck run --every 15m`. On a terminal a live view (the table, the time
of the next round, a spinner while a round runs); off a terminal one plain block per round.
Ctrl-C ends it cleanly with the last round's exit code (130 before the first round ends:
nothing was judged, which must not read as OK)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fleetcheck.core.model import Report
from fleetcheck.rounds.patrol import repeat


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S UTC")


def run_loop(
    one: Callable[[], Report],
    every: float,
    rounds: int | None,
    render: Callable[[Report], str] | None,
    next_note: bool = False,
    problems: bool = False,
) -> Report | None:
    """Run rounds until `rounds` are done or Ctrl-C; the last round's report (None when
    interrupted before the first round ended). `render` None: the live view (a terminal);
    else one block of its text per round, with the next round's time when `next_note`."""
    last: list[Report | None] = [None]

    def round_fn() -> Report:
        report = one()
        last[0] = report
        return report

    try:
        if render is None:
            _live(round_fn, every, rounds, problems)
        else:

            def on_report(report: Report, next_at: float | None) -> None:
                text = render(report)
                if next_at is not None and next_note:
                    text += f"\nnext round at {_when(next_at)}"
                print(text + "\n", flush=True)

            repeat(round_fn, every, rounds, on_report)
    except KeyboardInterrupt:
        print("fleetcheck: stopped", file=sys.stderr)
    return last[0]


def _live(round_fn: Callable[[], Report], every: float, rounds: int | None, problems: bool) -> None:
    from rich.console import Group
    from rich.live import Live
    from rich.spinner import Spinner
    from rich.text import Text

    from fleetcheck.render import table

    state: dict[str, Any] = {"report": None}

    def view(status: Any) -> Group:
        parts: list[Any] = []
        if state["report"] is not None:
            parts.append(table.build(state["report"], problems))
        parts.append(status)
        return Group(*parts)

    with Live(view(Spinner("dots", " first round running...")), refresh_per_second=8) as live:

        def on_start() -> None:
            live.update(view(Spinner("dots", " round running...")))

        def on_report(report: Report, next_at: float | None) -> None:
            state["report"] = report
            note = f"next round at {_when(next_at)} (Ctrl-C to stop)" if next_at else "done"
            live.update(view(Text(note, style="dim")))

        repeat(round_fn, every, rounds, on_report, on_start)
