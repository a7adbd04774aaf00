"""The format library's rules through the check's evaluate (pure, fixed instants): years and
dates of stamps without them, year and date mix-ups told from zones, one age everywhere, the
trust rule of detection, and the messages for a tail no format reads.

Each test below fails on the code before the format library (checked by running it against
the previous parser): the defect it guards is named in its docstring."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fleetcheck.checks.logs import LogsConfig, LogsFacts

from fleetcheck.config import HostConfig
from fleetcheck.core.hostfacts import LogsHostConfig, LogSpec
from fleetcheck.core.model import Result, Status
from fleetcheck.parse.duration import format_duration
from fleetcheck.parse.logformats import detect
from fleetcheck.parse.logtail import LogFacts
from tests.log_rows import evaluate_one

NOW = datetime(2026, 11, 29, 11, 5, 0, tzinfo=UTC)
CFG = LogsConfig()


def judge(tail: str | bytes, tz: str = "UTC", mtime: datetime = NOW, **spec: object) -> Result:
    data = tail.encode() if isinstance(tail, str) else tail
    lf = LogFacts("/l", "ok", "", mtime.timestamp(), len(data), data)
    host = HostConfig(name="h", ssh="local").with_settings(
        LogsHostConfig(tz=tz, logs=(LogSpec(path="/l", **spec),))  # type: ignore[arg-type]
    )
    return evaluate_one(LogsFacts((lf,), 0.0, None), CFG, host, NOW)


def ev(r: Result) -> dict[str, object]:
    assert isinstance(r.evidence, dict)
    return r.evidence


def syslog(t: datetime, text: str = "box rater[42]: tick") -> str:
    return f"{t:%b} {t.day:2d} {t:%H:%M:%S} {text}\n"


# ---------------------------------------------------------------- years and zones told apart


def test_a_year_old_syslog_file_is_read_as_last_year_not_a_wrong_zone() -> None:
    """The issue's case: a syslog file last written a year before now came back as
    `declared zone looks wrong ... 11:04 UTC = 11:04 UTC` with implied_offset_h 8760. The
    year is the one that puts the newest line at its mtime, and the summary says so."""
    written = NOW.replace(year=2025) - timedelta(minutes=1)
    r = judge("".join(syslog(written - timedelta(seconds=s)) for s in (20, 10, 0)), mtime=written)
    assert r.status is Status.CRIT, r.summary
    assert "zone" not in r.summary.split(";")[0], r.summary
    assert "no year in the line: read as 2025 (by the file's mtime)" in r.summary
    assert r.evidence["last_line_at"] == "2025-11-29T11:04:00Z"
    assert "zone_check" not in ev(r)
    assert r.metrics["age_s"] == (NOW - written).total_seconds()
    assert f"{format_duration(r.metrics['age_s'])} ago" in r.summary


def test_a_line_a_year_off_its_mtime_is_a_year_mix_up() -> None:
    """A stamp with a year, a year before the file's mtime (a writer's clock or template
    wrong by a year): not a zone 8760 h off, a year mix-up; every age from the mtime."""
    line = (NOW - timedelta(minutes=1)).replace(year=2025)
    tail = "".join(f"{line - timedelta(seconds=s):%Y-%m-%d %H:%M:%S} tick\n" for s in (20, 10, 0))
    r = judge(tail, mtime=NOW - timedelta(minutes=1))
    assert r.status is Status.WARN, r.summary
    assert "a year mix-up, not a zone" in r.summary and "365 days apart" in r.summary
    assert "declared zone looks wrong" not in r.summary
    check = ev(r)["date_check"]
    assert isinstance(check, dict) and check["gap_days"] == 365
    assert r.evidence["age_from"] == "mtime" and r.metrics["age_s"] == 60
    assert r.evidence["last_line_at"] == "2026-11-29T11:04:00Z"
    assert ev(r)["line_at"] == "2025-11-29T11:04:00Z"
    assert "by mtime the log is 1m00s old" in r.summary


def test_a_zone_warning_keeps_one_age_everywhere() -> None:
    """After a zone warning the status and summary used the mtime age but metrics.age_s and
    last_line_at still held the misread line time (a 5-hour figure for an alert on age_s)."""
    mtime = NOW - timedelta(seconds=30)
    local = mtime - timedelta(hours=5)  # written in New York, declared UTC
    tail = "".join(f"{local - timedelta(seconds=s):%Y-%m-%d %H:%M:%S} tick\n" for s in (20, 0))
    r = judge(tail, mtime=mtime)
    assert r.status is Status.WARN and "declared zone looks wrong" in r.summary
    assert r.metrics["age_s"] == r.metrics["mtime_age_s"] == 30
    assert r.evidence["last_line_at"] == "2026-11-29T11:04:30Z"
    assert r.evidence["age_from"] == "mtime"
    assert ev(r)["line_age_s"] == 30 + 5 * 3600


def test_the_zone_check_only_names_real_utc_offsets() -> None:
    """A gap of 20 hours is no zone (none is 20 h off UTC): a date mix-up."""
    mtime = NOW - timedelta(seconds=30)
    line = mtime - timedelta(hours=20)
    tail = "".join(f"{line - timedelta(seconds=s):%Y-%m-%d %H:%M:%S} tick\n" for s in (20, 0))
    r = judge(tail, mtime=mtime)
    assert "declared zone looks wrong" not in r.summary
    assert "a date mix-up, not a zone" in r.summary, r.summary


def test_the_assumed_year_is_stated_every_time() -> None:
    """A year-less line read as this year said nothing."""
    r = judge(syslog(NOW - timedelta(minutes=1)))
    assert r.status is Status.OK
    assert "no year in the line: read as 2026 (by the file's mtime)" in r.summary
    assert ev(r)["note"] == "no year in the line: read as 2026 (by the file's mtime)"


def test_a_year_carried_elsewhere_on_the_line_is_used() -> None:
    """`2025.11.09` beside a syslog stamp (Thunderbird's layout) was ignored."""
    t = datetime(2025, 11, 9, 12, 1, 1, tzinfo=UTC)
    tail = "".join(
        syslog(t + timedelta(seconds=s), "dn228 crond[2915]: 2025.11.09 run") for s in (0, 5)
    )
    r = judge(tail, mtime=NOW)  # modified since, not by whole half hours: the line decides
    assert r.status is Status.CRIT, r.summary
    assert r.evidence["age_from"] == "line"
    assert r.evidence["last_line_at"] == "2025-11-09T12:01:06Z"
    assert "year 2025 taken from '2025.11.09' on the line" in r.summary


# ---------------------------------------------------------------- detection's trust rule


def test_a_weak_shape_on_one_line_is_not_trusted() -> None:
    """One `081109 203615` line could be anything: UNKNOWN, naming the shape it nearly was."""
    r = judge("261129 110400 148 INFO dfs.DataNode: x\n")
    assert r.status is Status.UNKNOWN, r.summary
    assert "yymmdd-hhmmss (read 1 of 1 lines, needs 3)" in r.summary


def test_a_date_quoted_in_one_message_is_no_stamp() -> None:
    """An unknown format whose one message quotes an ISO date: never read as the log's time."""
    lines = [f"<{i}> worker 17 step {i} ok" for i in range(10)]
    lines[4] = "<4> worker 17 retrying job from 2026-11-29T01:00:00Z"
    r = judge("\n".join(lines) + "\n")
    assert r.status is Status.UNKNOWN, r.summary
    assert "iso8601 (read 1 of 10 lines, needs 3)" in r.summary


def test_the_most_shared_shape_wins() -> None:
    lines = [f"2026-11-29 11:04:{s:02d},000 INFO job from Nov 28 10:00:00 done" for s in range(5)]
    d = detect(lines)
    assert d.format is not None and d.format.name == "python-logging"
    assert d.hits == 5


def test_the_tail_is_sampled_again_past_a_long_traceback() -> None:
    stamped = [f"2026-11-29 11:04:0{i},000 ERROR job {i} failed" for i in range(3)]
    trace = [f"ValueError 17: frame {i}" for i in range(40)]
    d = detect(stamped + trace)
    assert d.format is not None and d.format.name == "python-logging"


# ---------------------------------------------------------------- messages


def test_an_unrecognised_tail_names_the_closest_formats_and_the_setting_to_add() -> None:
    r = judge("[29.11 11:04:00] tick\n[29.11 11:04:10] tock\n")
    assert r.status is Status.UNKNOWN
    assert r.summary.startswith("file /l: no parseable timestamp in the last 2 lines")
    assert "closest tried: bracket-mm.dd (like " in r.summary, r.summary
    assert "regex = '(?P<ts>\\d\\d\\.\\d\\d \\d\\d:\\d\\d:\\d\\d)'" in r.summary, r.summary
    assert 'format = "%d.%m %H:%M:%S"' in r.summary
    assert r.summary.endswith("last line: '[29.11 11:04:10] tock'")


def test_a_crlf_file_shows_no_carriage_return_in_the_quoted_line() -> None:
    r = judge(b"starting\r\nstill starting\r\n")
    assert r.status is Status.UNKNOWN
    assert "last line: 'still starting'" in r.summary, r.summary
    assert "\\r" not in r.summary


@pytest.mark.parametrize(
    "tail",
    [
        # strace -t: a time of day alone, no thread or level to say what it is
        '08:09:33.814936 execve("/bin/ls", ["ls"]) = 0\n08:09:34.000001 exit_group(0) = ?\n',
        # TCF's minutes:seconds
        "TCF 29:47.191: Server-Properties: {}\nTCF 30:11.475: 0: <--- R 2\n",
        # an unknown layout of numbers
        "17 29 11 04 00 tick\n17 29 11 04 10 tock\n17 29 11 04 20 tack\n",
    ],
)
def test_logs_of_systems_the_library_does_not_know_are_unknown_never_green(tail: str) -> None:
    r = judge(tail)
    assert r.status is Status.UNKNOWN, r.summary
    assert "no parseable timestamp" in r.summary and "closest tried" in r.summary


@pytest.mark.parametrize(
    "line,fmt,utc",
    [
        # PostgreSQL names its zone: read in the declared zone, the name kept as a note
        ("2026-11-29 11:04:00.127 UTC [12347] LOG:  checkpoint starting", "iso8601", "11:04:00"),
        ("2026-11-29 11:04:00,484 [myid:] - INFO  [QuorumPeer] - x", "python-logging", "11:04:00"),
        ("Nov 29 11:04:00 198.18.0.2 haproxy[1]: Proxy started.", "syslog-rfc3164", "11:04:00"),
        ("2026-11-29T11:04:00.835618Z 0 [Note] [MY-012487] [InnoDB] DDL", "iso8601", "11:04:00"),
        ("I, [2026-11-29T11:04:00.497736 #126554]  INFO -- : Completed", "iso8601", "11:04:00"),
        ("(Sun Nov 29 11:04:00 2026) [sssd] [start_service] (0x0100): x", "ctime", "11:04:00"),
    ],
)
def test_logs_of_other_systems_read_right(line: str, fmt: str, utc: str) -> None:
    r = judge((line + "\n") * 3, mtime=NOW - timedelta(minutes=1))
    assert r.status is Status.OK, r.summary
    format_ev = ev(r)["format"]
    assert isinstance(format_ev, dict) and format_ev["name"] == fmt
    assert str(r.evidence["last_line_at"]).startswith(f"2026-11-29T{utc}")


def test_a_zone_abbreviation_that_disagrees_with_the_declared_zone_is_noted() -> None:
    r = judge("2026-11-29 06:04:00 PDT x\n" * 3, tz="America/New_York", mtime=NOW)
    assert "the line names zone PDT, read in America/New_York (EST)" in r.summary


def test_a_stamped_record_between_message_lines_is_read() -> None:
    """The demo's rater log: one ISO-stamped line and one message line (2 lines) is read by
    its stamp, as it always was; a quoted date inside a message still is not a stamp."""
    from fleetcheck.parse.logformats.detect import detect

    d = detect(["2026-03-01T10:00:00Z ack 1", "processed 2538a9f3-5d74-409e-801b-b153cfa1e650"])
    assert d.format is not None and d.format.name.startswith("iso")
    more = ["2026-03-01T10:00:00Z ack 1"] + [f"processed job {i}" for i in range(10)]
    d = detect(more)
    assert d.format is not None and d.format.name.startswith("iso")
    d = detect(["processed job 7 (queued 2026-03-01T10:00:00Z)", "processed 2538a9f3-5d74"])
    assert d.format is None


# ---------------------------------------------------------------- numbers that are no time


def _written_a_minute_ago(lines: list[str]) -> Result:
    return judge("".join(line + "\n" for line in lines), mtime=NOW - timedelta(minutes=1))


@pytest.mark.parametrize(
    "lines",
    [
        # the review's case: order ids in the fourth field gave CRIT "(epoch) on 2001-09-09"
        [f"job {i} order {1000000000 + i} shipped" for i in range(7, 12)],
        # byte sizes of an access log in a leading field, up and down
        [f"198.18.0.9 GET 200 {n} /blob" for n in (1048576000, 2147483000, 1500000000)] * 2,
        # a row counter that only grows, far from any time near the mtime
        [f"worker 3 processed {1200000000 + 977 * i} rows" for i in range(6)],
        # a session id next to an address and port
        [f"conn {i} session {3000000000 + i} from 198.18.0.7:6379 open" for i in range(4)],
    ],
)
def test_ids_sizes_and_counters_in_leading_fields_are_no_epoch_time(lines: list[str]) -> None:
    """Numbers in a line's first fields were read as epoch seconds (the epoch-field pattern
    matched at 0, so each hit "started its line"): a minute-old log came back CRIT at a time
    years ago. Honest UNKNOWN instead, never a wrong time. Fails before the fix (CRIT)."""
    r = _written_a_minute_ago(lines)
    assert r.status is Status.UNKNOWN, r.summary
    assert "no parseable timestamp" in r.summary and "(epoch)" not in r.summary, r.summary
    assert r.evidence["last_line_at"] is None


def test_an_epoch_field_stamp_starts_where_its_digits_do() -> None:
    """The position of a hit is the stamp's own, not the pattern's (which skips fields)."""
    d = detect([f"job 7 order {1800000000 + i} shipped" for i in range(5)])
    tried = {t.fmt.name: t for t in d.tried}
    assert tried["epoch-field"].at_start == 0


def test_an_epoch_field_near_the_mtime_is_still_read() -> None:
    base = int((NOW - timedelta(minutes=1)).timestamp())
    lines = [f"- {base - 20 + 10 * i} 2026.11.29 R02 RAS KERNEL INFO tick" for i in range(3)]
    r = _written_a_minute_ago(lines)
    assert r.status is Status.OK, r.summary
    assert r.evidence["last_line_at"] == "2026-11-29T11:04:00Z"


# ---------------------------------------------------------------- date mix-ups, not any gap


def _iso_offset_tail(newest: datetime) -> str:
    stamped = [newest - timedelta(seconds=s) for s in (20, 10, 0)]
    lines = [f"{t:%Y-%m-%dT%H:%M:%S}+00:00 ERROR job failed" for t in stamped]
    return "\n".join(lines) + "\nTraceback (most recent call last):\n  File x\nValueError: y\n"


@pytest.mark.parametrize(
    "gap", [timedelta(hours=15, minutes=30), timedelta(hours=37.5), timedelta(days=3, hours=7)]
)
def test_a_line_with_its_own_offset_is_judged_by_the_line_whatever_the_gap(
    gap: timedelta,
) -> None:
    """Any gap over 14 h of whole half hours was a "date mix-up" (~1 in 10 random gaps): an
    ISO +00:00 log whose newest stamped line is 15 h 30 m before the mtime came back WARN
    "the line's date looks wrong". A line carrying its offset is believed; the mtime is
    noted. Fails before the fix (WARN, a date mix-up)."""
    mtime = NOW - timedelta(minutes=1)
    line = mtime - gap
    r = judge(_iso_offset_tail(line), mtime=mtime)
    assert "mix-up" not in r.summary and "date_check" not in ev(r), r.summary
    assert r.status is Status.CRIT, r.summary
    assert r.evidence["age_from"] == "line"
    assert r.evidence["last_line_at"] == f"{line:%Y-%m-%dT%H:%M:%S}Z"
    assert r.metrics["age_s"] == (NOW - line).total_seconds()
    assert ev(r)["mtime_after_line_s"] == gap.total_seconds()
    assert f"file modified {format_duration(gap.total_seconds())} after" in r.summary


@pytest.mark.parametrize("gap", [timedelta(hours=15, minutes=30), timedelta(days=3, minutes=7)])
def test_a_gap_no_real_zone_and_whole_days_explain_is_no_date_mix_up(gap: timedelta) -> None:
    """A zone-free line 15 h 30 m off its mtime: no zone is 15.5 h off UTC and no day shift
    plus a real offset (+08:30 is none) makes it; 3 days and 7 minutes is no zone's either.
    Judged by the line. The 15.5 h case fails before the fix (a date mix-up)."""
    mtime = NOW - timedelta(minutes=1)
    line = mtime - gap
    tail = "".join(f"{line - timedelta(seconds=s):%Y-%m-%d %H:%M:%S} tick\n" for s in (20, 0))
    r = judge(tail, mtime=mtime)
    assert "mix-up" not in r.summary and "declared zone" not in r.summary, r.summary
    assert r.status is Status.CRIT and r.evidence["age_from"] == "line", r.summary


def test_a_zone_free_line_a_day_off_its_mtime_is_a_date_mix_up() -> None:
    mtime = NOW - timedelta(minutes=1)
    line = mtime - timedelta(days=1)
    tail = "".join(f"{line - timedelta(seconds=s):%Y-%m-%d %H:%M:%S} tick\n" for s in (20, 0))
    r = judge(tail, mtime=mtime)
    assert r.status is Status.WARN, r.summary
    assert "1 days apart (a date mix-up, not a zone)" in r.summary, r.summary
    check = ev(r)["date_check"]
    assert isinstance(check, dict) and check["gap_days"] == 1
    assert r.evidence["age_from"] == "mtime" and r.metrics["age_s"] == 60


def test_a_year_less_line_a_day_before_its_mtime_is_a_date_mix_up() -> None:
    """A syslog line dated the day before the file was written (its clock's date wrong)."""
    mtime = NOW - timedelta(minutes=1)
    r = judge(syslog(mtime - timedelta(days=1)), mtime=mtime)
    assert r.status is Status.WARN, r.summary
    assert "a date mix-up, not a zone" in r.summary, r.summary
    check = ev(r)["date_check"]
    assert isinstance(check, dict) and check["gap_days"] == 1
