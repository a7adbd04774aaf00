"""The zones a log's times are read in: the host's declared (or asked) zone, how a time is
written in a summary, and the cross-check of a zone-free line against the file's mtime that
catches a wrongly declared zone (with the zones that would fit instead)."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from fleetcheck.config import HostConfig
from fleetcheck.core.hostfacts import LogsHostConfig

if TYPE_CHECKING:
    from fleetcheck.checks.logs.config import LogsFacts

    from fleetcheck.parse.timestamps import Resolved, Stamp

ZONE_TOLERANCE_S = 90.0  # how far from a whole half hour a line/mtime gap may be
UTC_OFFSETS = (timedelta(hours=-12), timedelta(hours=14))  # the offsets zones really have


def zone_for(host: HostConfig, facts: LogsFacts) -> tuple[tzinfo | None, str, str | None]:
    """(zone, its name, why there is none)."""
    from fleetcheck.zones import zone_named

    tz = host.settings(LogsHostConfig).tz
    if tz == "auto":
        z = facts.zone
        if z is None or z.name is None:
            why = z.how if z else "no answer"
            return None, "auto", f"tz = auto but the host's zone could not be found ({why})"
        return zone_named(z.name), z.name, None
    if tz is None:  # config refuses log files without tz; only a hand-made host gets here
        return None, "-", "no tz configured for this host"
    return zone_named(tz), tz, None


# zones most operators run in, first among those that fit (all canonical IANA names)
PREFERRED_ZONES = """
    America/New_York America/Chicago America/Denver America/Los_Angeles Europe/London
    Europe/Berlin Europe/Moscow Asia/Kolkata Asia/Shanghai Asia/Tokyo Australia/Sydney
    America/Toronto America/Phoenix America/Anchorage America/Halifax America/Sao_Paulo
    America/Mexico_City Europe/Paris Europe/Dublin Europe/Athens Europe/Istanbul
    Africa/Johannesburg Africa/Lagos Asia/Dubai Asia/Singapore Asia/Seoul Australia/Perth
    Pacific/Auckland Pacific/Honolulu
""".split()


def _suggest_zones(offset: timedelta, at: datetime, declared: str) -> list[str]:
    from fleetcheck.zones import canonical_zones, zone_named

    if offset == timedelta(0):
        return ["UTC"]
    region = declared.split("/", 1)[0] if "/" in declared else ""
    matches = []
    for name in canonical_zones():
        if "/" not in name or name.startswith(("Etc/", "SystemV/", "posix", "right")):
            continue
        try:
            if at.astimezone(zone_named(name)).utcoffset() == offset:
                matches.append(name)
        except Exception:
            continue
    rank = {name: i for i, name in enumerate(PREFERRED_ZONES)}
    matches.sort(key=lambda n: (rank.get(n, len(rank)), not n.startswith(region + "/"), n))
    return matches[:2]


def time_label(r: Resolved) -> str:
    """`02:21:00 EST = 07:21:00 UTC`; one time when the writer's zone is UTC itself."""
    if r.zone == "epoch":
        return f"{r.utc:%H:%M:%S} UTC (epoch)"
    if r.local.utcoffset() == timedelta(0) and (r.local.tzname() or "UTC").startswith("UTC"):
        return f"{r.utc:%H:%M:%S} UTC"
    return f"{r.local_label} = {r.utc:%H:%M:%S} UTC"


def _implied_offset(halves: int, newest: Resolved) -> timedelta:
    return (newest.local.utcoffset() or timedelta(0)) - timedelta(seconds=halves * 1800)


def zone_offset_halves(stamp: Stamp, newest: Resolved, mtime: datetime) -> int:
    """How many half hours the line's UTC is off the zone-free mtime, when that gap is a
    whole number of half hours, the line carries no offset or epoch of its own and the zone
    it implies is a real one (UTC-12 to UTC+14): the declared zone is then wrong by that
    much. 0: no sign of that (a gap of whole days is a date mix-up, see date_shift_s)."""
    if stamp.offset is not None or stamp.kind == "epoch":
        return 0
    gap = (mtime - newest.utc).total_seconds()
    halves = round(gap / 1800)  # a whole number of them, within ZONE_TOLERANCE_S
    if not halves or abs(gap - halves * 1800) > ZONE_TOLERANCE_S:
        return 0
    low, high = UTC_OFFSETS
    return halves if low <= _implied_offset(halves, newest) <= high else 0


