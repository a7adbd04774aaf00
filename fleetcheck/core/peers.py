"""Peers as the control group. A host is compared with the hosts that should behave like it:
the members of a `[groups.NAME]` it belongs to, or, for a host in no group, the other
ungrouped hosts whose row of that check was judged against the same settings (equal
`limits`). Where one departs from its peers on a metric its check declares comparable
(`Check.peer_metrics`), its row's evidence gets a `peers` entry (strength `inference`).

A departure never changes a row's status, for a group of any size: a peer comparison is one
snapshot, and a snapshot of peers catches a deploy half way or a host that is simply on
another schedule; it is a lead for `fleetcheck explain`, not a page. A group of fewer than
three hosts is never compared at all: with one peer there is no telling which of the two is
the odd one.

The statistics are robust, because the host under test must not hide itself: the peers'
median and MAD are computed without the host (leave one out), so one silent host among three
cannot drag the median or inflate the spread that judges it. A host departs when its distance
from the peers' median is beyond all three of:
- `K` = 3.5 robust standard deviations (1.4826 x MAD), the usual cut for the modified z-score
  (Iglewicz and Hoaglin): on normally spread values about 1 in 2,000 crosses it by chance;
- a share of the median (`rel`): a fleet of identical hosts has a MAD of 0, and a difference of
  one connection in twelve is noise, not a departure;
- an absolute floor (`floor`): below it no difference matters to an operator (two
  connections, three error lines a minute, ten minutes of log silence).
Each metric declares which direction counts (`PeerMetric.direction`).

Pure: the runner calls `with_peers` once, after every row is in.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleetcheck.core.declarations import PeerMetric
from fleetcheck.core.model import Result, number

K = 3.5  # robust standard deviations (modified z-score's cut)
MAD_TO_SD = 1.4826  # MAD x this estimates the standard deviation of normally spread values
MIN_GROUP = 3  # hosts, the one judged included
SAME_SETTINGS = "hosts with the same settings"
# Up to this many hosts a group's median and MAD are computed without the host judged (O(n^2)
# over a group); in a bigger group one value moves the median by at most one rank, so they are
# computed once, with it (O(n log n): a patrol of thousands of hosts stays fast)
LEAVE_ONE_OUT_UP_TO = 40


@dataclass(frozen=True)
class Departure:
    row: tuple[str, str, str | None]  # (check, host, item): an item is compared per item
    group: str
    direction: str  # "higher" or "lower"
    peers: int  # how many peers it was compared with
    note: dict[str, Any]  # what the row's evidence says under `peers`

    @property
    def host(self) -> str:
        return self.row[1]


def departs(value: float, others: Sequence[float], spec: PeerMetric) -> str | None:
    """ "higher"/"lower" when `value` departs from `others` (its peers, itself left out) by
    the rule in the module docstring; None when it does not, or there are fewer than two."""
    if len(others) < MIN_GROUP - 1:
        return None
    median = statistics.median(others)
    mad = statistics.median(abs(x - median) for x in others)
    return departs_from(value, median, mad, spec)


def departs_from(value: float, median: float, mad: float, spec: PeerMetric) -> str | None:
    """The rule itself, given the peers' median and MAD."""
    bound = max(K * MAD_TO_SD * mad, spec.rel * abs(median), spec.floor)
    distance = value - median
    if abs(distance) <= bound:
        return None
    direction = "higher" if distance > 0 else "lower"
    if spec.direction != "both" and spec.direction != direction:
        return None
    return direction


def _number(row: Result, spec: PeerMetric) -> float | None:
    value = row.metrics.get(spec.metric)
    if value is None and spec.zero_if is not None and row.metrics.get(spec.zero_if) == 0:
        return 0.0
    return number(value)


def _shown(value: float, spec: PeerMetric) -> str:
    if spec.unit == "s":
        from fleetcheck.parse.duration import format_duration

        return format_duration(max(0.0, round(value)))
    if spec.unit == "/s":
        return f"{value:g}/s"
    return f"{value:g}"


def _groups(
    rows: dict[str, Result], memberships: dict[str, tuple[str, ...]]
) -> dict[str, list[str]]:
    """Peer groups among `rows`' hosts: each named group, and the ungrouped hosts by the
    settings (limits) their row was judged against."""
    out: dict[str, list[str]] = {}
    for host in sorted(rows):
        named = memberships.get(host, ())
        for g in named:
            out.setdefault(f"group {g}", []).append(host)
        if not named:
            settings = repr(sorted(rows[host].limits.items()))  # keys are unique text
            out.setdefault(f"{SAME_SETTINGS}\0{settings}", []).append(host)
    return out


