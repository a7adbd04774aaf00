"""`fleetcheck reap-live`: the command's I/O (broker, output, exit code) over livehash.

Settings are the live_hash check's (`[checks.live_hash]`, else LiveHashConfig's defaults),
overridden by the options. Dry run by default; `--apply` deletes only what the guard allows
(`--force` overrides it), each field only if its value is unchanged since the scan.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from fleetcheck.checks.live_hash import LiveHashConfig
from fleetcheck.checks.live_hash.scan import Stale, describe_kind, find_stale, guard, key_type, reap

from fleetcheck.config import zone
from fleetcheck.core import stderr
from fleetcheck.core.safe_text import printable
from fleetcheck.parse.duration import format_duration
from fleetcheck.transport.redis import connect, describe_error

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig


def reap_live_command(
    fleet: FleetConfig,
    *,
    key: str | None = None,
    max_age: float | None = None,
    apply: bool = False,
    force: bool = False,
    keep_malformed: bool = False,
    show: int = 20,
    out: TextIO | None = None,
    now: float | None = None,
    between: Callable[[list[Stale]], None] | None = None,
) -> int:
    """List (and with `apply`, delete) the stale live-hash entries; the exit code: 0 done,
    3 when the broker or the key could not be read or the guard refuses, with the message on
    stderr. `between` runs after the scan and before the delete (tests play the race)."""
    out = out or sys.stdout
    cfg = fleet.checks.get("live_hash")
    if not isinstance(cfg, LiveHashConfig):
        cfg = LiveHashConfig()
    key = key or cfg.key
    age_limit = max_age if max_age is not None else cfg.max_age
    tz = zone(cfg.naive_tz, "naive_tz") if cfg.naive_tz else None

    def error(message: str) -> int:
        stderr.error(message)
        return 3

    def say(line: str) -> None:
        _say(out, line)

    try:
        r = connect(fleet.broker)
    except Exception as e:
        return error(f"broker {fleet.broker.address}: {describe_error(e, fleet.broker)}")
    try:
        try:
            r.ping()
        except Exception as e:
            return error(
                f"broker {fleet.broker.address} unreachable: {describe_error(e, fleet.broker)}"
            )
        try:
            kind = key_type(r, key)
            if kind == "none":
                say(f"{key}: absent, nothing to reap")
                return 0
            if kind != "hash":
                return error(describe_kind(key, kind) + ": nothing deleted")
            total, stale = find_stale(
                r,
                key,
                time.time() if now is None else now,
                age_limit,
                count=cfg.scan_count,
                started_field=cfg.started_field,
                owner_field=cfg.owner_field or None,
                assume_tz=tz,
                include_malformed=not keep_malformed,
            )
        except Exception as e:
            return error(f"reading {key}: {describe_error(e, fleet.broker)}")
        _listing(out, key, total, stale, age_limit, keep_malformed, show)
        seen, refusals = guard(
            total, stale, age_limit, cfg.match_wall, cfg.started_field, not keep_malformed
        )
        for line in seen:
            say(f"guard: {line}")
        for line in refusals:
            say(f"guard: REFUSES: {line}" + (" (overridden by --force)" if force else ""))
        if not apply:
            hint = " (add --force: the guard refuses)" if refusals and not force else ""
            say(f"dry run: nothing deleted (run with --apply to delete these {len(stale)}){hint}")
            return 0
        if refusals and not force and stale:
            return error(
                f"reap-live refuses: {refusals[0]}; nothing deleted (check the settings; "
                "--force overrides)"
            )
        if between is not None:
            between(stale)
        try:
            removed = reap(r, key, stale)
        except Exception as e:
            return error(f"deleting from {key}: {describe_error(e, fleet.broker)}")
        kept = len(stale) - removed
        note = f" ({kept} changed since the scan and were kept)" if kept else ""
        say(f"removed {removed} of {len(stale)} stale entries from {key}{note}")
        return 0
    finally:
        r.close()


def _listing(
    out: TextIO,
    key: str,
    total: int,
    stale: list[Stale],
    age_limit: float,
    keep_malformed: bool,
    show: int,
) -> None:
    """The counts, then the stale entries oldest first (`show` of them; 0: all)."""

    def say(line: str) -> None:
        _say(out, line)

    malformed = sum(1 for s in stale if s.reason.startswith("malformed"))
    say(
        f"{key}: {total} entries scanned, {len(stale)} stale "
        f"({len(stale) - malformed} older than {format_duration(age_limit)}, "
        f"{malformed} malformed{', malformed kept' if keep_malformed else ''})"
    )
    ordered = sorted(stale, key=lambda s: (s.age_s is None, -(s.age_s or 0.0)))
    listed = ordered if show <= 0 else ordered[:show]
    for s in listed:
        age = format_duration(s.age_s) if s.age_s is not None else "-"
        owner = f"  owner {s.owner}" if s.owner else ""
        say(f"  {s.name}  age {age}{owner}  {s.reason}")
    if len(listed) < len(ordered):
        say(f"  ... and {len(ordered) - len(listed)} more (--show 0 lists all)")


def _say(out: TextIO, line: str) -> None:
    """One line of reap-live's output, through `printable`: a field name or an owner is
    whatever a worker wrote (a line feed in one must not start a line of its own)."""
    print(printable(line), file=out)
