"""The console's HTML pages: one `string.Template` skeleton, every value through
`html.escape` on its way in (host names, summaries and evidence carry log content, so a log
line `<script>` must arrive as text). No script, no inline style, no external resource: the
pages work under `default-src 'none'; style-src 'self'; img-src 'self'`.

Renderers decide nothing: statuses, since-when and the chart series come from the Snapshot.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from html import escape
from string import Template
from typing import Any
from urllib.parse import urlencode

from fleetcheck.console import svg
from fleetcheck.console.charts import Chart
from fleetcheck.console.source import (
    BROKER,
    Grid,
    Point,
    Snapshot,
    changes,
    grid,
    since_from_history,
)
from fleetcheck.core.model import Report, Result, Status
from fleetcheck.core.safe_text import printable
from fleetcheck.parse.duration import format_duration
from fleetcheck.render import host_verdicts, since_text, with_strength
from fleetcheck.render.causes import CauseGroup, layout, left_to_say

# Text and shape, not only colour: readable for colour-blind operators and on paper.
SYMBOL = {Status.OK: "\u2714", Status.WARN: "\u25b2", Status.UNKNOWN: "?", Status.CRIT: "\u2716"}

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #111; background: #fff; }
h1 { font-size: 1.3em; margin: 0 0 .2em; } h2 { font-size: 1.1em; margin: 1.2em 0 .3em; }
nav a { margin-right: 1em; }
.meta { color: #444; }
.banner { border: 3px solid #C62828; padding: .4em .8em; font-weight: bold; margin: .6em 0; }
table { border-collapse: collapse; margin: .4em 0; }
th, td { border: 1px solid #999; padding: .25em .5em; text-align: left; vertical-align: top; }
td.cell a { display: block; text-decoration: none; color: inherit; }
.st { font-weight: bold; white-space: nowrap; }
.st-OK { background: #e8f5e9; } .st-WARN { background: #fff3e0; border: 2px dashed #B26A00; }
.st-UNKNOWN { background: #f3e5f5; border: 2px dotted #6A1B9A; }
.st-CRIT { background: #ffebee; border: 3px solid #C62828; }
.since { color: #333; font-size: .9em; } .flap { font-style: italic; }
.na { color: #888; }
pre { background: #f6f6f6; border: 1px solid #ccc; padding: .5em; white-space: pre-wrap;
      word-break: break-word; max-width: 100em; }
.chart, .strip { display: block; margin: .3em 0 1em; max-width: 100%; height: auto; }
.decision { color: #444; margin: 0; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr));
          gap: 0 2em; }
@media print { nav { display: none; } }
"""

FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16">'
    '<rect width="16" height="16" rx="3" fill="#0072B2"/></svg>'
)

PAGE = Template(
    """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title</title>
<link rel="stylesheet" href="/static/console.css">
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
</head>
<body>
<nav><a href="/">Grid</a><a href="/charts">Charts</a><a href="/report.json">report.json</a>\
<a href="/metrics">metrics</a><a href="/healthz">healthz</a></nav>
$body
</body>
</html>
"""
)


def e(value: Any) -> str:
    """`value` as HTML text: control characters made visible (a history file can hold raw
    ones; line breaks stay, for the evidence's <pre>), then escaped."""
    text = "\n".join(printable(line) for line in str(value).split("\n"))
    return escape(text, quote=True)


def page(title: str, body: str) -> str:
    return PAGE.substitute(title=e(title), body=body)


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "never"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(seconds: float) -> str:
    return format_duration(max(0.0, round(seconds)))


def row_link(check: str, host: str | None) -> str:
    return "/row?" + urlencode({"check": check, "host": host or ""})


def host_link(host: str) -> str:
    return "/host?" + urlencode({"host": host})


def ordered(g: Grid) -> Grid:
    """The grid in a stable order: hosts worst first, then by name (broker-wide rows first
    among equals), checks by name, whatever order the patrol finished in."""
    worst_of: dict[str, int] = {}
    for (host, _check), r in g.cells.items():
        worst_of[host] = max(worst_of.get(host, 0), r.status.rank)
    hosts = sorted(g.hosts, key=lambda h: (-worst_of.get(h, 0), h != BROKER, h))
    return Grid(sorted(g.checks), hosts, g.cells)


