"""The commands checks declare (`CheckCommand`), made into typer commands when one is run or
shows its own help: `--config` first, the check's options, `--format` last when the command
prints a report. The CLI never imports a check for this: the registry finds the declaration.
"""

import importlib
import inspect
from typing import Annotated, Any

import typer
import typer.main

from fleetcheck.cli.common import (
    ConfigOpt,
    DurationArg,
    FormatOpt,
    UsageFailure,
    duration,
    emit,
    load_fleet,
    output_format,
    short_help,
)

# an option's kind: the type typer reads it as (a duration goes through `duration`)
_KINDS: dict[str, Any] = {
    "duration": DurationArg | None,
    "flag": bool,
    "text": str | None,
    "count": int,
}


def build(name: str, context: dict[str, Any]) -> Any:
    """The click command of check command `name`, or None when no check declares it."""
    from fleetcheck.core import registry

    declared = registry.check_command(name)
    if declared is None:
        return None
    module, _, attr = declared.run.partition(":")
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("config", keyword, default=None, annotation=ConfigOpt)]
    for opt in declared.options:
        kind = _KINDS[opt.kind]
        extra: dict[str, Any] = {"parser": duration} if opt.kind == "duration" else {}
        if opt.metavar:
            extra["metavar"] = opt.metavar
        option = typer.Option(opt.flag, help=opt.help, **extra)
        key = opt.flag.lstrip("-").replace("-", "_")
        params.append(
            inspect.Parameter(key, keyword, default=opt.default, annotation=Annotated[kind, option])
        )
    if declared.report:
        params.append(inspect.Parameter("format", keyword, default=None, annotation=FormatOpt))

    def run_command(**values: Any) -> None:
        fleet = load_fleet(values.pop("config"))
        fmt = values.pop("format", None)
        for key, value in values.items():
            if isinstance(value, DurationArg):
                values[key] = value.seconds
        from fleetcheck.config import ConfigError

        try:
            out = getattr(importlib.import_module(module), attr)(fleet, **values)
        except ConfigError as e:  # an option the check rejects, phrased with its name
            raise UsageFailure(str(e)) from None
        if declared.report:
            emit(out, output_format(fmt))
            out = out.exit_code
        raise typer.Exit(out)

    run_command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run_command.__annotations__ = {p.name: p.annotation for p in params}
    run_command.__doc__ = declared.help
    group = typer.Typer(context_settings=context, add_completion=False, rich_markup_mode=None)
    group.command(name, short_help=short_help(declared.help))(run_command)
    return typer.main.get_command(group)
