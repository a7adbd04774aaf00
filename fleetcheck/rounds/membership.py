"""Fleets that change: which hosts the fleet had last round, remembered in its own file beside
the state file (`members-DIGEST.json`, atomic and locked like it), and the inventory's row.

Each round the fleet as loaded (hosts.toml merged with its [[inventory]] sources) is compared
with the one remembered: a host that appears is noted once ("joined the fleet") and patrolled
from this round on; a host that is gone is noted once ("left the fleet at ...") and simply has
no rows from then on; its history stays in the history file, where `history` and the console
read it. A host that is in the inventory but unreachable is not gone: its rows say what is wrong.
A source that fails never empties the fleet (the loader falls back on its last good list), so
a broken source cannot turn into a mass "left the fleet"; the `inventory` row says it failed.

`judge_sources` is pure (table-tested); `Members` only loads and saves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fleetcheck.config import FleetConfig
from fleetcheck.core.model import Result, Status, worst
from fleetcheck.files import LockedJson, replace_private

SCHEMA = "fleetcheck.members/1"
CHECK = "inventory"


def members_path(state: Path) -> Path:
    """Beside the state file, named after it."""
    name = state.name.removeprefix("state-")
    return state.with_name(f"members-{name}")


class Members(LockedJson):
    """The hosts each round saw, and those that left."""

    schema = SCHEMA

    def _load(self) -> dict[str, Any]:
        raw = self._document()
        if not raw:
            return {}
        hosts = raw.get("hosts")
        left = raw.get("left")
        return {
            "hosts": dict(hosts) if isinstance(hosts, dict) else {},
            "left": dict(left) if isinstance(left, dict) else {},
        }

    def _save(self, data: dict[str, Any]) -> None:
        text = json.dumps({"schema": SCHEMA, **data}, indent=1, sort_keys=True)
        replace_private(self.path, text)


def changes(
    known: dict[str, Any] | None, current: dict[str, str], now: str
) -> tuple[list[str], dict[str, Any]]:
    """(the notes, the new memory) for a fleet of `current` {name: origin}; `known` None: the
    first round remembered (nothing is noted: everything would have 'joined')."""
    hosts: dict[str, Any] = dict((known or {}).get("hosts", {}))
    left: dict[str, Any] = dict((known or {}).get("left", {}))
    notes: list[str] = []
    if known is not None:
        for name, origin in current.items():
            if name not in hosts:
                where = f" (from {origin})" if origin else ""
                notes.append(f"{name} joined the fleet{where}")
        for name in hosts:
            if name not in current:
                notes.append(f"{name} left the fleet at {now} (its history is kept)")
                left[name] = now
    for name in current:
        if name not in hosts:
            hosts[name] = {"since": now}
        left.pop(name, None)
    hosts = {n: v for n, v in hosts.items() if n in current}
    return notes, {"hosts": hosts, "left": left}


def judge_sources(fleet: FleetConfig) -> Result | None:
    """The `inventory` row: OK when every source answered; WARN when one failed (or fell too
    far at once, or reported hosts that cannot be used) and its last good list, younger than
    its max_age, is patrolled instead; UNKNOWN when there is no such list or it is too old."""
    if not fleet.inventory:
        return None
    from fleetcheck.parse.duration import format_duration

    verdict = Status.OK
    parts: list[str] = []
    total = 0
    for st in fleet.inventory:
        total += len(st.hosts)
        if st.error is not None:
            if st.cached_at is None:
                status = Status.UNKNOWN
                parts.append(f"{st.label}: {st.error}; no earlier list: its hosts are not known")
            else:
                age = st.age_s if st.age_s is not None else float("inf")
                stale = age > st.spec.max_age
                status = Status.UNKNOWN if stale else Status.WARN
                shown = format_duration(age) if st.age_s is not None else "an unknown time"
                parts.append(
                    f"{st.label}: {st.error}; patrolling its last good list "
                    f"({len(st.hosts)} hosts, {shown} old"
                    + (f", past max_age {format_duration(st.spec.max_age)})" if stale else ")")
                )
        elif st.problems:
            status = Status.WARN
            more = f" (and {len(st.problems) - 1} more)" if len(st.problems) > 1 else ""
            parts.append(f"{st.problems[0]}{more}")
        else:
            continue
        verdict = worst([verdict, status])
    if verdict is Status.OK:
        summary = f"{total} hosts from {len(fleet.inventory)} inventory source(s)"
    else:
        summary = "; ".join(parts)
    return Result(
        check=CHECK,
        host=None,
        status=verdict,
        summary=summary,
        metrics={"hosts": total},
        headline="hosts",
        evidence_strength=None
        if verdict is Status.OK
        else ("absence" if verdict is Status.UNKNOWN else "proof"),
    )


def observe(fleet: FleetConfig, at: str, state: Path | None) -> tuple[list[Result], list[str]]:
    """The inventory's row (when there is one) and this round's membership notes."""
    row = judge_sources(fleet)
    rows = [] if row is None else [row]
    if state is None:
        return rows, []
    current = {h.name: h.origin for h in fleet.hosts}
    try:
        with Members(members_path(state)).locked() as data:
            notes, new = changes(data if data else None, current, at)
            data.clear()
            data.update(new)
    except OSError as e:
        from fleetcheck.core.stderr import warn

        warn(f"fleet membership file beside {state}: {e.strerror or e}")
        return rows, []
    return rows, notes
