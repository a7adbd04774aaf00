"""`fleetcheck explain HOST`: one host's story in UTC, from this patrol's rows and the rounds
the state and history files remember (field note 7: grade the evidence, say what would
confirm it).

What it tells: when the host last looked healthy, what changed and since when (its log silent
since its last line, its broker connections gone, its routes changed, an error burst from),
which of those came first, the likely cause with the strength of its evidence, and what
would confirm it. On a healthy host: that nothing is wrong, and on which evidence.

The clues and causes are rules over rows, written as data (metric and evidence keys) by the
check whose rows they read (`Check.clues`, `Check.causes`): nothing here names a check. A
check may add its own cause through `Check.explain_hint` (the caller passes the lookup in).
`explain` is pure and table-tested; the CLI and the console only gather its inputs and print
its lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fleetcheck.core.declarations import Cause as CauseRule
from fleetcheck.core.declarations import Clue
from fleetcheck.core.model import NO_STANDING, Result, Standing, Status, Strength, number, worst
from fleetcheck.core.safe_text import one_line
from fleetcheck.iso import iso_utc, parse_iso
from fleetcheck.rounds.history import Round

SCHEMA = "fleetcheck.explain/1"
NO_ROWS = "no check has a row for this host in this patrol (none enabled applies to it)"
NO_ROW_STANDING: Mapping[str, Standing] = {}


# ------------------------------------------------------------------- the rules, as data
# (check, clue) and (check, cause) pairs: what the checks of a host's rows declare
Rules = tuple[Sequence[tuple[str, Clue]], Sequence[tuple[str, CauseRule]]]


def declared_rules(checks: Iterable[str]) -> Rules:
    """The clues and causes the checks called `checks` declare (`Check.clues`, `causes`),
    through the registry: the clues by check, the causes most upstream first (see
    `fleetcheck.core.declarations.Cause`)."""
    from fleetcheck.core import registry

    names = sorted(set(checks))
    causes = sorted(registry.declared("causes", names), key=lambda pair: pair[1].upstream)
    return registry.declared("clues", names), causes


@dataclass(frozen=True)
class Hint:
    """A cause a check declares for one of its rows (`Check.explain_hint`)."""

    cause: str
    confirm: str
    strength: str = Strength.INFERENCE.value


# ------------------------------------------------------------------- the explanation
@dataclass(frozen=True)
class Event:
    at: datetime
    what: str
    check: str
    how: str = ""  # how the time is known: "" exact, or "first seen ..." / "since at least"

    def to_dict(self) -> dict[str, Any]:
        return {"at": iso_utc(self.at, "seconds"), "what": self.what, "check": self.check,
                "time_known": self.how or "exact"}  # fmt: skip


@dataclass(frozen=True)
class Cause:
    text: str
    strength: str
    confirm: str
    rows: tuple[str, ...]  # the checks whose rows show it
    row_strength: str | None = None  # how strong the row's own evidence is

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "strength": self.strength, "confirm": self.confirm,
                "rows": list(self.rows), "row_strength": self.row_strength}  # fmt: skip


@dataclass(frozen=True)
class Explanation:
    host: str
    status: Status
    at: datetime
    sources: tuple[str, ...]
    last_healthy: datetime | None
    last_healthy_note: str
    events: tuple[Event, ...] = ()
    cause: Cause | None = None
    other_causes: tuple[Cause, ...] = ()
    peers: tuple[dict[str, Any], ...] = ()
    healthy_because: tuple[dict[str, str], ...] = ()
    unknown: tuple[dict[str, str], ...] = ()

    @property
    def exit_code(self) -> int:
        return self.status.code

    @property
    def first(self) -> Event | None:
        return self.events[0] if self.events else None

    def lines(self) -> list[str]:
        """The text `fleetcheck explain` prints and the console shows, one line each."""
        out = [f"{self.host}: {self.status.label} at {when(self.at)}"]
        out += [f"from: {s}" for s in self.sources]
        if self.status is Status.OK:
            out.append("nothing is wrong: every row of this host is OK in this patrol:")
            for row in self.healthy_because:
                out.append(f"  {row['check']} ({strength_words(row['strength'])}): "
                           f"{row['summary']}")  # fmt: skip
        else:
            shown = when(self.last_healthy) if self.last_healthy else "never"
            out.append(f"last looked healthy: {shown}{self.last_healthy_note}")
        if self.events:
            out.append("timeline (UTC):")
            for ev in self.events:
                how = f" [{ev.how}]" if ev.how else ""
                out.append(f"  {when(ev.at)}  {ev.what}{how}")
            first = self.events[0]
            out.append(f"first change: {when(first.at)}: {first.what}")
        if self.cause is not None:
            c = self.cause
            graded = f" (the row itself: {c.row_strength})" if c.row_strength else ""
            out.append(f"likely cause ({strength_words(c.strength)}): {c.text}; "
                       f"seen in {', '.join(c.rows)}{graded}")  # fmt: skip
            out.append(f"confirm with: {c.confirm}")
            for other in self.other_causes:
                out.append(f"also: {other.text} ({strength_words(other.strength)})")
        for row in self.unknown:
            where = f"{row['check']}: " if row["check"] != "-" else ""
            out.append(f"could not look: {where}{row['summary']}")
        for p in self.peers:
            out.append(f"peers ({strength_words('inference')}): {p['check']}: {p['text']}")
        return [one_line(line) for line in out]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "host": self.host,
            "status": self.status.label,
            "exit_code": self.exit_code,
            "at": iso_utc(self.at),
            "sources": list(self.sources),
            "nothing_wrong": self.status is Status.OK,
            "last_healthy": iso_utc(self.last_healthy) if self.last_healthy else None,
            "timeline": [e.to_dict() for e in self.events],
            "first_change": self.first.to_dict() if self.first else None,
            "cause": self.cause.to_dict() if self.cause else None,
            "other_causes": [c.to_dict() for c in self.other_causes],
            "peers": list(self.peers),
            "healthy_because": list(self.healthy_because),
            "could_not_look": list(self.unknown),
            "lines": self.lines(),
        }


def when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def strength_words(value: str | None) -> str:
    """`proof`, or the weak grades with what they mean (`inference, to be confirmed`)."""
    try:
        grade = Strength(value)
    except ValueError:
        return str(value)
    return grade.value if not grade.words else f"{grade.value}: {grade.words}"


# ------------------------------------------------------------------- reading the rows
def _metric(values: dict[str, Any] | None, name: str | None) -> float | None:
    return number(values.get(name)) if name is not None and isinstance(values, dict) else None


def _in_range(value: float | None, at_least: float | None, at_most: float | None) -> bool:
    if value is None:
        return False
    return (at_least is None or value >= at_least) and (at_most is None or value <= at_most)


def _time(evidence: Any, key: str | None) -> datetime | None:
    if key is None or not isinstance(evidence, dict) or not isinstance(evidence.get(key), str):
        return None
    try:
        moment = parse_iso(evidence[key])
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _series(
    rounds: Sequence[Round], host: str, check: str
) -> list[tuple[datetime, dict[str, Any]]]:
    """This host's recorded rows of `check`, oldest first, with the round's time."""
    out = []
    for rnd in rounds:
        for row in rnd.rows:
            if isinstance(row, dict) and row.get("host") == host and row.get("check") == check:
                out.append((rnd.started_at, row))
                break
    return out


def _streak(
    series: list[tuple[datetime, dict[str, Any]]], holds: Callable[[dict[str, Any]], bool]
) -> tuple[datetime, str] | None:
    """When the run of recorded rounds in which `holds` is true, ending with the newest one,
    began; and how that time is known. None when the newest recorded round does not hold."""
    if not series or not holds(series[-1][1]):
        return None
    start = len(series) - 1
    while start > 0 and holds(series[start - 1][1]):
        start -= 1
    at = series[start][0]
    if start == 0:
        return at, "since at least: the first round recorded"
    return at, f"first seen then; {when(series[start - 1][0])} did not show it"


def _row_since(
    row: Result, state: str | None, series: list[tuple[datetime, dict[str, Any]]], now: datetime
) -> tuple[datetime, str]:
    """Since when `row` has had its status: the state's `since`, else the history, else now."""
    if state:
        try:
            since = parse_iso(state)
            if since.tzinfo is None:
                since = since.replace(tzinfo=UTC)
            if since < now:
                return since, "since, by the state file"
        except ValueError:
            pass
    label = row.status.label
    found = _streak(series, lambda r: r.get("status") == label)
    if found is not None:
        return found
    return now, "first seen in this patrol"


