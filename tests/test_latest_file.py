"""The newest round kept whole beside the history (`history.write_latest` /
`read_latest`): marshal's format, written atomically and privately, read back as the same
document `Report.to_dict` built; a value marshal cannot hold becomes what JSON wrote; a file
that is not one is a ValueError its readers report; the JSON file an older fleetcheck kept
is removed when the new one is written."""

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
    """`history.append` makes the newest round's file beside the store's commit (a thread,
    into a temporary file) and puts it in place once the round is stored: a round the store
    could not write leaves the previous file, a file that could not be made is the append's
    error after the round was stored; neither leaves a temporary file behind."""
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

    def unwritable(doc: object, tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(history, "_write_tmp", unwritable)
    with pytest.raises(OSError, match="No space left"):
        history.append(second, hist)
    assert len(history.load(hist)[0]) == 2  # the round was stored
    assert history.read_latest(latest) == first.to_dict()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def _any_rows(seed: int) -> tuple[Result, ...]:
    """Rows with every optional key set on some, none, or all of them (the state's four
    together), in no order."""
    import random

    rng = random.Random(seed)
    every = rng.random() < 0.3  # a round where a key that only some rows have is on all
    out = []
    for i in range(rng.randint(0, 30)):
        on = lambda p: every or rng.random() < p  # noqa: E731
        state = on(0.5)
        out.append(
            Result(
                rng.choice(["clients", "logs", "routes"]),
                rng.choice([None, "", "h1", "h2", f"w{i}"]),
                rng.choice(list(Status)),
                f"row {i}",
                metrics=rng.choice([{}, {"n": i, "age_s": i / 3}]),
                evidence=rng.choice([None, {"lines": ["a"]}, ["x", 1]]),
                duration_s=rng.choice([0.0, 0.25]),
                limits=rng.choice([{}, {"max": 3}]),
                headline=rng.choice([None, "n"]),
                since="2026-11-29T02:00:00.000Z" if state else None,
                bad_rounds=rng.randint(0, 3),
                alerting=rng.choice([None, True, False]) if state else None,
                flapping=rng.random() < 0.5,
                evidence_strength=rng.choice(["proof", "inference"]) if on(0.3) else None,
                cause="broker" if on(0.3) else None,
                silenced="until 03:00" if on(0.2) else None,
            )
        )
    notes = ("slowed down",) if rng.random() < 0.5 else ()
    return Report("2026-11-29T02:21:00.000Z", 1.5, tuple(out), notes).results


@pytest.mark.parametrize("seed", range(300))
def test_columns_read_back_as_the_document(tmp_path: Path, seed: int) -> None:
    """A report's file holds its document as columns (`history._columns`): read back, it is
    `Report.to_dict`'s document exactly, whichever rows lack which keys."""
    import random

    path = tmp_path / "h.last.marshal"
    notes = ("slowed down",) if random.Random(seed).random() < 0.5 else ()
    report = Report("2026-11-29T02:21:00.000Z", 1.5, _any_rows(seed), notes)
    history.write_latest(report, path)
    assert marshal.loads(path.read_bytes())["layout"] == history._COLUMNS
    got = history.read_latest(path)
    want = report.to_dict()
    assert got == want
    assert [list(r) for r in got["results"]] == [list(r) for r in want["results"]]  # key order


def test_the_columns_know_every_key_of_a_row() -> None:
    """Every key `Result.to_dict` can give is one the columns hold (a key added there and
    not here would be lost from the newest round's file)."""
    row = Result(
        "c", "h", Status.WARN, "s", since="t", alerting=True, evidence_strength="proof",
        cause="x", silenced="y",
    )  # fmt: skip
    assert list(row.to_dict()) == list(history._ALWAYS + history._WHEN_SET + history._STATE)


@pytest.mark.parametrize(
    "change,why",
    [
        (lambda d: d["columns"].pop(), "do not fit"),
        (lambda d: d["columns"][0].pop(), "do not fit"),
        (lambda d: d.__setitem__("fields", [1] * len(d["fields"])), "do not fit"),
        (lambda d: d.__setitem__("omit", [[["cause"], [99]]]), "IndexError"),
        (lambda d: d.__setitem__("omit", [[["nope"], [0]]]), "KeyError"),
        (lambda d: d.pop("head"), "KeyError"),
        (lambda d: d.__setitem__("omit", 5), "do not fit"),
    ],
)
def test_columns_that_do_not_fit_are_a_value_error(
    tmp_path: Path, change: object, why: str
) -> None:
    path = tmp_path / "h.last.marshal"
    history.write_latest(_report(), path)
    data = marshal.loads(path.read_bytes())
    change(data)  # type: ignore[operator]
    path.write_bytes(marshal.dumps(data))
    with pytest.raises(ValueError, match=f"not a newest-round file .*{why}"):
        history.read_latest(path)


def test_a_document_file_from_before_the_columns_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "h.last.marshal"
    doc = _report().to_dict()
    path.write_bytes(marshal.dumps(doc))
    assert history.read_latest(path) == doc
