"""Time zones by IANA name: the one place a zone is built. UTC and its aliases are
`datetime.UTC`; every other name must be in this machine's tzdata (the `tzdata` wheel)."""

from __future__ import annotations

import contextlib
from datetime import UTC, tzinfo
from functools import cache
from pathlib import Path

UTC_NAMES = ("UTC", "Etc/UTC", "Z")


class UnknownZone(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin'")
        self.name = name


def zone_named(name: str) -> tzinfo:
    """The zone called `name`; UnknownZone when there is none by that name."""
    if name in UTC_NAMES:
        return UTC
    # imported here: zoneinfo reads sysconfig at import (~5 ms a process), and a fleet in
    # UTC (or a broker-only patrol that validates such a config) needs none of it
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UnknownZone(name) from None


@cache
def canonical_zones() -> tuple[str, ...]:
    """The canonical IANA zone names (tzdata.zi's `Z` entries, never its links) a suggestion
    names; every zone this machine knows (links included) when there is no tzdata.zi."""
    text = _tzdata_zi()
    if text is None:
        from zoneinfo import available_timezones

        return tuple(sorted(available_timezones()))
    names = {line.split()[1] for line in text.splitlines() if line.startswith("Z ")}
    return tuple(sorted(names))


def _tzdata_zi() -> str | None:
    with contextlib.suppress(ImportError, OSError):
        from importlib.resources import files

        return files("tzdata").joinpath("zoneinfo", "tzdata.zi").read_text(encoding="utf-8")
    for path in ("/usr/share/zoneinfo/tzdata.zi", "/usr/lib/zoneinfo/tzdata.zi"):
        with contextlib.suppress(OSError):
            return Path(path).read_text(encoding="utf-8")
    return None
