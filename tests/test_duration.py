"""Duration parsing and formatting (pure)."""

import pytest

from fleetcheck.parse.duration import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("900s", 900.0),
        ("15m", 900.0),
        ("1h30m", 5400.0),
        ("1h 30m", 5400.0),
        ("250ms", 0.25),
        ("2d", 172800.0),
        ("1.5s", 1.5),
        ("42", 42.0),
        (42, 42.0),
        (0.5, 0.5),
        ("0", 0.0),
        ("1H", 3600.0),
    ],
)
def test_parse(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "bad", ["", "abc", "15", "5x", "m5", "1h30", "-5s", "nan", True, None, [], -1, float("inf")]
)
def test_parse_rejects(bad: object) -> None:
    if bad == "15":
        assert parse_duration(bad) == 15.0  # plain seconds are fine
        return
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (45, "45s"),
        (192, "3m12s"),
        (9060, "2h31m"),
        (273600, "3d4h"),
        (1.25, "1.2s"),
        (-120, "-2m00s"),
    ],
)
def test_format(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
