"""Living with fleetcheck: one round or many, with memory, history and the alerting outputs.

The CLI parses options; this module decides the order of things in a round: patrol, then
its record (the verdicts with each row's standing, built once), then that record to the
history (appended here only) and the monitoring stack. A failing output
(Alertmanager down, heartbeat URL unreachable) is a warning on stderr, never a lost patrol.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.core.model import Report
from fleetcheck.core.runner import Planned, run_patrol
from fleetcheck.core.stderr import warn
from fleetcheck.rounds.state import Memory, StateFile, carried, remember


@dataclass(frozen=True)
class Outputs:
    state: Path | None = None
    history: Path | None = None
    textfile: Path | None = None
    alertmanager: tuple[str, ...] = ()  # every URL gets every alert (an Alertmanager cluster)
    heartbeat: str | None = None
    notify: Any = None  # rounds.notify_targets.Settings: messages through Apprise (needs `state`)
    silences: Path | None = None  # `fleetcheck silence`'s file (rounds.silences)


class OutputError(ValueError):
    """An output target that cannot work, named by its option or key (a usage error, exit 3:
    under a timer a dead alert path must fail the unit, not warn after every patrol)."""


def resolve_outputs(
    fleet: FleetConfig,
    alertmanager: list[str] | None = None,
    heartbeat: str | None = None,
    textfile: Path | None = None,
) -> tuple[tuple[str, ...], str | None, Path | None]:
    """(alertmanager URLs, heartbeat URL, textfile) from the command line, else [outputs]
    (its *_env variables read now), each checked before any patrol starts. Raises OutputError
    naming the option or key; never the URL itself (tokens live in URLs)."""
    from fleetcheck.config import http_url_problem

    cfg = fleet.outputs
    urls: list[tuple[str, str]] = []  # (where it came from, url)
    if alertmanager:
        urls += [("--alertmanager", u) for u in alertmanager]
    else:
        urls += [(f"[outputs] alertmanager[{i}]", u) for i, u in enumerate(cfg.alertmanager)]
        urls += [
            (f"[outputs] alertmanager_env {name}", _from_env(name, "alertmanager_env"))
            for name in cfg.alertmanager_env
        ]
    beat: tuple[str, str] | None = None
    if heartbeat is not None:
        beat = ("--heartbeat", heartbeat)
    elif cfg.heartbeat is not None:
        beat = ("[outputs] heartbeat", cfg.heartbeat)
    elif cfg.heartbeat_env is not None:
        beat = (
            f"[outputs] heartbeat_env {cfg.heartbeat_env}",
            _from_env(cfg.heartbeat_env, "heartbeat_env"),
        )
    for where, url in urls + ([beat] if beat else []):
        problem = http_url_problem(url)
        if problem is not None:
            raise OutputError(f"{where}: {problem}")
    target = textfile if textfile is not None else (Path(cfg.textfile) if cfg.textfile else None)
    if target is not None:
        where = "--textfile" if textfile is not None else "[outputs] textfile"
        directory = target.expanduser().parent
        if not directory.is_dir():
            raise OutputError(f"{where} {target}: directory {directory} does not exist")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise OutputError(f"{where} {target}: directory {directory} is not writable")
        if target.is_dir():
            raise OutputError(f"{where} {target}: is a directory")
    return tuple(u for _, u in urls), beat[1] if beat else None, target


def _from_env(name: str, key: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise OutputError(f"[outputs] {key} {name}: not set in the environment")
    return value


def parse_shard(text: str) -> tuple[int, int]:
    """'2/3' -> (2, 3). Raises ValueError with a usable message."""
    try:
        i_text, n_text = text.split("/")
        i, n = int(i_text), int(n_text)
    except ValueError:
        raise ValueError(f"--shard {text}: expected I/N, e.g. 1/3") from None
    if not (n >= 1 and 1 <= i <= n):
        raise ValueError(f"--shard {text}: need 1 <= I <= N")
    return i, n


def in_shard(host: HostConfig | None, shard: tuple[int, int]) -> bool:
    """Deterministic split by host name (stable across machines and Python runs); broker-wide
    rows belong to shard 1 only, so several patrol machines never duplicate them."""
    i, n = shard
    if host is None:
        return i == 1
    bucket = int(hashlib.sha256(host.name.encode()).hexdigest()[:8], 16) % n
    return bucket == i - 1


def one_round(
    fleet: FleetConfig, items: list[Planned], outputs: Outputs, keeper: Any = None
) -> Report:
    """One round: the patrol, its record built once (record), then that record handed
    unchanged to every output: the history, the textfile, Alertmanager, notify."""
    previous: dict[str, Any] = {}
    if outputs.state is not None:
        try:
            previous = carried(StateFile(outputs.state).read())
        except Exception as e:  # state never costs a patrol: it only loses its memory
            warn(f"state file {outputs.state}: {_why(e)}")
    report = record(fleet, run_patrol(fleet, items, carried=previous, keeper=keeper), outputs)
    if outputs.history is not None:
        from fleetcheck.rounds import history

        try:
            history.append(report, outputs.history)
        except OSError as e:
            warn(f"history file {outputs.history}: {e.strerror or e}")
    if outputs.textfile is not None:
        from fleetcheck.render import prometheus

        try:
            prometheus.write_textfile(report, str(outputs.textfile))
        except OSError as e:
            warn(f"textfile {outputs.textfile}: {e.strerror or e}")
    for url in outputs.alertmanager:
        from fleetcheck.rounds import alerting

        try:
            # firing alerts lapse by themselves three patrol intervals after the last
            # confirmation, so a dead fleetcheck never leaves them firing forever
            alerting.push_alerts(url, report, expires_after=max(300.0, 3 * fleet.patrol.every))
        except alerting.DeliveryError as e:
            warn(str(e))
    if outputs.notify is not None and outputs.state is not None:
        from fleetcheck.rounds import notify

        try:
            notify.after_round(report, outputs.notify, notify.ledger_path(outputs.state))
        except Exception as e:  # a message never costs a patrol
            warn(f"notify: {_why(e)}")
    if outputs.heartbeat is not None:
        from fleetcheck.rounds import alerting

        try:
            alerting.ping_heartbeat(outputs.heartbeat)
        except alerting.DeliveryError as e:
            warn(str(e))
    return report


def record(fleet: FleetConfig, report: Report, outputs: Outputs) -> Report:
    """The round's record, built here once: the patrol's rows with the inventory's row,
    silenced rows marked, the notes of hosts that joined or left and silences that ended,
    and each row's Standing from the state's one step (saved under the state's lock)."""
    rows, notes = list(report.results), list(report.notes)
    if fleet.inventory:  # [[inventory]]: its row, and the hosts that joined or left
        from fleetcheck.rounds import membership

        extra, joined = membership.observe(fleet, report.started_at, outputs.state)
        rows, notes = rows + extra, notes + joined
    words: dict[str, str] = {}
    # no silence set makes no file: then only the config's windows can silence a row
    if (outputs.silences is not None and outputs.silences.exists()) or fleet.silences.windows:
        from fleetcheck.iso import parse_iso
        from fleetcheck.rounds import silences

        try:
            now = parse_iso(report.started_at)
            rows, words, ended = silences.apply(rows, outputs.silences, fleet.silences.windows, now)
            notes += ended
        except Exception as e:  # a silence never costs a patrol (the rows show unsilenced)
            warn(f"silences file {outputs.silences}: {_why(e)}")
    report = replace(report, results=tuple(rows), notes=tuple(notes))
    p = fleet.patrol
    memory = Memory(p.fail_after, p.flap_changes, p.flap_window)
    try:
        return remember(report, outputs.state, memory, words)
    except Exception as e:  # then the round has no memory, never no record
        warn(f"state file {outputs.state}: {_why(e)}")
        return remember(report, None, memory, words)


def _why(e: Exception) -> str:
    if isinstance(e, OSError):
        return str(e.strerror or e)
    return f"{type(e).__name__}: {e}"


def repeat(
    round_fn: Callable[[], Report],
    every: float,
    rounds: int | None,
    on_report: Callable[[Report, float | None], None],
    on_start: Callable[[], None] = lambda: None,
    stop: threading.Event | None = None,
) -> Report | None:
    """Run rounds every `every` seconds (start to start) until `rounds` are done or `stop` is
    set. A round slower than `every` is followed at once by the next: rounds never overlap.
    `on_report(report, next_start_epoch_or_None)` renders each round."""
    stop = stop or threading.Event()
    last: Report | None = None
    n = 0
    while not stop.is_set():
        start = time.monotonic()
        on_start()
        last = round_fn()
        n += 1
        done = rounds is not None and n >= rounds
        wait = 0.0 if done else max(0.0, every - (time.monotonic() - start))
        on_report(last, None if done else time.time() + wait)
        if done or stop.wait(wait):
            break
    return last
