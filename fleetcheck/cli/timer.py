"""`fleetcheck timer`: systemd units (and a crontab line) for one patrol every --every, with
the `run` options after -- checked as `run` will parse them."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.main

from fleetcheck.cli.app import app, command, is_click_error, usage_message
from fleetcheck.cli.common import (
    ConfigOpt,
    DurationArg,
    Opt,
    UsageFailure,
    duration_opt,
    load_fleet,
)

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig


@command(app, "timer")
def timer_cmd(
    config: ConfigOpt = None,
    every: Annotated[
        DurationArg | None, duration_opt("--every", "Interval, e.g. 15m (default: [patrol] every).")
    ] = None,
    show: Annotated[
        bool, typer.Option("--print", help="Print the units and the crontab line (default).")
    ] = False,
    install: Annotated[
        bool, typer.Option("--install", help="Write the units to --dir (no systemctl run).")
    ] = False,
    directory: Annotated[
        str, Opt("--dir", metavar="DIR", help="Where --install writes the units.")
    ] = "/etc/systemd/system",
    name: Annotated[
        str, Opt("--name", metavar="NAME", help="Unit name (one per fleet).")
    ] = "fleetcheck",
    user: Annotated[
        str,
        Opt(
            "--user",
            metavar="USER",
            help="The account the service runs as ('root': no User= line).",
        ),
    ] = "fleetcheck",
    run_args: Annotated[
        list[str] | None, typer.Argument(metavar="-- RUN_OPTION", hidden=True)
    ] = None,
) -> None:
    """systemd service + timer (and a crontab line) that run one patrol every --every.

    Options for the patrol itself go after --, as for `fleetcheck run`: e.g.
    `fleetcheck timer -c hosts.toml -- --textfile /var/lib/node_exporter/fleet.prom`."""
    import re

    from fleetcheck import timer

    if show and install:
        raise UsageFailure("--print and --install: choose one")
    if not re.fullmatch(r"[A-Za-z0-9_.:-]+", name) or name.startswith("."):
        raise UsageFailure(f"--name {name!r}: use letters, digits, '_', '.', ':' or '-'")
    fleet = load_fleet(config)
    interval = fleet.patrol.every
    if every is not None and every.seconds is not None:
        interval = every.seconds
        if interval < 1:
            raise UsageFailure(f"--every {every.text}: must be at least 1s")
    if not re.fullmatch(r"[a-z_][a-z0-9_-]*[$]?", user) or len(user) > 32:
        raise UsageFailure(f"--user {user!r}: not a user name")
    params = check_run_args(fleet, list(run_args or []))
    service_user = None if user == "root" else user
    writable, home_read = timer.confinement(fleet, params, service_user)
    command = timer.fleetcheck_command()
    for refusal in timer.refusals(fleet, service_user, command):
        raise UsageFailure(refusal)
    home_read = home_read or timer.runtime_under_home(command)
    environment_file = fleet.patrol.environment_file
    try:
        units = timer.build(
            fleet.path,
            interval,
            fleet.patrol.deadline,
            name,
            list(run_args or []),
            command=command,
            user=service_user,
            writable=writable,
            home_read=home_read,
            environment_file=environment_file,
        )
    except timer.UnitTextError as e:
        raise UsageFailure(str(e)) from None
    if not install:
        print(timer.units_text(units, service_user, environment_file))
    else:
        try:
            paths = timer.install(units, directory)
        except OSError as e:
            raise UsageFailure(f"--install into {directory}: {e.strerror or e}") from None
        for path in paths:
            print(f"wrote {path}")
        if timer.systemd_reads(directory):
            print(f"now run: systemctl daemon-reload && systemctl enable --now {units.timer_file}")
        else:  # systemctl would not find them there: no command that does not apply
            print(
                f"{directory} is not a directory systemd reads units from: copy both files "
                f"to {timer.SYSTEM_DIR} to use them"
            )
    for warning in timer.warnings(service_user):
        print(f"fleetcheck: warning: {warning}", file=sys.stderr)


def check_run_args(fleet: "FleetConfig", args: list[str]) -> dict[str, Any]:
    """Parse `fleetcheck run` options exactly as `run` will (typos, values, output targets),
    so `timer` never writes a unit that fails at its first activation; returns them."""
    from fleetcheck.rounds import patrol

    run_command = typer.main.get_command(app).get_command(None, "run")  # type: ignore[attr-defined]
    try:
        ctx = run_command.make_context("run", list(args))
    except Exception as e:
        message = usage_message(e) if is_click_error(e) else e
        raise UsageFailure(f"run options after --: {message}") from None
    params = dict(ctx.params)  # as click parsed them: typer makes paths Path only in its call
    for loop in ("every", "rounds"):
        if params.get(loop) is not None:
            raise UsageFailure(
                f"run options after --: --{loop} would keep the oneshot service running: "
                "the timer schedules the rounds (use timer --every)"
            )
    if params.get("config"):
        raise UsageFailure(
            "run options after --: --config is timer's own option (put it before --)"
        )
    try:
        textfile = Path(params["textfile"]) if params.get("textfile") else None
        patrol.resolve_outputs(fleet, params.get("alertmanager"), params.get("heartbeat"), textfile)
    except patrol.OutputError as e:
        raise UsageFailure(f"run options after --: {e}") from None
    from fleetcheck.timer import url_secret

    urls = [("--alertmanager", u) for u in params.get("alertmanager") or []]
    if params.get("heartbeat"):
        urls.append(("--heartbeat", params["heartbeat"]))
    for option, url in urls:
        secret = url_secret(option, str(url))
        if secret is not None:
            raise UsageFailure(f"run options after --: {secret}")
    return params
