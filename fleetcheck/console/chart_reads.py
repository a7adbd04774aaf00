"""The console's charts over a time window: a small fleet's from its rounds as read (drawn by
fleetcheck.console.charts), a large fleet's (past MAX_LINES hosts) from the history database,
the hosts that matter most read by SQL."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetcheck.console.charts import (  # the series of the declared charts
    Chart,
    Declared,
    Focus,
    Series,
    charts,
    declared_charts,
    host_limit,
    host_value,
    limits_of,
    newest_of,
    reference_lines,
)
from fleetcheck.console.source import Snapshot

MAX_LINES = 12  # per-host lines a chart draws; past it, the hosts that matter most


def window_charts(
    snap: Snapshot,
    since: datetime,
    focus: Focus,
    now: datetime,
    declared: Declared | None = None,
) -> tuple[list[Chart], float, float]:
    """The charts of the rounds at or after `since`, and their time span. From a database
    with more than MAX_LINES hosts, only the broker-wide rows and the rows of the MAX_LINES
    hosts with the fewest or the most of each per-host chart's metric (as it declares) are
    read, chosen by one SQL query."""
    specs = declared if declared is not None else declared_charts()
    if snap.stored is None or _host_count(snap.stored) <= MAX_LINES:
        window = snap.window(since)
        t0 = window[0].started_at.timestamp() if window else now.timestamp()
        t1 = window[-1].started_at.timestamp() if window else now.timestamp()
        return charts(window, focus, specs), t0, t1
    broker = snap.host_window(since, None)
    t0 = broker[0].started_at.timestamp() if broker else now.timestamp()
    t1 = broker[-1].started_at.timestamp() if broker else now.timestamp()
    out = charts(broker, {}, specs)
    hosts = _host_count(snap.stored)
    for i, (check, spec) in enumerate(specs):
        if spec.per_host is None:
            continue
        order = "ASC" if spec.pick == "fewest" else "DESC"
        field_path = f"$.metrics.{spec.per_host}"
        chosen = _extreme_hosts(snap.stored, since, check, field_path, order)
        mine = focus.get(spec.key, {})
        value = functools.partial(host_value, spec=spec, focus=mine)
        values = _stored_series(snap.stored, since, chosen, check, value)
        series = [Series(h, values[h]) for h in chosen if h in values]
        newest: dict[str, float] = {}
        if spec.limit is not None:
            limit = functools.partial(host_limit, key=spec.limit)
            newest = newest_of(_stored_series(snap.stored, since, chosen, check, limit))
        limits = limits_of(spec, mine, newest)
        series += reference_lines(spec, limits, [h for h in chosen if h in values], t0, t1)
        title = f"{out[i].title}: the {len(chosen)} of {hosts} hosts with the {spec.picked}"
        out[i] = replace(out[i], title=title, series=series)
    return out, t0, t1


def _stored_series(
    path: Path,
    since: datetime,
    hosts: list[str],
    check: str,
    value: Callable[[dict[str, Any]], float | None],
) -> dict[str, list[tuple[float, float]]]:
    """Per host, `value` of its `check` row over the rounds at or after `since`, from the rows
    the database stored (each change, each refresh): a value holds until the round before
    the next one, so each change is drawn as a step, as one point a round would draw it."""
    from fleetcheck.rounds import store

    with closing(store.connect(path, write=False)) as db:
        first = store.first_round(db, since)
        if first is None:
            return {}
        first = max(first, store.whole_from(db) or 0)
        base = store.reader_start(db, first)
        times = dict(db.execute("SELECT id, at FROM rounds WHERE id >= ?", (base,)).fetchall())
        newest = max(times)
        out: dict[str, list[tuple[float, float]]] = {}
        for host in hosts:
            got = db.execute(
                "SELECT id FROM keys WHERE host = ? AND check_name = ?", (host, check)
            ).fetchone()
            if got is None:
                continue
            pts: list[tuple[float, float]] = []
            held: float | None = None
            for rnd, body in db.execute(
                "SELECT round, body FROM rows WHERE key = ? AND round >= ? ORDER BY round",
                (got[0], base),
            ):
                try:
                    row = json.loads(body) if body is not None else None
                except ValueError:
                    continue
                now = value(row) if isinstance(row, dict) else None
                if rnd <= first:
                    held = now
                    continue
                if not pts and held is not None:
                    pts.append((times[first], held))
                if held is not None and rnd - 1 in times:
                    pts.append((times[rnd - 1], held))
                if now is not None:
                    pts.append((times[rnd], now))
                held = now
            if not pts and held is not None:
                pts.append((times[first], held))
            if held is not None:
                pts.append((times[newest], held))
            if pts:
                out[host] = pts
    return out


def _host_count(path: Path) -> int:
    from fleetcheck.rounds import store

    with closing(store.connect(path, write=False)) as db:
        (n,) = db.execute(
            "SELECT count(DISTINCT host) FROM keys WHERE host != ? AND sig IS NOT NULL",
            (store.BROKER_KEY,),
        ).fetchone()
    return int(n)


def _extreme_hosts(
    path: Path, since: datetime, check: str, field_path: str, order: str
) -> list[str]:
    """The MAX_LINES hosts whose `check` rows stored in the window have the lowest (ASC) or
    highest (DESC) value at `field_path`."""
    from fleetcheck.rounds import store

    with closing(store.connect(path, write=False)) as db:
        first = store.first_round(db, since)
        if first is None:
            return []
        agg = "min" if order == "ASC" else "max"
        got = db.execute(
            f"SELECT k.host, {agg}(json_extract(r.body, ?)) AS v FROM keys k "  # noqa: S608
            "JOIN rows r ON r.key = k.id WHERE k.check_name = ? AND k.host != ? "
            "AND r.round >= ? AND r.body IS NOT NULL GROUP BY k.host HAVING v IS NOT NULL "
            f"ORDER BY v {order}, k.host LIMIT ?",
            (field_path, check, store.BROKER_KEY, store.reader_start(db, first), MAX_LINES),
        ).fetchall()
    return [str(h) for h, _ in got]
