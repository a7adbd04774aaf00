"""`fleetcheck notify --test` (one test message to each [notify] URL, each result reported),
and the [notify] settings `run` hands to each round."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import ConfigOpt, Opt, UsageFailure, load_fleet

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig


def notify_settings(fleet: "FleetConfig", no_state: bool = False) -> Any:
    """rounds.notify_targets.Settings for `fleet` (None without [notify]), every URL checked now.
    Messages need the memory of the state file: with --no-state there are none, said once."""
    if not fleet.notify.enabled:
        return None
    if no_state:
        from fleetcheck.core import stderr

        stderr.warn("[notify]: no messages with --no-state (they need the state file)")
        return None
    from fleetcheck.rounds import notify_targets

    try:
        return notify_targets.resolve(fleet)
    except notify_targets.NotifyError as e:
        raise UsageFailure(str(e)) from None


@command(app, "notify")
def notify_cmd(
    config: ConfigOpt = None,
    test: Annotated[
        bool, Opt("--test", help="Send one test message to each [notify] URL and report each.")
    ] = False,
) -> None:
    """Notifications ([notify]): `--test` sends a test message to each URL; exit 0 when all
    were delivered, 2 when one was not."""
    import socket

    from fleetcheck.rounds import notify

    if not test:
        raise UsageFailure("notify: say what to do: --test")
    fleet = load_fleet(config)
    settings = notify_settings(fleet)
    if settings is None:
        raise UsageFailure(f"{fleet.path}: no [notify] URLs (urls, urls_env or urls_file)")
    message = notify.test_message(socket.gethostname())
    outcomes = notify.send([(t, message) for t in settings.targets], settings.timeout)
    for outcome in outcomes:
        print(outcome.line)
    raise typer.Exit(0 if all(o.error is None for o in outcomes) else 2)