def find(
    results: Iterable[Result],
    memberships: dict[str, tuple[str, ...]],
    metrics: Sequence[tuple[str, PeerMetric]] | None = None,
) -> list[Departure]:
    """Every departure from peers among `results` (host rows only). `memberships`: each
    host's named groups (a host missing from it is in none). `metrics`: (check, metric)
    pairs; None: what the checks of these rows declare (`Check.peer_metrics`, through the
    registry)."""
    results = list(results)
    if metrics is None:
        from fleetcheck.core import registry

        metrics = registry.declared("peer_metrics", (r.check for r in results))
    out: list[Departure] = []
    for check, spec in metrics:
        items = dict.fromkeys(r.item for r in results if r.check == check)
        for item in items:
            out += _departures(results, memberships, check, spec, item)
    return out


def _departures(
    results: list[Result],
    memberships: dict[str, tuple[str, ...]],
    check: str,
    spec: PeerMetric,
    item: str | None,
) -> list[Departure]:
    """The departures of one metric among the rows of one item (None: whole-host rows)."""
    out: list[Departure] = []
    rows = {
        r.host: r for r in results if r.check == check and r.host is not None and r.item == item
    }
    values = {h: v for h, r in rows.items() if (v := _number(r, spec)) is not None}
    for key, members in _groups(rows, memberships).items():
        measured = [h for h in members if h in values]
        if len(measured) < MIN_GROUP:
            continue
        label = key.split("\0")[0]
        whole = None
        if len(measured) > LEAVE_ONE_OUT_UP_TO:  # one value moves a big median by a rank
            every = [values[h] for h in measured]
            centre = statistics.median(every)
            whole = (centre, statistics.median(abs(x - centre) for x in every))
        for host in measured:
            if whole is None:
                others = [values[h] for h in measured if h != host]
                direction = departs(values[host], others, spec)
                median = statistics.median(others)
            else:
                direction = departs_from(values[host], *whole, spec)
                median = whole[0]
            if direction is None:
                continue
            n_others = len(measured) - 1
            note = {
                "group": label,
                "metric": spec.metric,
                "value": values[host],
                "peer_median": median,
                "peers": n_others,
                "departs": direction,
                "strength": "inference",
                "text": f"{_shown(values[host], spec)} {spec.words} where its {n_others} "
                f"peers ({label}) have a median of {_shown(median, spec)}",
            }
            out.append(Departure((check, host, item), label, direction, n_others, note))
    return out


def annotate(results: Sequence[Result], found: Sequence[Departure]) -> tuple[Result, ...]:
    """`results` with each departure in its row's evidence under `peers` (status unchanged)."""
    by_row: dict[tuple[str, str, str | None], list[Departure]] = {}
    for d in found:
        by_row.setdefault(d.row, []).append(d)
    out = []
    for r in results:
        mine = by_row.get((r.check, r.host or "", r.item))
        if not mine:
            out.append(r)
            continue
        notes = [d.note for d in mine]
        if isinstance(r.evidence, dict):
            evidence: Any = {**r.evidence, "peers": notes}
        elif r.evidence is None:
            evidence = {"peers": notes}
        else:
            evidence = {"observed": r.evidence, "peers": notes}
        out.append(replace(r, evidence=evidence))
    return tuple(out)


def with_peers(fleet: Any, results: Sequence[Result]) -> tuple[Result, ...]:
    """The runner's hook: `results` with departures from peers noted (see the docstring).
    `fleet` is the FleetConfig (its hosts' `groups`)."""
    memberships = {h.name: tuple(h.groups) for h in getattr(fleet, "hosts", ())}
    found = find(results, memberships)
    return annotate(results, found) if found else tuple(results)


def candidates(fleet: Any, host: str) -> list[str]:
    """The hosts `host` may be compared with (for a patrol narrowed to one host, as
    `fleetcheck explain` runs): its named groups' members, or the ungrouped hosts."""
    hosts = list(getattr(fleet, "hosts", ()))
    me = next((h for h in hosts if h.name == host), None)
    if me is None:
        return []
    mine = set(me.groups)
    if mine:
        return [h.name for h in hosts if h.name != host and mine & set(h.groups)]
    return [h.name for h in hosts if h.name != host and not h.groups]
