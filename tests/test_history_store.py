"""The history's database (issue 29): a JSONL history migrates on the first append without
losing a row; rows are stored only when they change, and read back for every round; a host
removed is not carried forward; retention keeps the window and each row's last store; a
database the keyframe store wrote reads as it did; a second process reads while a patrol holds
the write lock; a writer killed in the middle of a round loses only that round; `history
--export jsonl` writes every round."""

from __future__ import annotations

import io
import json
import marshal
import sqlite3
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.core.model import BROKER_WIDE, Report, Result, Standing, Status
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
    reports = [fleet_round(i) for i in range(116)]
    for r in reports:
        history.append(r, path)
    db = sqlite3.connect(store.db_path(path))
    (stored,) = db.execute("SELECT count(*) FROM rows").fetchone()
    per_round = dict(db.execute("SELECT round, count(*) FROM rows GROUP BY round").fetchall())
    per_key = db.execute(
        "SELECT k.host, k.check_name, count(*) FROM rows r JOIN keys k ON k.id = r.key "
        "GROUP BY r.key"
    ).fetchall()
    db.close()
    total = sum(len(r.results) for r in reports)
    assert per_round[1] == len(reports[0].results)  # the first round: every row
    assert max(n for rnd, n in per_round.items() if rnd > 1) <= 5  # then what changed
    assert stored < total / 4
    times = {(h, c): n for h, c, n in per_key}
    assert times[("h0", "clients")] == 1  # never changed: stored once
    assert times[("h4", "logs")] == 2  # stored, then its tombstone when removed
    assert times[("h1", "logs")] == 3  # OK, CRIT, OK again
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
    assert last[("h0", "clients")].get("as_of") == iso(T0)
    stored_now = [r for rnd in rounds[1:] for r in rnd.rows if "as_of" not in r]
    assert 0 < len(stored_now) < total / 4
    # one host's timeline, and a window that starts long after most rows were stored
    mine, _ = history.load(path, host="h1")
    assert [set(r.hosts) for r in mine] == [{"h1"}] * len(reports)
    assert [r.rows for r in mine] == [
        tuple(row for row in r.rows if row["host"] == "h1") for r in rounds
    ]
    since = T0 + timedelta(minutes=15 * 99)
    window, _ = history.load(path, since)
    assert [r.started_at for r in window] == [r.started_at for r in rounds[-17:]]
    assert [r.rows for r in window] == [r.rows for r in rounds[-17:]]


def words(row: dict[str, Any]) -> str:
    """The row as its signature sees it: without `as_of`, its summary without numbers."""
    summary = "".join(c for c in row.get("summary", "") if not (c.isdigit() or c == "."))
    return key({**without_as_of([row])[0], "summary": summary})


def test_a_changing_fleet_reads_back_every_round_as_written(tmp_path: Path) -> None:
    """Over fleets that change (hosts added, removed and back, rows reordered, a check's
    second row for one host, statuses and numbers that move), every round reads back as
    the rows it was given (one carried from an earlier round marked `as_of`, the numbers of
    its summary from then), whole and from any round on; a host's rounds hold its rows."""
    for seed in range(4):
        path = tmp_path / f"history-{seed}.jsonl"
        lines = random_rounds(seed, 60)
        db = store.connect(path, write=True)
        try:
            for line in lines:
                with store.transaction(db):
                    store.add_round(db, line)
            whole = store.read(db)
            assert len(whole) == len(lines)
            for (fields, rows), line in zip(whole, lines, strict=True):
                assert fields["started_at"] == line["started_at"]
                # as given, but for a carried row's summary numbers (no change: not stored)
                assert sorted(map(words, rows)) == sorted(map(words, line["rows"]))
                fresh = [key(r) for r in rows if "as_of" not in r]
                assert not Counter(fresh) - Counter(map(key, line["rows"]))
            for start in (1, 17, 59):
                since = store.epoch(lines[start]["started_at"])
                got = store.read(db, datetime.fromtimestamp(since, UTC))
                assert got == whole[start:]
            for rnd, (_, rows) in zip(store.read(db, host="h2"), whole, strict=True):
                assert rnd[1] == [r for r in rows if r["host"] == "h2"]
        finally:
            db.close()


