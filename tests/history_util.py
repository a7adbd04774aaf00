"""A history as fleetcheck wrote it before its database: one JSON line a round (what the
console and `history` still read until a patrol migrates it)."""

from __future__ import annotations

import json
from pathlib import Path

from fleetcheck.core.model import Report
from fleetcheck.rounds import history


def jsonl_append(report: Report, path: Path) -> None:
    """Append the round as a JSONL line and keep it whole beside, as the old append did."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(history._line(report), separators=(",", ":"), default=str) + "\n")
    history.write_latest(report, history.latest_path(path))
