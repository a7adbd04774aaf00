"""The log corpus (tests/log_corpus/): every format of the library read right with no
`format`/`regex`, live (a minute old: OK) and stale (CRIT), and with the declared zone wrong by
4 hours (WARN naming the zone) when the lines carry no offset of their own.

Each file's newest line has a known true instant (index.toml); every test judges at a fixed
instant derived from it, never today's date, so nothing here depends on the season or the
year the suite runs in. The files are read through the check's real shell fragment by
/bin/sh, as on a host, with the file's mtime set to its newest line. Whether a file's lines
carry their own offset (or epoch) is recorded in index.toml, never taken from the output.
JSON lines are in the corpus (format "json"); journald is not: it is read from a real
journal by journalctl in tests/test_logs_sources_lab.py."""

from __future__ import annotations

import os
import subprocess
import tomllib
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from fleetcheck.checks.logs import LogsConfig, LogsFacts, log_fragment

from fleetcheck.config import HostConfig
from fleetcheck.core.hostfacts import LogsHostConfig, LogSpec
from fleetcheck.core.model import Result, Status
from fleetcheck.parse.duration import format_duration
from fleetcheck.parse.logformats import BY_NAME, FORMATS
from fleetcheck.parse.logtail import parse_log_output
from fleetcheck.zones import canonical_zones, zone_named
from tests.log_rows import evaluate_one

CORPUS = Path(__file__).parent / "log_corpus"
INDEX = tomllib.loads((CORPUS / "index.toml").read_text())
CFG = LogsConfig()


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def read_corpus(name: str, tz: str, now: datetime, mtime: datetime, tmp: Path) -> Result:
    """The corpus file `name` on this machine with `mtime`, read by the real fragment and
    judged at `now` by a host declaring `tz`."""
    path = tmp / name
    path.write_bytes((CORPUS / name).read_bytes())
    os.utime(path, (mtime.timestamp(), mtime.timestamp()))
    spec = LogSpec(path=str(path))
    out = subprocess.run(
        ["/bin/sh", "-c", log_fragment(spec)], capture_output=True, check=True
    ).stdout
    host = HostConfig(name="h", ssh="local").with_settings(LogsHostConfig(tz=tz, logs=(spec,)))
    facts = LogsFacts((parse_log_output(str(path), 0, out),), 0.0, None)
    return evaluate_one(facts, CFG, host, now)


def log_evidence(r: Result) -> dict[str, object]:
    assert isinstance(r.evidence, dict)
    return r.evidence


FILES = sorted(INDEX)


JSON = "json"  # a JSON-lines sample: read by parse/jsonlog.py, not the text library


def test_the_corpus_covers_every_format_of_the_library() -> None:
    assert {INDEX[f]["format"] for f in FILES} - {JSON} == {f.name for f in FORMATS}
    assert any(INDEX[f]["format"] == JSON for f in FILES)
    assert all(isinstance(INDEX[f]["has_offset"], bool) for f in FILES)


@pytest.mark.parametrize("name", FILES)
def test_read_right_and_live(name: str, tmp_path: Path) -> None:
    """A minute after its newest line: OK, the true instant, the format named, the stated
    assumption for a stamp without a year or a date."""
    entry = INDEX[name]
    newest = instant(entry["newest"])
    r = read_corpus(name, entry["zone"], newest + timedelta(seconds=60), newest, tmp_path)
    assert r.status is Status.OK, r.summary
    ev = log_evidence(r)
    if entry["format"] == JSON:
        assert ev["source"] == "json" and "format" not in ev, r.summary
    else:
        fmt = ev["format"]
        assert isinstance(fmt, dict) and fmt["name"] == entry["format"], (fmt, r.summary)
    assert instant(str(r.evidence["last_line_at"])) == newest, r.summary
    assert r.evidence["age_from"] == "line"
    assert r.metrics["age_s"] == 60
    assert f"{format_duration(r.metrics['age_s'])} ago" in r.summary
    quirks = BY_NAME[entry["format"]].quirks if entry["format"] != JSON else ()
    if "no year" in quirks:
        assert f"no year in the line: read as {newest.year} (by the file's mtime)" in r.summary
    if "no date" in quirks:
        local = newest.astimezone(zone_named(entry["zone"]))
        assert f"no date in the line: read as {local:%Y-%m-%d} (by the file's mtime)" in r.summary
    assert "\r" not in str(ev["last_line"])


