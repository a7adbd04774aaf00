"""`fleetcheck silence`: silence a host, a check or one row for a while, list the silences,
end one early. They live next to the config's state file (rounds.silences)."""

from typing import Annotated

import typer

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import (
    ConfigOpt,
    DurationArg,
    Opt,
    StateOpt,
    UsageFailure,
    duration_opt,
    load_fleet,
)


@command(app, "silence")
def silence_cmd(
    what: Annotated[
        str,
        typer.Argument(
            metavar="HOST|CHECK|HOST/CHECK[/ITEM]|list|end", help="What to silence, or list/end."
        ),
    ],
    which: Annotated[
        str | None, typer.Argument(metavar="[ID|TARGET]", help="With end: the silence to end.")
    ] = None,
    config: ConfigOpt = None,
    for_: Annotated[
        DurationArg | None, duration_opt("--for", "How long (e.g. 2h; at most 30d).")
    ] = None,
    reason: Annotated[
        str | None, Opt("--reason", metavar="TEXT", help="Why: shown on every silenced row.")
    ] = None,
    state: StateOpt = None,
) -> None:
    """Silence a host, a check or a row for a while: it still shows, marked, but does not
    alert, notify or raise the exit code; `silence list`, `silence end ID`."""
    from fleetcheck.config.tables import silence_target_problem
    from fleetcheck.core.context import utcnow
    from fleetcheck.rounds import silences
    from fleetcheck.rounds import state as state_mod

    fleet = load_fleet(config)
    path = silences.silences_path(state or state_mod.default_paths(fleet.path)[0])
    now = utcnow()
    if what == "list":
        running = silences.active(path, now)
        for s in running:
            print(f"{s.id}  {s.target}  until {s.until}  {s.reason}")
        for w in fleet.silences.windows:
            print(f"[silences]  {w.match}  daily {w.daily} UTC  {w.reason}")
        if not running and not fleet.silences.windows:
            print("no silences")
        raise typer.Exit(0)
    if what == "end":
        if not which:
            raise UsageFailure("silence end: name the silence (its ID or its target)")
        gone = silences.end(path, which, now)
        if not gone:
            raise UsageFailure(f"silence end {which}: no running silence has this ID or target")
        for s in gone:
            print(f"ended silence {s.id} of {s.target}")
        raise typer.Exit(0)
    if which is not None:
        raise UsageFailure(f"silence {what}: one target at a time (got {which!r} too)")
    problem = silence_target_problem(what)
    if problem:
        raise UsageFailure(f"silence {problem}")
    _known(fleet, what)
    if for_ is None or for_.seconds is None:
        raise UsageFailure("silence: --for DURATION is required (e.g. --for 2h)")
    if for_.seconds > silences.MAX_FOR.total_seconds():
        raise UsageFailure(f"--for {for_.text}: at most 30d (a silence must end)")
    if not reason or not reason.strip():
        raise UsageFailure("silence: --reason TEXT is required (it shows on every silenced row)")
    s = silences.add(path, what, for_.seconds, reason, now)
    print(f"silenced {s.target} until {s.until} (id {s.id}): {s.reason}")


def _known(fleet: object, target: str) -> None:
    """A target must name a host or check this config knows: a typo must not silence nothing."""
    from fleetcheck.core import registry

    hosts = {h.name for h in fleet.hosts}  # type: ignore[attr-defined]
    checks = set(registry.available())
    if "/" in target:
        host, check = target.split("/", 2)[:2]
        if host != "*" and host not in hosts:
            raise UsageFailure(f"silence {target}: no host {host!r} in the config")
        if check != "*" and check not in checks:
            raise UsageFailure(f"silence {target}: no check {check!r} (see `fleetcheck checks`)")
    elif target != "*" and target not in hosts and target not in checks:
        raise UsageFailure(f"silence {target}: neither a host in the config nor a check")
