"""`fleetcheck reap-live`: the command's I/O (broker, output, exit code) over livehash.

Settings are the live_hash check's (`[checks.live_hash]`, else LiveHashConfig's defaults),
overridden by the options. Dry run by default; `--apply` deletes only what the guard allows
(`--force` overrides it), each field only if its value is unchanged since the scan.

Ages are judged on the broker's clock (checks/live_hash/evidence.py): reap-live refuses when
this machine's clock and the broker's differ by more than `max_clock_skew`, and keeps the
stale entries of owners connected to the broker right now unless `--force`. All of the broker
talk has one overall deadline (`--deadline`, default the patrol's), so a broker that drips
its replies cannot hold the command.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TextIO

from fleetcheck.checks.live_hash import LiveHashConfig, owner_presence
from fleetcheck.checks.live_hash.evidence import (
    clock_refusal,
    live_owner_line,
    read_broker_clock,
    read_connections,
    relate_owners,
    split_live,
    unknown_owner_line,
)
from fleetcheck.checks.live_hash.scan import Stale, describe_kind, find_stale, guard, key_type, reap

from fleetcheck.config import zone
from fleetcheck.core import stderr
from fleetcheck.core.safe_text import printable
from fleetcheck.parse.duration import format_duration
from fleetcheck.transport.deadline import DeadlineExpired, run_within
from fleetcheck.transport.redis import connect, describe_error

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig


class _Run:
    """What the command's worker thread is doing, for the one line the deadline gives, and
    its client, which the deadline closes (a blocked read then fails at once)."""

    def __init__(self) -> None:
        self.phase = "connecting to the broker"
        self.client: Any = None
        self.cancelled = threading.Event()  # set at the deadline: nothing may be deleted then
        self.deleting = False

    def abandon(self) -> None:
        self.cancelled.set()
        if self.client is not None:
            self.client.close()


def reap_live_command(
    fleet: FleetConfig,
    *,
    key: str | None = None,
    max_age: float | None = None,
    apply: bool = False,
    force: bool = False,
    keep_malformed: bool = False,
    show: int = 20,
    deadline: float | None = None,
    out: TextIO | None = None,
    now: float | None = None,
    between: Callable[[list[Stale]], None] | None = None,
) -> int:
    """List (and with `apply`, delete) the stale live-hash entries; the exit code: 0 done,
    3 when the broker or the key could not be read, the guard refuses or the deadline
    passed, with the message on stderr. `now`: the patrol machine's clock (tests move it;
    default fleetcheck.core.context.utcnow). `between` runs after the scan and before the
    delete (tests play the race)."""
    out = out or sys.stdout
    limit = fleet.patrol.deadline if deadline is None else deadline
    run = _Run()
    buffered, errors = io.StringIO(), io.StringIO()
    try:
        code = run_within(
            limit,
            lambda: _reap(
                fleet,
                run,
                key,
                max_age,
                apply,
                force,
                keep_malformed,
                show,
                buffered,
                errors,
                now,
                between,
            ),
            abandon=run.abandon,
        )
    except DeadlineExpired:
        code = 3
        done = (
            "some stale entries may have been deleted (run reap-live again to see)"
            if run.deleting
            else "nothing deleted"
        )
        stderr.error(
            f"broker {fleet.broker.address}: {run.phase} did not finish "
            f"within the deadline ({format_duration(limit)}; --deadline sets it): {done}",
            errors,
        )
    finally:
        out.write(buffered.getvalue())
    sys.stderr.write(errors.getvalue())  # each line went through core.stderr or one_line
    return code


def _reap(
    fleet: FleetConfig,
    run: _Run,
    key: str | None,
    max_age: float | None,
    apply: bool,
    force: bool,
    keep_malformed: bool,
    show: int,
    out: TextIO,
    err: TextIO,
    now: float | None,
    between: Callable[[list[Stale]], None] | None,
) -> int:
    """The command's work, in the deadline's worker thread (see reap_live_command)."""
    from fleetcheck.core.context import utcnow

    cfg = fleet.checks.get("live_hash")
    if not isinstance(cfg, LiveHashConfig):
        cfg = LiveHashConfig()
    key = key or cfg.key
    age_limit = max_age if max_age is not None else cfg.max_age
    tz = zone(cfg.naive_tz, "naive_tz") if cfg.naive_tz else None

    def error(message: str) -> int:
        stderr.error(message, err)
        return 3

    say = partial(_say, out)

    try:
        r = run.client = connect(fleet.broker)
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
            run.phase = "reading the broker's clock (TIME)"
            local = (lambda: now) if now is not None else (lambda: utcnow().timestamp())
            clock = read_broker_clock(r, local)
        except Exception as e:
            return error(f"reading the broker's clock (TIME): {describe_error(e, fleet.broker)}")
        try:
            run.phase = f"reading {key}"
            kind = key_type(r, key)
            if kind == "none":
                say(f"{key}: absent, nothing to reap")
                return 0
            if kind != "hash":
                return error(describe_kind(key, kind) + ": nothing deleted")
            # the broker's time, less the reading's error: an entry is never judged older
            # than it may be
            now_s = clock.now(local()) - clock.error_s
            total, stale = _scan(r, cfg, key, now_s, age_limit, tz, keep_malformed)
        except Exception as e:
            return error(f"reading {key}: {describe_error(e, fleet.broker)}")
        try:
            run.phase = "reading CLIENT LIST"
            presence = _presence(r, fleet, stale)
        except Exception as e:
            return error(
                f"reading CLIENT LIST (which owners are connected): "
                f"{describe_error(e, fleet.broker)}; nothing deleted"
            )
        run.phase = f"judging {key}"
        _listing(out, key, total, stale, age_limit, keep_malformed, show)
        stale, refusals, skewed = _guarded(
            cfg, clock, total, stale, presence, age_limit, force, keep_malformed, say
        )
        if not apply:
            hint = " (add --force: the guard refuses)" if refusals and not force else ""
            say(f"dry run: nothing deleted (run with --apply to delete these {len(stale)}){hint}")
            return 0
        if refusals and not force and (stale or skewed is not None):  # a bad clock: always
            return error(
                f"reap-live refuses: {refusals[0]}; nothing deleted (check the settings; "
                "--force overrides)"
            )
        if between is not None:
            between(stale)
        run.phase = f"deleting from {key}"
        run.deleting = True  # before the check: a deadline from here on says "may have"
        if run.cancelled.is_set():
            return 3  # the deadline passed: its line is the caller's
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


def _scan(
    r: Any,
    cfg: LiveHashConfig,
    key: str,
    now_s: float,
    age_limit: float,
    tz: Any,
    keep_malformed: bool,
) -> tuple[int, list[Stale]]:
    """(entries, the stale ones) of the hash at `now_s` on the broker's clock."""
    return find_stale(
        r,
        key,
        now_s,
        age_limit,
        count=cfg.scan_count,
        started_field=cfg.started_field,
        owner_field=cfg.owner_field or None,
        assume_tz=tz,
        include_malformed=not keep_malformed,
    )


