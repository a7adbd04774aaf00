"""`fleetcheck demo`: a throwaway fleet with the incidents planted, patrolled once."""

from typing import Annotated

import typer

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import FormatOpt, UsageFailure, emit, output_format


@command(app, "demo")
def demo_cmd(
    keep: Annotated[bool, typer.Option("--keep", help="Leave the fleet running.")] = False,
    local: Annotated[
        bool, typer.Option("--local", help='Loopback only: ssh = "local" hosts, no namespaces.')
    ] = False,
    format: FormatOpt = None,
) -> None:
    """A throwaway fleet on this machine with the incidents behind the checks planted,
    patrolled once."""
    import shutil

    if shutil.which("redis-server") is None:
        raise UsageFailure("the demo needs redis-server (apt-get install redis-server)")
    from fleetcheck.lab import demo

    fmt = output_format(format)
    code = demo.run_demo(keep, lambda report: emit(report, fmt), netns=False if local else None)
    raise typer.Exit(code)