@pytest.mark.parametrize("name", FILES)
def test_stale_is_crit(name: str, tmp_path: Path) -> None:
    entry = INDEX[name]
    newest = instant(entry["newest"])
    r = read_corpus(name, entry["zone"], newest + timedelta(hours=2), newest, tmp_path)
    assert r.status is Status.CRIT, r.summary
    assert instant(str(r.evidence["last_line_at"])) == newest
    assert r.metrics["age_s"] == 7200
    assert f"{format_duration(7200)} ago" in r.summary and "crit_age" in r.summary


def four_hours_off(zone: str, at: datetime) -> str:
    """A canonical zone whose offset at `at` is 4 h off `zone`'s (east when one exists)."""
    true = at.astimezone(zone_named(zone)).utcoffset()
    assert true is not None
    for delta in (timedelta(hours=4), timedelta(hours=-4)):
        for name in canonical_zones():
            if "/" in name and at.astimezone(zone_named(name)).utcoffset() == true + delta:
                return name
    raise AssertionError(f"no zone 4 h off {zone}")


@pytest.mark.parametrize("name", FILES)
def test_zone_wrong_by_four_hours(name: str, tmp_path: Path) -> None:
    """Declared 4 h off the writer's zone: WARN naming the declared zone and the zone that
    fits, every age from the mtime. Lines with an offset or an epoch do not depend on the
    declared zone: they read the same instant, OK."""
    entry = INDEX[name]
    newest = instant(entry["newest"])
    wrong = four_hours_off(entry["zone"], newest)
    now = newest + timedelta(seconds=60)
    r = read_corpus(name, wrong, now, newest, tmp_path)
    ev = log_evidence(r)
    if entry["has_offset"]:  # from the index, not from what the check printed
        assert str(ev["zone"]).startswith("offset") or ev["zone"] == "epoch", ev["zone"]
        assert r.status is Status.OK, r.summary
        assert instant(str(r.evidence["last_line_at"])) == newest
        return
    assert not str(ev["zone"]).startswith("offset") and ev["zone"] != "epoch", ev["zone"]
    assert r.status is Status.WARN, r.summary
    assert "declared zone looks wrong" in r.summary and wrong in r.summary, r.summary
    check = ev["zone_check"]
    assert isinstance(check, dict)
    true_offset = newest.astimezone(zone_named(entry["zone"])).utcoffset()
    assert true_offset is not None
    assert check["implied_offset_h"] == true_offset.total_seconds() / 3600
    suggested = check["suggested"]
    assert isinstance(suggested, list) and suggested, r.summary
    assert set(suggested) <= {*canonical_zones(), "UTC"}
    for zone in suggested:
        assert newest.astimezone(zone_named(zone)).utcoffset() == true_offset
        assert zone in r.summary
    # one age everywhere: the mtime's (whole seconds, as stat prints it), the summary's too
    mtime = newest.replace(microsecond=0)
    assert r.evidence["age_from"] == "mtime"
    assert r.metrics["age_s"] == r.metrics["mtime_age_s"] == round((now - mtime).total_seconds(), 3)
    assert instant(str(r.evidence["last_line_at"])) == mtime
    assert f"by mtime the log is {format_duration(r.metrics['age_s'])} old" in r.summary
    assert instant(str(ev["line_at"])) != newest  # the misread time is kept, as evidence


def test_zone_suggestions_are_canonical_names() -> None:
    """The second suggestion for UTC-5 was America/Atikokan, a tzdata alias of Panama."""
    assert "America/Atikokan" not in canonical_zones()
    assert "America/Panama" in canonical_zones()
    assert "US/Eastern" not in canonical_zones()


def test_the_sample_line_of_every_format_is_read_by_it() -> None:
    from fleetcheck.parse.logformats import find_in

    for fmt in FORMATS:
        assert find_in(fmt, fmt.sample) is not None, fmt.name
