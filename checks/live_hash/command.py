"""The `reap-live` command the live_hash check adds to the CLI: its declaration (read by the
registry, no import of the reaper until the command runs) and the function behind it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetcheck.core.check import CheckCommand, CommandOption

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig

COMMANDS = (
    CheckCommand(
        name="reap-live",
        help="Stale live-hash entries: listed (dry run), deleted with --apply, each only if "
        "its value is still the one judged stale.",
        run="fleetcheck.checks.live_hash.command:reap_live",
        options=(
            CommandOption(
                "--max-age", "Stale past this age (default: config, 900s).", "duration", "DURATION"
            ),
            CommandOption("--apply", "Delete (default: dry run).", "flag", default=False),
            CommandOption(
                "--force",
                "Delete even when the guard refuses (more than half the hash, started_field "
                "in no entry, max_age below the match wall).",
                "flag",
                default=False,
            ),
            CommandOption("--key", "The live hash's key.", metavar="KEY"),
            CommandOption(
                "--keep-malformed", "Leave entries without a start time.", "flag", default=False
            ),
            CommandOption("--show", "Entries listed (0: all).", "count", "N", default=20),
        ),
    ),
)


def reap_live(
    fleet: FleetConfig,
    max_age: float | None = None,
    apply: bool = False,
    force: bool = False,
    key: str | None = None,
    keep_malformed: bool = False,
    show: int = 20,
) -> int:
    """`fleetcheck reap-live`: the reaper over the fleet's broker; its exit code."""
    from fleetcheck.checks.live_hash.reaper import reap_live_command

    return reap_live_command(
        fleet,
        key=key,
        max_age=max_age,
        apply=apply,
        force=force,
        keep_malformed=keep_malformed,
        show=show,
    )
