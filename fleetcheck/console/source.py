"""What `fleetcheck serve` shows, read from the files scheduled patrols already write: the
history and the newest round kept whole next to it. Nothing here patrols or writes.

`Source` re-reads the files when they change, so a console started once follows every new
round; the grid, a row's timeline and the chart series are computed from a `Snapshot`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from fleetcheck import collector
from fleetcheck.core.model import (
    BROKER_WIDE,
    READABLE_SCHEMAS,
    REPORT_SCHEMA,
    Report,
    Result,
    Standing,
    Status,
)
from fleetcheck.core.safe_text import one_line, printable, printable_tree
from fleetcheck.iso import iso_utc, parse_iso
from fleetcheck.rounds import history as hist

BROKER = BROKER_WIDE  # the grid's row for broker-wide checks (host None)
_MALFORMED = (ValueError, KeyError, TypeError, AttributeError)  # a document that is not one


def _said(problems: Sequence[str | None]) -> str | None:
    """The problems as the one line the pages' banner shows (None: there are none)."""
    said = [p for p in problems if p]
    return one_line("; ".join(said))[:1000] if said else None


def _result(r: dict[str, Any], **more: Any) -> Result:
    """A Result from a row as a report or a history line writes it."""
    return Result(
        check=str(r["check"]),
        host=None if r.get("host") is None else str(r["host"]),
        status=Status.parse(str(r["status"])),
        summary=str(r.get("summary", "")),
        metrics=dict(r.get("metrics") or {}),
        limits=dict(r.get("limits") or {}),
        item=_text_or_none(r.get("item")),
        **more,
    )


def report_from_dict(data: dict[str, Any]) -> Report:
    """A Report back from the `fleetcheck.report/3` JSON (what `run --format json` prints; a
    version 1 document lacks only evidence_strength and cause, a version 2 one items).
    Raises ValueError/KeyError/TypeError on a document that is not one."""
    if data.get("schema") not in READABLE_SCHEMAS:
        raise ValueError(f"not a {REPORT_SCHEMA} document")
    results, standing = [], {}
    for r in data["results"]:
        has_state = "since" in r
        row = _result(
            r,
            evidence=r.get("evidence"),
            duration_s=float(r.get("duration_s") or 0.0),
            headline=None if r.get("headline") is None else str(r["headline"]),
            evidence_strength=_text_or_none(r.get("evidence_strength")),
            cause=_text_or_none(r.get("cause")),
        )
        results.append(row)
        if has_state or r.get("silenced"):
            standing[row.id] = Standing(
                since=str(r["since"]) if has_state and r.get("since") is not None else None,
                bad_rounds=int(r.get("bad_rounds") or 0),
                alerting=bool(r.get("alerting")) if has_state else None,
                flapping=bool(r.get("flapping")),
                silenced=_text_or_none(r.get("silenced")),
            )
    parse_iso(str(data["started_at"]))  # a malformed time is a malformed document
    started = str(data["started_at"])
    return Report(started, float(data["duration_s"]), tuple(results), standing=standing)


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def report_from_round(rnd: hist.Round) -> Report:
    """The newest round from its history line alone (no evidence): for histories written
    before the whole-round file existed."""
    from fleetcheck.core import registry

    def headline(name: str, metrics: dict[str, Any]) -> str | None:
        check = registry.find(name)  # history lines do not keep it: the check declares it
        return check.headline_of(metrics) if check is not None else None

    results = tuple(
        _result(r, headline=headline(str(r["check"]), dict(r.get("metrics") or {})))
        for r in rnd.rows
    )
    return Report(iso_utc(rnd.started_at), rnd.duration_s, results)


def clean_row(row: Any) -> tuple[dict[str, Any] | None, str | None]:
    """A history row with the types every page relies on: (row, None) as recorded, (degraded
    row, why) or (None, why) when it cannot be placed. One bad line must cost its own fields,
    never every page."""
    if not isinstance(row, dict):
        return None, f"a row is a {type(row).__name__}, not a map"
    check, host = row.get("check"), row.get("host")
    if not isinstance(check, str) or not (host is None or isinstance(host, str)):
        return None, f"a row's check/host is {type(check).__name__}/{type(host).__name__}"
    try:
        Status.parse(str(row.get("status")))
    except (KeyError, AttributeError):
        return None, f"{check} on {host or 'the broker'}: status {str(row.get('status'))[:40]!r}"
    why = []
    out = dict(row)
    for key in ("metrics", "limits"):
        if key in out and out[key] is not None and not isinstance(out[key], dict):
            why.append(f"{key} is a {type(out[key]).__name__}, not a map")
            del out[key]
    if "summary" in out and not isinstance(out["summary"], str):
        why.append(f"summary is a {type(out['summary']).__name__}, not text")
        out["summary"] = json.dumps(out["summary"], default=str)[:200]
    if not why:
        return row, None
    return out, f"{check} on {host or 'the broker'}: {', '.join(why)}"


