"""Rows that share one cause (a broker that does not answer, a host key, a jump host), told
once with their rows under it: the text renderers and the console lay rows out with it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fleetcheck.core.model import Result, Status, place


@dataclass(frozen=True)
class CauseGroup:
    """Rows that share one cause (a broker that does not answer, a host key, a jump host):
    told once, with its rows under it."""

    cause: str
    rows: tuple[Result, ...]  # worst first, as the report sorts them

    @property
    def status(self) -> Status:
        return max((r.status for r in self.rows), key=lambda s: s.rank)

    @property
    def places(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.rows:
            seen.setdefault(place(r.host), None)
        return list(seen)

    def extent(self) -> str:
        """'5 rows on broker-wide and 3 hosts', '2 rows on host n8'."""
        hosts = sorted({r.host for r in self.rows if r.host is not None})
        parts = []
        if any(r.host is None for r in self.rows):
            parts.append("broker-wide")
        if len(hosts) == 1:
            parts.append(f"host {hosts[0]}")
        elif hosts:
            parts.append(f"{len(hosts)} hosts")
        return f"{len(self.rows)} rows on {' and '.join(parts)}"

    def head(self) -> str:
        """The line that tells the cause: the cause and its extent."""
        return f"{self.cause} ({self.extent()})"


def left_to_say(result: Result) -> str:
    """What a grouped row's summary adds to its cause: '' when the cause says it all, the
    summary with the cause taken out when it quotes it ('could not look'), else the whole
    summary."""
    summary, cause = " ".join(result.summary.split()), result.cause or ""
    if not cause:
        return summary
    if summary in cause:
        return ""
    if cause in summary:
        return summary.replace(cause, "").strip(" :;,-")
    return summary


def layout(results: Iterable[Result]) -> list[Result | CauseGroup]:
    """The rows in order, those sharing a cause gathered into one CauseGroup at the place of
    its worst row (a cause with a single row is just that row)."""
    rows = list(results)
    by_cause: dict[str, list[Result]] = {}
    for r in rows:
        if r.cause:
            by_cause.setdefault(r.cause, []).append(r)
    out: list[Result | CauseGroup] = []
    placed: set[str] = set()
    for r in rows:
        if r.cause and len(by_cause[r.cause]) > 1:
            if r.cause not in placed:
                placed.add(r.cause)
                out.append(CauseGroup(r.cause, tuple(by_cause[r.cause])))
            continue
        out.append(r)
    return out
