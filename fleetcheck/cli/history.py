"""`fleetcheck history`: the per-host timeline of past patrols."""

from typing import Annotated

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import (
    ConfigOpt,
    DurationArg,
    HistoryOpt,
    Opt,
    UsageFailure,
    duration_opt,
    load_fleet,
)


@command(app, "history")
def history_cmd(
    config: ConfigOpt = None,
    host: Annotated[str | None, Opt("--host", metavar="NAME", help="Only this host.")] = None,
    since: Annotated[DurationArg, duration_opt("--since", "How far back, e.g. 24h.")] = "24h",  # type: ignore[assignment]  # converted by duration
    history: HistoryOpt = None,
    export: Annotated[
        str | None,
        Opt(
            "--export",
            metavar="FORMAT",
            help="Write the rounds since --since to stdout instead: jsonl (one JSON line a "
            "round, as the history was kept before its database).",
        ),
    ] = None,
) -> None:
    """Per-host timeline of past patrols: one cell per round, coloured by status."""
    from datetime import timedelta

    from fleetcheck.core.context import utcnow
    from fleetcheck.rounds import history as hist
    from fleetcheck.rounds import state as state_mod

    back = since.seconds or 0.0
    path = history or state_mod.default_paths(load_fleet(config).path)[1]
    if export is not None and export != "jsonl":
        raise UsageFailure(f"--export {export}: the one export format is jsonl")
    if not hist.exists(path):
        raise UsageFailure(f"{path}: no history yet (run `fleetcheck run` first)")
    if export is not None:
        import sys

        hist.export_jsonl(path, sys.stdout, utcnow() - timedelta(seconds=back))
        return
    start = utcnow() - timedelta(seconds=back)
    if host is None:  # every host's timeline: statuses are all it draws
        rounds, bad = hist.load_statuses(path, start)
    else:
        rounds, bad = hist.load(path, start, host)
    lines = hist.timeline(rounds, host)
    if host is not None and not lines:
        raise UsageFailure(f"--host {host}: not in the history of the last {since.text}")
    from rich.console import Console

    from fleetcheck.render import history as render_history

    render_history.render(rounds, lines, Console(), bad)
