"""Renderers: one module per output format, each reading a Report and deciding nothing."""

from __future__ import annotations

from fleetcheck.model import Report, Result, Status


def hosts_not_ok(report: Report) -> list[tuple[str, Status]]:
    """Hosts whose worst row is not OK, worst first (the at-a-glance line)."""
    by_host = report.worst_by_host().items()
    bad = [(h, s) for h, s in by_host if h is not None and s is not Status.OK]
    return sorted(bad, key=lambda hs: (-hs[1].rank, hs[0]))


def footer(report: Report) -> str:
    counts = report.counts()
    parts = [f"{n} {label}" for label, n in counts.items() if n]
    return (
        f"{len(report.results)} checks: {', '.join(parts) or 'none'}; "
        f"patrol {report.duration_s:.2f}s, started {report.started_at}; "
        f"status {report.status.label} (exit {report.exit_code})"
    ) + "".join(f"\nnote: {n}" for n in report.notes)


def _age(since: str | None, now_text: str) -> str | None:
    if since is None:
        return None
    from fleetcheck.iso import parse_iso
    from fleetcheck.parse.duration import format_duration

    try:
        return format_duration((parse_iso(now_text) - parse_iso(since)).total_seconds())
    except ValueError:
        return None


def since_text(result: Result, report: Report) -> str:
    """'2h31m' for a row with memory across rounds, '' without (first round or no state)."""
    age = _age(result.since, report.started_at)
    if age is None or result.since == report.started_at:
        return ""
    return age + (" ~" if result.flapping else "")


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
        since = min((r.since for r in worst_rows if r.since), default=None)
        age = _age(since, report.started_at) if since and since != report.started_at else None
        head = f"{host} {status.label}" + (f" for {age}" if age else "")
        parts = []
        for r in rows:
            text = r.summary
            if text.startswith(f"{host}: "):
                text = text[len(host) + 2 :]
            parts.append(f"{r.check}: {text}")
        out.append((host, status, f"{head}: " + "; ".join(parts)))
    return out
