"""One patrol: run every selected check against its rows, concurrently, within a deadline.

The only place that turns exceptions into UNKNOWN rows, and (through Report) the only place
an exit code comes from. Host lanes run concurrently on daemon threads, so a host that hangs
past every timeout can neither delay the report past the deadline nor keep the process alive.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.core.check import Check, Scope
from fleetcheck.core.context import PatrolContext, utcnow
from fleetcheck.core.correlate import correlate
from fleetcheck.core.errors import CheckError
from fleetcheck.core.model import Report, Result, Status
from fleetcheck.iso import iso_utc
from fleetcheck.parse.duration import format_duration


@dataclass(frozen=True)
class Planned:
    check: Check[Any, Any]
    config: Any
    target: HostConfig | None
    # Why an enabled check has no rows (its targets() was empty): it becomes one UNKNOWN
    # broker-wide row saying so, never silence and never exit 0 for a check that looked at nothing
    no_targets: str | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.check.name, self.target.name if self.target else None)


def preload(items: Iterable[Planned]) -> None:
    """Import now the client library the planned checks will need (redis-py for a check on the
    broker), as part of start-up rather than inside the first lane that connects."""
    if any(item.check.scope is Scope.BROKER for item in items):
        from fleetcheck.transport.redis import preload as preload_redis

        preload_redis()


def plan(
    fleet: FleetConfig,
    available: dict[str, Check[Any, Any]],
    only: Iterable[str] = (),
    hosts: Iterable[str] = (),
) -> list[Planned]:
    """The (check, row) pairs of this patrol: configured checks, narrowed by --only/--host.

    Raises ValueError naming an unknown --only check or --host name.
    """
    only, hosts = list(only), list(hosts)
    for name in only:
        if name not in available:
            raise ValueError(f"--only {name}: no such check (see `fleetcheck checks`)")
        if name not in fleet.checks:
            raise ValueError(f"--only {name}: not enabled in {fleet.path} (add [checks.{name}])")
    names = {h.name for h in fleet.hosts}
    for name in hosts:
        if name not in names:
            raise ValueError(f"--host {name}: no such host in {fleet.path}")
    out = []
    for name, config in fleet.checks.items():
        if only and name not in only:
            continue
        check = available[name]
        targets = check.targets(fleet, config)
        if not targets and not hosts:  # naming hosts narrows, it does not complain
            out.append(Planned(check, config, None, check.no_targets(fleet, config)))
        for target in targets:
            # naming hosts narrows the patrol to their rows; broker-wide rows are left out
            if hosts and (target is None or target.name not in hosts):
                continue
            out.append(Planned(check, config, target))
    return out


def run_batch(
    ctx: PatrolContext, batch: list[Planned]
) -> dict[tuple[str, str | None], list[Result]]:
    """Measure a check's targets together (`probe_all`), then judge each from its own facts:
    {row key: its row, or its items' rows}; every failure becomes rows, never an exception."""
    start = time.monotonic()
    check, config = batch[0].check, batch[0].config
    out: dict[tuple[str, str | None], list[Result]] = {}
    measured: Any = {}
    if batch[0].no_targets is None:
        try:
            measured = check.probe_all(ctx, [item.target for item in batch], config)
        except Exception as e:  # the batch failed: every row's UNKNOWN
            measured = {item.key[1]: e for item in batch}
    took = time.monotonic() - start  # the batch's measuring, shared by its rows
    for item in batch:
        target, start = item.target, time.monotonic()
        try:
            if item.no_targets is not None:
                raise CheckError(item.no_targets)
            if item.key[1] not in measured:
                raise CheckError(f"check {check.name} measured nothing for this row")
            facts = measured[item.key[1]]
            if isinstance(facts, Exception):
                raise facts
            verdict = check.evaluate(facts, config, target, ctx.clock())
            rows = [verdict] if isinstance(verdict, Result) else list(verdict)
            if not rows:
                raise CheckError(f"check {check.name} judged nothing (no row, no item)")
        except Exception as e:
            rows = [_failed(check, target, e)]
        judged = took + time.monotonic() - start
        out[item.key] = [_completed(check, row).with_duration(judged) for row in rows]
    return out


def _failed(check: Check[Any, Any], target: HostConfig | None, e: Exception) -> Result:
    """The one place an exception becomes a row: a CheckError says its own reason and
    status; anything else is a bug in the check, which must not take the patrol down."""
    if isinstance(e, CheckError):
        return check.result(
            target,
            e.status,
            e.reason,
            cause=e.cause,
            evidence_strength=e.strength,
            evidence=e.evidence,
        )
    reason = f"internal error in check {check.name}: {type(e).__name__}: {e}"
    return check.result(target, Status.UNKNOWN, reason)


def _completed(check: Check[Any, Any], result: Result) -> Result:
    """A row with what its check declares filled in where the row was built without it."""
    if result.headline is None:  # a row built without Check.result still gets its headline
        result = replace(result, headline=check.headline_of(result.metrics))
    if result.evidence_strength is None and result.status is not Status.OK:
        result = replace(result, evidence_strength=check.default_strength(result.status))
    return result


def fragments_for(
    items: list[Planned], fleet: FleetConfig
) -> Callable[[HostConfig], dict[str, str]]:
    """The shell fragments each host's one gathered exec must run, from its host checks."""

    def for_host(host: HostConfig) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in items:
            if item.target is not None and item.target.name == host.name:
                for key, body in item.check.remote_commands(host, item.config, fleet).items():
                    out[f"{item.check.name}.{key}"] = body
        return out

    return for_host


def run_patrol(
    fleet: FleetConfig,
    items: list[Planned],
    clock: Callable[[], datetime] = utcnow,
    deadline: float | None = None,
    carried: dict[str, Any] | None = None,
    keeper: Any = None,
) -> Report:
    """One patrol. `carried` maps state-row keys to what each row's previous round carried
    (see fleetcheck.state.carried); `keeper` (fleetcheck.transport.keep.Keeper) lends and
    takes back SSH connections kept between the rounds of a long-running process."""
    started = clock()
    t0 = time.monotonic()
    deadline_s = fleet.patrol.deadline if deadline is None else deadline
    ctx = PatrolContext(fleet, fragments_for(items, fleet), clock, carried, keeper=keeper)
    ctx.deadline_at = t0 + deadline_s

    # Lanes of batches: each broker check is one lane of one batch (its rows measured
    # together); each host is one lane running its host checks in turn over its one shell.
    broker_lanes: dict[str, list[list[Planned]]] = {}
    by_host: dict[str, list[list[Planned]]] = {}
    for item in items:
        if item.check.scope is Scope.HOST and item.target is not None:
            by_host.setdefault(item.target.name, []).append([item])
        else:
            broker_lanes.setdefault(item.check.name, [[]])[0].append(item)
    lanes = [*broker_lanes.values(), *by_host.values()]

    results: dict[tuple[str, str | None], list[Result]] = {}
    lock = threading.Lock()
    work: queue.Queue[list[list[Planned]]] = queue.Queue()
    for lane in lanes:
        work.put(lane)
    done = threading.Event()
    remaining = [len(lanes)]

    def worker() -> None:
        while True:
            try:
                lane = work.get_nowait()
            except queue.Empty:
                return
            for batch in lane:
                if ctx.closed:
                    break
                rows = run_batch(ctx, batch)
                with lock:
                    for key, row in rows.items():
                        results.setdefault(key, row)
            with lock:
                remaining[0] -= 1
                if remaining[0] == 0:
                    done.set()

    if not lanes:
        done.set()
    n_threads = max(1, min(fleet.patrol.concurrency, len(lanes)))
    for i in range(n_threads):
        threading.Thread(target=worker, name=f"fleetcheck-lane-{i}", daemon=True).start()
    done.wait(timeout=max(0.0, deadline_s - (time.monotonic() - t0)))
    timed_out = not done.is_set()
    with lock:
        final = dict(results)
    ctx.close()
    if timed_out:
        # one cause for every row cut off: the outputs tell the deadline once, not per row
        limit = format_duration(deadline_s)
        late = f"the patrol deadline ({limit}) came before these rows finished"
        for item in items:
            if item.key not in final:
                final[item.key] = [
                    item.check.result(
                        item.target,
                        Status.UNKNOWN,
                        f"did not finish within the patrol deadline ({limit})",
                        duration_s=round(time.monotonic() - t0, 6),
                        cause=late,
                        evidence_strength="absence",
                    )
                ]
    # verdicts that need the whole patrol (a host gone from the network whose broker
    # connections are left open): once, after every row is in
    ordered = correlate(_unique(final[item.key] for item in items if item.key in final))
    if any(r.host is not None for r in ordered):  # peers compare host rows only
        from fleetcheck.core.peers import with_peers

        ordered = with_peers(fleet, ordered)  # peers as the control group (core.peers)
    return Report(
        started_at=iso_utc(started),
        duration_s=time.monotonic() - t0,
        results=ordered,
        notes=tuple(ctx.notes()),
    )


def _unique(per_target: Iterable[list[Result]]) -> list[Result]:
    """Every row once by its (check, host, item): a check that named one item twice keeps the
    first."""
    seen: set[tuple[str, str | None, str | None]] = set()
    out = []
    for rows in per_target:
        for r in rows:
            if r.key not in seen:
                seen.add(r.key)
                out.append(r)
    return out
