"""The command line. Kept import-light: `--help` and `--version` must not load redis or
paramiko, so everything heavy is imported inside the command that needs it.

Exit codes follow Nagios: 0 OK, 1 WARN, 2 CRIT, 3 UNKNOWN. Usage and config errors exit 3
with one line on stderr (click's own usage errors would exit 2, which cron and Nagios read
as CRITICAL).
"""

from __future__ import annotations

import enum
import os
import sys
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer

from fleetcheck import __version__

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig
    from fleetcheck.model import Report

EXIT_USAGE = 3

app = typer.Typer(
    name="fleetcheck",
    help="Inspect a fleet of worker machines that share one Redis/Valkey broker.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
config_app = typer.Typer(help="Validate and show the configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")


class Format(enum.StrEnum):
    table = "table"
    plain = "plain"
    json = "json"


class UsageFailure(Exception):
    """A usage or config problem: one line on stderr, exit 3."""


ConfigOpt = Annotated[
    Optional[str],  # noqa: UP045 (typer needs Optional on 3.11)
    typer.Option(
        "--config",
        "-c",
        help="hosts.toml (else $FLEETCHECK_CONFIG, ./hosts.toml, ~/.config/fleetcheck/hosts.toml)",
    ),
]
FormatOpt = Annotated[
    Optional[Format],  # noqa: UP045
    typer.Option("--format", "-f", help="table on a terminal, plain otherwise"),
]

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        print(f"fleetcheck {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Tracebacks for internal errors.")] = False,
) -> None:
    _state["debug"] = debug


def load_fleet(config: str | None) -> FleetConfig:
    from fleetcheck import registry
    from fleetcheck.config import ConfigError, find_config, load

    try:
        return load(find_config(config), registry.config_type)
    except ConfigError as e:
        raise UsageFailure(str(e)) from None


def output_format(fmt: Format | None) -> Format:
    if fmt is not None:
        return fmt
    return Format.table if sys.stdout.isatty() else Format.plain


def emit(report: Report, fmt: Format) -> None:
    if fmt is Format.json:
        from fleetcheck.render import json as render_json

        print(render_json.render(report))
    elif fmt is Format.plain:
        from fleetcheck.render import plain

        print(plain.render(report))
    else:
        from rich.console import Console

        from fleetcheck.render import table

        table.render(report, Console())


@app.command()
def run(
    config: ConfigOpt = None,
    format: FormatOpt = None,
    only: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--only", help="Run only this check (repeatable)."),
    ] = None,
    host: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--host", help="Check only this host (repeatable)."),
    ] = None,
) -> None:
    """One patrol of the fleet; exit code is the worst status (0 OK .. 3 UNKNOWN)."""
    from fleetcheck import registry, runner

    fleet = load_fleet(config)
    try:
        items = runner.plan(fleet, registry.available(), only or (), host or ())
    except ValueError as e:
        raise UsageFailure(str(e)) from None
    report = runner.run_patrol(fleet, items)
    emit(report, output_format(format))
    raise typer.Exit(report.exit_code)


@app.command("checks")
def list_checks() -> None:
    """The available checks, one line each."""
    from fleetcheck import registry

    for name, check in sorted(registry.available().items()):
        print(f"{name:<14} {check.scope.value:<7} {check.description}")


@config_app.command("check")
def config_check(config: ConfigOpt = None) -> None:
    """Validate the config and print the resolved fleet."""
    fleet = load_fleet(config)
    from fleetcheck.parse.duration import format_duration
    from fleetcheck.transport.redis import redact_url

    print(f"config: {fleet.path}: valid")
    print(
        f"broker: {redact_url(fleet.broker.url)} (connect timeout "
        f"{format_duration(fleet.broker.connect_timeout)})"
    )
    print(
        f"patrol: every {format_duration(fleet.patrol.every)}, deadline "
        f"{format_duration(fleet.patrol.deadline)}"
    )
    print(f"checks: {', '.join(fleet.checks) or '(none)'}")
    print(f"hosts ({len(fleet.hosts)}):")
    for h in fleet.hosts:
        logs = ", ".join(f"{log.path} (max_age {format_duration(log.max_age)})" for log in h.logs)
        print(
            f"  {h.name}: ssh={h.ssh or '-'} addrs={','.join(h.addrs) or '-'} "
            f"min_clients={h.min_clients} tz={h.tz or '-'}" + (f" logs={logs}" if logs else "")
        )


def fail(message: str) -> NoReturn:
    print(f"fleetcheck: error: {message}", file=sys.stderr)
    sys.exit(EXIT_USAGE)


def main() -> None:
    try:  # typer >= 0.20 vendors click; older ones depend on it
        from typer._click.exceptions import ClickException, UsageError
    except ImportError:  # pragma: no cover
        from click.exceptions import ClickException, UsageError  # type: ignore[no-redef]

    try:
        rv = app(standalone_mode=False)
    except UsageFailure as e:
        fail(str(e))
    except UsageError as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        print("fleetcheck: interrupted", file=sys.stderr)
        sys.exit(130)
    except ClickException as e:
        e.show()
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        print("fleetcheck: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as e:
        if _state["debug"] or os.environ.get("FLEETCHECK_DEBUG"):
            raise
        fail(f"internal error: {type(e).__name__}: {e} (run with --debug for a traceback)")
    sys.exit(rv if isinstance(rv, int) else 0)
