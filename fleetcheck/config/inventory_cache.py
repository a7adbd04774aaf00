"""The last good answer of each `[[inventory]]` source, kept next to the state file, so that a
source that fails, hangs, returns nothing or suddenly loses most of its hosts never empties
the fleet. Written atomically under a lock; an unreadable cache is set aside, never trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetcheck.config.inventory import Found, InventorySpec, SourceFailed, SourceStatus, select
from fleetcheck.files import LockedJson, replace_private

SCHEMA = "fleetcheck.inventory/1"


def cache_path(config_path: str) -> Path:
    """Beside the state file of the same config (fleetcheck.rounds.state.default_paths'
    rule: $XDG_STATE_HOME/fleetcheck, one file per config path)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    digest = hashlib.sha256(str(Path(config_path).resolve()).encode()).hexdigest()[:10]
    return Path(base) / "fleetcheck" / f"inventory-{digest}.json"


class InventoryCache(LockedJson):
    """The sources' entries, saved when a round changed them."""

    schema = SCHEMA

    def _load(self) -> dict[str, Any]:
        raw = self._document()
        if raw is None:
            aside = self.path.with_name(f"{self.path.name}.corrupt")
            with contextlib.suppress(OSError):
                os.replace(self.path, aside)
            return {}
        sources = raw.get("sources")
        return dict(sources) if isinstance(sources, dict) else {}

    def _save(self, sources: dict[str, Any]) -> None:
        text = json.dumps({"schema": SCHEMA, "sources": sources}, indent=1, sort_keys=True)
        replace_private(self.path, text)


def _age(at: str, now: datetime) -> float | None:
    try:
        return max(0.0, (now - datetime.fromisoformat(at)).total_seconds())
    except (TypeError, ValueError):
        return None


def collect(
    specs: list[InventorySpec],
    config_path: str,
    ssh_config_file: str,
    now: datetime | None = None,
    cache: InventoryCache | None = None,
) -> list[SourceStatus]:
    """Every source read now; a source that fails, returns nothing, or falls by more than its
    `max_drop` share at once is answered by its last good list (with its age) and an error.
    A fall seen twice in a row with the same hosts is believed (a real scale-in)."""
    from fleetcheck.config.inventory_sources import read_source

    now = now or datetime.now(UTC)
    cache = cache or InventoryCache(cache_path(config_path))
    statuses: list[SourceStatus] = []
    fresh: dict[str, tuple[list[Found], list[str], str | None]] = {}
    for spec in specs:  # the programs run outside the lock: a slow one blocks no other run
        try:
            hosts, problems = read_source(spec, ssh_config_file)
            hosts = select(spec, hosts)
            error = None if hosts else "returned no hosts"
        except SourceFailed as e:
            hosts, problems, error = [], [], e.reason
        fresh[spec.label] = (hosts, problems, error)
    try:
        with cache.locked() as entries:
            for spec in specs:
                statuses.append(_settle(spec, fresh[spec.label], entries, now))
    except OSError as e:  # no state directory: the sources' answers, without a memory
        statuses = []
        for spec in specs:
            hosts, problems, error = fresh[spec.label]
            st = SourceStatus(spec, hosts, problems, error)
            st.problems.append(f"{spec.label}: cannot keep its last good list: {e}")
            statuses.append(st)
    return statuses


def _settle(
    spec: InventorySpec,
    fresh: tuple[list[Found], list[str], str | None],
    entries: dict[str, Any],
    now: datetime,
) -> SourceStatus:
    hosts, problems, error = fresh
    entry = entries.get(spec.label)
    last: list[Found] = []
    at: str | None = None
    if isinstance(entry, dict) and isinstance(entry.get("hosts"), list):
        last = [f for f in (Found.from_json(x) for x in entry["hosts"]) if f is not None]
        at = entry.get("at") if isinstance(entry.get("at"), str) else None
    names = sorted(h.name for h in hosts)
    if error is None and last and len(hosts) < len(last) * (1 - spec.max_drop):
        if isinstance(entry, dict) and entry.get("fall_to") == names:
            pass  # the same smaller list twice in a row: a scale-in, not a half-failure
        else:
            error = (
                f"reported {len(hosts)} hosts, {len(last)} before: a fall of more than "
                f"{spec.max_drop:.0%} at once (half-failed?); kept the last good list until "
                "the next answer says the same"
            )
            if isinstance(entry, dict):
                entry["fall_to"] = names
    status = SourceStatus(spec, hosts, problems, error)
    if error is None:
        entries[spec.label] = {
            "at": now.isoformat(),
            "hosts": [h.to_json() for h in hosts],
        }
        return status
    if error != "returned no hosts" and not error.startswith("reported"):
        if isinstance(entry, dict):
            entry.pop("fall_to", None)
    if last:
        status.hosts = [select(spec, [h])[0] for h in last if select(spec, [h])]
        status.cached_at = at
        status.age_s = _age(at, now) if at else None
    return status
