"""Statuses and the flat result row every output format consumes.

Results are immutable values: checks produce them, the runner collects them, renderers only
read them. Nothing here does I/O.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from fleetcheck.core.safe_text import one_line, printable, printable_tree


class Status(enum.Enum):
    """A verdict. `code` is the Nagios exit code; `rank` orders severity for "worst".

    Ranking: OK < WARN < UNKNOWN < CRIT. UNKNOWN outranks WARN because a check that could not
    look may be hiding anything; it stays below CRIT because a proven failure is the stronger,
    more actionable signal at 3 a.m. The exit code of a patrol is the `code` of its worst status,
    so a patrol with one CRIT and one UNKNOWN exits 2.
    """

    OK = ("OK", 0, 0)
    WARN = ("WARN", 1, 1)
    UNKNOWN = ("UNKNOWN", 3, 2)
    CRIT = ("CRIT", 2, 3)

    def __init__(self, label: str, code: int, rank: int) -> None:
        self.label = label
        self.code = code
        self.rank = rank

    def __str__(self) -> str:
        return self.label

    @classmethod
    def parse(cls, text: str) -> Status:
        return cls[text.upper()]


class Strength(enum.Enum):
    """How strong the evidence behind a verdict is.

    Ordered strongest first: `proof` is a direct observation (a probe answered or did not, a
    connection is absent, a count is over its cap); `behaviour` a signature seen over time
    (silence while work waits, reconnects, a loop that took seconds to answer); `inference`
    a conclusion from timing or from peers; `absence` that nothing was found (no error lines,
    nothing to look at), the weakest there is: it never proves health.
    """

    PROOF = "proof"
    BEHAVIOUR = "behaviour"
    INFERENCE = "inference"
    ABSENCE = "absence"

    def __str__(self) -> str:
        return self.value

    @property
    def words(self) -> str:
        """How the table and plain outputs say it when it is weak (empty for proof)."""
        return {
            "proof": "",
            "behaviour": "seen as behaviour over time",
            "inference": "inferred, to be confirmed",
            "absence": "nothing seen: absence of evidence",
        }[self.value]


STRENGTHS = tuple(s.value for s in Strength)


def worst(statuses: Iterable[Status]) -> Status:
    """The most severe status; OK for an empty patrol (nothing was judged bad)."""
    return max(statuses, key=lambda s: s.rank, default=Status.OK)


# How every text output names the place of a broker-wide row (host None). Host names use only
# letters, digits and `._:@-` (config.SAFE_NAME), so no host can be called this: the `*` and
# the space are what make it impossible to mistake for a host named "broker".
BROKER_WIDE = "* broker-wide"


def place(host: str | None) -> str:
    """The HOST column's text: the host's name, or BROKER_WIDE for a broker-wide row."""
    return BROKER_WIDE if host is None else host


# Every metric name ends in the suffix of its unit, so each output format can label it without
# guessing: JSON keeps the names, Prometheus spells the base unit out. A name with none of these
# suffixes is a plain count (connections, entries, replicas). Metrics are numbers only; strings
# (a zone name, a link state) belong in `evidence`.
UNIT_SUFFIXES: dict[str, str] = {
    "_s": "seconds",
    "_bytes": "bytes",
    "_ratio": "ratio",
    "_per_s": "per_second",
}


def number(value: Any) -> float | None:
    """A metric's value as a number; None for a flag, a text, a map or nothing."""
    return None if isinstance(value, bool) or not isinstance(value, int | float) else float(value)


def row_id(check: str, host: str | None, item: str | None = None) -> str:
    """A row's key in every file that remembers rows (state, history, notify ledger): CHECK|HOST,
    then |ITEM for a row of one item. Check and host names hold no `|` (SAFE_NAME), so the
    item is everything after the second one, whatever it holds."""
    base = f"{check}|{host or ''}"
    return base if item is None else f"{base}|{item}"


_SAFE: dict[str, Callable[[Any], Any]] = {
    "summary": one_line,
    "evidence": printable_tree,
    "metrics": printable_tree,
}
_SAFE |= {"limits": printable_tree, "check": printable, "host": printable, "item": one_line}
_SAFE |= {"headline": printable, "cause": one_line}


