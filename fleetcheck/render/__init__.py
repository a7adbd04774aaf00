"""Renderers: one module per output format, each reading a Report and deciding nothing.
Rows that share a cause are gathered by fleetcheck.render.causes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleetcheck.core.model import BROKER_WIDE, Report, Result, Status, Strength, place

if TYPE_CHECKING:  # imported where the text outputs group rows: JSON and Nagios never do
    from fleetcheck.render.causes import CauseGroup


# ------------------------------------------------------------------ evidence strength
def strength_words(result: Result) -> str:
    """How a row's evidence is said in words where it is weak ('' for proof, for no grade,
    and for UNKNOWN: a row that could not look says so by its status already). An OK row
    resting on absence says it too: absence is never shown as proof of health."""
    if result.evidence_strength is None or result.status is Status.UNKNOWN:
        return ""
    return Strength(result.evidence_strength).words


def with_strength(result: Result, text: str) -> str:
    """`text` with the row's weak evidence said after it in brackets."""
    words = strength_words(result)
    if not words:
        return text
    return f"{text} [{words}]" if text else f"[{words}]"


def absence_note(report: Report) -> str:
    """The footer's word on OK rows that rest on nothing seen, or ''."""
    n = sum(
        1
        for r in report.results
        if r.status is Status.OK and r.evidence_strength == Strength.ABSENCE.value
    )
    if not n:
        return ""
    rows = "row rests" if n == 1 else "rows rest"
    return f"{n} OK {rows} on nothing seen (absence of evidence, not proof of health)"


def hosts_not_ok(report: Report) -> list[tuple[str, Status]]:
    """Hosts whose worst row is not OK, worst first (the at-a-glance line)."""
    by_host = report.worst_by_host().items()
    bad = [(h, s) for h, s in by_host if h is not None and s is not Status.OK]
    return sorted(bad, key=lambda hs: (-hs[1].rank, hs[0]))


def footer(report: Report) -> str:
    from fleetcheck.parse.duration import format_duration

    counts = report.counts()
    parts = [f"{n} {label}" for label, n in counts.items() if n]
    absence = absence_note(report)
    return (
        (
            f"{len(report.results)} rows: {', '.join(parts) or 'none'}; "
            f"patrol {format_duration(report.duration_s)}, started {report.started_at}; "
            f"status {report.status.label} (exit {report.exit_code})"
        )
        + (f"; {absence}" if absence else "")
        + "".join(f"\nnote: {n}" for n in report.notes)
    )


def _age(since: str | None, now_text: str) -> str | None:
    """format_duration(now - since), or None when `since` is missing, unreadable or not
    before now (a row first seen this round has no age yet)."""
    if since is None:
        return None
    from fleetcheck.iso import parse_iso
    from fleetcheck.parse.duration import format_duration

    try:
        seconds = (parse_iso(now_text) - parse_iso(since)).total_seconds()
    except ValueError:
        return None
    return format_duration(seconds) if seconds > 0 else None


def since_text(result: Result, report: Report) -> str:
    """'2h31m' for a row with memory across rounds, '' without (first round or no state)."""
    standing = report.standing_of(result)
    age = _age(standing.since, report.started_at)
    if age is None:
        return ""
    return age + (" ~" if standing.flapping else "")


FIRST_SEEN = "first seen now"


def since_cell(result: Result, report: Report) -> str:
    """The SINCE column: the row's age in its status once it has history; a first round says
    FIRST_SEEN for a row that is not OK (an OK row seen first has nothing to say); '' without
    state."""
    text = since_text(result, report)
    if text or report.standing_of(result).since is None:
        return text
    return FIRST_SEEN if result.status is not Status.OK else ""


