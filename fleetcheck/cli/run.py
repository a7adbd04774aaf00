"""`fleetcheck run` (a patrol, or one every --every) and `fleetcheck checks` (the listing)."""

import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import (
    EXIT_INTERRUPTED,
    ConfigOpt,
    EveryOpt,
    Format,
    FormatOpt,
    HistoryOpt,
    Opt,
    StateOpt,
    UsageFailure,
    emit,
    load_fleet,
    output_format,
    patrol_interval,
    render_text,
    round_keeper,
    split_list,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from fleetcheck.config import FleetConfig
    from fleetcheck.core.check import Check
    from fleetcheck.core.model import Report
    from fleetcheck.core.runner import Planned
    from fleetcheck.rounds import patrol


# `run`'s options (typer reads them from these aliases)
OnlyOpt = Annotated[
    list[str] | None,
    Opt("--only", metavar="CHECK", help="Run only this check (repeatable, or CHECK,CHECK)."),
]
HostOpt = Annotated[
    list[str] | None,
    Opt("--host", metavar="NAME", help="Check only this host (repeatable, or NAME,NAME)."),
]
RoundsOpt = Annotated[
    int | None,
    Opt("--rounds", metavar="N", min=1, help="With --every: stop after N rounds."),
]
NoStateOpt = Annotated[bool, Opt("--no-state", help="No memory across runs, no history.")]
TextfileOpt = Annotated[
    Path | None,
    Opt("--textfile", metavar="FILE", help="Also write Prometheus metrics here (atomic)."),
]
AlertmanagerOpt = Annotated[
    list[str] | None,
    Opt(
        "--alertmanager",
        metavar="URL",
        help="Alertmanager base URL to push alerts to (repeatable: every one gets every "
        "alert). Else [outputs] alertmanager / alertmanager_env.",
    ),
]
HeartbeatOpt = Annotated[
    str | None,
    Opt(
        "--heartbeat",
        metavar="URL",
        help="URL to ping after each patrol (else [outputs] heartbeat).",
    ),
]
ShardOpt = Annotated[
    str | None, Opt("--shard", metavar="I/N", help="Check only this share of the hosts.")
]
ProblemsOpt = Annotated[
    bool,
    Opt("--problems", help="Table/plain: show only the rows not OK (the counts stay)."),
]


@command(app, "run")
def run(
    config: ConfigOpt = None,
    format: FormatOpt = None,
    only: OnlyOpt = None,
    host: HostOpt = None,
    every: EveryOpt = None,
    rounds: RoundsOpt = None,
    state: StateOpt = None,
    no_state: NoStateOpt = False,
    history: HistoryOpt = None,
    textfile: TextfileOpt = None,
    alertmanager: AlertmanagerOpt = None,
    heartbeat: HeartbeatOpt = None,
    shard: ShardOpt = None,
    problems: ProblemsOpt = False,
) -> None:
    """One patrol of the fleet (or one every --every); exit code is the worst status."""
    from fleetcheck import collector

    # start-up (the config, the checks' modules, the broker client library) with the cycle
    # collector off, as the entry point does for the CLI's imports
    collector.starting()
    from fleetcheck.cli.notify import notify_settings
    from fleetcheck.core import registry, runner
    from fleetcheck.rounds import patrol

    fleet = load_fleet(config)
    only, host = split_list(only), split_list(host)
    try:
        checks = registry.select(only or fleet.checks)  # the checks this patrol runs
        part = patrol.parse_shard(shard) if shard else None
    except ValueError as e:
        raise UsageFailure(str(e)) from None

    def planned(fleet: "FleetConfig") -> "list[Planned]":
        items = runner.plan(fleet, checks, only, host)
        return [i for i in items if part is None or patrol.in_shard(i.target, part)]

    try:
        items = planned(fleet)
    except ValueError as e:
        raise UsageFailure(str(e)) from None
    interval = patrol_interval(fleet, every)
    if rounds is not None and interval is None:
        raise UsageFailure("--rounds goes with --every")
    outputs = replace(
        _outputs(fleet, state, no_state, history, textfile, alertmanager, heartbeat),
        notify=notify_settings(fleet, no_state),
    )
    fmt = output_format(format)
    if problems and fmt not in (Format.table, Format.plain):
        raise UsageFailure(
            f"--problems goes with --format table or plain (not {fmt.value}: machine formats "
            "always carry every row)"
        )

    keeper = round_keeper(fleet, interval)
    runner.preload(items)
    collector.settled()  # before any check runs

    first = [True]

    def one() -> "Report":
        nonlocal fleet, items
        if fleet.inventory and not first[0]:  # [[inventory]]: the fleet re-read each round
            try:
                fleet = load_fleet(config)
                items = planned(fleet)
            except (UsageFailure, ValueError) as e:
                from fleetcheck.core.stderr import warn

                warn(f"{e}; this round patrols the fleet as it was")
        first[0] = False
        return patrol.one_round(fleet, items, outputs, keeper)

    if interval is None:
        report = one()
        emit(report, fmt, problems)
        raise typer.Exit(report.exit_code)
    from fleetcheck.rounds import watch as live

    shown = Format.plain if fmt is Format.table else fmt
    try:
        last = live.run_loop(
            one,
            interval,
            rounds,
            None
            if fmt is Format.table and sys.stdout.isatty()
            else partial(render_text, fmt=shown, problems=problems),
            next_note=shown is Format.plain,
            problems=problems,
        )
    finally:
        if keeper is not None:
            keeper.close()
    raise typer.Exit(last.exit_code if last else EXIT_INTERRUPTED)


def _outputs(
    fleet: "FleetConfig",
    state: Path | None,
    no_state: bool,
    history: Path | None,
    textfile: Path | None,
    alertmanager: list[str] | None,
    heartbeat: str | None,
) -> "patrol.Outputs":
    """Where a patrol's round goes besides stdout: state, history and silences beside it (none
    when their directory cannot be used: said once, here), the textfile, Alertmanager and the
    heartbeat (flags first, then the config)."""
    from fleetcheck.rounds import patrol
    from fleetcheck.rounds import state as state_mod

    try:
        am_urls, beat_url, text_path = patrol.resolve_outputs(
            fleet, alertmanager, heartbeat, textfile
        )
    except patrol.OutputError as e:
        raise UsageFailure(str(e)) from None
    default_state, default_history = state_mod.default_paths(fleet.path)
    state_path = None if no_state else (state or default_state)
    history_path = history if history or no_state else default_history
    silences: Path | None = state_mod.silences_path(state or default_state)
    for kind, path in (("state", state_path), ("history", history_path)):
        problem = None if path is None else path_problem(path)
        if problem is not None:  # said once here, not once per read and write
            from fleetcheck.core.stderr import warn

            warn(f"{kind} {problem}; this patrol keeps no state and no history")
            state_path = history_path = None
            # the silences file lives beside the state: no directory, no file to read (the
            # config's [silences] windows still apply)
            if kind == "state":
                silences = None
            break
    return patrol.Outputs(state_path, history_path, text_path, am_urls, beat_url, silences=silences)


def path_problem(path: Path) -> str | None:
    """Create the state (or history) file's directory on first use, 0700 and owned by whoever
    runs fleetcheck (the service user under the timer and `runuser`); why the file cannot be
    used, with the one command that fixes it, or None."""
    import os

    directory = path.parent
    missing = []
    d = directory.absolute()
    while not d.exists() and d != d.parent:
        missing.append(d)
        d = d.parent
    for part in reversed(missing):
        try:
            part.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as e:
            return f"directory {directory} cannot be created ({e.strerror or e}): {_make(part)}"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"directory {directory} is not writable by this user: {_make(directory)}"
    for file in (path, path.with_name(path.name + ".lock")):
        if file.exists() and not os.access(file, os.R_OK | os.W_OK):
            user, group = owner()
            return f"file {file} is not writable by this user: as root, chown {user}:{group} {file}"
    return None


def owner() -> tuple[str, str]:
    """This process's user and group names (numbers when they have none)."""
    import grp
    import os
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
    except KeyError:
        return str(os.getuid()), str(os.getgid())


def _make(directory: Path) -> str:
    user, group = owner()
    return f"as root, install -d -o {user} -g {group} -m 0700 {directory}"


@command(app, "checks")
def list_checks() -> None:
    """The available checks, one line each."""
    from fleetcheck.core import registry

    print(checks_text(registry.available()))


def checks_text(checks: "Mapping[str, Check]") -> str:
    """One line per check, by name: name, scope, description, in columns as wide as the
    longest name (at least 14 wide, as the listing always was)."""
    width = max([14, *(len(name) for name in checks)])
    return "\n".join(
        f"{name:<{width}} {check.scope.value:<7} {check.description}"
        for name, check in sorted(checks.items())
    )
