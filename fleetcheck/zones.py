"""Time zones by IANA name: the one place a zone is built. UTC and its aliases are
`datetime.UTC`; every other name must be in this machine's tzdata (the `tzdata` wheel)."""

from __future__ import annotations

from datetime import UTC, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

UTC_NAMES = ("UTC", "Etc/UTC", "Z")


class UnknownZone(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin'")
        self.name = name


def zone_named(name: str) -> tzinfo:
    """The zone called `name`; UnknownZone when there is none by that name."""
    if name in UTC_NAMES:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UnknownZone(name) from None