@dataclass(frozen=True)
class Result:
    """One (check, host, item) verdict: what the check said of it this round, nothing more.
    What the row's past adds (since when, alerting, silenced) is its Standing, kept beside
    it in the Report.

    `host` is None for broker-wide rows; `item` names one of several things a check judges on
    that host or broker (a log file, a queue), None for a row that is the whole (check, host).
    `summary` is one line an operator can act on.
    `metrics` holds numbers (and small maps of numbers) under public names; `evidence` holds
    the few raw facts behind the verdict.
    """

    check: str
    host: str | None
    status: Status
    summary: str
    metrics: dict[str, Any] = field(default_factory=dict)
    evidence: Any = None
    duration_s: float = 0.0
    # The configured limits this verdict was judged against (thresholds, caps, minimums):
    # kept apart from `metrics`, which hold measurements only, so no output publishes a
    # setting as if it were a reading
    limits: dict[str, Any] = field(default_factory=dict)
    # The name of the metric that is this row's headline (Nagios' first perfdata value, the
    # console's number); the check declares it (`Check.headline`), None when it has none
    headline: str | None = None
    # The check's note to its own next round (counters to judge by their increase, limits
    # last seen): part of what the check said, so it stays on the verdict; the state file
    # keeps it, no output shows it
    carry: dict[str, Any] | None = None
    # How strong the evidence behind this verdict is (Strength's value); every row that is not
    # OK carries one (the runner fills in the check's declared default), an OK row may
    evidence_strength: str | None = None
    # The one cause this row shares with others (a broker that did not answer, a host key that
    # changed, a jump host): renderers group rows of one cause under it; None: its own
    cause: str | None = None
    # Which of the check's items on this host the row judges (a log file, a queue); None: the
    # row is the whole (check, host). Rows of one (check, host) differ by their item
    item: str | None = None

    def __post_init__(self) -> None:
        # Text remote parties control (and a row rebuilt from an old file: any field) is made
        # safe here, once, so no output can print a control character (see core.safe_text)
        for name, clean in _SAFE.items():
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, clean(value))
        if self.evidence_strength is not None and self.evidence_strength not in STRENGTHS:
            # only a row rebuilt from a damaged file can get here (checks are held to the
            # four values by the contract test): an unknown grade is no grade
            object.__setattr__(self, "evidence_strength", None)
        if self.evidence_strength is None and self.status is Status.UNKNOWN:
            # a row that could not look rests on nothing seen, whoever built it
            object.__setattr__(self, "evidence_strength", Strength.ABSENCE.value)

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        """What the row is about: (check, host, item), unique in a report."""
        return (self.check, self.host, self.item)

    @property
    def id(self) -> str:
        """The row's key as files keep it (row_id)."""
        return row_id(self.check, self.host, self.item)

    @property
    def label(self) -> str:
        """The CHECK column's text: the check, and its item in brackets for an item's row."""
        return self.check if self.item is None else f"{self.check}[{self.item}]"

    def with_duration(self, seconds: float) -> Result:
        return replace(self, duration_s=round(seconds, 6))

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "check": self.check,
            "host": self.host,
            **({"item": self.item} if self.item is not None else {}),
            "status": self.status.label,
            "summary": self.summary,
            "metrics": self.metrics,
            "headline": self.headline,
            "limits": self.limits,
            "evidence": self.evidence,
            "duration_s": self.duration_s,
        }
        if self.evidence_strength is not None:
            row["evidence_strength"] = self.evidence_strength
        if self.cause is not None:
            row["cause"] = self.cause
        return row


def worst_per_host(rows: Iterable[tuple[str | None, Status]]) -> dict[str | None, Status]:
    """Each host's worst status over its (host, status) rows; None is the broker-wide rows."""
    out: dict[str | None, Status] = {}
    for host, status in rows:
        seen = out.get(host)
        if seen is None or status.rank > seen.rank:
            out[host] = status
    return out


