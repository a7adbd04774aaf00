"""Memory across patrols: cron runs are separate processes, so what a row looked like last
time lives in a small JSON file. From it each row learns since when it has had its status,
how many bad rounds in a row it has had (so `fail_after` can hold back a one-round blip), and
whether it is flapping.

`step` is pure (table-tested); `StateFile` only loads and saves, atomically and under a lock
so two overlapping cron runs cannot corrupt it. State heals: a damaged row is dropped with one
warning and the others kept; a file that is not ours, or of a newer schema, is moved aside
with a warning; nothing about state ever makes a patrol fail. Its files are private (0600):
they hold the fleet's names and verdicts.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from fleetcheck import collector
from fleetcheck.core.model import Report, Result, Standing, Status
from fleetcheck.core.stderr import warn
from fleetcheck.files import exclusive, replace_private
from fleetcheck.iso import parse_iso

SCHEMA_NAME = "fleetcheck.state"
SCHEMA_VERSION = 1
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"
FORGET_AFTER = timedelta(days=30)
_NONE: Mapping[str, str] = {}


@dataclass(frozen=True)
class Memory:
    fail_after: int = 1  # a row alerts only after this many consecutive bad rounds
    flap_changes: int = 4  # this many status changes ...
    flap_window: int = 10  # ... within this many recent rounds is flapping


_LABELS = frozenset(s.label for s in Status)
_TEXT = frozenset((str,))
# a state file's rows share a few times (every last_seen is some round's start): each read once
_instant = lru_cache(maxsize=1024)(parse_iso)


def _is_iso(text: Any) -> bool:
    try:
        return isinstance(text, str) and bool(_instant(text))
    except ValueError:
        return False


def row_problem(row: Any) -> str | None:
    """Why a state row cannot be used (None when it can)."""
    if not isinstance(row, dict):
        return "not an object"
    if row.get("status") not in _LABELS:
        return "status"
    for key in ("since", "last_seen"):
        if not _is_iso(row.get(key)):
            return key
    bad = row.get("bad_rounds")
    if isinstance(bad, bool) or not isinstance(bad, int) or bad < 0:
        return "bad_rounds"
    recent = row.get("recent")
    if not isinstance(recent, list) or not _TEXT.issuperset(map(type, recent)):
        return "recent"  # (texts as JSON reads them: str itself, told by C loops)
    if row.get("carry") is not None and not isinstance(row.get("carry"), dict):
        return "carry"
    held = row.get("held")
    if held is not None and (
        not isinstance(held, dict)
        or held.get("status") not in _LABELS
        or not isinstance(held.get("since"), str)
    ):
        return "held"
    return None


def clean(rows: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """(usable rows, [(key, what is wrong)] for the dropped ones)."""
    problems = {key: row_problem(row) for key, row in rows.items()}
    good = {key: rows[key] for key, problem in problems.items() if problem is None}
    return good, [(key, problem) for key, problem in problems.items() if problem is not None]


def carried(rows: dict[str, Any]) -> dict[str, Any]:
    """What each row carries into the next round (see Result.carry), by row key."""
    return {k: v["carry"] for k, v in rows.items() if isinstance(v, dict) and v.get("carry")}


def step(
    results: Iterable[Result],
    at: str,
    rows: dict[str, Any] | None,
    memory: Memory,
    silenced: Mapping[str, str] = _NONE,
    checked: bool = False,
) -> tuple[dict[str, Standing], dict[str, Any]]:
    """The round's one state step (pure): each row's Standing (by row id) from the previous
    state `rows` (None: no state kept, so only the silences), this round's verdicts made at
    `at`, the silence words by row id and the memory settings; and the new state rows.
    Unusable rows are dropped (as if never seen). A row back at its status after one round
    of UNKNOWN keeps the since it had before that gap (CRIT -> UNKNOWN -> CRIT: the CRIT
    started at the first CRIT); after two rounds of UNKNOWN it starts anew."""
    if rows is None:
        return {k: Standing(silenced=words) for k, words in silenced.items()}, {}
    if not checked:  # (`checked`: the rows are a StateFile's, cleaned as it loaded them)
        rows, _ = clean(rows)
    now = parse_iso(at)
    new_rows = {k: v for k, v in rows.items() if now - _instant(v["last_seen"]) < FORGET_AFTER}
    standing = {}
    for r in results:
        key = r.id
        prev = rows.get(key) or {}
        label = r.status.label
        held = prev.get("held")
        if prev.get("status") == label:
            since = prev["since"]
        elif isinstance(held, dict) and held.get("status") == label:
            # back to what it was before ONE round of UNKNOWN (fleetcheck could not look):
            # the problem did not start again, it was not seen for a round
            since = str(held.get("since") or at)
        else:
            since = at
        bad = 0 if r.status is Status.OK else int(prev.get("bad_rounds", 0)) + 1
        recent = [*prev.get("recent", []), label][-memory.flap_window :]
        changes = sum(1 for a, b in zip(recent, recent[1:], strict=False) if a != b)
        alerting = r.status is not Status.OK and bad >= memory.fail_after
        flapping = changes >= memory.flap_changes
        standing[key] = Standing(since, bad, alerting, flapping, silenced.get(key))
        new = {
            "status": label,
            "since": since,
            "bad_rounds": bad,
            "recent": recent,
            "last_seen": at,
        }
        if r.status is Status.UNKNOWN and prev and prev.get("status") != Status.UNKNOWN.label:
            # what the row was before this gap, kept for one round only
            new["held"] = {"status": prev.get("status"), "since": prev.get("since")}
        carry = r.carry if r.carry is not None else prev.get("carry")
        if carry is not None:
            new["carry"] = carry
        new_rows[key] = new
    return standing, new_rows


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "fleetcheck"


def default_paths(config_path: str) -> tuple[Path, Path]:
    """(state file, history file) for a config: one pair per fleet config."""
    digest = hashlib.sha256(str(Path(config_path).resolve()).encode()).hexdigest()[:10]
    d = state_dir()
    return d / f"state-{digest}.json", d / f"history-{digest}.jsonl"


def silences_path(state: Path) -> Path:
    """The silences of a state file: next to it, named after it (here, not in
    fleetcheck.rounds.silences: a patrol with no silence set never imports that module)."""
    return state.with_name(state.stem + ".silences.json")


class StateFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._healed = False

    @contextmanager
    def locked(self) -> Iterator[dict[str, Any]]:
        """Load the rows under an exclusive lock; the caller updates the dict; saved on exit."""
        with exclusive(self.path):
            rows = self._load()
            holder: dict[str, Any] = {"rows": rows}
            yield holder
            self._save(holder["rows"])

    def read(self) -> dict[str, Any]:
        """The rows as they are now, under the lock. A file that needed healing (rows
        dropped) is saved healed, so its warning is given once."""
        with exclusive(self.path):
            rows = self._load()
            if self._healed:
                self._save(rows)
            return rows

    def _load(self) -> dict[str, Any]:
        try:
            raw = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise ValueError("not a fleetcheck state file")
            schema = data.get("schema")
            name, _, version = str(schema).partition("/")
            if (
                name == SCHEMA_NAME
                and version.isascii()
                and version.isdigit()
                and int(version) > SCHEMA_VERSION
            ):
                self._aside("newer", f"written by a newer fleetcheck ({schema})")
                return {}
            if schema != SCHEMA or not isinstance(data.get("rows"), dict):
                raise ValueError("not a fleetcheck state file")
        except ValueError as e:
            self._aside("corrupt", f"unreadable ({e})")
            return {}
        rows, dropped = clean(dict(data["rows"]))
        self._healed = bool(dropped)
        if dropped:
            key, problem = dropped[0]
            more = f" and {len(dropped) - 1} more" if len(dropped) > 1 else ""
            warn(
                f"state file {self.path}: dropped damaged row {key!r} ({problem}){more}; "
                f"kept the other {len(rows)}"
            )
        return rows

    def _aside(self, tag: str, why: str) -> None:
        aside = self.path.with_name(f"{self.path.name}.{tag}-{int(time.time())}")
        os.replace(self.path, aside)
        warn(f"state file {self.path} {why}; kept as {aside}, starting fresh")

    def _save(self, rows: dict[str, Any]) -> None:
        # compact: indenting makes json use its pure-Python encoder (1.5 s at 30,000 rows,
        # against 0.1 s); one line, sorted, as `jq` shows it to a person who looks
        text = json.dumps({"schema": SCHEMA, "rows": rows}, sort_keys=True, separators=(",", ":"))
        replace_private(self.path, text)


def remember(
    report: Report, path: Path | None, memory: Memory, silenced: Mapping[str, str] = _NONE
) -> Report:
    """The round's record: `report` with each row's standing, the state at `path` (None:
    none kept) loaded, stepped and saved in one locked step."""
    if path is None:
        standing, _ = step(report.results, report.started_at, None, memory, silenced)
        return replace(report, standing=standing)
    with collector.paused(), StateFile(path).locked() as holder:  # see fleetcheck.collector
        standing, holder["rows"] = step(
            report.results, report.started_at, holder["rows"], memory, silenced, checked=True
        )
    return replace(report, standing=standing)