def clean_round(rnd: hist.Round) -> tuple[hist.Round, list[str]]:
    """`rnd` with each row through `clean_row`; and what was wrong, one phrase per row."""
    rows, problems = [], []
    for row in rnd.rows:
        kept, why = clean_row(row)
        if why is not None:
            problems.append(why)
        if kept is not None:
            rows.append(kept)
    if not problems:
        return rnd, []
    return replace(rnd, rows=tuple(rows)), problems


@dataclass(frozen=True)
class Head:
    """What a page's header says of the newest round: its time, its status and its counts."""

    started_at: str
    duration_s: float
    status: Status
    counts: dict[str, int]
    rows: int

    @classmethod
    def of(cls, report: Report) -> Head:
        counts, rows = report.counts(), len(report.results)
        return cls(report.started_at, report.duration_s, report.status, counts, rows)


def head_from_dict(data: dict[str, Any]) -> Head:
    """The Head of a `fleetcheck.report/3` document without making its rows Results (the
    expensive part). Raises as `report_from_dict` does."""
    if data.get("schema") not in READABLE_SCHEMAS:
        raise ValueError(f"not a {REPORT_SCHEMA} document")
    started = str(data["started_at"])
    parse_iso(started)
    counts = {s.label: 0 for s in Status}
    worst_rank, status = -1, Status.OK
    for r in data["results"]:
        st = Status.parse(str(r["status"]))
        counts[st.label] += 1
        if _text_or_none(r.get("silenced")) is None and st.rank > worst_rank:
            worst_rank, status = st.rank, st
    return Head(printable(started), float(data["duration_s"]), status, counts, len(data["results"]))


class Later:
    """The newest round's file, its rows made `Result`s only when a page first needs them
    (the charts page needs only its Head). A document whose rows cannot be made Results is
    unreadable then: `fallback` gives the newest round from the history, `problem` says why."""

    def __init__(
        self, path: Path, data: dict[str, Any], fallback: Callable[[], Report | None]
    ) -> None:
        self.head = head_from_dict(data)
        self.problem: str | None = None
        self._path = path
        self._data: dict[str, Any] | None = data
        self._fallback = fallback
        self._report: Report | None = None
        self._lock = threading.Lock()

    @property
    def parsed(self) -> bool:
        return self._data is None

    def part(self, host: str | None) -> Report:
        """The newest round with only one host's rows (None: the broker-wide rows), made Results
        without making the other 29,997 at 10,000 hosts (a host's and a row's page need only
        these). Rows whose host matches only once made safe are found too. A document whose
        rows cannot be read: as `report`, the newest round from the history, `problem` set."""
        with self._lock:
            data = self._data
        if data is not None:
            try:
                raw = data["results"]
                picked = [r for r in raw if isinstance(r, dict) and r.get("host") == host]
                if not picked and host is not None:  # a name that was made safe
                    picked = [
                        r
                        for r in raw
                        if isinstance(r, dict)
                        and isinstance(r.get("host"), str)
                        and printable(r["host"]) == host
                    ]
                return report_from_dict({**data, "results": picked})
            except _MALFORMED:
                pass  # the whole document then: its problem said, the history's round used
        report = self.report() or Report("", 0.0, ())
        return replace(report, results=tuple(r for r in report.results if r.host == host))

    def report(self) -> Report | None:
        with self._lock:
            if self._data is not None:
                try:
                    with collector.paused():  # 30,000 Results that all live on
                        self._report = report_from_dict(self._data)
                except _MALFORMED as e:
                    self.problem = f"{self._path}: unreadable ({type(e).__name__}: {e})"
                    self._report = self._fallback()
                    if self._report is not None:
                        self.head = Head.of(self._report)
                self._data = None
            return self._report


