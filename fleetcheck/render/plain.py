"""--format plain: for cron mail and pipes. No colour, no box drawing (tabulate)."""

from __future__ import annotations

from tabulate import tabulate

from fleetcheck.model import Report
from fleetcheck.render import footer, host_verdicts, since_text


def render(report: Report) -> str:
    remembered = any(r.since for r in report.results)
    headers = ["STATUS", "HOST", "CHECK", "SUMMARY"] + (["SINCE"] if remembered else [])
    rows = []
    for r in report.sorted_results():
        row = [r.status.label, r.host or "(broker)", r.check, r.summary]
        if remembered:
            row.append(since_text(r, report))
        rows.append(row)
    out = [text for _, _, text in host_verdicts(report)]
    if out:
        out.append("")
    out.append(tabulate(rows, headers=headers, tablefmt="simple") if rows else "(no checks ran)")
    out.append(footer(report))
    return "\n".join(out)
