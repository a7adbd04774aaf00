"""The judging vocabulary every check shares: findings, the worst of them, the summary they
make, and the standard threshold kinds (a duration limit, an age limit with warn and crit, a
share, a count) validated and written the same way in every check, so a summary joins the
same way and a bad threshold is refused with the same sentence whichever check it belongs to
(the key, each check's own, is an argument). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from fleetcheck.config import InvalidValue
from fleetcheck.core.model import Status
from fleetcheck.core.model import worst as worst  # re-exported: the checks judge with it

# ---------------------------------------------------------------- findings


@dataclass(frozen=True)
class Finding:
    """One thing a check found, with the status it earns on its own."""

    status: Status
    text: str


class Findings:
    """The findings of one row, in the order they were found. The row's status is the worst
    of them (OK when there are none); its summary lists them worst first, ties in the order
    found, joined by "; "."""

    def __init__(self, items: Iterable[Finding] = ()) -> None:
        self._items = list(items)

    def add(self, status: Status, text: str) -> None:
        self._items.append(Finding(status, text))

    def warn(self, text: str) -> None:
        self.add(Status.WARN, text)

    def crit(self, text: str) -> None:
        self.add(Status.CRIT, text)

    def __iter__(self) -> Iterator[Finding]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    @property
    def status(self) -> Status:
        return worst(f.status for f in self._items)

    def worst_first(self) -> list[Finding]:
        """Most severe first; a stable sort, so equal statuses keep the order found."""
        return sorted(self._items, key=lambda f: -f.status.rank)

    def joined(self, sep: str = "; ") -> str:
        return sep.join(f.text for f in self.worst_first())

    def summary(self, head: str, ok_tail: str) -> str:
        """`HEAD: FINDING; FINDING` when there are findings, else `HEAD, OK_TAIL`."""
        if not self._items:
            return f"{head}, {ok_tail}"
        return f"{head}: {self.joined()}"

    def evidence(self) -> list[dict[str, str]]:
        """The findings worst first as the evidence lists them."""
        return [{"status": f.status.label, "finding": f.text} for f in self.worst_first()]


# ---------------------------------------------------------------- thresholds: validation


def _seconds_text(seconds: float) -> str:
    """A bound as the messages write it: `0s`, `60s`, `5m`, `1h`."""
    if seconds > 60 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds > 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def check_duration(
    key: str, value: float | None, *, positive: bool = True, at_most: float | None = None
) -> None:
    """A duration threshold (None: not set): longer than 0s unless `positive` is off, and at
    most `at_most` seconds when that is given."""
    if value is None:
        return
    low = positive and not value > 0  # written so that NaN is refused too
    high = at_most is not None and not value <= at_most
    if not (low or high):
        return
    words = []
    if positive:
        words.append("longer than 0s")
    if at_most is not None:
        words.append(f"at most {_seconds_text(at_most)}")
    raise InvalidValue(key, "must be " + " and ".join(words))


def check_share(key: str, value: float | None, *, of: str = "", zero_ok: bool = False) -> None:
    """A share (None: not set). Warning shares are above 0 and at most 1 (`of` names what it
    is a share of: " of the cap"); a crit share that may be 0 is at least 0 and below 1."""
    if value is None:
        return
    if zero_ok:
        if not 0 <= value < 1:
            raise InvalidValue(key, "must be at least 0 and below 1 (a share)")
    elif not 0 < value <= 1:
        raise InvalidValue(key, f"must be a share{of} above 0 and at most 1")


def check_count(
    key: str,
    value: int | float | None,
    *,
    minimum: int = 0,
    maximum: int | None = None,
    zero_means: str | None = None,
) -> None:
    """A count or cap (None: not set): `minimum` or more, or between the two bounds.
    `zero_means` says what 0 does when it switches the threshold off ("off")."""
    if value is None:
        return
    if maximum is not None:
        if not minimum <= value <= maximum:
            raise InvalidValue(key, f"must be between {minimum} and {maximum}")
    elif value < minimum:
        zero = f" ({zero_means})" if zero_means else ""
        raise InvalidValue(key, f"must be {minimum}{zero} or more")


# ---------------------------------------------------------------- thresholds: judging


def exceeds(value: float, limit: float | None) -> bool:
    """Whether `value` is past a limit that may be unset (None: nothing is past it)."""
    return limit is not None and value > limit


def limit_text(key: str, seconds: float) -> str:
    """A duration limit as every summary writes it: `max_age 10m00s`."""
    from fleetcheck.parse.duration import format_duration

    return f"{key} {format_duration(seconds)}"


@dataclass(frozen=True)
class AgeLimit:
    """An age limit with a warn and a crit level: older than `warn` WARN, older than `crit`
    CRIT. `crit` None: three times `warn` (what `crit_age` defaults to)."""

    warn: float
    crit: float | None = None
    warn_key: str = "max_age"
    crit_key: str = "crit_age"

    def validate(self) -> None:
        check_duration(self.warn_key, self.warn)
        if self.crit is not None and self.crit < self.warn:
            raise InvalidValue(self.crit_key, f"must not be shorter than {self.warn_key}")

    @property
    def crit_at(self) -> float:
        return self.crit if self.crit is not None else 3 * self.warn

    def status(self, age: float) -> Status:
        if age > self.crit_at:
            return Status.CRIT
        if age > self.warn:
            return Status.WARN
        return Status.OK

    def reason(self, status: Status) -> str:
        """` (crit_age 30m00s)` for CRIT, ` (max_age 10m00s)` for WARN, else empty."""
        if status is Status.CRIT:
            return f" ({limit_text(self.crit_key, self.crit_at)})"
        if status is Status.WARN:
            return f" ({limit_text(self.warn_key, self.warn)})"
        return ""
