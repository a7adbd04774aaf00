"""The shared judging vocabulary (fleetcheck.core.judge): pure, so every rule is a table.

The wordings asserted here are the ones the checks' own tests assert through their config
files: a threshold is refused with the same sentence whichever check it belongs to."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from fleetcheck.config import InvalidValue
from fleetcheck.core.judge import (
    AgeLimit,
    Finding,
    Findings,
    check_count,
    check_duration,
    check_share,
    exceeds,
    limit_text,
)
from fleetcheck.core.model import Status

OK, WARN, UNKNOWN, CRIT = Status.OK, Status.WARN, Status.UNKNOWN, Status.CRIT


def _validated(
    validate: Callable[..., None], value: object, kwargs: Mapping[str, object], message: str | None
) -> None:
    """`validate("k", value, **kwargs)` passes (message None) or refuses with `message`."""
    if message is None:
        validate("k", value, **kwargs)
        return
    with pytest.raises(InvalidValue) as e:
        validate("k", value, **kwargs)
    assert (e.value.key, e.value.message) == ("k", message)


@pytest.mark.parametrize(
    ("found", "status", "joined"),
    [
        ([], OK, ""),
        ([(WARN, "a")], WARN, "a"),
        # worst first; equal statuses keep the order found (a stable sort)
        ([(WARN, "a"), (CRIT, "b"), (WARN, "c")], CRIT, "b; a; c"),
        ([(OK, "a"), (UNKNOWN, "b"), (WARN, "c")], UNKNOWN, "b; c; a"),
        ([(WARN, "w"), (UNKNOWN, "u"), (CRIT, "c"), (OK, "o")], CRIT, "c; u; w; o"),
    ],
)
def test_findings_worst_and_joined(
    found: list[tuple[Status, str]], status: Status, joined: str
) -> None:
    findings = Findings()
    for s, text in found:
        findings.add(s, text)
    assert findings.status is status
    assert findings.joined() == joined
    assert len(findings) == len(found) and bool(findings) is bool(found)
    assert list(findings) == [Finding(s, t) for s, t in found]  # kept in the order found


def test_findings_summary_and_evidence() -> None:
    none = Findings()
    assert none.summary("redis 7.2 master", "3 clients") == "redis 7.2 master, 3 clients"
    assert none.evidence() == []
    some = Findings()
    some.warn("ping slow")
    some.crit("memory full")
    assert some.summary("redis 7.2 master", "3 clients") == (
        "redis 7.2 master: memory full; ping slow"
    )
    assert some.evidence() == [
        {"status": "CRIT", "finding": "memory full"},
        {"status": "WARN", "finding": "ping slow"},
    ]
    assert some.joined(", ") == "memory full, ping slow"


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        (0.0, {}, "must be longer than 0s"),
        (-1.0, {}, "must be longer than 0s"),
        (0.001, {}, None),
        (None, {}, None),  # not set
        (0.0, {"at_most": 300}, "must be longer than 0s and at most 5m"),
        (301.0, {"at_most": 300}, "must be longer than 0s and at most 5m"),
        (300.0, {"at_most": 300}, None),
        (120.0, {"positive": False, "at_most": 60}, "must be at most 60s"),
        (0.0, {"positive": False, "at_most": 60}, None),
        (7201.0, {"at_most": 7200}, "must be longer than 0s and at most 2h"),
        (2.0, {"at_most": 1.5}, "must be longer than 0s and at most 1.5s"),
        (float("nan"), {"at_most": 300}, "must be longer than 0s and at most 5m"),
    ],
)
def test_check_duration(value: float | None, kwargs: dict[str, float], message: str | None) -> None:
    _validated(check_duration, value, kwargs, message)


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        (0.0, {}, "must be a share above 0 and at most 1"),
        (1.5, {}, "must be a share above 0 and at most 1"),
        (1.0, {}, None),
        (0.01, {}, None),
        (None, {}, None),
        (2.0, {"of": " of the cap"}, "must be a share of the cap above 0 and at most 1"),
        (0.0, {"zero_ok": True}, None),
        (1.0, {"zero_ok": True}, "must be at least 0 and below 1 (a share)"),
        (-0.1, {"zero_ok": True}, "must be at least 0 and below 1 (a share)"),
    ],
)
def test_check_share(value: float | None, kwargs: dict[str, object], message: str | None) -> None:
    _validated(check_share, value, kwargs, message)


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        (-1, {}, "must be 0 or more"),
        (0, {}, None),
        (None, {}, None),
        (0, {"minimum": 1}, "must be 1 or more"),
        (-0.5, {"zero_means": "off"}, "must be 0 (off) or more"),
        (0, {"minimum": 1, "maximum": 60}, "must be between 1 and 60"),
        (61, {"minimum": 1, "maximum": 60}, "must be between 1 and 60"),
        (60, {"minimum": 1, "maximum": 60}, None),
        (0, {"maximum": 100}, None),
    ],
)
def test_check_count(value: int | None, kwargs: dict[str, object], message: str | None) -> None:
    _validated(check_count, value, kwargs, message)


@pytest.mark.parametrize(
    ("value", "limit", "over"),
    [(3, None, False), (3, 3, False), (4, 3, True), (0.51, 0.5, True), (0, 0, False)],
)
def test_exceeds(value: float, limit: float | None, over: bool) -> None:
    assert exceeds(value, limit) is over


@pytest.mark.parametrize(
    ("limit", "age", "status", "reason"),
    [
        (AgeLimit(600), 600, OK, ""),
        (AgeLimit(600), 601, WARN, " (max_age 10m00s)"),
        (AgeLimit(600), 1800, WARN, " (max_age 10m00s)"),  # crit defaults to 3 x warn
        (AgeLimit(600), 1801, CRIT, " (crit_age 30m00s)"),
        (AgeLimit(600, 900), 901, CRIT, " (crit_age 15m00s)"),
        (AgeLimit(30, None, "max_wait", "crit_wait"), 31, WARN, " (max_wait 30s)"),
    ],
)
def test_age_limit(limit: AgeLimit, age: float, status: Status, reason: str) -> None:
    assert limit.status(age) is status
    assert limit.reason(status) == reason


@pytest.mark.parametrize(
    ("limit", "key", "message"),
    [
        (AgeLimit(0), "max_age", "must be longer than 0s"),
        (AgeLimit(600, 300), "crit_age", "must not be shorter than max_age"),
        (
            AgeLimit(60, 30, "warn_wait", "crit_wait"),
            "crit_wait",
            "must not be shorter than warn_wait",
        ),
    ],
)
def test_age_limit_validation(limit: AgeLimit, key: str, message: str) -> None:
    with pytest.raises(InvalidValue) as e:
        limit.validate()
    assert (e.value.key, e.value.message) == (key, message)
    AgeLimit(600, 600).validate()  # equal levels are allowed


def test_limit_text_writes_durations_as_summaries_do() -> None:
    assert limit_text("max_clock_skew", 60) == "max_clock_skew 1m00s"
    assert limit_text("max_wait", 45) == "max_wait 45s"
