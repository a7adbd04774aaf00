"""Reports whose rows carry a standing, as the round's one state step (rounds.state.step)
and its silences give them in a patrol."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from fleetcheck.core.model import Report, Result, Standing
from fleetcheck.iso import parse_iso
from fleetcheck.rounds import silences
from fleetcheck.rounds.state import Memory, remember

Row = Result | tuple[Result, Standing]


def recorded(started_at: str, duration_s: float, rows: Iterable[Row], notes: tuple = ()) -> Report:
    """The report of `rows`, each a Result or (Result, its Standing)."""
    results, standing = [], {}
    for row in rows:
        result, given = row if isinstance(row, tuple) else (row, None)
        results.append(result)
        if given is not None:
            standing[result.id] = given
    return Report(started_at, duration_s, tuple(results), tuple(notes), standing)


def silenced(report: Report, path: Path | None, windows: Iterable[Any] = ()) -> Report:
    """The report as a round without state records it with the silences at `path` and the
    config's `windows` (what rounds.patrol.record does)."""
    now = parse_iso(report.started_at)
    rows, words, ended = silences.apply(report.results, path, windows, now)
    report = replace(report, results=tuple(rows), notes=(*report.notes, *ended))
    return remember(report, None, Memory(), words)
