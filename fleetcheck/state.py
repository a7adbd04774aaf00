"""Memory across patrols: cron runs are separate processes, so what a row looked like last
time lives in a small JSON file. From it each row learns since when it has had its status,
how many bad rounds in a row it has had (so `fail_after` can hold back a one-round blip), and
whether it is flapping.

`apply` is pure (table-tested); `StateFile` only loads and saves, atomically and under a lock
so two overlapping cron runs cannot corrupt it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fleetcheck.model import Report, Status

SCHEMA = "fleetcheck.state/1"
FORGET_AFTER = timedelta(days=30)


@dataclass(frozen=True)
class Memory:
    fail_after: int = 1  # a row alerts only after this many consecutive bad rounds
    flap_changes: int = 4  # this many status changes ...
    flap_window: int = 10  # ... within this many recent rounds is flapping


def row_key(check: str, host: str | None) -> str:
    return f"{check}|{host or ''}"


def parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def apply(report: Report, rows: dict[str, Any], memory: Memory) -> tuple[Report, dict[str, Any]]:
    """The report with since/bad_rounds/alerting/flapping filled in, and the new state rows."""
    now_text = report.started_at
    now = parse_iso(now_text)
    new_rows = {
        k: v for k, v in rows.items() if isinstance(v, dict) and _recent(v.get("last_seen"), now)
    }
    results = []
    for r in report.results:
        key = row_key(r.check, r.host)
        prev = rows.get(key) if isinstance(rows.get(key), dict) else None
        label = r.status.label
        if prev and prev.get("status") == label and isinstance(prev.get("since"), str):
            since = prev["since"]
        else:
            since = now_text
        bad = 0 if r.status is Status.OK else int((prev or {}).get("bad_rounds", 0)) + 1
        recent = [s for s in (prev or {}).get("recent", []) if isinstance(s, str)]
        recent = (recent + [label])[-memory.flap_window :]
        changes = sum(1 for a, b in zip(recent, recent[1:], strict=False) if a != b)
        flapping = changes >= memory.flap_changes
        alerting = r.status is not Status.OK and bad >= memory.fail_after
        results.append(
            replace(r, since=since, bad_rounds=bad, alerting=alerting, flapping=flapping)
        )
        new_rows[key] = {
            "status": label,
            "since": since,
            "bad_rounds": bad,
            "recent": recent,
            "last_seen": now_text,
        }
    return replace(report, results=tuple(results)), new_rows


def _recent(last_seen: Any, now: datetime) -> bool:
    if not isinstance(last_seen, str):
        return False
    try:
        return now - parse_iso(last_seen) < FORGET_AFTER
    except ValueError:
        return False


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(base) / "fleetcheck"


def default_paths(config_path: str) -> tuple[Path, Path]:
    """(state file, history file) for a config: one pair per fleet config."""
    digest = hashlib.sha256(str(Path(config_path).resolve()).encode()).hexdigest()[:10]
    d = state_dir()
    return d / f"state-{digest}.json", d / f"history-{digest}.jsonl"


class StateFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def locked(self) -> Iterator[dict[str, Any]]:
        """Load the rows under an exclusive lock; the caller updates the dict; saved on exit."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            rows = self._load()
            holder: dict[str, Any] = {"rows": rows}
            yield holder
            self._save(holder["rows"])

    def _load(self) -> dict[str, Any]:
        try:
            raw = self.path.read_text()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(raw)
            if data.get("schema") != SCHEMA or not isinstance(data.get("rows"), dict):
                raise ValueError("not a fleetcheck state file")
            return dict(data["rows"])
        except (ValueError, AttributeError) as e:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            os.replace(self.path, aside)
            print(
                f"fleetcheck: warning: state file {self.path} unreadable ({e}); kept as {aside}, "
                "starting fresh",
                file=sys.stderr,
            )
            return {}

    def _save(self, rows: dict[str, Any]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"schema": SCHEMA, "rows": rows}, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def remember(report: Report, path: Path, memory: Memory) -> Report:
    """Load, apply and save in one locked step."""
    state = StateFile(path)
    with state.locked() as holder:
        report, holder["rows"] = apply(report, holder["rows"], memory)
    return report
