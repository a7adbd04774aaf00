"""The console's charts (`/charts`): what the checks declare (`Check.charts`) drawn over
recorded rounds. Pure: rounds in, series out (a large fleet's: `chart_reads.window_charts`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from fleetcheck.core.declarations import ChartSpec
from fleetcheck.core.model import number
from fleetcheck.core.safe_text import printable

if TYPE_CHECKING:
    from fleetcheck.rounds import history as hist


@dataclass(frozen=True)
class Series:
    label: str
    points: list[tuple[float, float]]  # (Unix time, value)
    reference: bool = False  # a limit (cap, max_age) rather than a measurement

    def __post_init__(self) -> None:
        # a host's name as a history line spells it: made safe for the chart's text
        object.__setattr__(self, "label", printable(self.label))


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    decision: str  # the decision this chart informs, one line
    unit: str  # "count" or "seconds"
    series: list[Series]


def _broker_value(row: dict[str, Any], metric: str, part: str) -> float | None:
    """`metric` of a broker-wide row (`part`: "metrics", or "limits" for a setting judged
    against, among the metrics in an old round)."""
    values = row.get(part)
    if part == "limits" and not isinstance(values, dict):
        values = row.get("metrics")
    return number(values.get(metric)) if isinstance(values, dict) else None


# chart key -> host -> (the item its line follows, that item's limit): `Check.chart_focus`
Focus = dict[str, dict[str, tuple[str, float]]]
Declared = list[tuple[str, ChartSpec]]  # (check, chart) pairs, in the page's order


def declared_charts() -> Declared:
    """Every chart the checks declare (`Check.charts`, through the registry), in the order of
    their `place`."""
    from fleetcheck.core import registry

    return sorted(registry.declared("charts"), key=lambda pair: pair[1].place)


def config_focus(fleet: Any, declared: Declared | None = None) -> Focus:
    """For each chart with items: host -> (item, limit) its check picks from the host's
    settings (`Check.chart_focus`; e.g. the first log and its max_age)."""
    from fleetcheck.core import registry

    out: Focus = {}
    for check_name, spec in declared if declared is not None else declared_charts():
        check = registry.find(check_name)
        if spec.items is None or check is None:
            continue
        picks = {h.name: check.chart_focus(h) for h in getattr(fleet, "hosts", ())}
        out[spec.key] = {h: pick for h, pick in picks.items() if pick is not None}
    return out


def host_value(
    row: dict[str, Any], spec: ChartSpec, focus: dict[str, tuple[str, float]]
) -> float | None:
    """A host row's value on a per-host chart: its `per_host` metric. Where the host has a
    focus (charts with `items`), only the row of the item it names counts (an old row of the
    whole host: that item's value from its `items` map)."""
    metrics = row.get("metrics")
    if spec.per_host is None or not isinstance(metrics, dict):
        return None
    host = row.get("host")
    picked = focus.get(host) if isinstance(host, str) else None
    item = row.get("item")
    if picked is not None and isinstance(item, str) and item != picked[0]:
        return None  # another item of the host: its line follows the picked one
    value = number(metrics.get(spec.per_host))
    per_item = metrics.get(spec.items) if spec.items is not None else None
    if picked is not None and isinstance(per_item, dict):
        own = per_item.get(picked[0])
        if isinstance(own, dict):
            value = number(own.get(spec.per_host))
    return value


def _series(
    rounds: list[hist.Round],
    check: str,
    value: Callable[[dict[str, Any]], float | None],
    hosts: bool = True,
) -> dict[str, list[tuple[float, float]]]:
    """Per host, `value` of its `check` rows round by round (not `hosts`: of the broker-wide
    rows, under "")."""
    out: dict[str, list[tuple[float, float]]] = {}
    for rnd in rounds:
        t = rnd.started_at.timestamp()
        for row in rnd.rows:
            host = row.get("host")
            if row.get("check") != check or hosts != (host is not None):
                continue
            got = value(row)
            if got is not None:
                out.setdefault("" if host is None else str(host), []).append((t, got))
    return out


def reference_lines(
    spec: ChartSpec, limits: dict[str, float], hosts: list[str], t0: float, t1: float
) -> list[Series]:
    """`hosts`' limits (host -> limit), one reference line per distinct limit (named after
    its hosts when they differ)."""
    by_value: dict[float, list[str]] = {}
    for h in hosts:
        if h in limits:
            by_value.setdefault(limits[h], []).append(h)
    out = []
    label = spec.limit_label
    for limit, names in sorted(by_value.items()):
        named = label if len(by_value) == 1 else f"{label} {', '.join(names)}"
        out.append(Series(named, [(t0, limit), (t1, limit)], reference=True))
    return out


def host_limit(row: dict[str, Any], key: str) -> float | None:
    limits = row.get("limits")
    return number(limits.get(key)) if isinstance(limits, dict) else None


def newest_of(values: dict[str, list[tuple[float, float]]]) -> dict[str, float]:
    """Per host, the value of its newest point."""
    return {h: pts[-1][1] for h, pts in values.items() if pts}


def limits_of(
    spec: ChartSpec, focus: dict[str, tuple[str, float]], newest: dict[str, float]
) -> dict[str, float]:
    """host -> the limit its reference line draws: its item's (`items`), else the newest of
    its rows' `limit` (`newest`)."""
    if spec.items is not None:
        return {h: limit for h, (_, limit) in focus.items()}
    return newest


def _broker_lines(rounds: list[hist.Round], check: str, spec: ChartSpec) -> list[Series]:
    """A broker-wide chart's lines: the measured ones, then the limits that have points;
    nothing until a measured line has a point."""
    measured, references = [], []
    for line in spec.lines:
        part = "limits" if line.limit else "metrics"
        value = partial(_broker_value, metric=line.metric, part=part)
        points = _series(rounds, check, value, hosts=False).get("", [])
        if not line.limit:
            measured.append(Series(line.label or line.metric, points))
        elif points:
            references.append(Series(line.label or line.metric, points, reference=True))
    return measured + references if any(s.points for s in measured) else []


def charts(rounds: list[hist.Round], focus: Focus, declared: Declared | None = None) -> list[Chart]:
    """The charts the checks declare (`declared`; None: through the registry), drawn over
    `rounds`. `focus`: per chart with items, host -> (item, limit) from the config (the
    history holds each item's value, not its limit)."""
    out = []
    for check, spec in declared if declared is not None else declared_charts():
        if spec.per_host is None:
            series = _broker_lines(rounds, check, spec)
        else:
            mine = focus.get(spec.key, {})
            values = _series(rounds, check, partial(host_value, spec=spec, focus=mine))
            series = [Series(h, pts) for h, pts in sorted(values.items())]
            if values and rounds:
                t0, t1 = rounds[0].started_at.timestamp(), rounds[-1].started_at.timestamp()
                limit = partial(host_limit, key=spec.limit) if spec.limit else lambda row: None
                newest = newest_of(_series(rounds, check, limit))
                limits = limits_of(spec, mine, newest)
                series += reference_lines(spec, limits, sorted(values), t0, t1)
        out.append(Chart(spec.key, spec.title, spec.decision, spec.unit, series))
    return out
