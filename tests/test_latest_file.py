"""The newest round kept whole beside the history (`history.write_latest` /
`read_latest`): marshal's format, written atomically and privately, read back as the same
document `Report.to_dict` built; a value marshal cannot hold becomes what JSON wrote; a file
that is not one (or the columns an older fleetcheck wrote) is a ValueError its readers
report; the JSON file an older fleetcheck kept is removed when the new one is written."""

from __future__ import annotations

import marshal
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetcheck.core.model import Report, Result, Status
from fleetcheck.rounds import history


def _report(evidence: object = None) -> Report:
    return Report(
        "2026-11-29T02:21:00.000Z",
        1.5,
        (
            Result("clients", "mini", Status.CRIT, "0 connections", metrics={"connections": 0}),
            Result("logs", "n8", Status.OK, "fresh", evidence=evidence),
        ),
    )


def test_round_trip_is_the_report_document(tmp_path: Path) -> None:
    path = history.latest_path(tmp_path / "history-x.jsonl")
    assert path.name == "history-x.last.marshal"
    report = _report(evidence={"lines": ["a", "b"], "counts": {"error": 3}})
    history.write_latest(report, path)
    assert history.read_latest(path) == report.to_dict()
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_value_marshal_cannot_hold_is_written_as_json_would(tmp_path: Path) -> None:
    path = tmp_path / "h.last.marshal"
    when = datetime(2026, 11, 29, 2, 21, tzinfo=UTC)
    history.write_latest(_report(evidence={"at": when, "file": Path("/var/log/w.log")}), path)
    rows = {r["host"]: r for r in history.read_latest(path)["results"]}
    assert rows["n8"]["evidence"] == {"at": str(when), "file": "/var/log/w.log"}
    assert rows["mini"]["metrics"] == {"connections": 0}  # the other rows as they were


@pytest.mark.parametrize(
    "blob,why",
    [
        (b"{not json", "unknown type code"),
        (b"", "EOF"),
        (marshal.dumps({"schema": "x"})[:-1], "EOF"),  # torn
        (marshal.dumps(["a", "list"]), "a list"),
    ],
)
def test_a_file_that_is_not_one_is_a_value_error(tmp_path: Path, blob: bytes, why: str) -> None:
    path = tmp_path / "h.last.marshal"
    path.write_bytes(blob)
    with pytest.raises(ValueError, match=f"not a newest-round file .*{why}"):
        history.read_latest(path)


def test_no_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        history.read_latest(tmp_path / "none.last.marshal")


def test_the_older_json_file_goes_when_the_new_one_is_written(tmp_path: Path) -> None:
    hist = tmp_path / "history-x.jsonl"
    legacy = tmp_path / "history-x.last.json"
    legacy.write_text('{"schema": "fleetcheck.report/2", "results": []}')
    history.write_latest(_report(), history.latest_path(hist))
    assert not legacy.exists()
    assert history.latest_path(hist).exists()


def test_an_append_puts_the_newest_round_in_place_only_once_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`history.append` replaces the newest round's file once the round is stored: a round
    the store could not write leaves the previous file, a file that could not be replaced
    is the append's error after the round was stored; neither leaves a temporary file."""
    from fleetcheck.rounds import store

    hist = tmp_path / "history-x.jsonl"
    first = _report()
    history.append(first, hist)
    latest = history.latest_path(hist)
    assert history.read_latest(latest) == first.to_dict()
    second = Report("2026-11-29T02:36:00.000Z", 1.0, first.results[:1])

    def full_disk(db: object, now: float, retention_s: float = 0.0) -> None:
        raise store.sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(store, "expire", full_disk)
    with pytest.raises(OSError, match="disk is full"):
        history.append(second, hist)
    assert history.read_latest(latest) == first.to_dict()  # the round was not stored
    assert len(history.load(hist)[0]) == 1
    monkeypatch.undo()

    latest.unlink()
    latest.mkdir()  # a file that cannot be replaced
    with pytest.raises(OSError):
        history.append(second, hist)
    assert len(history.load(hist)[0]) == 2  # the round was stored
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_the_columns_an_older_fleetcheck_wrote_are_a_value_error(tmp_path: Path) -> None:
    """Its readers say so and show the database's newest round until the next append."""
    path = tmp_path / "h.last.marshal"
    head = {"schema": "fleetcheck.report/2", "started_at": "2026-11-29T02:21:00.000Z"}
    older = {"layout": "fleetcheck.latest/columns-1", "head": head, "fields": [], "columns": []}
    path.write_bytes(marshal.dumps(older))
    with pytest.raises(ValueError, match="not a newest-round file .*no results"):
        history.read_latest(path)


def test_a_document_file_from_before_the_columns_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "h.last.marshal"
    doc = _report().to_dict()
    path.write_bytes(marshal.dumps(doc))
    assert history.read_latest(path) == doc
