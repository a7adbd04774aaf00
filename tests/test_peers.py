"""Peers as the control group (issue 24 item 5): the pure rule, table-tested. A departure is
named in the row's evidence with strength "inference", never changes a status, and a group
of fewer than three is never compared."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from fleetcheck.core import peers, registry
from fleetcheck.core.declarations import PeerMetric
from fleetcheck.core.model import Result, Status
from fleetcheck.rounds import explain as explaining


def declared(check: str, metric: str) -> PeerMetric:
    """The peer metric a check declares (`Check.peer_metrics`): the rule's data is theirs."""
    found = registry.find(check)
    assert found is not None
    return next(m for m in found.peer_metrics if m.metric == metric)


CONNS = declared("clients", "connections")
RATE = declared("logs", "error_rate_per_s")
AGE = declared("logs", "age_s")


@pytest.mark.parametrize(
    "value, others, spec, expected",
    [
        # a host that lost its workers among identical peers
        (0, [4, 4], CONNS, "lower"),
        (0, [12, 12, 12, 12], CONNS, "lower"),
        (6, [12, 12, 12], CONNS, "lower"),  # half its workers gone
        (40, [12, 12, 12], CONNS, "higher"),  # a leak, or a connection per request
        # noise: jitter of healthy pools, one connection less, small absolute numbers
        (8, [10, 11, 9, 12, 10], CONNS, None),
        (11, [12, 12, 12], CONNS, None),
        (1, [2, 2], CONNS, None),  # two connections apart: under the floor
        (3, [4, 3, 0], CONNS, None),
        # fewer than two peers: no comparison at all
        (0, [12], CONNS, None),
        (0, [], CONNS, None),
        # log silence: only longer than its peers counts, and by more than 10 minutes
        (9005, [33, 123, 62], AGE, "higher"),
        (290, [10, 12], AGE, None),  # a fleet logging every 5 minutes, caught unluckily
        (3500, [100, 3000], AGE, None),  # hourly loggers: spread too wide to tell
        (5, [3000, 3100, 2900], AGE, None),  # logging more often is no suspicion
        # error rate: only more errors than its peers counts, over 3 a minute
        (0.15, [0.0, 0.0, 0.0], RATE, "higher"),
        (0.01, [0.0, 0.0], RATE, None),
        (0.0, [0.5, 0.6, 0.55], RATE, None),
    ],
)
def test_departs(value: float, others: list[float], spec: PeerMetric, expected: str | None) -> None:
    assert peers.departs(value, others, spec) == expected


@dataclass(frozen=True)
class H:
    name: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fleet:
    hosts: tuple[H, ...]


def clients(host: str, n: int, min_clients: int = 1) -> Result:
    status = Status.OK if n >= min_clients else Status.CRIT
    return Result(
        "clients",
        host,
        status,
        f"{n} broker connections",
        metrics={"connections": n},
        evidence={"names": ["worker"]},
        limits={"min_clients": min_clients},
    )


def logs(host: str, age: float, errors: int = 0, rate: float | None = None) -> Result:
    return Result(
        "logs",
        host,
        Status.OK,
        f"last line {age:.0f}s ago",
        metrics={"age_s": age, "error_lines": errors, "error_rate_per_s": rate},
        evidence={"last_line_at": "2026-03-01T11:59:00Z"},
    )


def noted(results: tuple[Result, ...]) -> dict[tuple[str, str | None], list[dict]]:
    return {
        (r.check, r.host): r.evidence["peers"]
        for r in results
        if isinstance(r.evidence, dict) and "peers" in r.evidence
    }


def test_a_host_departing_from_a_group_of_three_is_named_in_evidence_and_explain() -> None:
    fleet = Fleet((H("w1", ("workers",)), H("w2", ("workers",)), H("w3", ("workers",))))
    rows = (clients("w1", 8), clients("w2", 8), clients("w3", 2))
    out = peers.with_peers(fleet, rows)
    assert [r.status for r in out] == [Status.OK] * 3  # never a status of its own
    notes = noted(out)
    assert list(notes) == [("clients", "w3")]
    (note,) = notes[("clients", "w3")]
    assert note["group"] == "group workers" and note["departs"] == "lower"
    assert note["strength"] == "inference" and note["peer_median"] == 8
    assert (
        note["text"] == "2 broker connections where its 2 peers (group workers) have a median of 8"
    )
    assert out[2].evidence["names"] == ["worker"]  # the row's own evidence is kept
    from datetime import UTC, datetime

    told = explaining.explain("w3", out, None, datetime(2026, 3, 1, 12, tzinfo=UTC))
    assert told.status is Status.OK and told.exit_code == 0
    assert told.peers and told.peers[0]["text"] == note["text"]
    assert any(
        "peers (inference" in line and "2 broker connections" in line for line in told.lines()
    )
    for healthy in ("w1", "w2"):
        assert not explaining.explain(healthy, out, None, told.at).peers


