"""`fleetcheck doctor`: prove a patrol would see everything (fleetcheck.doctor)."""

import typer

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import ConfigOpt, DeadlineOpt, DurationArg, load_fleet


def run_doctor(config: str | None, deadline: DurationArg | None = None) -> int:
    """Print doctor's lines; the exit code (0 only when a patrol would see everything)."""
    from fleetcheck import doctor

    fleet = load_fleet(config)  # the environment file is read here, as for `run`
    lines, code = doctor.doctor(fleet, deadline.seconds if deadline else None)
    print("\n".join(lines), flush=True)
    return code


@command(app, "doctor")
def doctor_cmd(
    config: ConfigOpt = None,
    deadline: DeadlineOpt = None,
) -> None:
    """Log in to the broker and every host as a patrol would (auth, TLS, ACL, host keys, the
    login shell's start-up time, every check's commands, the logs) and print what to fix;
    exit 0 only when a patrol would see everything. Writes nothing.

    Run it as the timer's user: `runuser -u fleetcheck -- fleetcheck doctor -c FILE`."""
    raise typer.Exit(run_doctor(config, deadline))
