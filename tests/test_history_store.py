"""The history's database (issue 29): a JSONL history migrates on the first append without
losing a row; rows are stored only when they change, and read back for every round; a host
removed is not carried forward; keyframes bound what a reader replays and what retention
drops; a second process reads while a patrol holds the write lock; a writer killed in the
middle of a round loses only that round; `history --export jsonl` writes every round."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.core.model import BROKER_WIDE, Report, Result, Status
from fleetcheck.rounds import history, store
from tests.history_util import jsonl_append

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def rep(i: int, rows: list[Result]) -> Report:
    return Report(iso(T0 + timedelta(minutes=15 * i)), 0.5, tuple(rows))


def fleet_round(i: int, hosts: int = 5) -> Report:
    """A small fleet: log ages that move every round (numbers in the summary), a host that
    goes CRIT for a while, one that is removed half-way, a broker-wide row."""
    rows = [Result("broker", None, Status.OK, "up", metrics={"clients": 40 + i % 2})]
    for h in range(hosts):
        if h == 4 and i >= 10:
            continue  # removed from the fleet
        bad = h == 1 and 5 <= i < 8
        age = 3.0 + (i * 7 + h) % 40  # under a minute: one bucket
        rows.append(
            Result(
                "logs",
                f"h{h}",
                Status.CRIT if bad else Status.OK,
                f"/var/log/w.log, {age:.0f}s ago",
                metrics={"age_s": 4000.0 if bad else age},
            )
        )
        rows.append(Result("clients", f"h{h}", Status.OK, "3 broker connections"))
    return rep(i, rows)


def as_recorded(report: Report) -> list[dict[str, Any]]:
    return json.loads(json.dumps(history._line(report)["rows"], default=str))


def without_as_of(rows: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "as_of"} for r in rows]


def key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True)


def test_a_jsonl_history_migrates_on_first_append_without_losing_a_row(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    reports = [fleet_round(i) for i in range(12)]
    # hostile and odd rows as older fleetchecks or a tampered file left them
    reports.append(
        rep(
            12,
            [
                Result("clients", "h0", Status.WARN, "\x1b[31mred\x1b[0m \u202e evil"),
                Result("clients", "h0", Status.OK, "a second row of one check and host"),
                Result("logs", "h\u00e9", Status.UNKNOWN, "x" * 500, metrics={"n": [1, 2]}),
            ],
        )
    )
    for r in reports[:6]:
        jsonl_append(r, path)
    path.rename(path.with_name("history.jsonl.1"))  # rotated by the old code
    for r in reports[6:]:
        jsonl_append(r, path)
    with open(path, "a") as f:
        f.write('{"started_at": "2026-11-29T1')  # torn by a crash
    before, bad_before = history.load(path)
    assert len(before) == len(reports) and bad_before == 1

    history.append(fleet_round(13), path)  # the first append migrates

    assert store.db_path(path).exists()
    assert not path.exists() and not path.with_name("history.jsonl.1").exists()
    assert path.with_name("history.jsonl.migrated").exists()  # kept, never deleted
    after, bad = history.load(path)
    assert bad == 1
    assert len(after) == len(reports) + 1
    for old, new, report in zip(before, after, reports, strict=False):
        assert new.started_at == old.started_at and new.status is old.status
        assert new.hosts == old.hosts and new.summaries == old.summaries
        # every row, as written, none carried
        assert Counter(map(key, new.rows)) == Counter(map(key, as_recorded(report)))
    assert [r.hosts for r in after[-1:]] == [
        {BROKER_WIDE: Status.OK} | {f"h{h}": Status.OK for h in range(4)}
    ]
    # migrated once: a second append does not import the moved-aside file again
    history.append(fleet_round(14), path)
    assert len(history.load(path)[0]) == len(reports) + 2


def test_rows_are_stored_when_they_change_and_read_back_for_every_round(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.jsonl"
    reports = [fleet_round(i) for i in range(store.KEYFRAME + 20)]
    for r in reports:
        history.append(r, path)
    db = sqlite3.connect(store.db_path(path))
    (stored,) = db.execute("SELECT count(*) FROM rows").fetchone()
    (full,) = db.execute("SELECT count(*) FROM rounds WHERE keyframe = 1").fetchone()
    per_round = dict(db.execute("SELECT round, count(*) FROM rows GROUP BY round").fetchall())
    gaps = db.execute(  # the most rounds between two stores of one row
        "SELECT max(gap) FROM (SELECT round - lag(round) OVER (PARTITION BY key ORDER BY round)"
        " AS gap FROM rows)"
    ).fetchone()[0]
    db.close()
    total = sum(len(r.results) for r in reports)
    assert full == 1  # the first round; after it, refreshes are staggered
    assert max(n for rnd, n in per_round.items() if rnd > 1) <= 5  # no round stores all 10
    assert gaps <= store.KEYFRAME  # every row at least once in any KEYFRAME rounds
    assert stored < total / 4  # most rows said the same as the round before
    rounds, bad = history.load(path)
    assert bad == 0 and len(rounds) == len(reports)
    for rnd, report in zip(rounds, reports, strict=True):
        want = {(r.host, r.check): r.status for r in report.results}
        got = {(r["host"], r["check"]): Status.parse(r["status"]) for r in rnd.rows}
        assert got == want  # the removed host is not carried forward
        summaries = {(r["host"], r["check"]): r["summary"] for r in rnd.rows}
        for r in report.results:  # words exact; numbers may be from the round stored
            assert summaries[(r.host, r.check)].split(",")[0] == r.summary.split(",")[0]
    crit = [rnd.started_at for rnd in rounds if rnd.hosts.get("h1") is Status.CRIT]
    assert crit == [T0 + timedelta(minutes=15 * i) for i in (5, 6, 7)]
    assert history.went_dark(rounds[:7], "h1") == T0 + timedelta(minutes=75)
    # a row carried from an earlier round says from when; one stored now does not
    last = {(r["host"], r["check"]): r for r in rounds[-1].rows}
    assert last[("h0", "clients")].get("as_of") is not None
    stored_now = [r for rnd in rounds[1:] for r in rnd.rows if "as_of" not in r]
    assert 0 < len(stored_now) < total / 4
    # one host's timeline, and a window that starts between keyframes
    mine, _ = history.load(path, host="h1")
    assert [set(r.hosts) for r in mine] == [{"h1"}] * len(reports)
    since = T0 + timedelta(minutes=15 * (store.KEYFRAME + 3))
    window, _ = history.load(path, since)
    assert [r.started_at for r in window] == [r.started_at for r in rounds[-17:]]
    assert [
        without_as_of(r.rows) == without_as_of(o.rows)
        for r, o in zip(window, rounds[-17:], strict=True)
    ] == [True] * 17


def test_retention_drops_whole_keyframe_intervals(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    days = int(store.RETENTION_S // 86400) + 3
    for i in range(days * store.KEYFRAME):
        history.append(fleet_round(i, hosts=2), path)
    rounds, _ = history.load(path)
    newest = rounds[-1].started_at
    kept = newest - rounds[0].started_at
    assert timedelta(seconds=store.RETENTION_S) <= kept
    assert kept <= timedelta(seconds=store.RETENTION_S) + timedelta(minutes=15 * store.KEYFRAME)
    # every kept round whole: the first one read back starts at a keyframe
    assert {r["host"] for r in rounds[0].rows} == {None, "h0", "h1"}


def test_a_second_process_reads_while_a_patrol_holds_the_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    for i in range(3):
        history.append(fleet_round(i), path)
    writer = store.connect(path, write=True)
    try:
        writer.execute("BEGIN IMMEDIATE")
        store.add_round(writer, history._line(fleet_round(3)))  # not committed yet
        code = (
            "import sys; from pathlib import Path; from fleetcheck.rounds import history; "
            "r, bad = history.load(Path(sys.argv[1])); print(len(r), bad)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["3", "0"]  # the committed rounds, at once
        writer.execute("COMMIT")
    finally:
        writer.close()
    assert len(history.load(path)[0]) == 4


def test_a_writer_killed_in_the_middle_of_a_round_loses_only_that_round(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    for i in range(3):
        history.append(fleet_round(i), path)
    code = (
        "import os, sys; from pathlib import Path; from fleetcheck.rounds import history, store; "
        "from tests.test_history_store import fleet_round; "
        "db = store.connect(Path(sys.argv[1]), write=True); db.execute('BEGIN IMMEDIATE'); "
        "store.add_round(db, history._line(fleet_round(3))); os._exit(9)"
    )
    killed = subprocess.run([sys.executable, "-c", code, str(path)], timeout=60)
    assert killed.returncode == 9
    rounds, bad = history.load(path)
    assert len(rounds) == 3 and bad == 0
    history.append(fleet_round(4), path)
    assert [r.started_at.minute for r in history.load(path)[0]] == [0, 15, 30, 0]


def test_history_export_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    for i in range(4):
        history.append(fleet_round(i), path)
    cfg = tmp_path / "hosts.toml"
    cfg.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\n')
    out = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "history", "-c", str(cfg), "--history", str(path)]
        + ["--since", "100000d", "--export", "jsonl"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert [x["started_at"] for x in lines] == [
        iso(T0 + timedelta(minutes=15 * i)) for i in range(4)
    ]
    assert len(lines[1]["rows"]) == len(fleet_round(1).results)
    bad = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "history", "-c", str(cfg), "--history", str(path)]
        + ["--export", "csv"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "--export csv: the one export format is jsonl" in bad.stderr


def test_a_database_from_before_staggered_refreshes_keeps_every_row_readable(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.jsonl"
    reports = [fleet_round(i) for i in range(store.KEYFRAME + 30)]
    for r in reports[:40]:
        history.append(r, path)
    db = sqlite3.connect(store.db_path(path))
    db.execute("ALTER TABLE keys DROP COLUMN last")  # as the first database's code wrote it
    db.commit()
    db.close()
    for r in reports[40:]:
        history.append(r, path)
    db = sqlite3.connect(store.db_path(path))
    gaps = db.execute(
        "SELECT max(gap) FROM (SELECT round - lag(round) OVER (PARTITION BY key ORDER BY round)"
        " AS gap FROM rows)"
    ).fetchone()[0]
    db.close()
    assert gaps <= store.KEYFRAME
    since = T0 + timedelta(minutes=15 * (store.KEYFRAME + 10))
    window, bad = history.load(path, since)
    assert bad == 0 and len(window) == 20
    for rnd, report in zip(window, reports[-20:], strict=True):
        assert {(r["host"], r["check"]) for r in rnd.rows} == {
            (r.host, r.check) for r in report.results
        }


def test_the_database_keeps_the_recorded_part_of_each_row(tmp_path: Path) -> None:
    """`append` hands the store each row as `Result.to_dict` makes it (evidence, headline,
    the state's fields): only check, host, status, summary, metrics and limits are stored."""
    path = tmp_path / "history.jsonl"
    row = Result(
        "logs",
        "h0",
        Status.WARN,
        "/var/log/w.log, 700s ago",
        metrics={"age_s": 700.0},
        evidence={"last_line": "x" * 500},
        limits={"max_age_s": 600},
        headline="silent",
        since="2026-11-29T02:00:00.000Z",
        bad_rounds=2,
    )
    report = rep(0, [row, Result("clients", "h0", Status.OK, "3 broker connections")])
    history.append(report, path)
    rounds, bad = history.load(path)
    assert bad == 0
    assert without_as_of(rounds[-1].rows) == as_recorded(report)
    assert "evidence" not in json.dumps(rounds[-1].rows)


def _timeline(rounds: list[history.Round]) -> list[tuple[Any, ...]]:
    return [(r.started_at, r.status, r.hosts, r.duration_s) for r in rounds]


def test_statuses_alone_read_as_the_whole_rounds_say(tmp_path: Path) -> None:
    """`fleetcheck history`'s timeline reads each host's worst status a round without the
    rows (store.read_statuses): the same hosts and statuses as the whole rounds, with a host
    that goes CRIT, one removed from the fleet (its rows' tombstones), a second row of one
    check, rows carried between stores, and a `since` that starts between two stores."""
    path = tmp_path / "history.jsonl"
    for i in range(14):
        report = fleet_round(i)
        if i == 11:  # a second clients row for h0, worse than its first
            extra = Result("clients", "h0", Status.WARN, "a second row")
            report = Report(report.started_at, 0.5, (*report.results, extra))
        history.append(report, path)
    whole, bad = history.load(path)
    statuses, bad_statuses = history.load_statuses(path)
    assert (bad, bad_statuses) == (0, 0)
    assert _timeline(statuses) == _timeline(whole)
    assert {r.hosts.get("h1") for r in statuses} == {Status.OK, Status.CRIT}
    assert "h4" in statuses[9].hosts and "h4" not in statuses[10].hosts  # removed
    assert statuses[11].hosts["h0"] is Status.WARN
    since = T0 + timedelta(minutes=15 * 6, seconds=1)
    assert _timeline(history.load_statuses(path, since)[0]) == _timeline(
        history.load(path, since)[0]
    )
    assert all(r.summaries == {} and r.rows == () for r in statuses)


def test_a_round_with_a_status_that_is_none_is_counted_not_drawn(tmp_path: Path) -> None:
    """A row a tampered or older file left with a status that is not one: the round is
    counted unreadable by the statuses' reader as by the whole rounds'; the others read."""
    path = tmp_path / "history.jsonl"
    for i in range(3):
        jsonl_append(fleet_round(i), path)
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"status":"OK"', '"status":"FINE"', 1)
    path.write_text("\n".join(lines) + "\n")
    history.append(fleet_round(3), path)  # migrates
    whole, bad = history.load(path)
    statuses, bad_statuses = history.load_statuses(path)
    assert bad == bad_statuses == 1
    assert _timeline(statuses) == _timeline(whole) and len(statuses) == 3


def test_the_history_command_draws_every_host_from_statuses(tmp_path: Path) -> None:
    """`fleetcheck history` without --host: one line a host, the CRIT host's streak named."""
    from typer.testing import CliRunner

    from fleetcheck.cli import app

    path = tmp_path / "history.jsonl"
    now = datetime.now(UTC).replace(microsecond=0)
    for i in range(4):
        at = now - timedelta(minutes=15 * (3 - i))
        rows = [
            Result("clients", "h0", Status.OK, "ok"),
            Result("clients", "h1", Status.CRIT if i >= 2 else Status.OK, "gone"),
        ]
        history.append(Report(iso(at), 0.5, tuple(rows)), path)
    config = tmp_path / "hosts.toml"
    config.write_text('[broker]\nurl = "redis://127.0.0.1:1"\n\n[[hosts]]\nname = "h0"\n')
    out = CliRunner().invoke(app, ["history", "-c", str(config), "--history", str(path)])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith("4 rounds")
    h1 = next(line for line in lines if line.startswith("h1"))
    assert h1.split()[1] == "..XX" and "not OK since" in h1
    assert next(line for line in lines if line.startswith("h0")).split()[1] == "...."


def test_a_signature_is_the_same_bytes_in_another_process() -> None:
    """Signatures are compared with those an earlier patrol (another process) stored: equal
    rows give equal bytes whatever the interpreter interned or shared."""
    row = {
        "status": "OK",
        "summary": "/var/log/w.log, 12s ago",
        "metrics": {"age_s": 12.5, "lines": 3, "by": {"a": 1.5}},
        "limits": {"max_age_s": 900, "names": ["x", "y"]},
    }
    code = (
        "import json, sys; from fleetcheck.rounds import store; "
        "sys.stdout.write(store.signature(json.loads(sys.argv[1])).hex())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code, json.dumps(row)], capture_output=True, text=True, check=True
    )
    assert bytes.fromhex(other.stdout) == store.signature(row)
    moved = {**row, "summary": "/var/log/w.log, 47s ago"}  # numbers in the words: the same
    assert store.signature(moved) == store.signature(row)
    for number in ("3.5s ago", "100s ago", "0.25s ago"):  # written with a decimal or not
        assert store.signature({**row, "summary": f"/var/log/w.log, {number}"}) == (
            store.signature(row)
        )
    for words in ("/var/log/x.log, 12s ago", "/var/log/w.log, 12m ago", "/var/log/w.log"):
        assert store.signature({**row, "summary": words}) != store.signature(row)
    assert store.signature({**row, "status": "WARN"}) != store.signature(row)
    dated = {**row, "limits": {"until": datetime(2026, 12, 1, tzinfo=UTC)}}  # a TOML date
    assert store.signature(dated) != store.signature(row)  # repr's bytes, no error


def test_text_signatures_of_an_older_database_store_each_row_once_more(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    for i in range(3):
        history.append(fleet_round(i), path)
    db = sqlite3.connect(store.db_path(path))
    db.execute("UPDATE keys SET sig = CAST(sig AS TEXT) || 'old' WHERE sig IS NOT NULL")
    db.commit()
    db.close()
    store.keys_path(path).unlink()  # that fleetcheck kept no keys file

    def stored_in(round_index: int) -> int:
        db = sqlite3.connect(store.db_path(path))
        try:
            (n,) = db.execute(
                "SELECT count(*) FROM rows WHERE round = (SELECT id FROM rounds "
                "ORDER BY id LIMIT 1 OFFSET ?)",
                (round_index,),
            ).fetchone()
            return int(n)
        finally:
            db.close()

    history.append(fleet_round(3), path)
    history.append(fleet_round(4), path)
    rows_a_round = len(fleet_round(3).results)
    assert stored_in(3) == rows_a_round  # every row once more
    assert stored_in(4) < rows_a_round  # then only what changed
    assert len(history.load(path)[0]) == 5


def test_a_rounds_signatures_are_each_rows_own() -> None:
    """`store.signatures` (a round's summaries' numbers replaced in one pass over them
    joined) gives each row's `signature` bytes: numbers at a
    summary's ends, a summary with no number, one that is not a text, metrics bucketed or
    with keys that are not texts, a limit marshal cannot hold; and a summary holding the
    joining character (NUL) has the round done row by row, the same bytes."""
    rows: list[dict[str, Any]] = [
        {"status": "OK", "summary": "12", "metrics": {"n": 3}},
        {"status": "OK", "summary": "3.5 s then 7", "metrics": {"age_s": 12.5}},
        {"status": "WARN", "summary": "no number", "metrics": {1: 2}, "limits": {"x": 1}},
        {"status": "OK", "summary": "", "metrics": {"by": {"a": 1.5}}},
        {"status": "OK", "metrics": None},
    ]
    assert store.signatures(rows) == [store.signature(r) for r in rows]
    assert store.signatures(rows)[0] == store.signatures(rows[1:2] + rows[0:1])[1]
    odd = [*rows, {"status": "OK", "summary": "a\0b 4", "metrics": {}}]
    assert store.signatures(odd) == [store.signature(r) for r in odd]
    not_text = [*rows, {"status": "OK", "summary": 42, "metrics": {}}]
    assert store.signatures(not_text) == [store.signature(r) for r in not_text]
    dated = [*rows, {"status": "OK", "limits": {"until": datetime(2026, 12, 1, tzinfo=UTC)}}]
    assert store.signatures(dated) == [store.signature(r) for r in dated]  # repr's, no error
    assert store.signatures([]) == []


_KEYS = st.sampled_from(["age_s", "lines", "n", "lag_s", "depth", "by"])
_VALUES = st.one_of(
    st.integers(-3, 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.5, 59.9, 60.0, -12.5, 1.0]),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.lists(st.floats(-100, 100), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.floats(-100, 100), max_size=2),
)
_METRICS = st.one_of(
    st.none(),
    st.just({}),
    st.dictionaries(_KEYS, _VALUES, max_size=3),
    st.dictionaries(st.integers(0, 2), st.integers(0, 3), max_size=2),  # keys not texts
    st.just([1.5, 2]),  # not a dict
)


@settings(max_examples=300, deadline=None)
@given(
    shapes=st.lists(st.tuples(_METRICS, st.sampled_from([None, {}, {"cap": 100}])), min_size=1),
    picks=st.lists(st.tuples(st.integers(0, 50), _VALUES), max_size=60),
    statuses=st.lists(st.sampled_from(["OK", "WARN", "CRIT"]), min_size=1),
)
def test_a_rounds_signatures_column_by_column_are_each_rows_own(
    shapes: list[tuple[Any, Any]], picks: list[tuple[int, Any]], statuses: list[str]
) -> None:
    """`store.signatures` (the metrics' forms made column by column: rows grouped by their
    keys, floats bucketed once a distinct value) gives each row's `signature` bytes, for
    rows that share their keys and values (a check's rows) with some values changed, of
    any types: integers, floats (nan, infinities, -0.0, under and over a minute), texts,
    lists, dicts, None; keys that are not texts; metrics that are not a dict."""
    rows: list[dict[str, Any]] = []
    for i, (n, value) in enumerate([(j % len(shapes), None) for j in range(40)] + picks):
        metrics, limits = shapes[n % len(shapes)]
        if isinstance(metrics, dict) and metrics and value is not None and i >= 40:
            metrics = {**metrics, list(metrics)[i % len(metrics)]: value}
        rows.append(
            {
                "status": statuses[i % len(statuses)],
                "summary": f"{i}s ago",
                "metrics": metrics,
                "limits": limits,
            }
        )
    assert store.signatures(rows) == [store.signature(r) for r in rows]


def result_of(row: dict[str, Any], **fields: Any) -> Result:
    """A recorded row (`random_rounds`) as a patrol's Result, with `fields` (metrics...)."""
    return Result(
        row["check"], row["host"], Status.parse(row["status"]), row.get("summary", ""), **fields
    )


def random_rounds(seed: int, rounds: int) -> list[dict[str, Any]]:
    """Rounds as the JSONL line records them, of a fleet that changes: hosts added, removed
    and back, rows reordered, a check's second row for one host, statuses and numbers that
    move, a row with no host."""
    import random

    rng = random.Random(seed)
    pool = [f"h{i}" for i in range(12)]
    live = set(pool[:6])
    out = []
    for i in range(rounds):
        if rng.random() < 0.2:
            live ^= {rng.choice(pool)}
        rows: list[dict[str, Any]] = [
            {"check": "broker", "host": None, "status": "OK", "summary": f"{rng.randint(0, 3)} up"}
        ]
        for h in sorted(live):
            for check in ("logs", "clients"):
                status = rng.choice(["OK", "OK", "OK", "WARN"])
                n = rng.randint(1, 3)
                rows.append(
                    {
                        "check": check,
                        "host": h,
                        "status": status,
                        "summary": f"{n}s",
                        "metrics": {"n": n},
                    }
                )
            if h in ("h2", "h7"):  # a second row of one check, round after round
                rows.append({"check": "logs", "host": h, "status": "OK", "summary": "second"})
        if rng.random() < 0.1:
            rng.shuffle(rows)
        start = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(minutes=15 * i)
        out.append({"started_at": iso(start), "duration_s": 1.0, "status": "OK", "rows": rows})
    return out


def test_remembered_keys_store_what_the_keys_table_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each round leaves every known key (text, id, signature) in a file for the next one
    (`store._known`, one value instead of the keys table read back row by row): over a fleet
    that changes (hosts added, removed, back; rows reordered; a second row of a check; the
    file damaged, of an older round, of another database, missing, or not written after a
    round), every round stores the very rows a writer that never remembers stores, and the
    remembered keys equal the keys table after each round."""
    import random
    import shutil

    rng = random.Random(7)
    table_reads: list[sqlite3.Connection] = []
    read_table, in_order = store._known_of_table, store._in_order
    orders: list[bool] = []

    def counted(db: sqlite3.Connection) -> store.Known:
        table_reads.append(db)
        return read_table(db)

    def told(known: store.Known | None, keys: list[str]) -> bool:
        orders.append(in_order(known, keys))
        return orders[-1]

    monkeypatch.setattr(store, "_known_of_table", counted)
    monkeypatch.setattr(store, "_in_order", told)
    spoiled: dict[str, int] = {}
    for seed in range(6):
        lines = random_rounds(seed, 60)
        dbs = [sqlite3.connect(tmp_path / f"{seed}-{w}.db", isolation_level=None) for w in "ab"]
        keys_file = tmp_path / f"{seed}.keys"
        other = tmp_path / f"{seed}-other.keys"  # another database's, of the same rounds
        for db in dbs:
            db.executescript(store._DDL)
        skipped = False  # the previous round's file not written
        try:
            for line in lines:
                remembering, forgetting = dbs
                spoil = rng.random() if keys_file.exists() else 1.0
                kind = ""
                if spoil < 0.04:
                    kind = "damaged"
                    keys_file.write_bytes(keys_file.read_bytes()[:-7])
                elif spoil < 0.08:
                    kind = "missing"
                    keys_file.unlink()
                elif spoil < 0.12 and other.exists():
                    kind = "another database's"
                    shutil.copyfile(other, keys_file)
                spoiled[kind] = spoiled.get(kind, 0) + 1
                table_reads.clear()
                with store.transaction(remembering):
                    kept = store.add_round(remembering, line, keys_file=keys_file)
                with store.transaction(forgetting):
                    assert store.add_round(forgetting, line) is None
                assert kept is not None
                # the keys table is read back only where nothing usable was remembered
                assert table_reads.count(forgetting) == 1
                fresh = line is lines[0] or kind != "" or skipped
                assert table_reads.count(remembering) == int(fresh), kind
                skipped = rng.random() < 0.05  # a crash between the commit and the file
                if skipped:
                    spoiled["not written"] = spoiled.get("not written", 0) + 1
                else:
                    kept.write()
                    store.Remembered(other, "0" * 16, kept.round, kept.keys).write()
                (newest,) = remembering.execute("SELECT max(id) FROM rounds").fetchone()
                known = store._known(remembering, newest, keys_file, kept.token)
                assert (known is None) == (skipped or not keys_file.exists())
                table = remembering.execute(
                    "SELECT host || char(0) || check_name, id, sig FROM keys"
                ).fetchall()
                assert sorted(zip(*kept.keys, strict=True)) == sorted(table)
            a, b = (
                db.execute("SELECT key, round, body FROM rows ORDER BY round, key").fetchall()
                for db in dbs
            )
            assert a == b
            assert a  # rows were stored
        finally:
            for db in dbs:
                db.close()
    assert all(spoiled.get(k, 0) >= 3 for k in ("damaged", "missing", "another database's"))
    assert spoiled.get("not written", 0) >= 3
    # both ways were taken: rows in the remembered order (compared index by index), and not
    assert orders.count(True) > 100 and orders.count(False) > 100


def test_a_patrols_results_are_stored_as_their_rows_are(tmp_path: Path) -> None:
    """A round given as a patrol's results (read by the store from the results: no row
    made but those it stores) stores what the same round given as `Result.to_dict` rows
    stores, round after round, over a fleet that changes; and each round's signatures are
    its rows' (metrics floats, limits, evidence and state fields too)."""
    import random

    rng = random.Random(3)
    dbs = [sqlite3.connect(tmp_path / f"{w}.db", isolation_level=None) for w in "ab"]
    for db in dbs:
        db.executescript(store._DDL)
    try:
        for line in random_rounds(11, 40):
            results = tuple(
                result_of(
                    row,
                    metrics={**(row.get("metrics") or {}), "age_s": rng.choice([1.5, 75.0])},
                    limits={"max_age_s": 900} if rng.random() < 0.5 else {},
                    evidence={"lines": ["x"]} if rng.random() < 0.3 else None,
                )
                for row in line["rows"]
            )
            rows = [r.to_dict() for r in results]
            assert store.signatures_of_results(results) == store.signatures(rows)
            for db, given in zip(dbs, ({"results": results}, {"rows": rows}), strict=True):
                with store.transaction(db):
                    store.add_round(db, {**line, "rows": None, **given})
        a, b = (
            db.execute("SELECT key, round, body FROM rows ORDER BY round, key").fetchall()
            for db in dbs
        )
        assert a == b and len(a) > 100
    finally:
        for db in dbs:
            db.close()


