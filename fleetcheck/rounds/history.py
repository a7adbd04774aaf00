"""Each patrol appended as one JSON line, so `fleetcheck history` can show when a machine went
dark and `fleetcheck serve` can chart the numbers behind each verdict. Rotated by size (one
older file kept) so a timer running for months stays bounded. Rotation and append happen under
a lock (and, from a patrol with state, under the state lock too), so two overlapping runs never
both rotate; the files are private (0600).

Next to the history file, the latest round is kept whole (`latest_path`: the `run --format
json` document, evidence included), replaced atomically each round: evidence is too bulky to
keep for every round, but the console shows it for the newest one."""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from fleetcheck.core.model import BROKER_WIDE, Report, Status, place, worst_per_host
from fleetcheck.files import private_open
from fleetcheck.iso import parse_iso

MAX_BYTES = 10 * 1024 * 1024


def append(report: Report, path: Path, max_bytes: int = MAX_BYTES) -> None:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with private_open(path.with_name(path.name + ".lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _append(report, path, max_bytes)


def _append(report: Report, path: Path, max_bytes: int) -> None:
    try:
        if path.stat().st_size >= max_bytes:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass
    line = {
        "started_at": report.started_at,
        "duration_s": round(report.duration_s, 3),
        "status": report.status.label,
        "rows": [
            {
                "check": r.check,
                "host": r.host,
                "status": r.status.label,
                "summary": r.summary,
                "metrics": r.metrics,
                **({"limits": r.limits} if r.limits else {}),
            }
            for r in report.results
        ],
    }
    text = json.dumps(line, separators=(",", ":"), default=str) + "\n"
    with private_open(path) as f:
        # A write cut short (disk full, a crash) leaves a last line with no newline: start a
        # new line, or this round would be glued to the torn fragment and both lost on read.
        if torn_tail(path):
            text = "\n" + text
        f.write(text)
    write_latest(report, latest_path(path))


def torn_tail(path: Path) -> bool:
    """Whether the file's last byte is not a newline (a line an earlier write left torn)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except FileNotFoundError:
        return False


def latest_path(history_path: Path) -> Path:
    """Where the newest round is kept whole: `history-x.jsonl` -> `history-x.last.json`."""
    return history_path.with_name(history_path.stem + ".last.json")


def write_latest(report: Report, path: Path) -> None:
    """The report as `run --format json` prints it, replaced atomically (readers never see
    half a file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    data = json.dumps(report.to_dict(), indent=1, default=str).encode("utf-8")
    # private like the state: evidence carries log lines and client names
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Round:
    started_at: datetime
    status: Status
    hosts: dict[str, Status]  # model.BROKER_WIDE for broker-wide rows
    summaries: dict[str, list[str]]
    rows: tuple[dict[str, Any], ...] = ()  # as recorded: check, host, status, summary, metrics
    duration_s: float = 0.0


def load(path: Path, since: datetime | None = None) -> tuple[list[Round], int]:
    """Rounds from the rotated file and the current one, oldest first; and how many lines
    could not be read (reported, never fatal: a torn last line after a crash is normal)."""
    rounds: list[Round] = []
    bad = 0
    for p in (path.with_name(path.name + ".1"), path):
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                records: list[Any] = [json.loads(line)]
            except ValueError:
                records = _pieces(line)  # texts, parsed below
            for record in records:
                try:
                    data = json.loads(record) if isinstance(record, str) else record
                    rounds.append(_round(data))
                except (ValueError, KeyError, TypeError, AttributeError):
                    bad += 1
    if since is not None:
        rounds = [r for r in rounds if r.started_at >= since]
    rounds.sort(key=lambda r: r.started_at)
    return rounds, bad


ROUND_START = '{"started_at":'


def _pieces(line: str) -> list[str]:
    """A line that does not parse, split into the torn fragment and the complete round(s) an
    older fleetcheck appended to it without starting a new line (each round begins with
    ROUND_START), so only the fragment is lost."""
    starts = [m.start() for m in re.finditer(re.escape(ROUND_START), line)]
    if not starts or starts == [0]:
        return [line]
    bounds = ([0] if starts[0] > 0 else []) + starts + [len(line)]
    return [line[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _round(data: dict[str, Any]) -> Round:
    statuses = [(place(row["host"]), Status.parse(row["status"])) for row in data["rows"]]
    summaries: dict[str, list[str]] = {}
    for row, (host, status) in zip(data["rows"], statuses, strict=True):
        if status is not Status.OK:
            summaries.setdefault(host, []).append(f"{row['check']}: {row['summary']}")
    return Round(
        started_at=parse_iso(data["started_at"]),
        status=Status.parse(data["status"]),
        hosts={h: s for h, s in worst_per_host(statuses).items() if h is not None},
        summaries=summaries,
        rows=tuple(data["rows"]),
        duration_s=float(data.get("duration_s") or 0.0),
    )


def timeline(rounds: list[Round], host: str | None = None) -> list[tuple[str, list[Status | None]]]:
    """Per host, one cell per round (None where the host was not in that round)."""
    hosts = sorted({h for r in rounds for h in r.hosts}, key=lambda h: (h != BROKER_WIDE, h))
    if host is not None:
        hosts = [h for h in hosts if h == host]
    return [(h, [r.hosts.get(h) for r in rounds]) for h in hosts]


def went_dark(rounds: list[Round], host: str) -> datetime | None:
    """When the host's current bad streak began (None if it is OK now)."""
    start = None
    for r in rounds:
        s = r.hosts.get(host)
        if s is None:
            continue
        if s is Status.OK:
            start = None
        elif start is None:
            start = r.started_at
    return start