SHORT = 160  # characters of a row's summary quoted in a timeline line


def _quoted(evidence: Any, path: tuple[str | int, ...]) -> str | None:
    """The text at `path` (keys and list indexes) in a row's evidence, or None."""
    here = evidence
    for step in path:
        if isinstance(step, int) and isinstance(here, list) and -len(here) <= step < len(here):
            here = here[step]
        elif isinstance(step, str) and isinstance(here, dict):
            here = here.get(step)
        else:
            return None
    return here if isinstance(here, str) else None


def _fill(
    text: str,
    row: Result,
    value: float | None,
    at: datetime | None,
    line_at: tuple[tuple[str | int, ...], ...] = (("last_line",),),
) -> str:
    summary = row.summary if len(row.summary) <= SHORT else row.summary[: SHORT - 3] + "..."
    line = next(filter(None, (_quoted(row.evidence, path) for path in line_at)), None)
    line = f'"{line[:SHORT]}"' if line else "(not kept)"
    return text.format(
        line=line,
        summary=summary, value=value if value is not None else 0.0,
        at=when(at) if at else "an unknown time",
    )  # fmt: skip


def _events(
    rows: Sequence[Result],
    rounds: Sequence[Round],
    host: str,
    now: datetime,
    clues: Sequence[tuple[str, Clue]],
    standing: Mapping[str, Standing],
) -> list[Event]:
    def since(row: Result, series: list[tuple[datetime, dict[str, Any]]]) -> tuple[datetime, str]:
        return _row_since(row, standing.get(row.id, NO_STANDING).since, series, now)

    out: list[Event] = []
    covered: set[str] = set()
    for check, clue in clues:
        for row in rows:
            if row.check != check or (row.status is Status.OK and not clue.any_status):
                continue
            value = _metric(row.metrics, clue.metric)
            if clue.metric is not None and not _in_range(value, clue.at_least, clue.at_most):
                continue
            series = _series(rounds, host, row.check)
            at = _time(row.evidence, clue.at_key)
            how = ""
            if clue.at_key is not None and at is None and clue.metric is None:
                continue  # a clue that is its time, without one
            if at is None and clue.metric is not None:
                metric = clue.metric

                def holds(r: dict[str, Any], m: str = metric, c: Clue = clue) -> bool:
                    return _in_range(_metric(r.get("metrics"), m), c.at_least, c.at_most)

                found = _streak(series, holds)
                at, how = found if found is not None else (None, "")
            if at is None:
                at, how = since(row, series)
            out.append(Event(at, _fill(clue.words, row, value, at, clue.line), row.check, how))
            covered.add(row.check)
    for row in rows:  # every other row not OK gets its line
        if row.status is Status.OK or row.check in covered:
            continue
        at, how = since(row, _series(rounds, host, row.check))
        out.append(Event(at, f"{row.check} {row.status.label}: {row.summary}", row.check, how))
    out.sort(key=lambda e: (e.at, e.check))
    return out


