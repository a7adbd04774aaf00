"""The post-patrol pass (fleetcheck.core.correlate) as a table: which rows it changes, which
it must leave alone. Pure: rows in, rows out."""

from __future__ import annotations

import pytest

from fleetcheck.core import registry
from fleetcheck.core.correlate import correlate
from fleetcheck.core.declarations import HalfOpen
from fleetcheck.core.errors import HOST_UNREACHABLE
from fleetcheck.core.model import Result, Status

GONE = {HOST_UNREACHABLE: "no route"}
CAUSE = "mini: no route to 198.18.0.5:22 (host down or network unreachable)"


def ssh_row(host: str, check: str = "logs", evidence: object = GONE) -> Result:
    return Result(
        check,
        host,
        Status.CRIT,
        "no route to 198.18.0.5:22 (host down or network unreachable)",
        evidence=evidence,
        cause=CAUSE,
        evidence_strength="inference",
    )


def clients(host: str | None, n: object, status: Status = Status.OK) -> Result:
    return Result(
        "clients",
        host,
        status,
        f"{n} broker connections",
        metrics={"connections": n},
        evidence={"names": ["worker"]},
    )


CASES = [
    # (rows, index of the clients row, expected status, half-open?)
    (
        "unreachable host with connections",
        [ssh_row("mini"), clients("mini", 25)],
        Status.WARN,
        True,
    ),
    ("one connection", [clients("mini", 1), ssh_row("mini", "routes")], Status.WARN, True),
    ("host answers SSH", [ssh_row("mini", evidence=None), clients("mini", 25)], Status.OK, False),
    ("another host unreachable", [ssh_row("n8"), clients("mini", 25)], Status.OK, False),
    (
        "no connections: clients already judged",
        [ssh_row("mini"), clients("mini", 0)],
        Status.OK,
        False,
    ),
    (
        "already CRIT: left as it is",
        [ssh_row("mini"), clients("mini", 3, Status.CRIT)],
        Status.CRIT,
        False,
    ),
    ("broker-wide row is no host", [ssh_row("mini"), clients(None, 25)], Status.OK, False),
    ("a count that is not a number", [ssh_row("mini"), clients("mini", None)], Status.OK, False),
    ("a flag is no count", [ssh_row("mini"), clients("mini", True)], Status.OK, False),
    ("no SSH rows at all", [clients("mini", 25)], Status.OK, False),
]


@pytest.mark.parametrize(
    "rows, status, half_open", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_half_open(rows: list[Result], status: Status, half_open: bool) -> None:
    out = correlate(rows)
    assert len(out) == len(rows)
    assert [r.check for r in out] == [r.check for r in rows]  # order kept
    row = next(r for r in out if r.check == "clients")
    before = next(r for r in rows if r.check == "clients")
    assert row.status is status
    if half_open:
        n = before.metrics["connections"]
        assert row.summary.startswith(f"{n} broker connection")
        assert "likely half-open" in row.summary and "does not answer SSH" in row.summary
        assert row.evidence_strength == "inference"
        assert row.cause == CAUSE  # grouped with the host's SSH rows
        assert row.evidence["names"] == ["worker"]  # what the check saw is kept
        assert row.evidence["half_open"]["how"] == "no route"
    else:
        assert row is before  # untouched


def test_rules_are_data_and_another_check_can_be_named() -> None:
    """The pass knows no check: the check declares the rule (`Check.correlations`) and the
    pass reads it from the registry; any check's rows can be given one."""
    clients_check = registry.find("clients")
    assert clients_check is not None
    assert clients_check.correlations == (HalfOpen(count="connections"),)
    assert all(  # the checks that declare none: the rows of theirs are left alone
        all(isinstance(r, HalfOpen) for r in c.correlations) for c in registry.available().values()
    )
    row = Result("sessions", "mini", Status.OK, "4 sessions", metrics={"open": 4})
    assert correlate([ssh_row("mini"), row])[1] is row  # "sessions" declares nothing
    out = correlate([ssh_row("mini"), row], [("sessions", HalfOpen(count="open"))])
    assert out[1].status is Status.WARN and "4 broker connections" in out[1].summary


def test_a_crit_rule_is_possible() -> None:
    out = correlate(
        [ssh_row("mini"), clients("mini", 2)],
        [("clients", HalfOpen(count="connections", status=Status.CRIT))],
    )
    assert out[1].status is Status.CRIT