def test_retention_keeps_the_window_and_each_rows_last_store(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    days = int(store.RETENTION_S // 86400) + 3
    for i in range(days * 96):
        history.append(fleet_round(i, hosts=2), path)
    rounds, _ = history.load(path)
    newest = rounds[-1].started_at
    kept = newest - rounds[0].started_at
    assert timedelta(seconds=store.RETENTION_S) <= kept
    assert kept <= timedelta(seconds=store.RETENTION_S) + timedelta(minutes=15)
    # every kept round whole: rows that never changed are kept from the first round
    assert {r["host"] for r in rounds[0].rows} == {None, "h0", "h1"}
    first = {(r["host"], r["check"]): r for r in rounds[0].rows}
    assert first[("h0", "clients")]["as_of"] == iso(T0)
    db = sqlite3.connect(store.db_path(path))
    (whole,) = db.execute("SELECT value FROM meta WHERE name = 'whole_from'").fetchone()
    (before,) = db.execute("SELECT count(*) FROM rows WHERE round < ?", (int(whole),)).fetchone()
    (keys,) = db.execute("SELECT count(*) FROM keys").fetchone()
    (old_rounds,) = db.execute("SELECT count(*) FROM rounds WHERE id < ?", (int(whole),)).fetchone()
    db.close()
    assert before <= keys  # of the rows before the window, each key's last one only
    assert old_rounds <= before  # and only the rounds they were stored in


def test_a_database_the_keyframe_store_wrote_reads_as_it_did(tmp_path: Path) -> None:
    """A database written by the store before this one (rows stored again every 96 rounds,
    a keys file beside it, retention from a keyframe; tests/recordings, made by that
    fleetcheck from `fleet_round`) reads back as that fleetcheck exported it, and takes
    new rounds: the first stores only what changed, and the keys file goes."""
    import gzip

    recordings = Path(__file__).parent / "recordings"
    path = tmp_path / "history-keyframes.jsonl"
    store.db_path(path).write_bytes(
        gzip.decompress((recordings / "history-keyframes.db.gz").read_bytes())
    )
    want = gzip.decompress((recordings / "history-keyframes.export.jsonl.gz").read_bytes())
    out = io.StringIO()
    assert history.export_jsonl(path, out) == 111
    assert out.getvalue().encode() == want
    keys_file = store.db_path(path).with_suffix(".keys")
    keys_file.write_bytes(b"an older fleetcheck's")
    history.append(fleet_round(136), path)
    history.append(fleet_round(137), path)
    rounds, bad = history.load(path)
    assert bad == 0 and len(rounds) == 113 and not keys_file.exists()
    for rnd, i in ((rounds[-2], 136), (rounds[-1], 137)):
        assert {(r["host"], r["check"]) for r in rnd.rows} == {
            (r.host, r.check) for r in fleet_round(i).results
        }
    db = sqlite3.connect(store.db_path(path))
    per_round = db.execute("SELECT count(*) FROM rows GROUP BY round ORDER BY round DESC LIMIT 2")
    assert per_round.fetchall() == [(1,), (1,)]  # the broker's clients count, which moved
    db.close()


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


def test_the_database_keeps_the_recorded_part_of_each_row(tmp_path: Path) -> None:
    """Of a row with evidence, a headline and the state's fields, only check, host, item,
    status, summary, metrics and limits are stored."""
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
    )
    rows = [row, Result("clients", "h0", Status.OK, "3 broker connections")]
    rows.append(Result("logs", "h0", Status.OK, "fresh", item="/var/log/x.log"))  # a log's row
    report = rep(0, rows)
    standing = {row.id: Standing("2026-11-29T02:00:00.000Z", 2)}  # not recorded: the verdicts are
    history.append(replace(report, standing=standing), path)
    rounds, bad = history.load(path)
    assert bad == 0
    assert without_as_of(rounds[-1].rows) == as_recorded(report)
    assert "evidence" not in json.dumps(rounds[-1].rows)
    assert [r.get("item") for r in rounds[-1].rows] == [None, None, "/var/log/x.log"]


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


def test_a_summarys_words_are_its_text_without_ascii_digits_and_dots() -> None:
    """The words a signature holds are the summary without 0-9 and '.', whatever else it
    holds (other scripts' digits, a lone surrogate): the bytes stored databases hold."""
    for summary, words in (
        ("/var/log/w.log, 12.5s ago", "/var/log/wlog, s ago"),
        ("über 3 Tage, ٣ أيام", "über  Tage, ٣ أيام"),
        ("\ud800 broken 7", "\ud800 broken "),
        ("", ""),
    ):
        row = {"status": "OK", "summary": summary, "metrics": {}}
        assert store.signature(row) == marshal.dumps(("OK", words, {}, None), 2)


def test_text_signatures_of_an_older_database_store_each_row_once_more(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    for i in range(3):
        history.append(fleet_round(i), path)
    db = sqlite3.connect(store.db_path(path))
    db.execute("UPDATE keys SET sig = CAST(sig AS TEXT) || 'old' WHERE sig IS NOT NULL")
    db.commit()
    db.close()

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


@settings(max_examples=150, deadline=None)
@given(
    metrics=st.lists(_METRICS, min_size=1, max_size=6),
    limits=st.sampled_from([None, {}, {"cap": 100}]),
)
def test_any_round_is_stored_whole_then_not_again(metrics: list[Any], limits: Any) -> None:
    """Rows with any metrics (integers, floats with nan and infinities, texts, lists, dicts,
    None; keys that are not texts; metrics that are not a dict): a round is stored and read
    back as given, and the same round again stores no row (each signature equal to itself)."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(store._DDL)
    rows = [
        {"check": "c", "host": f"h{i}", "status": "OK", "summary": f"{i}s", "metrics": m}
        | ({"limits": limits} if limits else {})
        for i, m in enumerate(metrics)
    ]
    for i in range(2):
        line = {"started_at": iso(T0 + timedelta(minutes=15 * i)), "status": "OK", "rows": rows}
        with store.transaction(db):
            store.add_round(db, line)
    assert db.execute("SELECT count(*) FROM rows WHERE round = 2").fetchone() == (0,)
    (_, first), (_, second) = store.read(db)
    assert first == json.loads(json.dumps(rows, default=str))
    assert without_as_of(second) == first
    db.close()


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