def _causes(
    rows: Sequence[Result],
    hints: Callable[[Result], Hint | None],
    rules: Sequence[tuple[str, CauseRule]],
) -> list[Cause]:
    bad = sorted((r for r in rows if r.status not in (Status.OK, Status.UNKNOWN)),
                 key=lambda r: (-r.status.rank, r.check))  # fmt: skip
    out: list[Cause] = []
    seen: set[str] = set()

    def add(cause: Cause) -> None:
        if cause.text not in seen:
            seen.add(cause.text)
            out.append(cause)

    shared: dict[str, list[Result]] = {}
    for r in rows:  # a cause the checks already named, shared by rows (a host key, a jump host)
        if r.cause and r.status is not Status.OK:
            shared.setdefault(r.cause, []).append(r)
    for text, rs in shared.items():
        add(Cause(text, rs[0].evidence_strength or Strength.PROOF.value,
                  "the rows that share it: " + ", ".join(r.check for r in rs),
                  tuple(r.check for r in rs), rs[0].evidence_strength))  # fmt: skip
    for r in bad:
        hint = hints(r)
        if hint is not None:
            add(Cause(hint.cause, hint.strength, hint.confirm, (r.check,), r.evidence_strength))
    matched: set[str] = set()  # one rule per row: the first (the most specific) that fits
    for check, rule in rules:
        for r in bad:
            if r.check in matched or r.check != check or r.status.label not in rule.statuses:
                continue
            value = _metric(r.metrics, rule.metric)
            if rule.metric is not None and not _in_range(value, rule.at_least, rule.at_most):
                continue
            matched.add(r.check)
            add(
                Cause(
                    _fill(rule.cause, r, value, None),
                    rule.strength,
                    rule.confirm,
                    (r.check,),
                    r.evidence_strength,
                )
            )
    for r in bad:  # no rule knows it: the row's own words are the best lead
        if not any(r.check in c.rows for c in out):
            add(Cause(f"{r.check}: {r.summary}", r.evidence_strength or Strength.PROOF.value,
                      f"the row's evidence (`fleetcheck run --host {r.host} --format json`)",
                      (r.check,), r.evidence_strength))  # fmt: skip
    return out


