"""--format prometheus and --textfile: the report as Prometheus metrics (exposition format;
the families and their labels are documented in docs/outputs.md).

Every sample is a gauge, rebuilt from one Report in a fresh CollectorRegistry (never the
process-global one), so a render holds exactly what the patrol saw. Severity is Status.rank,
so `max()` over rows is the worst row. Broker-wide rows carry `host=""`; where any row is
one item of its check, every family has an `item` label too. A check's metric gets its unit
from its name's suffix (model.UNIT_SUFFIXES), its maps' keys as labels (`key`, `key2`...),
and a map leaf whose own key carries a unit a family of its own, so no family mixes units.

Names pass `promtool check metrics`: characters outside [a-zA-Z0-9_] become `_`, camelCase
snake_case; a token promtool rejects (a non-base unit, a type word, a reserved suffix at the
end) is glued to its neighbour (`samples_count` -> `samplescount`). When two metrics end up
with one name and label set, the first (worst row first) wins; a check metric that would take
a name of the framework's own families is left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from fleetcheck.core.model import UNIT_SUFFIXES, Report, Result, Status
from fleetcheck.iso import parse_iso

PREFIX = "fleetcheck"
ROW_LABELS = ("check", "host")
SEVERITY = ", ".join(f"{s.rank} {s.label}" for s in sorted(Status, key=lambda s: s.rank))
KEY_LABELS = ("key", "key2", "key3", "key4")

# Units as promtool knows them: the base units it accepts, the units it wants in their base
# unit instead, SI and binary prefixes, and abbreviations it rejects as name tokens
_BASE_UNITS = frozenset(
    "amperes bytes celsius grams joules kelvin meters metres seconds volts".split()
)
_NON_BASE = frozenset(
    "minutes hours days weeks bits kelvins fahrenheit rankine inches yards miles calories "
    "pounds ounces".split()
)
_PREFIXES = tuple(
    "pico nano micro milli centi deci deca hecto kilo kibi mega mibi giga gibi tera tebi peta "
    "pebi".split()
)
_ABBREVIATIONS = frozenset("s sec ms us ns m h d b kb mb gb tb pb".split())
_TYPE_WORDS = ("gauge_histogram", "counter", "gauge", "summary", "untyped", "histogram")
_RESERVED_SUFFIXES = ("total", "count", "sum", "bucket")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_INVALID = re.compile(r"[^a-zA-Z0-9_]+")


def is_unit(token: str) -> bool:
    """Whether `token` names a unit promtool rejects in a name (anything but a base unit)."""
    if token in _ABBREVIATIONS or token in _NON_BASE:
        return True
    return any(
        token.startswith(p) and token[len(p) :] in _BASE_UNITS | _NON_BASE for p in _PREFIXES
    )


RESERVED_NAMES = frozenset(
    f"{PREFIX}_{n}"
    for n in (
        "check_severity check_duration_seconds check_alerting check_flapping check_bad_rounds "
        "check_since_timestamp_seconds results severity last_run_timestamp_seconds "
        "last_run_duration_seconds"
    ).split()
)


def snake(text: str) -> str:
    """`fooBar.baz-qux` -> `foo_bar_baz_qux`: lower snake_case from anything."""
    text = _CAMEL.sub(r"\1_\2", text)
    return "_".join(t for t in _INVALID.sub("_", text).lower().split("_") if t)


# words that would make a count's name look like it carries a unit
_UNIT_WORDS = _BASE_UNITS | set(UNIT_SUFFIXES.values()) | {"second", "per"}


def _lint_bad(token: str, last: bool) -> bool:
    return is_unit(token) or (last and (token in _RESERVED_SUFFIXES or token in _UNIT_WORDS))


# longest first, so `_per_s` is not read as `_s`
_SUFFIXES = sorted(UNIT_SUFFIXES.items(), key=lambda kv: -len(kv[0]))


def split_unit(metric: str) -> tuple[str, str]:
    """(stem, base unit) of a metric name by its UNIT_SUFFIXES suffix; unit '' for a count."""
    for suffix, unit in _SUFFIXES:
        if metric.endswith(suffix) and len(metric) > len(suffix):
            return metric[: -len(suffix)], unit
    return metric, ""


def metric_name(check: str, metric: str) -> tuple[str, str]:
    """(Prometheus name, base unit or '' for a count) for a check's metric."""
    stem, unit = split_unit(snake(metric))
    own = [t for t in stem.split("_") if t] or ["value"]
    tokens = [t for t in snake(check).split("_") if t] + own
    for _ in range(len(tokens)):  # glue tokens promtool rejects onto a neighbour
        changed = False
        for i, token in enumerate(tokens):
            if len(tokens) > 1 and _lint_bad(token, i == len(tokens) - 1 and not unit):
                if i > 0:
                    tokens[i - 1 : i + 1] = [tokens[i - 1] + token]
                else:
                    tokens[0:2] = [token + tokens[1]]
                changed = True
                break
        if not changed:
            break
    rest = "_".join(tokens)
    for word in _TYPE_WORDS:
        rest = rest.replace(f"_{word}", word)
    if rest.startswith(_TYPE_WORDS):
        rest = "x" + rest
    return f"{PREFIX}_{rest}" + (f"_{unit}" if unit else ""), unit


def numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    return None


def leaves(value: Any, keys: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], float]]:
    """Numeric leaves of a metric value with the map keys on the way to each."""
    number = numeric(value)
    if number is not None:
        yield keys, number
    elif isinstance(value, dict) and len(keys) < len(KEY_LABELS):
        for key, inner in value.items():
            yield from leaves(inner, (*keys, str(key)))


def epoch(iso: str) -> float | None:
    try:
        return parse_iso(iso).timestamp()
    except (TypeError, ValueError):
        return None


@dataclass
class _Family:
    help: str
    depth: int = 0
    samples: dict[tuple[str, ...], float] = field(default_factory=dict)  # (host, [item,] *keys)


def _check_families(results: list[Result], items: bool) -> dict[str, _Family]:
    families: dict[str, _Family] = {}
    for r in results:
        row = (r.host or "", r.item or "") if items else (r.host or "",)
        for metric, value in r.metrics.items():
            for keys, number in leaves(value):
                name_of = str(metric)
                if keys and split_unit(snake(keys[-1]))[1]:  # a map leaf with its own unit
                    name_of, keys = f"{metric}_{keys[-1]}", keys[:-1]
                name, unit = metric_name(r.check, name_of)
                if name in RESERVED_NAMES:
                    continue
                family = families.setdefault(
                    name,
                    _Family(
                        f"fleetcheck check {r.check}: metric {name_of}"
                        + (f" ({unit})" if unit else " (count)")
                    ),
                )
                family.depth = max(family.depth, len(keys))
                family.samples.setdefault((*row, *keys), number)
    return families


def registry_for(report: Report) -> CollectorRegistry:
    """A fresh registry holding the report's metrics (see the module docstring)."""
    registry = CollectorRegistry(auto_describe=True)
    results = report.sorted_results()
    items = any(r.item is not None for r in results)
    row_labels = (*ROW_LABELS, "item") if items else ROW_LABELS

    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(f"{PREFIX}_{name}", doc, labelnames=labels, registry=registry)

    status = gauge(
        "check_severity", f"Row status by severity ({SEVERITY}): max() is the worst", row_labels
    )
    duration = gauge("check_duration_seconds", "How long the row's probe took", row_labels)
    alerting = gauge("check_alerting", "1 when the row alerts (fail_after respected)", row_labels)
    flapping = gauge("check_flapping", "1 when the row changed status often lately", row_labels)
    bad_rounds = None
    since = None
    if report.remembered:
        bad_rounds = gauge("check_bad_rounds", "Consecutive rounds not OK", row_labels)
        since = gauge(
            "check_since_timestamp_seconds", "When the row got its current status", row_labels
        )
    seen: set[tuple[str, ...]] = set()
    for r in results:
        row = (r.check, r.host or "", r.item or "") if items else (r.check, r.host or "")
        if row in seen:
            continue
        seen.add(row)
        status.labels(*row).set(r.status.rank)
        duration.labels(*row).set(r.duration_s)
        standing = report.standing_of(r)
        alerting.labels(*row).set(1 if standing.pages(r.status) else 0)
        flapping.labels(*row).set(1 if standing.flapping else 0)
        if standing.since is not None and bad_rounds is not None and since is not None:
            bad_rounds.labels(*row).set(standing.bad_rounds)
            started = epoch(standing.since)
            if started is not None:
                since.labels(*row).set(started)

    for name, family in _check_families(results, items).items():
        place = ("host", "item") if items else ("host",)
        labels = (*place, *KEY_LABELS[: family.depth])
        g = Gauge(name, family.help, labelnames=labels, registry=registry)
        for sample, value in family.samples.items():
            where, keys = sample[: len(place)], sample[len(place) :]
            padded = [*keys, *[""] * (family.depth - len(keys))]
            g.labels(*where, *padded).set(value)

    counts = report.counts()
    per_status = gauge("results", "Rows per status in the last patrol", ("status",))
    for s in Status:
        per_status.labels(s.label).set(counts[s.label])
    gauge("severity", f"The last patrol's worst row ({SEVERITY})").set(report.status.rank)
    started = epoch(report.started_at)
    if started is not None:
        gauge("last_run_timestamp_seconds", "When the last patrol finished (Unix time)").set(
            started + report.duration_s
        )
    gauge("last_run_duration_seconds", "How long the last patrol took").set(report.duration_s)
    return registry


def render(report: Report) -> str:
    """The report in the Prometheus text exposition format (0.0.4)."""
    return generate_latest(registry_for(report)).decode()


def write_textfile(report: Report, path: str) -> None:
    """Write the metrics to `path` atomically (a temporary file in the same directory, then
    rename(2)), so node_exporter never reads half a file. Raises OSError."""
    from prometheus_client import write_to_textfile

    write_to_textfile(path, registry_for(report))
