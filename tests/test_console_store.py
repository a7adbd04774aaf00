"""The console over the history's database (issue 29): each page reads only what it shows,
and shows what the whole history would have shown; past MAX_LINES hosts a per-host chart
draws the hosts that matter (fewest connections, oldest logs); past GRID_PAGE hosts the grid
is paged, worst first. And a JSONL history migrated then exported round-trips: every round's
rows as written, again after the export is migrated into a new database."""

from __future__ import annotations

import io
import json
import marshal
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fleetcheck.console import chart_reads, html
from fleetcheck.console import source as console
from fleetcheck.console.charts import charts as draw_charts
from fleetcheck.core.model import Report, Result, Status
from fleetcheck.rounds import history
from tests.history_util import jsonl_append

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def fleet_round(i: int, hosts: int) -> Report:
    rows = [
        Result("queue_depth", None, Status.OK, f"depth {i % 9}", metrics={"depth": i % 9}),
        Result("live_hash", None, Status.OK, "entries", metrics={"fresh": 40, "stale": i % 3}),
    ]
    for h in range(hosts):
        conns = 0 if (h == 3 and i >= 4) else 5 + (h % 4)
        age = 600.0 + h if h in (7, 11) else 5.0 + (i + h) % 30
        status = Status.CRIT if conns == 0 else Status.OK
        rows.append(
            Result("clients", f"h{h:02d}", status, f"{conns} connections", {"connections": conns})
        )
        rows.append(Result("logs", f"h{h:02d}", Status.OK, f"{age:.0f}s ago", {"age_s": age}))
    return Report(iso(T0 + timedelta(minutes=15 * i)), 0.5, tuple(rows))


def recorded(tmp_path: Path, hosts: int, rounds: int) -> tuple[Path, list[Report]]:
    path = tmp_path / "history.jsonl"
    reports = [fleet_round(i, hosts) for i in range(rounds)]
    for r in reports:
        history.append(r, path)
    return path, reports


def strip_as_of(rounds: list[history.Round]) -> list[list[dict[str, Any]]]:
    return [[{k: v for k, v in r.items() if k != "as_of"} for r in rnd.rows] for rnd in rounds]


def test_pages_from_the_database_read_what_the_whole_history_would_show(tmp_path: Path) -> None:
    path, reports = recorded(tmp_path, hosts=6, rounds=106)
    snap = console.Source(path).snapshot()
    assert snap.stored is not None and snap.rounds == []  # nothing loaded up front
    assert snap.round_count == len(reports)
    assert snap.report is not None and snap.report.started_at == reports[-1].started_at
    whole = history.load(path)[0]
    memory = console.Snapshot(snap.report, whole)
    since = T0 + timedelta(minutes=15 * 20)
    # a host's rounds: every round of the window, with that host's rows only
    mine = snap.host_window(since, "h03")
    assert [r.started_at for r in mine] == [r.started_at for r in memory.window(since)]
    assert {row["host"] for r in mine for row in r.rows} == {"h03"}
    now = T0 + timedelta(minutes=15 * len(reports))
    from_db = html.row_page(snap, "clients", "h03", mine, now, 1800)
    from_memory = html.row_page(memory, "clients", "h03", memory.window(since), now, 1800)
    assert from_db is not None and from_db == from_memory
    assert html.host_page(snap, "h03", now, 1800) == html.host_page(memory, "h03", now, 1800)
    # a fleet of at most MAX_LINES hosts: the charts as the whole window draws them
    drawn, t0, t1 = chart_reads.window_charts(snap, since, {}, now)
    assert drawn == draw_charts(memory.window(since), {})
    assert t0 == since.timestamp() and t1 == whole[-1].started_at.timestamp()


