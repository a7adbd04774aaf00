"""Rows that share one cause told once, weak evidence said in words, plain output within the
width: rules over generated reports (no golden files), for the table, plain, Nagios, JSON and
the console's Not OK list."""

from __future__ import annotations

import io
import json
import random
import re

import pytest
from rich.console import Console

from fleetcheck.console.html import not_ok
from fleetcheck.core.model import Report, Result, Status, Strength
from fleetcheck.render import json as render_json
from fleetcheck.render import nagios, plain, table
from fleetcheck.render.causes import layout, left_to_say

BROKER = (
    "broker 198.18.0.1:6379 accepted the connection but did not answer within "
    "socket_timeout 5s (hung, stopped or overloaded)"
)
KEY = "n8: host key changed for 198.18.0.8: possible man-in-the-middle; not connecting"


def broker_down(hosts: int = 3) -> list[Result]:
    rows = [Result("broker", None, Status.CRIT, BROKER, cause=BROKER, evidence_strength="proof")]
    for check in ("clients", "queue_depth", "live_hash"):
        rows.append(Result(check, None, Status.UNKNOWN, f"could not look: {BROKER}", cause=BROKER))
    for i in range(hosts):
        rows.append(
            Result("clients", f"h{i}", Status.UNKNOWN, f"could not look: {BROKER}", cause=BROKER)
        )
    return rows


def key_changed() -> list[Result]:
    reason = KEY.split(": ", 1)[1]
    return [
        Result(c, "n8", Status.CRIT, reason, cause=KEY, evidence_strength="proof")
        for c in ("logs", "routes")
    ]


def report(rows: list[Result]) -> Report:
    return Report("2026-01-15T03:00:00.000Z", 0.5, tuple(rows))


def table_text(r: Report, width: int = 120) -> str:
    out = io.StringIO()
    table.render(r, Console(file=out, width=width))
    return out.getvalue()


def flat(text: str) -> str:
    return " ".join(re.sub(r"[│┃┏┓┗┛┡┩└┘┳┻╇┴┬─━]", " ", text).split())


def texts(r: Report) -> dict[str, str]:
    return {
        "plain": plain.render(r, columns=100),
        "plain-narrow": plain.render(r, columns=60),
        "table": table_text(r),
        "nagios-long": nagios.render(r).split("\n", 1)[1],
    }


@pytest.mark.parametrize("rows", [broker_down(), key_changed()], ids=["broker", "host key"])
def test_a_cause_is_told_once_with_its_rows_under_it(rows: list[Result]) -> None:
    r = report([*rows, Result("routes", "ok1", Status.OK, "one default route via eth0")])
    cause = rows[0].cause
    assert cause is not None
    n_rows = len(rows)
    for name, text in texts(r).items():
        words = flat(text)
        assert words.count(cause) == 1, (name, text)
        assert f"{n_rows} rows on" in words, (name, text)
        for row in rows:  # every row is still listed, by its check
            assert re.search(rf"{row.status.label}\b.*\b{row.check}\b", text), (name, row)
    # JSON keeps every row whole, with its cause
    doc = json.loads(render_json.render(r))
    grouped = [x for x in doc["results"] if x.get("cause") == cause]
    assert len(grouped) == n_rows and all(x["summary"] for x in grouped)


def test_the_broker_cause_counts_its_rows_and_hosts_in_one_problem_line() -> None:
    r = report(broker_down(hosts=3))
    text = plain.render(r, columns=100)
    assert "7 rows on broker-wide and 3 hosts" in text
    problems = text.split("\n\n")[1].splitlines()
    assert len([p for p in problems if not p.startswith(" ")]) == 1, problems
    assert problems[0].startswith("CRIT    one cause: broker, clients")
    # the exit code is the report's, once
    assert r.exit_code == 2


def test_what_a_grouped_row_adds_to_its_cause() -> None:
    rows = broker_down(1)
    assert left_to_say(rows[0]) == ""
    assert left_to_say(rows[1]) == "could not look"
    other = Result("clients", "mini", Status.WARN, "25 broker connections", cause=BROKER)
    assert left_to_say(other) == "25 broker connections"
    assert left_to_say(key_changed()[0]) == ""  # "n8: " + reason: the cause says it


def test_a_cause_with_one_row_is_just_that_row() -> None:
    lone = Result("logs", "n8", Status.CRIT, "gone", cause="n8: gone")
    assert layout([lone]) == [lone]
    assert "1 rows on" not in plain.render(report([lone]))


WEAK = [s for s in Strength if s.words]


@pytest.mark.parametrize("strength", list(Strength), ids=lambda s: s.value)
@pytest.mark.parametrize("status", [Status.WARN, Status.CRIT])
def test_weak_evidence_is_said_in_words_proof_never(strength: Strength, status: Status) -> None:
    row = Result("clients", "mini", status, "3 connections idle", evidence_strength=strength.value)
    r = report([row])
    for name, text in {**texts(r), "console": not_ok(r)}.items():
        if strength.words:
            assert strength.words in flat(text), (name, text)
        else:
            assert not any(s.words in text for s in WEAK), (name, text)


def test_unknown_rows_do_not_repeat_that_they_saw_nothing() -> None:
    r = report([Result("logs", "n8", Status.UNKNOWN, "cannot read the log")])
    assert r.results[0].evidence_strength == "absence"
    for text in texts(r).values():
        assert Strength.ABSENCE.words not in flat(text)


def test_absence_is_never_shown_as_proof_of_health() -> None:
    rows = [
        Result("logs", "n8", Status.OK, "no error lines", evidence_strength="absence"),
        Result("routes", "n8", Status.OK, "one default route"),
    ]
    r = report(rows)
    note = "1 OK row rests on nothing seen (absence of evidence, not proof of health)"
    assert note in flat(plain.render(r))
    assert note in flat(table_text(r))
    assert note in nagios.render(r).splitlines()[0]
    assert Strength.ABSENCE.words in flat(plain.render(r))  # and on the row itself


def test_plain_wraps_at_the_width_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: no 250-character rows off a terminal; 100 columns when there is none."""
    monkeypatch.delenv("COLUMNS", raising=False)
    rng = random.Random(7)
    rows = [
        Result(
            "logs",
            f"host-{i}",
            rng.choice(list(Status)),
            " ".join(rng.choice(["stale", "route", "eth0", "depth", "x" * 12]) for _ in range(60)),
        )
        for i in range(6)
    ]
    r = report(rows)
    assert plain.width() == 100  # pytest's stdout is no terminal
    for columns in (100, 72, 140):
        text = plain.render(r, columns=columns)
        assert max(len(line) for line in text.splitlines()) <= columns, columns
        for row in rows:  # wrapped, not cut: every word still there, in order
            assert " ".join(row.summary.split()) in " ".join(text.split())
