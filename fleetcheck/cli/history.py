"""`fleetcheck history`: the per-host timeline of past patrols."""

from typing import Annotated

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import (
    ConfigOpt,
    DurationArg,
    HistoryOpt,
    Opt,
    UsageFailure,
    duration,
    load_fleet,
)


@command(app, "history")
def history_cmd(
    config: ConfigOpt = None,
    host: Annotated[str | None, Opt("--host", metavar="NAME", help="Only this host.")] = None,
    since: Annotated[
        DurationArg,
        Opt("--since", metavar="DURATION", parser=duration, help="How far back, e.g. 24h."),
    ] = "24h",  # type: ignore[assignment]  # converted by _duration
    history: HistoryOpt = None,
) -> None:
    """Per-host timeline of past patrols: one cell per round, coloured by status."""
    from datetime import timedelta

    from fleetcheck.core.context import utcnow
    from fleetcheck.rounds import history as hist
    from fleetcheck.rounds import state as state_mod

    back = since.seconds or 0.0
    path = history or state_mod.default_paths(load_fleet(config).path)[1]
    if not path.exists():
        raise UsageFailure(f"{path}: no history yet (run `fleetcheck run` first)")
    rounds, bad = hist.load(path, utcnow() - timedelta(seconds=back))
    lines = hist.timeline(rounds, host)
    if host is not None and not lines:
        raise UsageFailure(f"--host {host}: not in the history of the last {since.text}")
    from rich.console import Console

    from fleetcheck.render import history as render_history

    render_history.render(rounds, lines, Console(), bad)
