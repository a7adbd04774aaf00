"""Silences: rows an operator knows about (maintenance, a deploy) that keep showing, marked,
but do not alert, notify or raise the exit code while the silence lasts.

One-off silences (`fleetcheck silence mini --for 2h --reason ...`) live in a small JSON file
next to the state file, atomic and locked like it, private (0600). Recurring windows come from
[silences] in the config. A silence ends on its own: the first round after its end drops it
from the file and says so in the report's notes. A row is matched by HOST, CHECK or HOST/CHECK,
or one item's row by HOST/CHECK/ITEM (`*` for any part; a bare word matches a host or a check of
that name; a broker-wide row has no host, so only `*` or a bare CHECK reaches it).

Marking is done once here, before the round's record is built: the row's summary starts with
`silenced until ... (REASON):` and its Standing's `silenced` holds the same words, so every
output (table, plain, Nagios, JSON, the console, the history) shows it without a renderer
knowing. `Standing.pages` is False for a silenced row (Alertmanager, the textfile's alerting
gauge, notifications) and `Report.status` leaves it out (the exit code).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fleetcheck.core import stderr
from fleetcheck.core.model import Result
from fleetcheck.core.safe_text import one_line
from fleetcheck.files import exclusive, read_document, replace_private
from fleetcheck.iso import iso_utc, parse_iso
from fleetcheck.rounds.state import silences_path as silences_path  # its home (callers: here)

SCHEMA = "fleetcheck.silences/1"
MAX_FOR = timedelta(days=30)


@dataclass(frozen=True)
class Silence:
    id: str
    target: str  # HOST, CHECK, HOST/CHECK or HOST/CHECK/ITEM, `*` for any part
    until: str  # UTC ISO
    reason: str
    created: str

    @staticmethod
    def from_dict(data: Any) -> Silence | None:
        if not isinstance(data, dict):
            return None
        try:
            kept = {f.name: data[f.name] for f in fields(Silence)}
            if not all(isinstance(v, str) for v in kept.values()):
                return None
            parse_iso(kept["until"])
        except (KeyError, ValueError):
            return None
        return Silence(**{k: one_line(v) for k, v in kept.items()})


def matches(target: str, check: str, host: str | None, item: str | None = None) -> bool:
    """Whether HOST, CHECK, HOST/CHECK or HOST/CHECK/ITEM (`*` any) names the row (check,
    host, item); a target without an item names every item's row."""
    if "/" in target:
        h, c, *i = target.split("/", 2)
        return (
            (h == "*" or h == host)
            and (c == "*" or c == check)
            and (not i or i[0] == "*" or i[0] == item)
        )
    return target == "*" or target == check or (host is not None and target == host)


def _clock(text: str) -> str:
    return parse_iso(text).strftime("%Y-%m-%d %H:%M UTC")


def window_active(start_min: int, end_min: int, now: datetime) -> bool:
    """Whether a daily window [start, end) in minutes after 00:00 UTC holds `now` (UTC); a
    window whose end is before its start crosses midnight."""
    minute = now.hour * 60 + now.minute
    if start_min < end_min:
        return start_min <= minute < end_min
    return minute >= start_min or minute < end_min


class SilenceFile:
    """The one-off silences: `locked()` yields the list (of Silence) and saves it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def locked(self) -> Iterator[list[Silence]]:
        with exclusive(self.path):
            items = self._load()
            before = list(items)
            yield items
            if items != before or not self.path.exists():
                self._save(items)

    def read(self) -> list[Silence]:
        with self.locked() as items:
            return list(items)

    def _load(self) -> list[Silence]:
        entries = read_document(self.path, SCHEMA, "silences file", "silences", list) or []
        out = []
        for entry in entries:
            silence = Silence.from_dict(entry)
            if silence is None:
                stderr.warn(f"silences file {self.path}: dropped a damaged entry")
            else:
                out.append(silence)
        return out

    def _save(self, items: list[Silence]) -> None:
        text = json.dumps({"schema": SCHEMA, "silences": [asdict(s) for s in items]}, indent=1)
        replace_private(self.path, text)


def add(path: Path, target: str, seconds: float, reason: str, now: datetime) -> Silence:
    """A new silence of `target` for `seconds` from `now`."""
    silence = Silence(
        id=secrets.token_hex(3),
        target=target,
        until=iso_utc(now + timedelta(seconds=seconds)),
        reason=one_line(reason),
        created=iso_utc(now),
    )
    with SilenceFile(path).locked() as items:
        items.append(silence)
    return silence


def end(path: Path, which: str, now: datetime) -> list[Silence]:
    """End the silences whose id or target is `which` (now): the ones ended."""
    with SilenceFile(path).locked() as items:
        gone = [s for s in items if which in (s.id, s.target) and parse_iso(s.until) > now]
        items[:] = [s for s in items if s not in gone]
    return gone


def active(path: Path, now: datetime) -> list[Silence]:
    """The silences still running at `now` (expired ones are left for the next round to
    drop and say so)."""
    return [s for s in SilenceFile(path).read() if parse_iso(s.until) > now]


def apply(
    results: Iterable[Result], path: Path | None, windows: Iterable[Any], now: datetime
) -> tuple[list[Result], dict[str, str], list[str]]:
    """The rows with each silenced one's summary marked (`WORDS: SUMMARY`, so every output
    says it without knowing silences), the silence words by row id (their Standing's), and
    notes naming the silences that ended since the last round (dropped from the file).
    Judged at `now`. `windows`: the config's [silences] windows (config.tables.SilenceWindow)."""
    found: list[tuple[str, str]] = []  # (target, words)
    notes: list[str] = []
    if path is not None and path.exists():  # no silence set: no file made (nor read)
        with SilenceFile(path).locked() as items:
            ended = [s for s in items if parse_iso(s.until) <= now]
            items[:] = [s for s in items if s not in ended]
        for s in ended:
            notes.append(
                f"silence {s.id} of {s.target} ended at {_clock(s.until)} (it was: {s.reason})"
            )
        for s in items:
            found.append((s.target, f"silenced until {_clock(s.until)} ({s.reason})"))
    for w in windows:
        start, stop = w.minutes()
        if window_active(start, stop, now):
            found.append((w.match, f"silenced daily {w.daily} UTC ({w.reason})"))
    rows: list[Result] = []
    words_of: dict[str, str] = {}
    for r in results:
        said = (w for target, w in found if matches(target, r.check, r.host, r.item))
        words = next(said, None)
        if words is not None:
            words_of[r.id] = words
        rows.append(r if words is None else replace(r, summary=f"{words}: {r.summary}"))
    return rows, words_of, notes
