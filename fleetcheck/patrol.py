"""Living with fleetcheck: one round or many, with memory, history and the alerting outputs.

The CLI parses options; this module decides the order of things in a round: patrol, then
remember (state), then record (history), then feed the monitoring stack. A failing output
(Alertmanager down, heartbeat URL unreachable) is a warning on stderr, never a lost patrol.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.model import Report
from fleetcheck.runner import Planned, run_patrol
from fleetcheck.state import Memory, remember


@dataclass(frozen=True)
class Outputs:
    state: Path | None = None
    history: Path | None = None
    textfile: Path | None = None
    alertmanager: str | None = None
    heartbeat: str | None = None


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


def warn(message: str) -> None:
    print(f"fleetcheck: warning: {message}", file=sys.stderr)


def one_round(
    fleet: FleetConfig, items: list[Planned], outputs: Outputs, keeper: Any = None
) -> Report:
    report = run_patrol(fleet, items, keeper=keeper)
    memory = Memory(fleet.patrol.fail_after, fleet.patrol.flap_changes, fleet.patrol.flap_window)
    if outputs.state is not None:
        try:
            report = remember(report, outputs.state, memory)
        except OSError as e:
            warn(f"state file {outputs.state}: {e.strerror or e}")
    if outputs.history is not None:
        from fleetcheck import history

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
    if outputs.alertmanager is not None:
        from fleetcheck import alerting

        try:
            # firing alerts lapse by themselves three patrol intervals after the last
            # confirmation, so a dead fleetcheck never leaves them firing forever
            alerting.push_alerts(
                outputs.alertmanager, report, expires_after=max(300.0, 3 * fleet.patrol.every)
            )
        except alerting.DeliveryError as e:
            warn(str(e))
    if outputs.heartbeat is not None:
        from fleetcheck import alerting

        try:
            alerting.ping_heartbeat(outputs.heartbeat, report)
        except alerting.DeliveryError as e:
            warn(str(e))
    return report


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
