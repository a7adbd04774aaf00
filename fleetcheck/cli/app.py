"""The typer app, its root options, and `main`: how errors become output and exit codes.

Exit codes follow Nagios (0 OK, 1 WARN, 2 CRIT, 3 UNKNOWN); usage and config errors exit 3
with one line on stderr (click's own 2 would read as CRITICAL). The root group is lazy: a
command resolved imports only the module that declares it, and `--help` lists the checks'
commands from their source (fleetcheck.core.command_index) without importing a check.
"""

import importlib
import os
import re
import sys
from collections.abc import Callable
from typing import Annotated, Any, NoReturn, TypeVar

import typer
import typer.core

from fleetcheck import __version__
from fleetcheck.cli.common import EXIT_INTERRUPTED, EXIT_USAGE, UsageFailure, short_help

# -h as well as --help, on every command (click hands the names down to subcommands)
CONTEXT = {"help_option_names": ["-h", "--help"]}


# The CLI's own commands in `--help`'s order, each with the fleetcheck.cli module that declares
# it; then its sub-groups, listed after the commands checks add.
OWN = {
    "run": "run",
    "checks": "run",
    "demo": "demo",
    "history": "history",
    "explain": "explain",
    "timer": "timer",
    "doctor": "doctor",
    "serve": "serve",
    "notify": "notify",
    "silence": "silence",
    "rules": "rules",
}
GROUPS = {"config": "config"}


class RootGroup(typer.core.TyperGroup):
    """The root command group: its own commands, then those of the checks (by name), then its
    sub-groups, as `fleetcheck --help` has always listed them; each built when resolved."""

    def list_commands(self, ctx: Any) -> list[str]:
        from fleetcheck.core.command_index import command_listing

        added = sorted(n for n in command_listing() if n not in OWN and n not in GROUPS)
        return [*OWN, *added, *GROUPS]

    listing: dict[str, tuple[str, str]] | None = None  # while `--help` lists the commands

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            return found
        if cmd_name in OWN or cmd_name in GROUPS:
            built = _own(cmd_name)
            self.add_command(built, cmd_name)
            return built
        if self.listing is not None and cmd_name in self.listing:
            return _Listed(short_help(self.listing[cmd_name][0]))
        from fleetcheck.cli.check_commands import build

        return build(cmd_name, CONTEXT)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """As typer's, with "Did you mean" taken from every command's name, built or not
        (typer's own suggestions know only the commands already built)."""
        try:
            return super().resolve_command(ctx, args)
        except Exception as e:
            if not is_click_error(e) or not args or not hasattr(e, "message"):
                raise
            from difflib import get_close_matches

            matches = get_close_matches(args[0], self.list_commands(ctx))
            if matches:
                suggestions = ", ".join(f"{m!r}" for m in matches)
                message = str(getattr(e, "message", "")).rstrip(".")
                setattr(e, "message", f"{message}. Did you mean {suggestions}?")  # noqa: B010
            raise

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The listing takes the checks' commands as the command index lists them (name and
        help, no check imported), not the commands themselves."""
        from fleetcheck.core.command_index import command_listing

        self.listing = command_listing()
        try:
            super().format_commands(ctx, formatter)
        finally:
            self.listing = None


def _own(name: str) -> Any:
    """The click command (or group) of the CLI's own command `name`: its module imported now,
    which registers it, and typer building that one command."""
    import typer.main

    importlib.import_module(f"fleetcheck.cli.{OWN.get(name) or GROUPS[name]}")
    if name in GROUPS:
        return typer.main.get_group(config_app)
    (info,) = (i for i in app.registered_commands if i.name == name)
    one = typer.Typer(**TYPER)
    one.registered_commands.append(info)
    return typer.main.get_command(one)


class _Listed:
    """A check's command as `--help` lists it: its line, nothing built."""

    hidden = False

    def __init__(self, text: str) -> None:
        self.text = text

    def get_short_help_str(self, limit: int = 45) -> str:
        return self.text


TYPER: dict[str, Any] = {
    "add_completion": False,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
    "context_settings": CONTEXT,
    "no_args_is_help": True,
}
app = typer.Typer(
    name="fleetcheck",
    help="Inspect a fleet of worker machines that share one Redis/Valkey broker.",
    cls=RootGroup,
    suggest_commands=False,  # RootGroup suggests, from every command's name
    **TYPER,
)
CONFIG_HELP = "Validate and show the configuration."
config_app = typer.Typer(name="config", help=CONFIG_HELP, short_help=CONFIG_HELP, **TYPER)

F = TypeVar("F", bound=Callable[..., Any])


def command(group: typer.Typer, name: str) -> Callable[[F], F]:
    """Registers `func` as command `name` of `group`, listed by its docstring's first
    paragraph."""

    def register(func: F) -> F:
        return group.command(name, short_help=short_help(func.__doc__))(func)

    return register


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


def fail(message: str) -> NoReturn:
    from fleetcheck.core.stderr import error

    error(message)  # made safe there: a usage failure can quote a broker's reply
    sys.exit(EXIT_USAGE)


def is_click_error(e: Exception) -> bool:
    """click's own exceptions (ClickException and its UsageError) by their public shape:
    typer vendors click in a private module, and we do not import private modules."""
    return (
        callable(getattr(e, "show", None))
        and callable(getattr(e, "format_message", None))
        and isinstance(getattr(e, "exit_code", None), int)
    )


def usage_message(e: Exception) -> str:
    """A click usage error as one line that names the option: `--every: bad duration ...`,
    `no such option: --bogus (fleetcheck run -h lists them)`."""
    message = str(getattr(e, "message", "") or e.format_message())  # type: ignore[attr-defined]
    message = " ".join(message.split()).removesuffix(".")
    message = re.sub(r"^value error, ", "", message, flags=re.I)
    param = getattr(e, "param", None)
    ctx = getattr(e, "ctx", None)
    words = []
    while ctx is not None:
        root = ctx.parent is None
        words.append(ctx.info_name if not root or not hasattr(ctx.command, "commands") else "")
        ctx = ctx.parent
    words.append("fleetcheck")  # a root that is not the group: `timer -- RUN_OPTION`'s `run`
    where = " ".join(w for w in reversed(words) if w)
    if param is not None and getattr(type(e), "__name__", "") == "BadParameter":
        opts = getattr(param, "opts", None) or [param.human_readable_name]
        name = max(opts, key=len)
        return f"{name}: {message[:1].lower()}{message[1:]}"
    option = getattr(e, "option_name", None)
    if option and type(e).__name__ == "BadOptionUsage":  # `--every` given last, no value
        return f"{option}: needs a value"
    return f"{message[:1].lower()}{message[1:]} (see `{where} -h`)"


def main() -> None:
    try:
        rv = app(standalone_mode=False, prog_name="fleetcheck")
    except UsageFailure as e:
        fail(str(e))
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print("fleetcheck: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as e:
        if is_click_error(e):  # a usage error found by click (bad option, bad value)
            if type(e).__name__ == "NoArgsIsHelpError":  # bare `fleetcheck`: the help itself
                e.show()  # type: ignore[attr-defined]
                sys.exit(EXIT_USAGE)
            fail(usage_message(e))
        if _state["debug"] or os.environ.get("FLEETCHECK_DEBUG"):
            raise
        fail(f"internal error: {type(e).__name__}: {e} (run with --debug for a traceback)")
    sys.exit(rv if isinstance(rv, int) else 0)