def status_badge(status: Status) -> str:
    return f'<span class="st st-{status.label}">{SYMBOL[status]} {status.label}</span>'


def header(snap: Snapshot, now: datetime, stale_after: float, title: str) -> str:
    parts = [f"<h1>{e(title)}</h1>"]
    finished = snap.finished_at
    r = snap.head  # not snap.report: the charts page never needs the newest round's rows
    if r is None or finished is None:
        parts.append(
            '<p class="banner">No patrol round recorded yet: start the timer '
            "(<code>fleetcheck timer</code>) or <code>fleetcheck serve --every 15m</code>.</p>"
        )
        return "".join(parts)
    age = (now - finished).total_seconds()
    if age > stale_after:
        parts.append(
            f'<p class="banner">STALE: the newest round finished {e(_ago(age))} ago '
            f"(expected every {e(_ago(stale_after / 2))}): what you see may be old.</p>"
        )
    counts = ", ".join(f"{n} {label}" for label, n in r.counts.items() if n)
    parts.append(
        f'<p class="meta">Fleet {status_badge(r.status)}; newest round {e(_when(finished))} '
        f"({e(_ago(age))} ago), {r.rows} rows: {e(counts or 'none')}; "
        f"{snap.round_count} rounds in the history.</p>"
    )
    banner = snap.banner
    if banner:
        parts.append(f'<p class="banner">{e(banner)}</p>')
    if snap.unreadable:
        parts.append(f'<p class="meta">{snap.unreadable} unreadable history lines skipped.</p>')
    return "".join(parts)


def cell(result: Result | None, report: Report, check: str, host: str) -> str:
    if result is None:
        return '<td class="na" title="not checked on this row">\u2014</td>'
    since = since_text(result, report)
    extra = ""
    if since:
        extra += f'<br><span class="since">for {e(since.rstrip(" ~"))}</span>'
    if report.standing_of(result).flapping:
        extra += '<br><span class="flap">~ flapping</span>'
    return (
        f'<td class="cell st-{result.status.label}">'
        f'<a href="{e(row_link(check, None if host == BROKER else host))}" '
        f'title="{e(with_strength(result, result.summary))}">'
        f"{status_badge(result.status)}{extra}</a></td>"
    )


GRID_PAGE = 500  # hosts a grid page shows (worst first): 10,000 hosts' cells are 7 MB


