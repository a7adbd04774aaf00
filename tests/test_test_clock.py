"""The test clock itself: FLEETCHECK_TEST_NOW names the instants the DST-sensitive tests run
at, and the patrol's clock (in-process and in a `fleetcheck` subprocess) follows it."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from fleetcheck.core.context import utcnow
from tests.conftest import SEASONS, ShiftedClock, _instants


def test_the_patrol_clock_is_the_test_clock(clock: ShiftedClock) -> None:
    # orders, not timings: the patrol's clock reads between two readings of the test clock
    before = clock.now()
    assert before <= utcnow() <= clock.now()
    code = "from fleetcheck.core.context import utcnow; print(utcnow().timestamp())"
    before = clock.now()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert before.timestamp() <= float(out.stdout) <= clock.now().timestamp()


def test_summer_and_winter_are_on_either_side_of_dst() -> None:
    from zoneinfo import ZoneInfo

    ny = ZoneInfo("America/New_York")
    assert SEASONS["summer"].astimezone(ny).tzname() == "EDT"
    assert SEASONS["winter"].astimezone(ny).tzname() == "EST"


@pytest.mark.parametrize(
    "value, expected",
    [
        ("", [("wallclock", None)]),
        ("summer,winter", [("summer", SEASONS["summer"]), ("winter", SEASONS["winter"])]),
        (
            "2027-03-20T12:00:00Z",
            [("2027-03-20T12:00:00Z", datetime(2027, 3, 20, 12, tzinfo=UTC))],
        ),
    ],
)
def test_instants_named_by_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: list[tuple[str, datetime | None]]
) -> None:
    monkeypatch.setenv("FLEETCHECK_TEST_NOW", value)
    assert _instants() == expected


def test_an_instant_without_offset_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETCHECK_TEST_NOW", "2027-03-20T12:00:00")
    with pytest.raises(pytest.UsageError, match="has no UTC offset"):
        _instants()


def test_no_clock_fixture_no_shift() -> None:
    """Tests that do not take `clock` run on the wall clock."""
    before = datetime.now(UTC)
    assert before <= utcnow() <= datetime.now(UTC)