@dataclass(frozen=True)
class Snapshot:
    """Everything one page is rendered from."""

    given: Report | None  # the newest round (None: no round yet, or it is `later`)
    rounds: list[hist.Round]  # every readable round, oldest first
    unreadable: int = 0  # history lines that could not be read
    problem: str | None = None  # why the newest round could not be read whole
    version: int = 0  # changes whenever the files are re-read (a cache key)
    # the history's database when it has one: `rounds` is then left empty and each page
    # reads only what it shows (a host's rounds, a chart's rows); `count`: its rounds
    stored: Path | None = None
    count: int = 0
    later: Later | None = None  # the newest round, its rows parsed when first needed

    @property
    def report(self) -> Report | None:
        """The newest round (None: no round yet)."""
        return self.later.report() if self.later is not None else self.given

    def part(self, host: str | None) -> Report:
        """The newest round with only the rows of `host`, and their standing."""
        if self.later is not None:
            return self.later.part(host)
        report = self.given or Report("", 0.0, ())
        return replace(report, results=tuple(r for r in report.results if r.host == host))

    @property
    def head(self) -> Head | None:
        """The newest round's time, status and counts, without parsing its rows."""
        if self.later is not None:
            return self.later.head
        return None if self.given is None else Head.of(self.given)

    @property
    def banner(self) -> str | None:
        """What the pages say is wrong, the newest round's unreadable rows included."""
        late = self.later.problem if self.later is not None else None
        if late is None:
            return self.problem
        return _said([late, self.problem])

    @property
    def round_count(self) -> int:
        """How many rounds the history holds."""
        return self.count if self.stored is not None else len(self.rounds)

    @property
    def finished_at(self) -> datetime | None:
        """When the newest round finished."""
        head = self.head
        if head is not None:
            return parse_iso(head.started_at) + timedelta(seconds=head.duration_s)
        if self.rounds:
            last = self.rounds[-1]
            return last.started_at + timedelta(seconds=last.duration_s)
        return None

    def window(self, since: datetime) -> list[hist.Round]:
        """Every round at or after `since`, all its rows."""
        if self.stored is not None:
            return _cleaned(hist.load(self.stored, since)[0])
        return [r for r in self.rounds if r.started_at >= since]

    def host_window(self, since: datetime | None, host: str | None) -> list[hist.Round]:
        """The rounds at or after `since` (every round when None), each with at least
        `host`'s rows (None: the broker-wide ones); from a database, only those."""
        if self.stored is not None:
            key = BROKER_WIDE if host is None else host
            return _cleaned(hist.load(self.stored, since, key)[0])
        return self.rounds if since is None else self.window(since)

    def window_key(self, since: datetime) -> tuple[Any, ...]:
        """What the rounds at or after `since` are, for a cache: (first start, how many)."""
        if self.stored is not None:
            from fleetcheck.rounds import store

            with closing(store.connect(self.stored, write=False)) as db:
                whole = store.whole_from(db) or 0
                got = db.execute(
                    "SELECT min(at), count(*) FROM rounds WHERE at >= ? AND id >= ?",
                    (since.timestamp(), whole),
                ).fetchone()
            return tuple(got)
        window = self.window(since)
        return (window[0].started_at if window else None, len(window))


def _cleaned(rounds: list[hist.Round]) -> list[hist.Round]:
    return [clean_round(r)[0] for r in rounds]


def _signature(paths: list[Path]) -> tuple[tuple[int, int, int], ...]:
    out = []
    for p in paths:
        try:
            st = p.stat()
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((0, -1, 0))
    return tuple(out)


