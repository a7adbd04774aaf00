"""What each notification target has been told, remembered between rounds (cron runs are
separate processes): the ledger file next to the state file.

Per target (keyed by a digest of its URL: the URL itself carries tokens and never reaches a
file) and per row: the status it was told, since when, when it was last told (for
reminders) and whether it was told the row is flapping. A target's entries change only after
a delivery to it succeeded, so a failed one is sent again at the next round.

Like the state file: atomic (a temporary file renamed over it), under an exclusive lock held
for the whole round, private (0600), and healing: an unreadable file is moved aside with one
warning and the round goes on as if nothing had been told (worst case: a repeated message,
never a lost patrol).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from fleetcheck.files import LockedJson, read_document, replace_private

SCHEMA = "fleetcheck.notify/1"


def target_key(url: str) -> str:
    """A target's name in the ledger: a digest of its URL (changing the URL starts afresh)."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def ledger_path(state: Path) -> Path:
    """The ledger of a state file: next to it, named after it."""
    return state.with_name(state.stem + ".notify.json")


def entry_problem(entry: Any) -> str | None:
    """Why a ledger entry cannot be used (None when it can)."""
    if not isinstance(entry, dict):
        return "not an object"
    for key in ("status", "sent", "seen"):
        if not isinstance(entry.get(key), str):
            return key
    if not isinstance(entry.get("flapping", False), bool):
        return "flapping"
    return None


class Ledger(LockedJson):
    """The ledger file: `locked()` yields {target key: {row key: entry}} and saves it."""

    schema = SCHEMA

    def _load(self) -> dict[str, Any]:
        targets = read_document(self.path, SCHEMA, "notify ledger", "targets", dict) or {}
        out: dict[str, dict[str, Any]] = {}
        for key, rows in targets.items():
            if isinstance(rows, dict):
                out[key] = {k: v for k, v in rows.items() if entry_problem(v) is None}
        return out

    def _save(self, targets: dict[str, Any]) -> None:
        text = json.dumps({"schema": SCHEMA, "targets": targets}, indent=1, sort_keys=True)
        replace_private(self.path, text)