# the UTC offsets zones really have, in hours: every whole hour from -12 to +14 and the
# half and quarter hours of India, Nepal, Iran, Newfoundland, Chatham, Lord Howe and others
REAL_OFFSETS_H = frozenset(
    [float(h) for h in range(-12, 15)]
    + [-9.5, -3.5, -2.5, 3.5, 4.5, 5.5, 5.75, 6.5, 8.75, 9.5, 10.5, 12.75, 13.75]
)
DAY_S = 86400


def date_shift_s(stamp: Stamp, newest: Resolved, mtime: datetime) -> float:
    """The line-to-mtime gap in seconds when the line's date is wrong (a year, a month,
    days), else 0: the gap, less a zone error that leaves a real UTC offset (or none), is a
    whole number of days (at least one) within ZONE_TOLERANCE_S. A stamp carrying its own
    offset, or an epoch, is never distrusted for a gap alone: a writer that stopped long ago
    in a file touched since is judged by its line (any whole half hours passed ~1 in 10)."""
    if stamp.kind == "epoch" or stamp.offset is not None:
        return 0.0
    gap = (mtime - newest.utc).total_seconds()
    declared_h = (newest.local.utcoffset() or timedelta(0)).total_seconds() / 3600
    days = round(gap / DAY_S)
    for k in (days - 1, days, days + 1):
        if k == 0:
            continue
        zone_error = gap - k * DAY_S
        quarters = round(zone_error / 900)
        if abs(zone_error - quarters * 900) > ZONE_TOLERANCE_S:
            continue
        if quarters == 0 or declared_h - quarters / 4 in REAL_OFFSETS_H:
            return float(k * DAY_S + quarters * 900)
    return 0.0


def date_mixup(gap_s: float, newest: Resolved, mtime: datetime) -> tuple[str, dict[str, Any]]:
    """The summary and evidence of a line whose date is off the mtime by whole days."""
    from fleetcheck.iso import iso_utc

    gap = timedelta(seconds=gap_s)
    days = abs(gap.total_seconds()) / 86400
    span = f"{days:.0f} days" if abs(days - round(days)) < 0.01 else f"{days:.1f} days"
    kind = "a year" if abs(days - 365) <= 1.5 or abs(days - 366) <= 0.5 else "a date"
    summary = (
        f"the line's date looks wrong: last line reads {newest.utc:%Y-%m-%d %H:%M} UTC, file "
        f"modified {mtime:%Y-%m-%d %H:%M} UTC, {span} apart ({kind} mix-up, not a zone)"
    )
    evidence = {
        "line_utc": iso_utc(newest.utc, "auto"),
        "mtime_utc": iso_utc(mtime, "auto"),
        "gap_days": round(gap.total_seconds() / 86400, 3),
        "verdict": f"{kind} mix-up",
    }
    return summary, evidence


def zone_mismatch(
    halves: int, newest: Resolved, mtime: datetime, zone_name: str
) -> tuple[str, dict[str, Any]]:
    """The summary and evidence of a declared zone off by `halves` half hours."""
    from fleetcheck.iso import iso_utc

    true_offset = _implied_offset(halves, newest)
    guesses = _suggest_zones(true_offset, mtime, zone_name)
    hint = f" ({' or '.join(guesses)}?)" if guesses else ""
    summary = (
        f"declared zone looks wrong: last line {newest.local:%H:%M} {zone_name} = "
        f"{newest.utc:%H:%M} UTC, file modified {mtime:%H:%M} UTC{hint}"
    )
    evidence = {
        "declared": zone_name,
        "line_utc": iso_utc(newest.utc, "auto"),
        "mtime_utc": iso_utc(mtime, "auto"),
        "implied_offset_h": true_offset.total_seconds() / 3600,
        "suggested": guesses,
    }
    return summary, evidence
