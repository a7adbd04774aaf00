"""`fleetcheck explain`'s timeline, table-tested with no I/O: rows of this patrol, the rounds
the history remembers, and what the explanation says from them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetcheck.core.model import Result, Standing, Status
from fleetcheck.iso import iso_utc
from fleetcheck.rounds import explain as explaining
from fleetcheck.rounds.history import Round

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SILENT_AT = datetime(2026, 3, 1, 9, 27, 42, tzinfo=UTC)


def minutes(n: float) -> datetime:
    return NOW - timedelta(minutes=n)


def logs(status: Status = Status.CRIT, age: float = 9138, errors: int = 0, **kw: Any) -> Result:
    return Result(
        "logs",
        "mini",
        status,
        f"file /var/log/w.log: last line {age:.0f}s ago",
        metrics={"age_s": age, "error_lines": errors},
        evidence={
            "last_line_at": iso_utc(NOW - timedelta(seconds=age), "seconds"),
            "logs": [{"last_line": "2026-03-01T09:27:42Z INFO match done"}],
        },
        **kw,
    )


def clients(n: int = 0, **kw: Any) -> Result:
    status = Status.CRIT if n == 0 else Status.OK
    summary = "no broker connections from 10.0.0.12" if n == 0 else f"{n} broker connections"
    return Result("clients", "mini", status, summary, metrics={"connections": n}, **kw)


def routes(defaults: int = 2, **kw: Any) -> Result:
    status = Status.CRIT if defaults > 1 else Status.OK
    return Result(
        "routes",
        "mini",
        status,
        "2 IPv4 default routes through different interfaces (eth0, wifi0) on one subnet",
        metrics={"default_routes": defaults, "unscoped_default_routes": defaults},
        **kw,
    )


def rnd(at: datetime, *rows: Result) -> Round:
    """A round as the history records it (rows without evidence)."""
    recorded = tuple(
        {
            "check": r.check,
            "host": r.host,
            "status": r.status.label,
            "summary": r.summary,
            "metrics": r.metrics,
        }  # fmt: skip
        for r in rows
    )
    worst = max((r.status for r in rows), key=lambda s: s.rank)
    return Round(at, worst, {"mini": worst}, {}, recorded)


def test_the_demo_mini_with_its_history() -> None:
    """Healthy until 10:00, the second default route from 10:30, connections gone from 11:00;
    the log went silent at 09:27:42 (its last line), before any round saw a change."""
    history = [
        rnd(minutes(120), logs(Status.OK, 60), clients(4), routes(1)),
        rnd(minutes(90), logs(Status.CRIT, 3700), clients(4), routes(2)),
        rnd(minutes(60), logs(Status.CRIT, 5500), clients(0), routes(2)),
        rnd(minutes(30), logs(Status.CRIT, 7300), clients(0), routes(2)),
    ]
    rows = [logs(), clients(0), routes(2)]
    told = explaining.explain("mini", rows, history, NOW)
    assert told.status is Status.CRIT and told.exit_code == 2
    assert told.last_healthy == minutes(120)
    assert [(e.at, e.check) for e in told.events] == [
        (SILENT_AT, "logs"),
        (minutes(90), "routes"),
        (minutes(60), "clients"),
    ]
    assert told.first is not None and told.first.check == "logs"
    assert told.events[1].how == f"first seen then; {explaining.when(minutes(120))} did not show it"
    assert told.cause is not None
    assert told.cause.text == (
        "two default routes on one subnet, the known cause of intermittent EHOSTUNREACH"
    )
    assert told.cause.strength == "inference"
    assert told.cause.confirm.startswith("the worker log's connection errors")
    assert [c.rows for c in told.other_causes] == [("clients",), ("logs",)]
    text = "\n".join(told.lines())
    assert (
        "last looked healthy: 2026-03-01 10:00:00 UTC (then CRIT from 2026-03-01 10:30:00 UTC)"
        in text
    )
    assert "2026-03-01 09:27:42 UTC  log silent since its last line: " in text
    assert '"2026-03-01T09:27:42Z INFO match done"' in text
    assert "first change: 2026-03-01 09:27:42 UTC: log silent" in text
    assert "likely cause (inference: inferred, to be confirmed): two default routes" in text
    assert "confirm with: the worker log's connection errors" in text
    doc = json.loads(json.dumps(told.to_dict()))
    assert doc["lines"] == told.lines()
    assert doc["first_change"]["at"] == "2026-03-01T09:27:42Z"
    assert doc["cause"]["strength"] == "inference" and doc["nothing_wrong"] is False


def test_without_state_or_history_only_this_patrol() -> None:
    told = explaining.explain("mini", [logs(), clients(0), routes(2)], None, NOW, ["this only"])
    assert told.last_healthy is None
    assert told.last_healthy_note == " (no history to look back in)"
    assert {e.check: e.how for e in told.events} == {
        "logs": "",  # its time is a fact of this patrol: the last line's
        "clients": "first seen in this patrol",
        "routes": "first seen in this patrol",
    }
    assert told.lines()[1] == "from: this only"


def test_since_from_the_state_when_there_is_no_history() -> None:
    since = iso_utc(minutes(45))
    row = routes(2)
    told = explaining.explain("mini", [row], [], NOW, standing={row.id: Standing(since)})
    assert [(e.at, e.how) for e in told.events] == [(minutes(45), "since, by the state file")]


def test_never_healthy_in_the_recorded_rounds() -> None:
    history = [rnd(minutes(30), routes(2)), rnd(minutes(15), routes(2))]
    told = explaining.explain("mini", [routes(2)], history, NOW)
    assert told.last_healthy is None
    assert told.events[0].at == minutes(30)
    assert told.events[0].how == "since at least: the first round recorded"


def test_a_healthy_host_says_nothing_is_wrong_and_on_which_evidence() -> None:
    rows = [logs(Status.OK, 30), clients(12), routes(1)]
    told = explaining.explain("mini", rows, None, NOW)
    assert told.status is Status.OK and told.exit_code == 0
    assert told.cause is None and not told.events
    assert [(b["check"], b["strength"]) for b in told.healthy_because] == [
        ("clients", "proof"),
        ("logs", "proof"),
        ("routes", "proof"),
    ]
    lines = told.lines()
    assert "nothing is wrong: every row of this host is OK in this patrol:" in lines
    assert "  clients (proof): 12 broker connections" in lines


def test_an_ok_row_resting_on_absence_says_so() -> None:
    row = Result("logs", "mini", Status.OK, "no error lines", evidence_strength="absence")
    lines = explaining.explain("mini", [row], None, NOW).lines()
    assert "  logs (absence: nothing seen: absence of evidence): no error lines" in lines


def test_an_error_burst_is_dated_from_the_rounds_that_saw_it() -> None:
    history = [
        rnd(minutes(45), logs(Status.OK, 5, errors=0)),
        rnd(minutes(30), logs(Status.WARN, 5, errors=700)),
        rnd(minutes(15), logs(Status.WARN, 5, errors=900)),
    ]
    told = explaining.explain("mini", [logs(Status.WARN, 5, errors=1000)], history, NOW)
    assert [(e.at, e.what) for e in told.events] == [
        (minutes(30), "error lines from 2026-03-01 11:30:00 UTC: 1000 in the window read")
    ]
    assert told.cause is not None and told.cause.text.startswith("its log shows errors")


def test_a_cause_the_rows_share_comes_first_with_its_own_strength() -> None:
    cause = "host key of mini changed"
    rows = [
        Result("logs", "mini", Status.CRIT, "host key changed", cause=cause),
        Result("routes", "mini", Status.CRIT, "host key changed", cause=cause),
    ]
    told = explaining.explain("mini", rows, None, NOW)
    assert told.cause is not None and told.cause.text == cause
    assert told.cause.strength == "proof" and told.cause.rows == ("logs", "routes")


def test_a_checks_own_hint_is_used_before_the_rules() -> None:
    def hint(row: Result) -> explaining.Hint | None:
        if row.check == "clients":
            return explaining.Hint("the deploy left no workers", "the deploy log")
        return None

    told = explaining.explain("mini", [clients(0)], None, NOW, hints=hint)
    assert told.cause is not None and told.cause.text == "the deploy left no workers"


def test_a_row_no_rule_knows_is_its_own_lead() -> None:
    row = Result("disk", "mini", Status.WARN, "93% full", evidence_strength="proof")
    told = explaining.explain("mini", [row], None, NOW)
    assert told.cause is not None and told.cause.text == "disk: 93% full"
    assert [e.what for e in told.events] == ["disk WARN: 93% full"]
    assert told.exit_code == 1


def test_could_not_look_is_said_and_is_the_exit_code() -> None:
    row = Result("routes", "mini", Status.UNKNOWN, "ssh: no route to host")
    told = explaining.explain("mini", [row], None, NOW)
    assert told.exit_code == 3
    assert "could not look: routes: ssh: no route to host" in told.lines()


@pytest.mark.parametrize("hostile", ["\x1b[2J\x1b]0;owned\x07", "a\nb\rc", "\u202eevil"])
def test_hostile_text_from_rows_is_made_safe(hostile: str) -> None:
    row = Result("disk", "mini", Status.WARN, hostile, evidence={"last_line": hostile})
    told = explaining.explain("mini", [row, logs()], None, NOW)
    for line in told.lines():
        assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F or c == "\u202e" for c in line)
    doc = json.dumps(told.to_dict())
    assert "\x1b" not in doc and "\u202e" not in doc


def test_only_the_hosts_own_rows_and_rounds_before_now_count() -> None:
    other = Result(
        "clients", "n8", Status.CRIT, "no broker connections", metrics={"connections": 0}
    )
    later = rnd(NOW + timedelta(minutes=5), routes(2))
    told = explaining.explain("mini", [other, clients(7)], [later], NOW)
    assert told.status is Status.OK and told.last_healthy == NOW


@pytest.mark.parametrize(
    "text, problem",
    [
        ("{not json", "not JSON"),
        ('{"schema": "other/1", "rows": {}}', "not a fleetcheck.state/1 file"),
        ('{"schema": "fleetcheck.state/1", "rows": []}', "no rows"),
    ],
)
def test_a_damaged_state_file_is_said_unusable_and_left_as_it_is(
    tmp_path: Any, text: str, problem: str
) -> None:
    from fleetcheck.cli.explain import read_state

    path = tmp_path / "state.json"
    path.write_text(text)
    assert read_state(path) == ({}, problem)
    assert path.read_text() == text and sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_state_files_usable_rows_are_read() -> None:
    import tempfile
    from pathlib import Path

    from fleetcheck.cli.explain import read_state

    good = {"status": "CRIT", "since": "2026-03-01T11:00:00.000Z", "bad_rounds": 2,
            "recent": ["CRIT"], "last_seen": "2026-03-01T11:45:00.000Z"}  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "s.json"
        doc = {"schema": "fleetcheck.state/1", "rows": {"routes|mini": good, "bad|x": 3}}
        path.write_text(json.dumps(doc))
        assert read_state(path) == ({"routes|mini": good}, None)


def test_a_host_with_no_rows_is_not_called_healthy() -> None:
    told = explaining.explain("mini", [], None, NOW)
    assert told.status is Status.UNKNOWN and told.exit_code == 3
    assert f"could not look: {explaining.NO_ROWS}" in told.lines()
    assert not any("nothing is wrong" in line for line in told.lines())


@pytest.mark.parametrize("age, silent", [(120, False), (299, False), (301, True), (9000, True)])
def test_a_log_is_called_silent_only_past_a_few_minutes(age: float, silent: bool) -> None:
    told = explaining.explain("mini", [logs(Status.WARN, age, errors=50)], None, NOW)
    said = any(e.what.startswith("log silent since") for e in told.events)
    assert said is silent
    assert told.cause is not None
    assert told.cause.text.startswith("its program stopped" if silent else "its log shows errors")
