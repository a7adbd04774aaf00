"""Memory across rounds: since, fail_after, flapping (pure), the state file's safety, and the
real thing over several CLI runs in the lab (cron runs are separate processes)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.core.model import Report, Result, Standing, Status
from fleetcheck.rounds.state import Memory, StateFile, remember, step
from tests.lab import Lab


def report(at: str, *statuses: tuple[str, str | None, Status]) -> Report:
    return Report(at, 0.1, tuple(Result(c, h, s, "x") for c, h, s in statuses))


def apply(rep: Report, rows: dict, memory: Memory) -> tuple[Report, dict]:
    standing, rows = step(rep.results, rep.started_at, rows, memory)
    return Report(rep.started_at, rep.duration_s, rep.results, standing=standing), rows


def rounds(seq: list[Status], memory: Memory) -> list[Standing]:
    rows: dict = {}
    out = []
    for i, s in enumerate(seq):
        rep, rows = apply(
            report(f"2026-11-29T00:{i:02d}:00.000Z", ("clients", "mini", s)), rows, memory
        )
        out.append(rep.standing_of(rep.results[0]))
    return out


OK, W, C, U = Status.OK, Status.WARN, Status.CRIT, Status.UNKNOWN


@pytest.mark.parametrize(
    ("seq", "fail_after", "alerting", "bad_rounds"),
    [
        ([OK, C], 1, [False, True], [0, 1]),
        ([OK, C, C], 2, [False, False, True], [0, 1, 2]),
        ([C, W, C], 3, [False, False, True], [1, 2, 3]),  # any non-OK keeps the streak
        ([C, C, OK, C], 2, [False, True, False, False], [1, 2, 0, 1]),
        ([U, U], 1, [True, True], [1, 2]),
    ],
)
def test_fail_after(
    seq: list[Status], fail_after: int, alerting: list[bool], bad_rounds: list[int]
) -> None:
    out = rounds(seq, Memory(fail_after=fail_after))
    assert [r.alerting for r in out] == alerting
    assert [r.bad_rounds for r in out] == bad_rounds


def test_since_keeps_start_of_current_status() -> None:
    out = rounds([OK, C, C, C, OK], Memory())
    assert [r.since for r in out] == [
        "2026-11-29T00:00:00.000Z",
        "2026-11-29T00:01:00.000Z",
        "2026-11-29T00:01:00.000Z",
        "2026-11-29T00:01:00.000Z",
        "2026-11-29T00:04:00.000Z",
    ]


T = [f"2026-11-29T00:{i:02d}:00.000Z" for i in range(10)]


@pytest.mark.parametrize(
    ("seq", "since"),
    [
        ([OK, C, U, C], [T[0], T[1], T[2], T[1]]),  # one round of UNKNOWN: the CRIT goes on
        ([OK, C, U, U, C], [T[0], T[1], T[2], T[2], T[4]]),  # two rounds: a new CRIT
        ([OK, C, U, W], [T[0], T[1], T[2], T[3]]),  # back to another status: anew
        ([C, U, C, U, C], [T[0], T[1], T[0], T[3], T[0]]),  # each gap one round
        ([U, C], [T[0], T[1]]),  # UNKNOWN from the start: nothing held
        ([OK, U, OK], [T[0], T[1], T[0]]),
        ([C, U, OK, C], [T[0], T[1], T[2], T[3]]),
    ],
)
def test_since_survives_one_round_of_unknown(seq: list[Status], since: list[str]) -> None:
    assert [r.since for r in rounds(seq, Memory())] == since


def test_a_damaged_held_entry_drops_the_row() -> None:
    from fleetcheck.rounds.state import row_problem

    row = {"status": "UNKNOWN", "since": T[0], "last_seen": T[0], "bad_rounds": 1, "recent": []}
    assert row_problem(row) is None
    assert row_problem({**row, "held": {"status": "CRIT", "since": T[0]}}) is None
    assert row_problem({**row, "held": {"status": "BAD", "since": T[0]}}) == "held"
    assert row_problem({**row, "held": "x"}) == "held"


@pytest.mark.parametrize(
    ("seq", "flapping_last"),
    [
        ([OK, C, OK, C, OK], True),  # 4 changes in 5 rounds
        ([OK, C, OK, C], False),  # 3 changes
        ([OK, C, C, C, C, C, C, C, C, C, OK, C, OK], False),  # 3 changes in the last 10
        ([OK] * 3, False),
    ],
)
def test_flapping(seq: list[Status], flapping_last: bool) -> None:
    assert rounds(seq, Memory(flap_changes=4, flap_window=10))[-1].flapping is flapping_last


def test_rows_not_in_this_round_are_kept_and_old_ones_forgotten() -> None:
    _, rows = apply(report("2026-10-01T00:00:00.000Z", ("a", "h", C)), {}, Memory())
    _, rows = apply(report("2026-10-20T00:00:00.000Z", ("b", "h", C)), rows, Memory())
    assert set(rows) == {"a|h", "b|h"}
    _, rows = apply(report("2026-11-05T00:00:00.000Z", ("b", None, OK)), rows, Memory())
    assert set(rows) == {"b|h", "b|"}  # a|h unseen for over 30 days


def test_corrupt_state_file_is_kept_aside_not_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state.json"
    path.write_text("{ not json")
    rep = remember(report("2026-11-29T00:00:00.000Z", ("a", "h", C)), path, Memory())
    assert rep.standing_of(rep.results[0]).bad_rounds == 1
    aside = list(tmp_path.glob("state.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == "{ not json"
    assert "unreadable" in capsys.readouterr().err
    assert json.loads(path.read_text())["rows"]["a|h"]["status"] == "CRIT"


def test_wrong_schema_state_file_is_kept_aside(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"schema": "other/1", "rows": {}}))
    with StateFile(path).locked() as holder:
        assert holder["rows"] == {}
    assert len(list(tmp_path.glob("state.json.corrupt-*"))) == 1


# ---------------------------------------------------------------- lab: several rounds


def fc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.lab
def test_lab_rounds_since_fail_after_flapping_history(lab: Lab, tmp_path: Path) -> None:
    n8 = lab.add_host("n8", sshd=False)
    cfg = lab.config(patrol='deadline = "30s"\nfail_after = 2\nflap_changes = 3\nflap_window = 5\n')
    state, hist = tmp_path / "state.json", tmp_path / "history.jsonl"

    def patrol() -> dict:
        proc = fc(
            "run", "-c", str(cfg), "--format", "json", "--state", str(state), "--history", str(hist)
        )
        assert proc.stderr == ""
        data = json.loads(proc.stdout)
        assert proc.returncode == data["exit_code"]
        return {r["host"]: r for r in data["results"]} | {"_at": data["started_at"]}

    workers = lab.start_workers(n8, 2)
    r1 = patrol()
    assert r1["n8"]["status"] == "OK" and r1["n8"]["since"] == r1["_at"]
    lab.stop(workers)
    r2 = patrol()
    assert (r2["n8"]["status"], r2["n8"]["bad_rounds"], r2["n8"]["alerting"]) == ("CRIT", 1, False)
    assert r2["n8"]["since"] == r2["_at"]
    r3 = patrol()
    assert (r3["n8"]["status"], r3["n8"]["bad_rounds"], r3["n8"]["alerting"]) == ("CRIT", 2, True)
    assert r3["n8"]["since"] == r2["_at"]  # CRIT since round 2
    assert r3["n8"]["flapping"] is False
    workers = lab.start_workers(n8, 2)
    r4 = patrol()
    lab.stop(workers)
    r5 = patrol()
    assert r4["n8"]["status"] == "OK" and r5["n8"]["status"] == "CRIT"
    assert r5["n8"]["flapping"] is True  # OK>CRIT>CRIT>OK>CRIT: 3 changes in 5 rounds

    # The plain table shows how long a row has been bad; the host's problem line says it too.
    proc = fc("run", "-c", str(cfg), "--state", str(state), "--history", str(hist))
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["STATUS", "HOST", "CHECK", "SINCE", "SUMMARY"]
    assert any(re.fullmatch(r"CRIT +n8: clients \(for [0-9.]+s\)", line) for line in lines), lines

    # History: one cell per round, the dark rounds visible.
    proc = fc("history", "-c", str(cfg), "--history", str(hist), "--host", "n8")
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stdout.splitlines() if x.startswith("n8")][0]
    assert line.split()[1] == ".XX.XX"
    assert "not OK since" in line
    assert "6 rounds" in proc.stdout


@pytest.mark.lab
def test_every_rounds_plain_blocks(lab: Lab, tmp_path: Path) -> None:
    n8 = lab.add_host("n8", sshd=False)
    lab.start_workers(n8, 1)
    cfg = lab.config()
    proc = fc("run", "-c", str(cfg), "--every", "0.2s", "--rounds", "3", "--no-state")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("1 rows:") == 0
    assert proc.stdout.count("2 rows: 2 OK") == 3
    assert proc.stdout.count("next round at") == 2


def test_usage_errors_of_patrol_options(tmp_path: Path) -> None:
    cfg = tmp_path / "hosts.toml"
    cfg.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\n')
    for args, message in [
        (["--rounds", "2"], "--rounds goes with --every"),
        (["--every", "soon"], "bad duration"),
        (["--shard", "3/2"], "--shard 3/2"),
        (["--shard", "x"], "expected I/N"),
    ]:
        proc = fc("run", "-c", str(cfg), "--no-state", *args)
        assert proc.returncode == 3, (args, proc.stderr)
        assert message in proc.stderr


def test_rows_sharing_an_unreadable_time_are_each_dropped(tmp_path: Path) -> None:
    """The loader remembers each time text's answer for the pass: a bad one shared by two
    rows drops both, a good one shared keeps both."""
    path = tmp_path / "state.json"
    row = {"status": "OK", "since": "2026-11-29T02:00:00Z", "bad_rounds": 0, "recent": ["OK"]}
    rows = {
        "a|h1": {**row, "last_seen": "yesterday"},
        "a|h2": {**row, "last_seen": "yesterday"},
        "a|h3": {**row, "last_seen": "2026-11-29T02:15:00Z"},
        "a|h4": {**row, "last_seen": "2026-11-29T02:15:00Z"},
        "a|h5": {**row, "last_seen": "2026-11-29T02:15:00Z", "recent": ["OK", 3]},
    }
    path.write_text(json.dumps({"schema": "fleetcheck.state/1", "rows": rows}))
    assert sorted(StateFile(path).read()) == ["a|h3", "a|h4"]


def test_the_step_gives_silences_their_standing_with_or_without_state() -> None:
    row = Result("clients", "mini", C, "x")
    words = {row.id: "silenced until 2026-11-29 04:10 UTC (deploy)"}
    standing, rows = step([row], T[0], None, Memory(), words)  # no state kept
    assert standing == {row.id: Standing(silenced=words[row.id])} and rows == {}
    standing, rows = step([row], T[0], {}, Memory(), words)
    assert standing[row.id] == Standing(T[0], 1, True, False, words[row.id])
    assert not standing[row.id].pages(C)  # silenced: it never pages, though it alerts
    assert rows[row.id]["status"] == "CRIT" and "silenced" not in rows[row.id]