@dataclass
class Source:
    """The history file (and the newest round beside it), re-read when either changes."""

    history: Path
    warn: Callable[[str], None] | None = None  # told each new problem once (serve: stderr)
    _warned: str | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _sig: tuple[tuple[int, int, int], ...] | None = field(default=None, repr=False)
    _snap: Snapshot = field(default_factory=lambda: Snapshot(None, []), repr=False)

    @property
    def latest(self) -> Path:
        return hist.latest_path(self.history)

    def _paths(self) -> list[Path]:
        from fleetcheck.rounds import store

        db = store.db_path(self.history)
        return [
            self.history,
            self.history.with_name(self.history.name + ".1"),
            self.latest,
            db,
            db.with_name(db.name + "-wal"),
        ]

    def snapshot(self) -> Snapshot:
        sig = _signature(self._paths())
        with self._lock:
            if sig != self._sig:
                self._snap = replace(self._load(), version=self._snap.version + 1)
                self._sig = sig
                problem = self._snap.problem
                if problem and problem != self._warned and self.warn is not None:
                    self.warn(problem)
                self._warned = problem
            return self._snap

    def _load(self) -> Snapshot:
        stored = self._load_stored()
        if stored is not None:
            return stored
        rounds, bad = hist.load(self.history)
        problems: list[str] = []
        wrong: list[str] = []
        for i, rnd in enumerate(rounds):
            rounds[i], why = clean_round(rnd)
            wrong += [f"round {iso_utc(rnd.started_at)}, {w}" for w in why]
        if wrong:
            problems.append(
                f"{self.history}: {len(wrong)} history rows with wrong-typed fields shown "
                f"without them or skipped (newest: {wrong[-1]})"
            )
        newest = rounds[-1].started_at.timestamp() if rounds else None
        return self._with_newest(Snapshot(None, rounds, bad), newest, lambda: rounds, problems)

    def _load_stored(self) -> Snapshot | None:
        """From the history's database (None: there is none yet, or it is not migrated):
        the newest round and how many there are; the pages read the rest as they need it."""
        from datetime import UTC

        from fleetcheck.rounds import store

        def counted(db: Any) -> Any:
            whole = store.whole_from(db) or 0
            sql = "SELECT count(*), max(at) FROM rounds WHERE id >= ?"
            return db.execute(sql, (whole,)).fetchone()

        got = hist.from_store(self.history, counted)
        if got is None:
            return None
        (count, newest), bad = got

        def recent() -> list[hist.Round]:
            since = datetime.fromtimestamp(newest, UTC)
            return _cleaned(hist.load(self.history, since)[0]) if newest is not None else []

        snap = Snapshot(None, [], bad, stored=self.history, count=int(count))
        return self._with_newest(snap, newest, recent, [])

    def _with_newest(
        self,
        snap: Snapshot,
        newest: float | None,
        recent: Callable[[], list[hist.Round]],
        problems: list[str],
    ) -> Snapshot:
        """`snap` with the newest round: the whole-round file's, its rows left for later, or
        when that lags, is missing or is unreadable the newest of `recent()` history rounds
        (no evidence); and what went wrong."""

        def from_history(said: list[str]) -> Report | None:
            rounds = recent()
            if not rounds:
                return None
            try:
                return report_from_round(rounds[-1])
            except _MALFORMED as e:
                said.append(f"the newest round: unreadable ({type(e).__name__}: {e})")
                return None

        later = None
        try:
            with collector.paused():  # the whole round's dicts, all kept
                data = hist.read_latest(self.latest)
                later = Later(self.latest, data, lambda: from_history([]))
        except FileNotFoundError:
            pass
        except (OSError, *_MALFORMED) as e:
            problems.insert(0, f"{self.latest}: unreadable ({type(e).__name__}: {e})")
        given = None
        if later is None or parse_iso(later.head.started_at).timestamp() < (newest or 0):
            later, given = None, from_history(problems)
        return replace(snap, given=given, problem=_said(problems), later=later)


# ---------------------------------------------------------------- the grid


@dataclass(frozen=True)
class Grid:
    checks: list[str]
    hosts: list[str]  # BROKER first when there are broker-wide rows
    cells: dict[tuple[str, str], Result]  # (host, check) -> row


def grid(report: Report) -> Grid:
    """Hosts x checks in the patrol's own order (config order), broker-wide rows first."""
    checks: dict[str, None] = {}  # ordered sets: a list's `in` made 10,000 hosts take 2 s
    hosts: dict[str, None] = {}
    cells: dict[tuple[str, str], Result] = {}
    broker = False
    for r in report.results:
        checks.setdefault(r.check)
        if r.host is None:
            broker = True
        else:
            hosts.setdefault(r.host)
        cells.setdefault((r.host or BROKER, r.check), r)
    return Grid(list(checks), ([BROKER] if broker else []) + list(hosts), cells)


# ---------------------------------------------------------------- a row over time


@dataclass(frozen=True)
class Point:
    at: datetime
    status: Status | None  # None: the row was not in that round
    summary: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # read straight from a history line, which can be old or hostile: safe as a Result's
        object.__setattr__(self, "summary", one_line(self.summary))
        object.__setattr__(self, "metrics", printable_tree(self.metrics))


def row_timeline(rounds: list[hist.Round], check: str, host: str | None) -> list[Point]:
    """The row in each round (status None: not in that round, or unreadable)."""
    out = []
    for rnd in rounds:
        mine = (r for r in rnd.rows if r.get("check") == check and r.get("host") == host)
        found = next(mine, None)
        if found is None:
            out.append(Point(rnd.started_at, None))
            continue
        try:
            status = Status.parse(str(found.get("status")))
        except KeyError:
            status = None
        metrics = found.get("metrics")
        metrics = metrics if isinstance(metrics, dict) else {}
        out.append(Point(rnd.started_at, status, str(found.get("summary", "")), metrics))
    return out


def changes(points: list[Point]) -> list[Point]:
    """The points where the row's status changed (the first one included)."""
    out: list[Point] = []
    last: Status | None = None
    for p in points:
        if p.status is not None and p.status is not last:
            out.append(p)
            last = p.status
    return out


def since_from_history(points: list[Point]) -> datetime | None:
    """When the row got its current status, as far as the window shows."""
    seen = [p for p in points if p.status is not None]
    if not seen:
        return None
    current = seen[-1].status
    start = seen[-1].at
    for p in reversed(seen):
        if p.status is not current:
            break
        start = p.at
    return start