def test_a_large_fleet_charts_the_hosts_that_matter(tmp_path: Path) -> None:
    path, reports = recorded(tmp_path, hosts=chart_reads.MAX_LINES + 8, rounds=8)
    snap = console.Source(path).snapshot()
    now = T0 + timedelta(hours=3)
    drawn = {c.key: c for c in chart_reads.window_charts(snap, T0, {}, now)[0]}
    conns = drawn["connections"]
    assert len(conns.series) == chart_reads.MAX_LINES
    assert conns.series[0].label == "h03"  # the one at zero first
    assert f"of {chart_reads.MAX_LINES + 8} hosts with the fewest connections" in conns.title
    assert dict(conns.series[0].points)[(T0 + timedelta(minutes=60)).timestamp()] == 0
    ages = [s.label for s in drawn["logs"].series]
    assert ages[:2] == ["h11", "h07"]  # the oldest logs first
    # each line, drawn from the rows stored, holds at every round the value that round has
    whole_rounds = history.load(path)[0]
    full = {c.key: {s.label: s.points for s in c.series} for c in draw_charts(whole_rounds, {})}
    for key in ("connections", "logs"):
        for line in drawn[key].series:
            if line.reference:
                continue
            for t, v in full[key][line.label]:
                held = [pv for pt, pv in line.points if pt <= t][-1]
                assert held == v, (key, line.label, t)
            assert len(line.points) < 2 * len(full[key][line.label])
    # the broker-wide charts as the whole history draws them
    whole = draw_charts(whole_rounds, {})
    assert [c.series for c in whole if c.key in ("queue", "live")] == [
        drawn["queue"].series,
        drawn["live"].series,
    ]


def test_a_large_grid_is_paged_worst_first() -> None:
    hosts = html.GRID_PAGE + 20
    rows = [
        Result("clients", f"h{h:04d}", Status.WARN if h == hosts - 1 else Status.OK, "x")
        for h in range(hosts)
    ]
    snap = console.Snapshot(Report(iso(T0), 1.0, tuple(rows)), [])
    first = html.grid_page(snap, T0, 1800)
    assert f"Hosts 1-{html.GRID_PAGE} of {hosts}" in first and 'href="/?page=2"' in first
    assert f"h{hosts - 1:04d}" in first  # the WARN host on the first page
    assert first.count('<tr><th scope="row">') == html.GRID_PAGE
    second = html.grid_page(snap, T0, 1800, 2)
    assert f"Hosts {html.GRID_PAGE + 1}-{hosts} of {hosts}" in second
    assert second.count('<tr><th scope="row">') == 20 and 'href="/?page=1"' in second


def test_a_migrated_history_exports_every_row_and_round_trips(tmp_path: Path) -> None:
    old = tmp_path / "old" / "history.jsonl"
    reports = [fleet_round(i, hosts=4) for i in range(101)]
    for r in reports:
        jsonl_append(r, old)
    written = [json.loads(line) for line in old.read_text().splitlines()]
    history.append(fleet_round(len(reports), hosts=4), old)  # migrates
    out = io.StringIO()
    assert history.export_jsonl(old, out) == len(reports) + 1
    exported = [json.loads(line) for line in out.getvalue().splitlines()]

    def same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=False):
            assert (x["started_at"], x["status"]) == (y["started_at"], y["status"])

            # a row the export carried from an earlier round says so (as_of); the rest as is
            def key(r: dict[str, Any]) -> str:
                return json.dumps({k: v for k, v in r.items() if k != "as_of"}, sort_keys=True)

            assert Counter(map(key, x["rows"])) == Counter(map(key, y["rows"]))

    same(written, exported[: len(written)])  # every row of every migrated round, as written
    again = tmp_path / "again" / "history.jsonl"
    again.parent.mkdir()
    again.write_text(out.getvalue())
    history.append(fleet_round(len(reports) + 1, hosts=4), again)  # migrates the export
    out2 = io.StringIO()
    history.export_jsonl(again, out2)
    same(exported, [json.loads(line) for line in out2.getvalue().splitlines()][: len(exported)])


def test_the_charts_page_never_makes_the_newest_rounds_rows(tmp_path: Path) -> None:
    """The charts page's header needs the newest round's status and counts only: its 30,000
    rows at 10,000 hosts are made Results when a page shows them, not before, and the
    header says the same thing either way."""
    from fleetcheck.console.server import Console

    path, reports = recorded(tmp_path, hosts=20, rounds=6)  # h03 CRIT from round 4
    now = T0 + timedelta(minutes=76)
    source = console.Source(path)
    app = Console(source, 900.0, 86400.0, "1d", {}, clock=lambda: now)
    code, _, charts_page = app.route("/charts", {})
    snap = source.snapshot()
    assert code == 200 and snap.later is not None and not snap.later.parsed
    newest = reports[-1]
    assert snap.head == console.Head.of(newest)
    assert "42 rows: 41 OK, 1 CRIT" in charts_page.decode()
    assert snap.finished_at == datetime.fromisoformat(newest.started_at) + timedelta(seconds=0.5)
    before = html.header(snap, now, 1800, "t")
    code, _, grid_page = app.route("/", {})
    assert code == 200 and snap.later.parsed and snap.report is not None
    assert snap.report.to_dict() == newest.to_dict()
    assert snap.head == console.Head.of(newest)
    whole = replace(snap, given=newest, later=None)  # the same snapshot, its report given
    assert html.header(snap, now, 1800, "t") == before == html.header(whole, now, 1800, "t")


