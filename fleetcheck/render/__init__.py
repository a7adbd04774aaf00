"""Renderers: one module per output format, each reading a Report and deciding nothing."""

from __future__ import annotations

from fleetcheck.model import Report, Status, worst


def hosts_not_ok(report: Report) -> list[tuple[str, Status]]:
    """Hosts whose worst row is not OK, worst first (the at-a-glance line)."""
    per_host: dict[str, list[Status]] = {}
    for r in report.results:
        if r.host is not None:
            per_host.setdefault(r.host, []).append(r.status)
    bad = [(h, worst(s)) for h, s in per_host.items() if worst(s) is not Status.OK]
    return sorted(bad, key=lambda hs: (-hs[1].rank, hs[0]))


def footer(report: Report) -> str:
    counts = report.counts()
    parts = [f"{n} {label}" for label, n in counts.items() if n]
    return (
        f"{len(report.results)} checks: {', '.join(parts) or 'none'}; "
        f"patrol {report.duration_s:.2f}s, started {report.started_at}; "
        f"status {report.status.label} (exit {report.exit_code})"
    )


def glance(report: Report) -> str | None:
    bad = hosts_not_ok(report)
    if not bad:
        return None
    return "Hosts not OK: " + ", ".join(f"{h} {s.label}" for h, s in bad)