@pytest.mark.parametrize("given_as", ["rows", "results"])
def test_a_new_databases_first_round_stores_every_row_in_order(
    tmp_path: Path, given_as: str
) -> None:
    """A new database's first round (made column by column: no key is known) stores every
    row, each under the next id in the round's order, with its host, check (a second row
    of one check named apart), signature and recorded body; the keys it leaves are the
    table's; and the next round reads it back as given."""
    for seed in range(8):
        first, second = random_rounds(seed, 2)
        rows = first["rows"]
        if given_as == "results":
            results = tuple(result_of(r, metrics=r.get("metrics") or {}) for r in rows)
            line: dict[str, Any] = {**first, "rows": None, "results": results}
            rows = [r.to_dict() for r in results]
        else:
            line = first
        db = sqlite3.connect(tmp_path / f"{seed}-{given_as}.db", isolation_level=None)
        db.executescript(store._DDL)
        try:
            with store.transaction(db):
                kept = store.add_round(db, line, keys_file=tmp_path / f"{seed}-{given_as}.keys")
            assert kept is not None
            keys = db.execute("SELECT id, host, check_name, sig, last FROM keys ORDER BY id")
            want = []
            seen: Counter[tuple[str, str]] = Counter()
            for i, (row, sig) in enumerate(zip(rows, store.signatures(rows), strict=True)):
                host = row["host"] or store.BROKER_KEY
                n = seen[(host, row["check"])]
                seen[(host, row["check"])] += 1
                want.append((i + 1, host, row["check"] + (f"#{n}" if n else ""), sig, 1))
            assert keys.fetchall() == want
            stored = db.execute("SELECT key, round, body FROM rows ORDER BY key").fetchall()
            assert stored == [
                (i + 1, 1, json.dumps(store.recorded(r), separators=(",", ":"), default=str))
                for i, r in enumerate(rows)
            ]
            table = db.execute("SELECT host || char(0) || check_name, id, sig FROM keys")
            assert sorted(zip(*kept.keys, strict=True)) == sorted(table.fetchall())
            kept.write()
            with store.transaction(db):
                store.add_round(db, second, keys_file=kept.path)
            got = [
                [(r["check"], r["host"], r["status"], r["summary"]) for r in rnd_rows]
                for _, rnd_rows in store.read(db)
            ]
            assert len(got) == 2
            assert got[0] == [(r["check"], r["host"], r["status"], r["summary"]) for r in rows]
        finally:
            db.close()
