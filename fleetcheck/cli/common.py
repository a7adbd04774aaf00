"""What every command group shares: the option types and aliases, the usage failure `main`
turns into one line and exit 3, loading the fleet, printing a report in the chosen format.

No `from __future__ import annotations` in the cli modules: typer would eval every string
annotation at each start-up (~20 ms, `--help` included).
"""

import enum
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig
    from fleetcheck.core.model import Report
    from fleetcheck.transport.keep import Keeper

EXIT_USAGE = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


class UsageFailure(Exception):
    """A usage or config problem: one line on stderr, exit 3."""


@dataclass(frozen=True)
class DurationArg:
    """A duration option's value: as typed (for messages) and in seconds. `seconds` is None
    only for --every patrol (the config's [patrol] every)."""

    text: str
    seconds: float | None


def duration(value: object) -> DurationArg:
    """The one type of every duration option: 900s, 15m, 1h30m or plain seconds, longer than
    0s. Its error is a click BadParameter, which `main` prints as `--option: message`."""
    if isinstance(value, DurationArg):  # a default, already converted
        return value
    from fleetcheck.parse.duration import parse_duration

    text = str(value)
    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    if seconds <= 0:
        raise typer.BadParameter(f"bad duration {text!r}: must be longer than 0s")
    return DurationArg(text, seconds)


def every_arg(value: object) -> DurationArg:
    """--every: a duration, or `patrol` for the config's [patrol] every."""
    if value == "patrol":
        return DurationArg("patrol", None)
    return duration(value)


def split_list(values: list[str] | None) -> list[str]:
    """A repeatable option's values, each of which may also be a comma-separated list
    (`--only broker,live_hash` = `--only broker --only live_hash`)."""
    return [part.strip() for v in values or () for part in v.split(",") if part.strip()]


def short_help(doc: str | None) -> str:
    """A command's line in its group's help: the docstring's whole first paragraph (click
    would cut it at 45 characters with "...")."""
    first = inspect.cleandoc(doc or "").split("\n\n")[0]
    return " ".join(first.split())


class Format(enum.StrEnum):
    table = "table"
    plain = "plain"
    json = "json"
    nagios = "nagios"
    prometheus = "prometheus"


Opt = typer.Option

ConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        help="hosts.toml (else $FLEETCHECK_CONFIG, ./hosts.toml, ~/.config/fleetcheck/hosts.toml)",
    ),
]
EveryOpt = Annotated[
    DurationArg | None,
    typer.Option(
        "--every",
        metavar="DURATION",
        parser=every_arg,
        help="Patrol every DURATION (e.g. 15m); 'patrol' = [patrol] every.",
    ),
]
HistoryOpt = Annotated[
    Path | None,
    typer.Option("--history", metavar="FILE", help="History file (default: the config's)."),
]
StateOpt = Annotated[
    Path | None,
    typer.Option("--state", metavar="FILE", help="State file (default: the config's)."),
]


def duration_opt(flag: str, help: str) -> Any:
    """A duration option (900s, 15m, 1h30m), converted by `duration`."""
    return typer.Option(flag, metavar="DURATION", parser=duration, help=help)


DeadlineOpt = Annotated[
    DurationArg | None,
    duration_opt("--deadline", "Give up after this long (default: [patrol] deadline)."),
]
FormatOpt = Annotated[
    Format | None,
    typer.Option(
        "--format",
        "-f",
        metavar="FORMAT",
        help="table, plain, json, nagios or prometheus (default: table on a terminal, "
        "plain otherwise)",
    ),
]


def load_fleet(config: str | None) -> "FleetConfig":
    from fleetcheck.config import ConfigError, find_config, load
    from fleetcheck.core import registry

    try:
        fleet = load(find_config(config), registry.config_type, registry.host_config_types)
    except ConfigError as e:
        raise UsageFailure(str(e)) from None
    from fleetcheck import envfile

    envfile.apply(fleet)  # the service's environment: what the timer's patrol sees
    return fleet


def patrol_interval(fleet: "FleetConfig", every: DurationArg | None) -> float | None:
    """Seconds between rounds for `--every` (None without it; 'patrol': [patrol] every)."""
    if every is None:
        return None
    return fleet.patrol.every if every.seconds is None else every.seconds  # both longer than 0s


def output_format(fmt: Format | None) -> Format:
    return fmt or (Format.table if sys.stdout.isatty() else Format.plain)


def round_keeper(fleet: "FleetConfig", interval: float | None) -> "Keeper | None":
    """The SSH connections a long-running process (`run --every`, `serve --every`) keeps
    between its rounds: a Keeper when the rounds are at most `[ssh] keep_alive_for` apart,
    else None (every round connects anew). The caller closes it when it stops."""
    if interval is None or not 0 < interval <= fleet.ssh.keep_alive_for:
        return None
    from fleetcheck.transport.keep import Keeper

    return Keeper(fleet.ssh.keep_alive_for)


def render_text(report: "Report", fmt: Format, problems: bool = False) -> str:
    """The report in a text format (everything but the rich table); `problems`: only the rows
    that are not OK, plus the counts (table and plain)."""
    if fmt in (Format.json, Format.nagios, Format.prometheus):  # one module each, as named
        from importlib import import_module

        return import_module(f"fleetcheck.render.{fmt.value}").render(report).rstrip("\n")
    from fleetcheck.render import plain

    return plain.render(report, problems)


def emit(report: "Report", fmt: Format, problems: bool = False) -> None:
    if fmt is Format.table:
        from rich.console import Console

        from fleetcheck.render import table

        table.render(report, Console(), problems)
    else:
        print(render_text(report, fmt, problems), flush=True)
