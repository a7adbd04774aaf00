"""--format plain: for cron mail and pipes. No colour, no box drawing (tabulate)."""

from __future__ import annotations

from tabulate import tabulate

from fleetcheck.model import Report
from fleetcheck.render import footer, glance


def render(report: Report) -> str:
    rows = [
        [r.status.label, r.host or "(broker)", r.check, r.summary] for r in report.sorted_results()
    ]
    out = []
    line = glance(report)
    if line:
        out.append(line)
    out.append(
        tabulate(rows, headers=["STATUS", "HOST", "CHECK", "SUMMARY"], tablefmt="simple")
        if rows
        else "(no checks ran)"
    )
    out.append(footer(report))
    return "\n".join(out)