def _last_healthy(rounds: Sequence[Round], host: str) -> tuple[datetime | None, str]:
    seen = [r for r in rounds if host in r.hosts]
    ok = [r for r in seen if r.hosts[host] is Status.OK]
    if not rounds:
        return None, " (no history to look back in)"
    if not seen:
        return None, f" (not in the {len(rounds)} recorded rounds)"
    if not ok:
        return None, (f" in the {len(seen)} recorded rounds since {when(seen[0].started_at)}")
    last = ok[-1]
    later = [r for r in seen if r.started_at > last.started_at]
    if later:
        return (
            last.started_at,
            f" (then {later[0].hosts[host].label} from {when(later[0].started_at)})",
        )
    return last.started_at, " (the newest recorded round)"


def explain(
    host: str,
    rows: Sequence[Result],
    rounds: Sequence[Round] | None,
    now: datetime,
    sources: Sequence[str] = (),
    hints: Callable[[Result], Hint | None] = lambda r: None,
    rules: Rules | None = None,
    standing: Mapping[str, Standing] = NO_ROW_STANDING,
) -> Explanation:
    """The host's explanation from its rows of this patrol (with `since` from their
    `standing`, by row id, when the state kept one) and the recorded rounds before `now`
    (None or empty: no history). `rules`: the clues and causes to read them with; None: what
    the rows' checks declare."""
    rows = [r for r in rows if r.host == host]
    past = [r for r in rounds or () if r.started_at < now]
    status = worst(r.status for r in rows)
    peers = tuple(
        {"check": r.check, **p}
        for r in rows
        if isinstance(r.evidence, dict) and isinstance(r.evidence.get("peers"), list)
        for p in r.evidence["peers"]
        if isinstance(p, dict) and isinstance(p.get("text"), str)
    )
    unknown = tuple({"check": r.check, "summary": r.summary} for r in rows
                    if r.status is Status.UNKNOWN)  # fmt: skip
    if not rows:  # nothing looked at is never "nothing wrong"
        said = {"check": "-", "summary": NO_ROWS}
        last, note = _last_healthy(past, host)
        return Explanation(host, Status.UNKNOWN, now, tuple(sources), last, note,
                           unknown=(said,))  # fmt: skip
    if status is Status.OK:
        because = tuple(
            {
                "check": r.check,
                "summary": r.summary,
                "strength": r.evidence_strength or Strength.PROOF.value,
            }  # fmt: skip
            for r in sorted(rows, key=lambda r: r.check)
        )
        return Explanation(host, status, now, tuple(sources), now, "", (), None, (), peers,
                           because, ())  # fmt: skip
    last, note = _last_healthy(past, host)
    clues, cause_rules = rules if rules is not None else declared_rules(r.check for r in rows)
    causes = _causes(rows, hints, cause_rules)
    return Explanation(
        host, status, now, tuple(sources), last, note,
        tuple(_events(rows, past, host, now, clues, standing)),
        causes[0] if causes else None, tuple(causes[1:]), peers, (), unknown,
    )  # fmt: skip


def hints_from_registry() -> Callable[[Result], Hint | None]:
    """Each row's check asked for its own cause (`Check.explain_hint`), through the registry
    (the one place that imports checks)."""
    from fleetcheck.core import registry

    def hint(row: Result) -> Hint | None:
        check = registry.find(row.check)
        said = check.explain_hint(row) if check is not None else None
        if not said:
            return None
        cause, confirm = said
        return Hint(one_line(cause), one_line(confirm))

    return hint
