"""Table-driven tests of the timestamp parser: formats, offsets, zones, DST, missing years."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from fleetcheck.parse.timestamps import (
    FormatError,
    find_stamp,
    find_with,
    format_regex,
    resolve,
)
from fleetcheck.zones import zone_named

NOW = datetime(2026, 11, 29, 8, 0, 0, tzinfo=UTC)


def utc(*a: int) -> datetime:
    return datetime(*a, tzinfo=UTC)  # type: ignore[misc]


# line, zone declared for the host, expected UTC, expected kind
CASES = [
    # ISO 8601 / RFC 3339
    ("2026-11-29T02:21:00Z worker up", "America/New_York", utc(2026, 11, 29, 2, 21), "iso8601"),
    ("2026-11-29T02:21:00.5+05:30 x", "UTC", utc(2026, 11, 28, 20, 51, 0, 500000), "iso8601"),
    ("2026-11-29 02:21:00 -0500 x", "UTC", utc(2026, 11, 29, 7, 21), "iso8601"),
    ("2026-11-29T02:21:00 no offset", "America/New_York", utc(2026, 11, 29, 7, 21), "iso8601"),
    ("ts=2026-11-29T02:21:00+00:00 level=info", "Asia/Tokyo", utc(2026, 11, 29, 2, 21), "iso8601"),
    (
        '{"time": "2026-11-29T02:21:00.123456789Z"}',
        "UTC",
        utc(2026, 11, 29, 2, 21, 0, 123456),
        "iso8601",
    ),
    ("2026-11-29 02:21:00 UTC something", "America/Chicago", utc(2026, 11, 29, 2, 21), "iso8601"),
    # Python logging default
    (
        "2026-11-29 02:21:00,123 ERROR boom",
        "America/New_York",
        utc(2026, 11, 29, 7, 21, 0, 123000),
        "iso8601",
    ),
    # Go log package
    ("2026/11/29 02:21:00 listening", "Europe/Berlin", utc(2026, 11, 29, 1, 21), "iso8601"),
    # classic syslog, year inferred
    (
        "Nov 29 02:21:00 box rater[42]: tick",
        "America/New_York",
        utc(2026, 11, 29, 7, 21),
        "syslog-rfc3164",
    ),
    ("Nov  9 13:51:00 box kernel: x", "Asia/Kolkata", utc(2026, 11, 9, 8, 21), "syslog-rfc3164"),
    # redis-server
    (
        "12345:M 29 Nov 2026 02:21:00.123 * Ready",
        "America/New_York",
        utc(2026, 11, 29, 7, 21, 0, 123000),
        "day-month-year",
    ),
    # RFC 2822 / HTTP date
    (
        "Date: Sun, 29 Nov 2026 02:21:00 GMT",
        "Asia/Tokyo",
        utc(2026, 11, 29, 2, 21),
        "day-month-year",
    ),
    # nginx / Apache access log
    (
        '198.18.0.9 - - [29/Nov/2026:02:21:00 -0500] "GET / HTTP/1.1" 200',
        "UTC",
        utc(2026, 11, 29, 7, 21),
        "common-log",
    ),
    # ctime / Apache error log (the syslog pattern inside it must not win)
    (
        "[Sun Nov 29 02:21:00.123456 2026] [core:error] x",
        "UTC",
        utc(2026, 11, 29, 2, 21, 0, 123456),
        "ctime",
    ),
    ("Sun Nov 29 02:21:00 2026 started", "America/New_York", utc(2026, 11, 29, 7, 21), "ctime"),
    # epoch seconds / milliseconds (zone irrelevant)
    ("1795909260 tick", "America/New_York", utc(2026, 11, 28, 23, 41), "epoch"),
    ("[1795909260.25] tick", "Asia/Kolkata", utc(2026, 11, 28, 23, 41, 0, 250000), "epoch"),
    ("1795909260000 tick", "UTC", utc(2026, 11, 28, 23, 41), "epoch"),
]


@pytest.mark.parametrize("line,zone,expected,kind", CASES)
def test_recognised_formats(line: str, zone: str, expected: datetime, kind: str) -> None:
    stamp = find_stamp(line)
    assert stamp is not None, line
    assert stamp.kind == kind
    r = resolve(stamp, zone_named(zone), zone, NOW)
    assert r.utc == expected


@pytest.mark.parametrize(
    "line",
    [
        "no time here",
        "Traceback (most recent call last):",
        '  File "x.py", line 2026, in <module>',
        "version 1.2.3 build 20261129",
        "12:30 lunch",  # a bare time is not a timestamp
        "2026-13-45T99:99:99 nonsense",
        "123456789012 not an epoch (12 digits)",
        "4102444800 epoch past 2100",
        "\x00\x01\x02binary\xff",
    ],
)
def test_lines_without_a_timestamp(line: str) -> None:
    assert find_stamp(line) is None


def test_leftmost_timestamp_wins() -> None:
    s = find_stamp("2026-11-29T02:21:00Z retrying job from 2026-11-28T01:00:00Z")
    assert s is not None and s.wall == datetime(2026, 11, 29, 2, 21)


# ---------------------------------------------------------------- the year of syslog lines


@pytest.mark.parametrize(
    "line,now,year",
    [
        ("Dec 31 23:59:00 x", datetime(2027, 1, 1, 0, 5, tzinfo=UTC), 2026),  # last year
        ("Jan  1 00:01:00 x", datetime(2026, 12, 31, 23, 50, tzinfo=UTC), 2027),  # <1 day ahead
        ("Jun  1 00:00:00 x", datetime(2026, 11, 29, tzinfo=UTC), 2026),
        ("Dec  1 00:00:00 x", datetime(2026, 11, 29, tzinfo=UTC), 2025),  # 2 days ahead: no
        ("Feb 29 10:00:00 x", datetime(2028, 3, 1, tzinfo=UTC), 2028),  # leap day
        ("Feb 29 10:00:00 x", datetime(2029, 3, 1, tzinfo=UTC), 2028),  # nearest leap year
    ],
)
def test_syslog_year_is_nearest_and_never_more_than_a_day_ahead(
    line: str, now: datetime, year: int
) -> None:
    stamp = find_stamp(line)
    assert stamp is not None and not stamp.year_known
    r = resolve(stamp, UTC, "UTC", now)
    assert r.utc.year == year
    assert r.utc <= now + timedelta(days=1)


# ---------------------------------------------------------------- DST


NY = ZoneInfo("America/New_York")


def test_repeated_hour_without_hint_is_the_first_occurrence_and_says_so() -> None:
    stamp = find_stamp("2026-11-01 01:30:00 tick")
    assert stamp is not None
    r = resolve(stamp, NY, "America/New_York", NOW)
    assert r.utc == utc(2026, 11, 1, 5, 30)  # EDT
    assert r.note is not None and "occurs twice in America/New_York" in r.note
    assert "first occurrence, EDT" in r.note


def test_repeated_hour_uses_the_mtime_to_pick_the_occurrence() -> None:
    stamp = find_stamp("2026-11-01 01:30:00 tick")
    assert stamp is not None
    mtime = utc(2026, 11, 1, 6, 31)  # 01:31 EST: written in the second pass
    r = resolve(stamp, NY, "America/New_York", NOW, hint=mtime)
    assert r.utc == utc(2026, 11, 1, 6, 30)
    assert r.note is not None and "second occurrence, EST" in r.note
    assert r.local_label == "01:30:00 EST"
    # an mtime in the first pass picks the first
    r = resolve(stamp, NY, "America/New_York", NOW, hint=utc(2026, 11, 1, 5, 31))
    assert r.utc == utc(2026, 11, 1, 5, 30) and "first occurrence" in (r.note or "")


def test_skipped_hour_uses_the_offset_before_the_change_and_says_so() -> None:
    stamp = find_stamp("2026-03-08 02:30:00 tick")
    assert stamp is not None
    r = resolve(stamp, NY, "America/New_York", NOW)
    assert r.utc == utc(2026, 3, 8, 7, 30)
    assert r.note is not None and "does not exist in America/New_York" in r.note


def test_ordinary_times_have_no_note() -> None:
    stamp = find_stamp("2026-11-29 02:21:00 tick")
    assert stamp is not None
    r = resolve(stamp, NY, "America/New_York", NOW)
    assert r.note is None and r.local_label == "02:21:00 EST"


def test_explicit_offset_beats_the_declared_zone() -> None:
    stamp = find_stamp("2026-11-29T02:21:00+05:30 x")
    assert stamp is not None
    r = resolve(stamp, NY, "America/New_York", NOW)
    assert r.zone.startswith("offset +0530")
    assert r.local_label == "02:21:00 +0530"


# ---------------------------------------------------------------- overrides


@pytest.mark.parametrize(
    "fmt,line,zone,expected",
    [
        (
            "%d.%m.%Y %H:%M:%S",
            "[29.11.2026 02:21:00] rater tick",
            "Europe/Berlin",
            utc(2026, 11, 29, 1, 21),
        ),
        ("%Y%m%d-%H%M%S", "job 20261129-022100 done", "UTC", utc(2026, 11, 29, 2, 21)),
        (
            "%m/%d %I:%M:%S %p",
            "11/29 02:21:00 AM tick",
            "America/New_York",
            utc(2026, 11, 29, 7, 21),
        ),
        (
            "%Y-%m-%d %H:%M:%S %z",
            "at 2026-11-29 02:21:00 +0100 ok",
            "UTC",
            utc(2026, 11, 29, 1, 21),
        ),
    ],
)
def test_format_override(fmt: str, line: str, zone: str, expected: datetime) -> None:
    stamp = find_with(line, fmt, None)
    assert stamp is not None
    assert resolve(stamp, zone_named(zone), zone, NOW).utc == expected


def test_regex_override_with_and_without_format() -> None:
    rx = re.compile(r"when=(?P<ts>\S+ \S+)")
    s = find_with("level=info when=2026-11-29 02:21:00 msg=x", None, rx)
    assert s is not None and s.wall == datetime(2026, 11, 29, 2, 21)
    rx2 = re.compile(r"@(?P<ts>\d+/\d+/\d+-\d+:\d+:\d+)")
    s = find_with("tick @29/11/2026-02:21:00", "%d/%m/%Y-%H:%M:%S", rx2)
    assert s is not None and s.wall == datetime(2026, 11, 29, 2, 21)
    assert find_with("no match", None, rx) is None


@pytest.mark.parametrize(
    "fmt,message",
    [
        ("%Y-%m-%d %H:%M:%S %Z", "%Z"),
        ("%Y-%m-%d %H:%M:%S %Q", "unsupported directive %Q"),
        ("%Y-%m-%d", "no hour"),
        ("%H:%M:%S", "no day"),
        ("%Y-%m-%d %H:%M:%S %", "lone '%'"),
    ],
)
def test_bad_formats_are_refused(fmt: str, message: str) -> None:
    with pytest.raises(FormatError, match=re.escape(message)):
        format_regex(fmt)
