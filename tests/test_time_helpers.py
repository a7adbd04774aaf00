"""The one helper each for ISO instants and zones (fleetcheck.iso, fleetcheck.zones)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetcheck.iso import iso_utc, parse_iso
from fleetcheck.zones import UnknownZone, zone_named

T = datetime(2026, 11, 29, 6, 21, 0, 123456, tzinfo=UTC)


def test_iso_utc_is_utc_with_z_and_milliseconds() -> None:
    assert iso_utc(T) == "2026-11-29T06:21:00.123Z"
    east = T.astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert iso_utc(east) == "2026-11-29T06:21:00.123Z"
    assert iso_utc(T, "auto") == "2026-11-29T06:21:00.123456Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-29T06:21:00.123Z", datetime(2026, 11, 29, 6, 21, 0, 123000, tzinfo=UTC)),
        ("2026-11-29T01:21:00-05:00", datetime(2026, 11, 29, 6, 21, tzinfo=UTC)),
        ("2026-11-29T06:21:00", datetime(2026, 11, 29, 6, 21)),  # naive stays naive
    ],
)
def test_parse_iso(text: str, expected: datetime) -> None:
    assert parse_iso(text) == expected
    assert (parse_iso(text).tzinfo is None) == (expected.tzinfo is None)


def test_parse_iso_refuses_what_is_not_iso() -> None:
    with pytest.raises(ValueError):
        parse_iso("yesterday")


@given(st.datetimes(timezones=st.just(UTC)))
def test_iso_round_trip_to_the_millisecond(moment: datetime) -> None:
    back = parse_iso(iso_utc(moment))
    assert back == moment.replace(microsecond=moment.microsecond // 1000 * 1000)


@pytest.mark.parametrize("name", ["UTC", "Etc/UTC", "Z"])
def test_utc_names_are_utc(name: str) -> None:
    assert zone_named(name) is UTC


def test_iana_zone() -> None:
    ny = zone_named("America/New_York")
    assert T.astimezone(ny).utcoffset() == timedelta(hours=-5)  # a November instant


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", "EST5EDT/../x"])
def test_unknown_zone(name: str) -> None:
    with pytest.raises(UnknownZone) as e:
        zone_named(name)
    assert str(e.value) == (f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin'")