def grid_page(snap: Snapshot, now: datetime, stale_after: float, number: int = 1) -> str:
    """The grid; a fleet of more than GRID_PAGE hosts is paged (`number`, from 1), worst
    hosts first, so the first page holds every host that is not OK (up to GRID_PAGE)."""
    report = snap.report  # first: rows that cannot be read are in the header's banner
    body = [header(snap, now, stale_after, "fleetcheck: the fleet now")]
    if report is not None:
        g = ordered(grid(report))
        if len(g.hosts) > GRID_PAGE:
            pages = -(-len(g.hosts) // GRID_PAGE)
            number = min(max(number, 1), pages)
            first = (number - 1) * GRID_PAGE
            shown = g.hosts[first : first + GRID_PAGE]
            links = [
                f'<a href="/?page={n}">{"previous" if n < number else "next"}</a>'
                for n in (number - 1, number + 1)
                if 1 <= n <= pages
            ]
            body.append(
                f'<p class="meta">Hosts {first + 1}-{first + len(shown)} of {len(g.hosts)}, '
                f"worst first (page {number} of {pages}) {' '.join(links)}</p>"
            )
            g = Grid(g.checks, shown, g.cells)
        body.append(
            '<table class="grid"><thead><tr><th scope="col">host</th>'
            + "".join(f'<th scope="col">{e(c)}</th>' for c in g.checks)
            + "</tr></thead><tbody>"
        )
        for host in g.hosts:
            name = e(host) if host == BROKER else f'<a href="{e(host_link(host))}">{e(host)}</a>'
            body.append(f'<tr><th scope="row">{name}</th>')
            for check in g.checks:
                body.append(cell(g.cells.get((host, check)), report, check, host))
            body.append("</tr>")
        body.append("</tbody></table>")
        body.append(
            '<p class="meta">Legend: '
            + ", ".join(f"{SYMBOL[s]} {s.label}" for s in Status)
            + "; \u2014 not checked; \u201cfor\u201d: since when the row has this status; "
            "\u201c~ flapping\u201d: it changed often lately. Each cell opens its row.</p>"
        )
        body.append(not_ok(report))
    return page("fleetcheck", "".join(body))


def not_ok(report: Report) -> str:
    """The "Not OK" list: rows that share one cause under it, told once (each row a link);
    then the broker-wide rows and one line per host for the rest."""
    bad = [r for r in report.sorted_results() if r.status is not Status.OK]
    entries = layout(bad)
    groups = [x for x in entries if isinstance(x, CauseGroup)]
    alone = tuple(x for x in entries if isinstance(x, Result))
    verdicts = host_verdicts(replace(report, results=alone))
    broker_bad = [r for r in alone if r.host is None]
    if not (groups or verdicts or broker_bad):
        return ""
    out = ["<h2>Not OK</h2><ul>"]
    for g in groups:
        out.append(
            f"<li>{status_badge(g.status)} <strong>{e(g.cause)}</strong> ({e(g.extent())})<ul>"
        )
        out += [_row_item(r, with_strength(r, left_to_say(r))) for r in g.rows]
        out.append("</ul></li>")
    out += [_row_item(r, with_strength(r, r.summary)) for r in broker_bad]
    for host, status, text in verdicts:
        out.append(f'<li>{status_badge(status)} <a href="{e(host_link(host))}">{e(text)}</a></li>')
    out.append("</ul>")
    return "".join(out)


def _row_item(r: Result, said: str) -> str:
    link = f'<a href="{e(row_link(r.check, r.host))}">{e(r.host or BROKER)} / {e(r.check)}</a>'
    return f"<li>{status_badge(r.status)} {link}" + (f": {e(said)}" if said else "") + "</li>"


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        out = []
        for k, v in value.items():
            out.extend(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return [(prefix, value)]


def _values(what: str, flat: list[tuple[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{e(k)}</td><td>{e(json.dumps(v, default=str))}</td></tr>" for k, v in flat
    )
    return f"<table><tr><th>{what}</th><th>value</th></tr>{rows}</table>"


def row_page(
    snap: Snapshot,
    check: str,
    host: str | None,
    window: list[Any],
    now: datetime,
    stale_after: float,
) -> str | None:
    """The row's page, or None when the newest round has no such row."""
    from fleetcheck.console.source import row_timeline

    head = snap.head
    part = snap.part(host) if head is not None else None  # not every row: this host's
    result = next((r for r in part.results if r.check == check), None) if part else None
    points = row_timeline(window, check, host)
    if result is None and not any(p.status for p in points):
        return None
    where = host if host is not None else BROKER
    body = [header(snap, now, stale_after, f"{where} / {check}")]
    if result is not None and part is not None:
        standing = part.standing_of(result)
        since = standing.since
        if since is None:
            hist_since = since_from_history(points)
            since = _when(hist_since) if hist_since else None
        body.append(
            f"<p>{status_badge(result.status)} {e(result.summary)}</p><table>"
            f"<tr><th>since</th><td>{e(since or 'this round')}</td></tr>"
            f"<tr><th>bad rounds in a row</th><td>{e(standing.bad_rounds)}</td></tr>"
            f"<tr><th>alerting</th><td>{'yes' if standing.pages(result.status) else 'no'}</td></tr>"
            f"<tr><th>flapping</th><td>{'yes' if standing.flapping else 'no'}</td></tr>"
            f"<tr><th>probe took</th><td>{e(f'{result.duration_s:.3f}s')}</td></tr></table>"
        )
        body.append("<h2>Metrics</h2>")
        flat = _flatten(result.metrics)
        has_metrics = flat and flat != [("", {})]
        body.append(_values("metric", flat) if has_metrics else '<p class="na">none</p>')
        if result.limits:  # the settings the verdict was judged against (not measurements)
            body.append("<h2>Limits</h2>" + _values("limit", _flatten(result.limits)))
        body.append("<h2>Evidence</h2>")
        if result.evidence is None:
            body.append('<p class="na">none recorded for this round</p>')
        else:
            text = json.dumps(result.evidence, indent=2, default=str, ensure_ascii=False)
            body.append(f"<pre>{e(text)}</pre>")
    if host is not None and head is not None:
        body.append(explanation_html(snap, part or Report("", 0.0, ()), head.started_at, host))
    body.append(f"<h2>Timeline ({len(points)} rounds in the window)</h2>")
    t0 = window[0].started_at.timestamp() if window else 0.0
    t1 = window[-1].started_at.timestamp() if window else 0.0
    strip = [(p.at.timestamp(), p.status, p.summary) for p in points]
    body.append(svg.status_strip(strip, t0, t1))
    body.append(_changes_table(changes(points)))
    return page(f"{where} / {check}", "".join(body))


def explanation_html(snap: Snapshot, part: Report, started_at: str, host: str) -> str:
    """`fleetcheck explain HOST`'s text for the newest round (`part`: it with only the rows
    of `host`; `started_at`: its start), from the recorded files (the console never
    patrols): the same lines, each escaped."""
    from fleetcheck.iso import parse_iso
    from fleetcheck.rounds import explain as explaining

    now = parse_iso(started_at)
    sources = [f"the newest recorded round ({explaining.when(now)})"]
    rounds = snap.host_window(None, host)  # from a database: this host's rows only
    past = [r for r in rounds if r.started_at < now]
    if past:
        sources.append(f"the history ({len(past)} earlier rounds)")
    else:
        sources.append("no earlier round in the history: this round only")
    hints = explaining.hints_from_registry()
    told = explaining.explain(
        host, part.results, rounds, now, sources, hints, standing=part.standing
    )
    lines = "\n".join(told.lines())
    return (
        f'<h2 id="explain">Explanation: {e(host)}</h2>'
        f"<p>{status_badge(told.status)}</p><pre>{e(lines)}</pre>"
    )


def host_page(snap: Snapshot, host: str, now: datetime, stale_after: float) -> str | None:
    """One host: its explanation and a link to each of its rows; None when the newest round
    has no row of it."""
    head = snap.head
    mine = snap.part(host) if head is not None else Report("", 0.0, ())  # this host's rows
    rows = sorted(mine.results, key=lambda r: (-r.status.rank, r.check))  # worst first, as the grid
    if head is None or not rows:
        return None
    body = [header(snap, now, stale_after, f"{host}: explained")]
    body.append("<h2>Rows</h2><ul>")
    for r in rows:
        body.append(
            f'<li>{status_badge(r.status)} <a href="{e(row_link(r.check, host))}">'
            f"{e(r.check)}</a>: {e(r.summary)}</li>"
        )
    body.append("</ul>")
    body.append(explanation_html(snap, mine, head.started_at, host))
    return page(f"{host}: explained", "".join(body))


def _changes_table(points: list[Point]) -> str:
    if not points:
        return ""
    rows = "".join(
        f"<tr><td>{e(_when(p.at))}</td><td>{status_badge(p.status)}</td>"
        f"<td>{e(p.summary)}</td></tr>"
        for p in reversed(points)
        if p.status is not None
    )
    return f"<table><tr><th>from</th><th>status</th><th>summary</th></tr>{rows}</table>"


def chart_html(chart: Chart, t0: float, t1: float) -> str:
    fmt = format_duration if chart.unit == "seconds" else svg.format_count
    lines = [(s.label, s.points, s.reference) for s in chart.series]
    return (
        f'<section id="{e(chart.key)}"><h2>{e(chart.title)}</h2>'
        f'<p class="decision">{e(chart.decision)}</p>'
        + svg.line_chart(chart.title, lines, t0, t1, fmt)
        + "</section>"
    )


def sections_of(drawn: list[Chart], t0: float, t1: float) -> str:
    """The charts' sections, over the time span t0..t1."""
    return '<div class="charts">' + "".join(chart_html(c, t0, t1) for c in drawn) + "</div>"


def charts_page(
    snap: Snapshot, sections: str, window_text: str, now: datetime, stale_after: float
) -> str:
    head = header(snap, now, stale_after, f"fleetcheck: the last {window_text}")
    return page("fleetcheck charts", head + sections)


def error_page(status: int, text: str) -> str:
    return page(f"{status}", f"<h1>{status}</h1><p>{e(text)}</p>")
