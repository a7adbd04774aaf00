"""The logs check gives one row per log of a host (its item): what its tests read of them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from fleetcheck.checks.logs import CHECK

from fleetcheck.core.model import Result


def only_row(rows: Result | Sequence[Result]) -> Result:
    """The one row of a host with one log."""
    found = [rows] if isinstance(rows, Result) else list(rows)
    assert len(found) == 1, [r.label for r in found]
    return found[0]


def evaluate_one(facts: Any, config: Any, host: Any, now: datetime) -> Result:
    """The logs check's row for a host with one log."""
    return only_row(CHECK.evaluate(facts, config, host, now))


def by_item(rows: Result | Sequence[Result]) -> dict[str | None, Result]:
    """Each row by its item (the log's path, or `journal:...`)."""
    found = [rows] if isinstance(rows, Result) else list(rows)
    return {r.item: r for r in found}