def test_a_group_of_two_is_never_compared() -> None:
    fleet = Fleet((H("w1", ("pair",)), H("w2", ("pair",))))
    rows = (clients("w1", 40), clients("w2", 0, min_clients=0), logs("w1", 5), logs("w2", 9999))
    out = peers.with_peers(fleet, rows)
    assert out == rows
    assert not noted(out)


def test_a_healthy_homogeneous_fleet_never_departs() -> None:
    names = [f"w{i}" for i in range(12)]
    # identical pools with jitter, logs written every few minutes, a traceback here and there
    rows = tuple(clients(n, 10 + (i % 3) - 1) for i, n in enumerate(names)) + tuple(
        logs(n, 20 + 23 * i, errors=i % 2, rate=None) for i, n in enumerate(names)
    )
    assert peers.find(rows, {}) == []


def test_ungrouped_hosts_are_peers_only_with_the_same_settings() -> None:
    # n8 expects 10 connections, the others 1: n8's 12 is not compared with their 3 and 4
    fleet = Fleet((H("n8"), H("laptop"), H("broker"), H("mini")))
    rows = (
        clients("n8", 12, min_clients=10),
        clients("laptop", 4),
        clients("broker", 3),
        clients("mini", 0),
    )
    found = peers.find(rows, {h.name: h.groups for h in fleet.hosts})
    assert [(d.host, d.group, d.direction) for d in found] == [
        ("mini", peers.SAME_SETTINGS, "lower")
    ]


def test_a_host_in_a_group_is_not_compared_with_ungrouped_hosts() -> None:
    fleet = Fleet((H("a", ("g",)), H("b"), H("c"), H("d")))
    rows = (clients("a", 0, 0), clients("b", 9), clients("c", 9), clients("d", 9))
    assert peers.find(rows, {h.name: h.groups for h in fleet.hosts}) == []


def test_candidates_for_a_narrowed_patrol() -> None:
    fleet = Fleet((H("a", ("g",)), H("b", ("g", "h")), H("c", ("h",)), H("d"), H("e")))
    assert peers.candidates(fleet, "a") == ["b"]
    assert peers.candidates(fleet, "b") == ["a", "c"]
    assert peers.candidates(fleet, "d") == ["e"]
    assert peers.candidates(fleet, "nope") == []


def test_evidence_that_is_not_a_map_is_kept_beside_the_note() -> None:
    fleet = Fleet(tuple(H(n, ("g",)) for n in "abc"))
    rows = tuple(
        Result("clients", n, Status.OK, "x", metrics={"connections": c}, evidence=ev)
        for n, c, ev in (("a", 9, None), ("b", 9, ["x"]), ("c", 0, ["hostile \x1b[2J"]))
    )
    out = peers.with_peers(fleet, rows)
    assert out[2].evidence["observed"] == ["hostile \\x1b[2J"]
    assert out[2].evidence["peers"][0]["departs"] == "lower"


@pytest.mark.parametrize("size", [3, peers.LEAVE_ONE_OUT_UP_TO, peers.LEAVE_ONE_OUT_UP_TO + 1, 400])
def test_small_and_big_groups_name_the_same_one(size: int) -> None:
    """Up to LEAVE_ONE_OUT_UP_TO hosts the median leaves the judged host out; beyond, it is
    computed once: both name the one host that lost its workers, and no other."""
    names = [f"w{i:03}" for i in range(size)]
    rows = [clients(n, 10 + (i % 3) - 1) for i, n in enumerate(names)]
    rows[size // 2] = clients(names[size // 2], 1)
    found = peers.find(rows, {n: ("g",) for n in names})
    assert [(d.host, d.direction, d.peers) for d in found] == [
        (names[size // 2], "lower", size - 1)
    ]