def test_newest_rows_that_cannot_be_made_results_fall_back_to_the_database(
    tmp_path: Path,
) -> None:
    """A whole-round file whose header reads but whose rows do not (a row's metrics not a
    map): once a page needs the rows, the newest round comes from the database and the
    banner says why, as it does for a file that does not parse at all."""
    path, reports = recorded(tmp_path, hosts=4, rounds=2)
    latest = history.latest_path(path)
    data = history.read_latest(latest)
    data["results"][0]["metrics"] = "not a map"
    latest.write_bytes(marshal.dumps(data))
    snap = console.Source(path).snapshot()
    assert snap.later is not None and snap.banner is None  # the header alone reads
    now = T0 + timedelta(minutes=16)
    page = html.grid_page(snap, now, 1800)
    report = snap.report
    assert report is not None and report.started_at == reports[-1].started_at
    assert [r.evidence for r in report.results] == [None] * len(report.results)  # from the rows
    assert snap.banner is not None and "unreadable (ValueError" in snap.banner
    assert "unreadable (ValueError" in page


def test_a_hosts_and_a_rows_page_make_only_that_hosts_rows_results(tmp_path: Path) -> None:
    """The host's and the row's pages read that host's rows from the newest round's file
    without making every row a Result; the page is what the whole round would show, and a
    broken row of another host does not hide this one."""
    path, reports = recorded(tmp_path, hosts=6, rounds=5)
    latest = history.latest_path(path)
    data = history.read_latest(latest)
    other = next(i for i, r in enumerate(data["results"]) if r["host"] == "h05")
    data["results"][other]["metrics"] = "not a map"  # only a whole parse trips on it
    latest.write_bytes(marshal.dumps(data))
    now = T0 + timedelta(minutes=15 * 5)
    snap = console.Source(path).snapshot()
    host_text = html.host_page(snap, "h03", now, 1800)
    row_text = html.row_page(snap, "clients", "h03", snap.host_window(None, "h03"), now, 1800)
    assert snap.later is not None and not snap.later.parsed  # no Result made for every row
    assert host_text is not None and row_text is not None
    assert "0 connections" in host_text and "0 connections" in row_text
    assert html.host_page(snap, "h99", now, 1800) is None
    # the same pages from the whole round, as before
    whole = console.Snapshot(reports[-1], history.load(path)[0])
    assert [r.check for r in whole.part("h03").results] == [
        r.check for r in snap.part("h03").results
    ]
    assert [r.summary for r in whole.part("h03").results] == [
        r.summary for r in snap.part("h03").results
    ]


def test_a_host_whose_name_was_made_safe_has_its_page(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    evil = "w\x1b[31m1"
    history.append(
        Report(iso(T0), 0.5, (Result("clients", evil, Status.CRIT, "0 connections"),)), path
    )
    snap = console.Source(path).snapshot()
    shown = console.printable(evil)
    assert shown != evil
    rows = snap.part(shown).results
    assert [r.host for r in rows] == [shown] and rows[0].status is Status.CRIT


def test_a_hosts_own_broken_row_falls_back_to_the_database(tmp_path: Path) -> None:
    path, reports = recorded(tmp_path, hosts=4, rounds=2)
    latest = history.latest_path(path)
    data = history.read_latest(latest)
    mine = next(i for i, r in enumerate(data["results"]) if r["host"] == "h01")
    data["results"][mine]["metrics"] = "not a map"
    latest.write_bytes(marshal.dumps(data))
    snap = console.Source(path).snapshot()
    rows = snap.part("h01").results
    assert {r.check for r in rows} == {"clients", "logs"}  # from the database's round
    assert snap.banner is not None and "unreadable (ValueError" in snap.banner
