"""The `reap-live` command the live_hash check adds to the CLI: its declaration, read by the
registry; the reaper (`reaper.reap_live_command`, called with the options as keywords) is
imported only when the command runs."""

from __future__ import annotations

from fleetcheck.core.check import CheckCommand, CommandOption

COMMANDS = (
    CheckCommand(
        name="reap-live",
        help="Stale live-hash entries: listed (dry run), deleted with --apply, each only if "
        "its value is still the one judged stale.",
        run="fleetcheck.checks.live_hash.reaper:reap_live_command",
        options=(
            CommandOption(
                "--max-age", "Stale past this age (default: config, 900s).", "duration", "DURATION"
            ),
            CommandOption("--apply", "Delete (default: dry run).", "flag", default=False),
            CommandOption(
                "--force",
                "Delete even when the guard refuses (more than half the hash, started_field "
                "in no entry, max_age below the match wall, our clock off the broker's) and "
                "the stale entries of owners connected to the broker now.",
                "flag",
                default=False,
            ),
            CommandOption("--key", "The live hash's key.", metavar="KEY"),
            CommandOption(
                "--keep-malformed", "Leave entries without a start time.", "flag", default=False
            ),
            CommandOption("--show", "Entries listed (0: all).", "count", "N", default=20),
            CommandOption(
                "--deadline",
                "Give up on the broker after this long, deleting nothing more (default: the "
                "patrol deadline).",
                "duration",
                "DURATION",
            ),
        ),
    ),
)
