"""Statuses, ranking and the report's exit code (pure)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.core.model import Report, Result, Standing, Status, worst, worst_per_host


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], Status.OK),
        ([Status.OK, Status.OK], Status.OK),
        ([Status.OK, Status.WARN], Status.WARN),
        ([Status.WARN, Status.UNKNOWN], Status.UNKNOWN),
        ([Status.UNKNOWN, Status.CRIT], Status.CRIT),
        ([Status.CRIT, Status.WARN, Status.OK], Status.CRIT),
    ],
)
def test_worst(statuses: list[Status], expected: Status) -> None:
    assert worst(statuses) is expected


@pytest.mark.parametrize(
    ("status", "code"),
    [(Status.OK, 0), (Status.WARN, 1), (Status.CRIT, 2), (Status.UNKNOWN, 3)],
)
def test_exit_code_is_nagios_code_of_worst(status: Status, code: int) -> None:
    report = Report("2026-11-29T00:00:00.000Z", 0.1, (Result("x", None, status, "s"),))
    assert report.exit_code == code


def test_crit_outranks_unknown_in_exit_code() -> None:
    rows = (Result("a", "h1", Status.UNKNOWN, "u"), Result("b", "h2", Status.CRIT, "c"))
    assert Report("t", 0.0, rows).exit_code == 2


def test_sorted_worst_first_and_dict_shape() -> None:
    rows = (
        Result("a", "h1", Status.OK, "fine"),
        Result("b", None, Status.WARN, "meh"),
        Result("c", "h2", Status.CRIT, "bad", metrics={"n": 1}),
    )
    report = Report("2026-11-29T00:00:00.000Z", 1.5, rows)
    assert [r.check for r in report.sorted_results()] == ["c", "b", "a"]
    d = report.to_dict()
    assert d["schema"] == "fleetcheck.report/3"
    assert d["status"] == "CRIT" and d["exit_code"] == 2
    assert d["results"][0] == {
        "check": "c",
        "host": "h2",
        "status": "CRIT",
        "summary": "bad",
        "metrics": {"n": 1},
        "headline": None,
        "limits": {},
        "evidence": None,
        "duration_s": 0.0,
    }
    assert d["results"][1]["host"] is None


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([], {}),
        ([("a", Status.OK)], {"a": Status.OK}),
        ([("a", Status.CRIT), ("a", Status.WARN)], {"a": Status.CRIT}),
        ([("a", Status.WARN), ("a", Status.UNKNOWN)], {"a": Status.UNKNOWN}),
        ([(None, Status.WARN), ("b", Status.OK)], {None: Status.WARN, "b": Status.OK}),
    ],
)
def test_worst_per_host(rows: list[tuple[str | None, Status]], expected: dict) -> None:
    assert worst_per_host(rows) == expected


def test_report_worst_by_host() -> None:
    rows = (
        Result("a", "h1", Status.WARN, "w"),
        Result("b", "h1", Status.CRIT, "c"),
        Result("a", None, Status.OK, "o"),
    )
    report = Report("2026-11-29T06:21:00.000Z", 0.1, rows)
    assert report.worst_by_host() == {"h1": Status.CRIT, None: Status.OK}


def test_a_standing_is_made_safe_and_kept_flat_in_the_document() -> None:
    """A standing read back from a file holds whatever it holds: made safe; the document's
    row keeps its keys flat (since, bad_rounds, alerting, flapping, silenced)."""
    row = Result("logs", "n8", Status.WARN, "red \x1b[31m")
    standing = Standing("2026-11-29T02:21:00Z\x1b[2J", 3, True, False, "quiet \x1b[2J\n")
    assert "\x1b" not in (standing.since or "") and "\x1b" not in (standing.silenced or "")
    report = Report("2026-11-29T06:21:00.000Z", 0.1, (row,), standing={row.id: standing})
    doc = report.to_dict()["results"][0]
    assert doc == row.to_dict() | {
        "silenced": standing.silenced,
        "since": standing.since,
        "bad_rounds": 3,
        "alerting": False,  # silenced: it never pages
        "flapping": False,
    }
    assert report.status is Status.OK  # a silenced row never raises the exit code
    bare = Report("2026-11-29T06:21:00.000Z", 0.1, (row,))
    assert bare.to_dict()["results"][0] == row.to_dict()
    assert bare.standing_of(row) == Standing() and bare.status is Status.WARN


def test_the_document_places_rows_worst_first() -> None:
    """`to_dict` places the rows as `sorted_results` orders the results: worst first,
    broker-wide rows before a host's (even a host named ""), then host and check; ties keep
    the round's order."""
    import random

    rng = random.Random(3)
    for _ in range(200):
        results = tuple(
            Result(
                rng.choice(["a", "b", "c"]),
                rng.choice([None, "", "h1", "h2", "h10"]),
                rng.choice(list(Status)),
                f"row {i}",
            )
            for i in range(rng.randint(0, 12))
        )
        report = Report("2026-11-29T00:00:00.000Z", 0.1, results)
        placed = report.to_dict()["results"]
        assert placed == [r.to_dict() for r in report.sorted_results()]
        assert [p["summary"] for p in placed] == [
            r.summary
            for r in sorted(
                results, key=lambda r: (-r.status.rank, r.host is not None, r.host or "", r.check)
            )
        ]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(list(Status)),
            st.one_of(st.none(), st.sampled_from(["a", "b", "h10", "h2", ""])),
            st.sampled_from(["logs", "clients", "routes"]),
            st.one_of(st.none(), st.just("maintenance")),
        ),
        max_size=40,
    )
)
def test_order_and_status_by_c_loops_are_the_rules(
    rows: list[tuple[Status, str | None, str, str | None]],
) -> None:
    """The rows' order and the patrol's status, made by C loops over the rows, are the rules
    written out: worst first, then broker-wide rows, then by host and check (a stable sort);
    the worst row that is not silenced, OK when none."""
    results = tuple(Result(c, h, s, "x") for s, h, c, q in rows)
    quiet = {Result(c, h, s, "x").id for s, h, c, q in rows if q is not None}
    standing = {k: Standing(silenced="maintenance") for k in quiet}
    report = Report("2026-01-01T00:00:00Z", 1.0, results, standing=standing)
    expected = sorted(
        results, key=lambda r: (-r.status.rank, r.host is not None, r.host or "", r.check)
    )
    assert report.sorted_results() == expected
    assert report.status is worst(r.status for r in results if r.id not in quiet)