def _presence(r: Any, fleet: FleetConfig, stale: list[Stale]) -> dict[str, bool | None]:
    """Whether each stale entry's owner is connected: by address (hosts.toml, IPs), then by
    connection name ({} when no entry names an owner)."""
    owners = sorted({s.owner for s in stale if s.owner is not None})
    if not owners:
        return {}
    conns = read_connections(r)
    return relate_owners(owner_presence(owners, fleet.hosts, conns.addresses), conns)


def _guarded(
    cfg: LiveHashConfig,
    clock: Any,
    total: int,
    stale: list[Stale],
    presence: dict[str, bool | None],
    age_limit: float,
    force: bool,
    keep_malformed: bool,
    say: Callable[[str], None],
) -> tuple[list[Stale], list[str], str | None]:
    """The guard's lines said, and what it leaves: (the entries to delete: those of owners not
    connected unless --force, why it refuses, the clock's refusal)."""
    dead, live, unknown = split_live(stale, presence)
    if not force:
        stale = dead  # the entries of connected or unrelatable owners are named and kept
    seen, refusals = guard(
        total, stale, age_limit, cfg.match_wall, cfg.started_field, not keep_malformed
    )
    seen.append(f"ages on the broker's clock: {clock.describe()}")
    if live:
        seen.append(live_owner_line(live, force))
    if unknown:
        seen.append(unknown_owner_line(unknown, force))
    skewed = clock_refusal(clock, cfg.max_clock_skew)
    if skewed is not None:
        refusals.insert(0, skewed)
    for line in seen:
        say(f"guard: {line}")
    for line in refusals:
        say(f"guard: REFUSES: {line}" + (" (overridden by --force)" if force else ""))
    return stale, refusals, skewed


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

    say = partial(_say, out)

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