@dataclass(frozen=True)
class Standing:
    """What a row's past adds to its verdict, made by the round's one state step
    (rounds.state.step): since when it has had its status (UTC ISO), its bad rounds in a row,
    whether it alerts (None: no state kept, then every row not OK does), whether it is
    flapping, and why and until when it is silenced (it shows, marked, but neither alerts,
    notifies nor raises the exit code)."""

    since: str | None = None
    bad_rounds: int = 0
    alerting: bool | None = None
    flapping: bool = False
    silenced: str | None = None

    def __post_init__(self) -> None:  # a standing rebuilt from a file holds what it holds
        if self.since is not None:
            object.__setattr__(self, "since", printable(self.since))
        if self.silenced is not None:
            object.__setattr__(self, "silenced", one_line(self.silenced))

    def pages(self, status: Status) -> bool:
        """Whether a row of `status` with this standing should page."""
        if self.silenced is not None:
            return False
        return status is not Status.OK if self.alerting is None else self.alerting

    def fields(self, status: Status) -> dict[str, Any]:
        """The standing's keys in a row of the report's document (none without state)."""
        row: dict[str, Any] = {} if self.silenced is None else {"silenced": self.silenced}
        if self.since is not None:
            row |= {"since": self.since, "bad_rounds": self.bad_rounds}
            row |= {"alerting": self.pages(status), "flapping": self.flapping}
        return row


NO_STANDING = Standing()

REPORT_SCHEMA = "fleetcheck.report/3"
# Documents of these schemas are still read back (history, the console's --from): version 1
# lacks only evidence_strength and cause, version 2 only the rows of items (`item`)
READABLE_SCHEMAS = ("fleetcheck.report/1", "fleetcheck.report/2", REPORT_SCHEMA)


@dataclass(frozen=True)
class Report:
    """One round's record: its verdicts, each row's standing (by row id; a row without one
    has NO_STANDING), its notes and timing. Built once per round and handed unchanged to
    every output; the exit code is derived here, once."""

    started_at: str  # UTC ISO 8601 ending in Z
    duration_s: float
    results: tuple[Result, ...]
    notes: tuple[str, ...] = ()  # about the patrol itself (e.g. it had to slow down)
    standing: Mapping[str, Standing] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Notes quote the patrol's transports (a throttled host's words) and a rebuilt
        # report's times come from a file: made safe like a Result's text
        object.__setattr__(self, "notes", tuple(one_line(n) for n in self.notes))
        object.__setattr__(self, "started_at", printable(self.started_at))

    @cached_property
    def status(self) -> Status:
        """The worst row that is not silenced: a silenced row never raises the exit code.
        Made once (the results cannot change): a pass over every row, asked for by the
        history's round, the newest round's file, the exit code and each renderer."""
        quiet = {k for k, s in self.standing.items() if s.silenced is not None}
        # the set first: four statuses at most, not one key call per row
        return worst({r.status for r in self.results if not quiet or r.id not in quiet})

    @property
    def remembered(self) -> bool:
        """Whether the round had state: its rows know since when (the SINCE column)."""
        return any(s.since for s in self.standing.values())

    def standing_of(self, row: Result) -> Standing:
        """The row's standing: the one way every output reads it."""
        return self.standing.get(row.id, NO_STANDING) if self.standing else NO_STANDING

    @property
    def exit_code(self) -> int:
        return self.status.code

    def worst_by_host(self) -> dict[str | None, Status]:
        """Each host's worst status (None: the broker-wide rows)."""
        return worst_per_host((r.host, r.status) for r in self.results)

    def sorted_results(self) -> list[Result]:
        """Worst first, then by host (broker-wide rows first), then by check and item."""
        return sorted(
            self.results,
            key=lambda r: (-r.status.rank, r.host is not None, r.host or "", r.check, r.item or ""),
        )

    def counts(self) -> dict[str, int]:
        found = Counter(r.status.label for r in self.results)
        return {s.label: found[s.label] for s in Status}

    def to_dict(self) -> dict[str, Any]:
        """The `run --format json` document: each row its verdict and its standing, flat."""
        rows = [r.to_dict() | self.standing_of(r).fields(r.status) for r in self.sorted_results()]
        status = self.status  # once: each is a pass over every row
        return {
            "schema": REPORT_SCHEMA,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 6),
            "status": status.label,
            "exit_code": status.code,
            "results": rows,
            **({"notes": list(self.notes)} if self.notes else {}),
        }
