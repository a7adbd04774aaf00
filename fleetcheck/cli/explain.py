"""`fleetcheck explain HOST`: a patrol narrowed to the host (and its peers, the control
group), read beside the state and history files, told as a short timeline in UTC."""

import json
from pathlib import Path
from typing import Annotated

import typer

from fleetcheck.cli.app import app, command
from fleetcheck.cli.common import ConfigOpt, HistoryOpt, Opt, StateOpt, UsageFailure, load_fleet


@command(app, "explain")
def explain_cmd(
    host: Annotated[str, typer.Argument(metavar="HOST", help="The host to explain.")],
    config: ConfigOpt = None,
    format: Annotated[
        str,
        Opt("--format", "-f", metavar="FORMAT", help="text (default) or json."),
    ] = "text",
    state: StateOpt = None,
    history: HistoryOpt = None,
    no_peers: Annotated[
        bool, Opt("--no-peers", help="Patrol the host alone, without its peers.")
    ] = False,
) -> None:
    """What is wrong with one host and since when: a timeline in UTC, the likely cause and
    how strong its evidence is, and what would confirm it.

    Patrols the host (and the hosts of its groups, to compare it with its peers) without
    recording the round, and reads the state and history files `fleetcheck run` keeps; without
    them it tells this patrol only, and says so. Exit code: 0 when nothing is wrong, else the
    code of the host's worst status (1 WARN, 2 CRIT, 3 UNKNOWN; 3 also for a usage error).
    """
    from dataclasses import replace

    from fleetcheck.core import peers, registry, runner
    from fleetcheck.core.context import utcnow
    from fleetcheck.iso import parse_iso
    from fleetcheck.rounds import explain as explaining
    from fleetcheck.rounds import history as hist
    from fleetcheck.rounds import state as state_mod

    if format not in ("text", "json"):
        raise UsageFailure(f"--format {format}: expected text or json")
    fleet = load_fleet(config)
    if host not in {h.name for h in fleet.hosts}:
        raise UsageFailure(f"{host}: no such host in {fleet.path}")
    hosts = [host] if no_peers else [host, *peers.candidates(fleet, host)]
    try:
        items = runner.plan(fleet, registry.select(list(fleet.checks)), (), hosts)
    except ValueError as e:
        raise UsageFailure(str(e)) from None
    default_state, default_history = state_mod.default_paths(fleet.path)
    state_path, history_path = state or default_state, history or default_history
    sources = []
    rows: dict[str, object] = {}
    if state_path.exists():
        rows, problem = read_state(state_path)
        if problem:
            sources.append(f"state file {state_path}: {problem}, not used")
    report = runner.run_patrol(fleet, items, clock=utcnow, carried=state_mod.carried(rows))
    now = parse_iso(report.started_at)
    sources.insert(0, f"this patrol ({explaining.when(now)}), not recorded")
    if rows:
        memory = state_mod.Memory(
            fleet.patrol.fail_after, fleet.patrol.flap_changes, fleet.patrol.flap_window
        )
        standing, _ = state_mod.step(report.results, report.started_at, rows, memory)
        report = replace(report, standing=standing)  # since when, nothing saved
        sources.append(f"the state file {state_path}")
    rounds: list[hist.Round] = []
    if hist.exists(history_path):  # its database, or a JSONL not yet migrated
        try:
            rounds, _bad = hist.load(history_path, host=host)  # this host's rows only
        except OSError as e:
            sources.append(f"history file {history_path}: unreadable ({e.strerror or e})")
        else:
            first = f", from {explaining.when(rounds[0].started_at)}" if rounds else ""
            sources.append(f"the history {history_path} ({len(rounds)} rounds{first})")
    if not rows and not rounds:
        sources.append(
            f"no state or history file ({state_path.parent}): this patrol only, so no "
            "'since' before it (`fleetcheck run` keeps them)"
        )
    told = explaining.explain(
        host,
        report.results,
        rounds,
        now,
        sources,
        explaining.hints_from_registry(),
        standing=report.standing,
    )
    if format == "json":
        print(json.dumps(told.to_dict(), indent=1, ensure_ascii=False))
    else:
        print("\n".join(told.lines()))
    raise typer.Exit(told.exit_code)


def read_state(path: Path) -> tuple[dict[str, object], str | None]:
    """The state file's usable rows, read without the lock-and-heal of a patrol: `explain`
    writes nothing, so a damaged file is left as it is (the next `run` heals it) and only
    said to be unusable."""
    from fleetcheck.rounds import state as state_mod

    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except OSError as e:
        return {}, f"unreadable ({e.strerror or e})"
    except ValueError:
        return {}, "not JSON"
    if not isinstance(data, dict) or data.get("schema") != state_mod.SCHEMA:
        return {}, f"not a {state_mod.SCHEMA} file"
    if not isinstance(data.get("rows"), dict):
        return {}, "no rows"
    rows, _dropped = state_mod.clean(data["rows"])
    return rows, None