def problem_lines(report: Report) -> list[tuple[Status, str, str]]:
    """One (worst status, place, what) per place with rows not OK, worst first, the
    broker-wide rows under BROKER_WIDE. `what` names the checks by status, worst first, with
    since when (`clients, logs (for 2h31m); WARN routes (first seen now)`); it never repeats
    a row's summary: that is in the row, once."""
    groups: dict[str | None, dict[Status, list[Result]]] = {}
    out = []
    from fleetcheck.render.causes import CauseGroup, layout

    bad = [r for r in report.sorted_results() if r.status is not Status.OK]
    for entry in layout(bad):
        if isinstance(entry, CauseGroup) and len(entry.places) > 1:
            # one cause over several places: one line for it, not one per place
            checks = ", ".join(dict.fromkeys(r.check for r in entry.rows))
            out.append((entry.status, "one cause", f"{checks} ({entry.extent()})"))
            continue
        for r in entry.rows if isinstance(entry, CauseGroup) else (entry,):
            groups.setdefault(r.host, {}).setdefault(r.status, []).append(r)
    for host, by_status in groups.items():
        worst_status = max(by_status, key=lambda s: s.rank)
        parts = []
        for status in sorted(by_status, key=lambda s: -s.rank):
            rows = by_status[status]
            text = ", ".join(r.label for r in rows)
            known = [s for r in rows if (s := report.standing_of(r).since)]
            if known:
                age = _age(min(known), report.started_at)
                text += f" (for {age})" if age else f" ({FIRST_SEEN})"
            parts.append(text if status is worst_status else f"{status.label} {text}")
        out.append((worst_status, place(host), "; ".join(parts)))
    return sorted(out, key=lambda x: (-x[0].rank, x[1] != "one cause", x[1] != BROKER_WIDE, x[1]))


def host_verdicts(report: Report) -> list[tuple[str, Status, str]]:
    """One line per host that is not OK, merging its rows: (host, worst status, text).

    e.g. ("mini", CRIT, "mini CRIT for 2h31m: no broker connections from 192.168.1.30; logs:
    last line 02:21 ... ").
    """
    out = []
    for host, status in hosts_not_ok(report):
        rows = sorted(
            (r for r in report.results if r.host == host and r.status is not Status.OK),
            key=lambda r: -r.status.rank,
        )
        worst_rows = [r for r in rows if r.status is status]
        since = min((s for r in worst_rows if (s := report.standing_of(r).since)), default=None)
        age = _age(since, report.started_at) if since and since != report.started_at else None
        head = f"{host} {status.label}" + (f" for {age}" if age else "")
        parts = []
        for r in rows:
            text = r.summary
            if text.startswith(f"{host}: "):
                text = text[len(host) + 2 :]
            parts.append(f"{r.label}: {with_strength(r, text)}")
        out.append((host, status, f"{head}: " + "; ".join(parts)))
    return out


def grid_lines(report: Report, problems: bool) -> list[tuple[Result | CauseGroup, str, bool]]:
    """The table and plain outputs' lines, worst first (`problems`: only rows not OK):
    (row, its text, whether it sits under its cause), or (a cause's group, the line telling
    it, False) before its rows."""
    from fleetcheck.render.causes import CauseGroup, layout, left_to_say

    shown = [r for r in report.sorted_results() if not (problems and r.status is Status.OK)]
    out: list[tuple[Result | CauseGroup, str, bool]] = []
    for entry in layout(shown):
        if isinstance(entry, CauseGroup):
            out.append((entry, entry.head(), False))
            out += [(r, left_to_say(r), True) for r in entry.rows]
        else:
            out.append((entry, " ".join(entry.summary.split()), False))
    return out


def nothing_shown(report: Report, problems: bool) -> str:
    """What the table and plain outputs say when they have no line to show."""
    return "no problems: every row is OK" if problems and report.results else "(no checks ran)"


def short_label(r: Result, width: int = 24) -> str:
    """The CHECK column of the table and plain outputs: an item longer than `width` keeps its
    end (a log's file name: its path is in the summary too), `logs[…/worker.log]`."""
    if r.item is None or len(r.item) <= width:
        return r.label
    return f"{r.check}[…{r.item[-(width - 1) :]}]"
