"""The console's row and host pages carry `fleetcheck explain`'s text (from the recorded
files, never a patrol), the grid keeps one order (worst first, then name) whatever order a
round's rows came in, and every "Not OK" entry and host is a link (issues 24 and 28)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape
from pathlib import Path

from fleetcheck.console import html
from fleetcheck.console import source as console
from fleetcheck.console.server import Console
from fleetcheck.core.model import Report, Result, Status
from fleetcheck.iso import iso_utc
from fleetcheck.rounds import history
from tests.serve_util import HOSTILE

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def rows(order: list[str]) -> tuple[Result, ...]:
    """A round whose host rows come in `order` (a patrol finishes hosts in any order)."""
    by_host = {
        "mini": [
            Result("routes", "mini", Status.CRIT, "2 IPv4 default routes on one subnet",
                   metrics={"unscoped_default_routes": 2}),
            Result("clients", "mini", Status.CRIT, "no broker connections from 10.0.0.12",
                   metrics={"connections": 0}),
        ],
        "alpha": [Result("clients", "alpha", Status.WARN, "2 broker connections, fewer than "
                         "min_clients 3", metrics={"connections": 2})],
        "n8": [Result("clients", "n8", Status.OK, "12 broker connections",
                      metrics={"connections": 12}),
               Result("logs", "n8", Status.OK, f"last line {HOSTILE}", metrics={"age_s": 9})],
        "zed": [Result("clients", "zed", Status.OK, "4 broker connections",
                       metrics={"connections": 4})],
    }  # fmt: skip
    broker = Result("queue_depth", None, Status.OK, "depth 3", metrics={"depth": 3})
    return (broker, *(r for h in order for r in by_host[h]))


def snap(order: list[str], tmp_path: Path | None = None) -> console.Snapshot:
    rounds = []
    if tmp_path is not None:  # an earlier round in which mini was healthy
        path = tmp_path / "h.jsonl"
        healthy = [
            Result("routes", "mini", Status.OK, "one default route", metrics={}),
            Result("clients", "mini", Status.OK, "4 broker connections",
                   metrics={"connections": 4}),
        ]  # fmt: skip
        history.append(Report(iso_utc(NOW - timedelta(minutes=15)), 1.0, tuple(healthy)), path)
        rounds = history.load(path)[0]
    return console.Snapshot(Report(iso_utc(NOW), 1.0, rows(order)), rounds)


def grid_order(page: str) -> tuple[list[str], list[str]]:
    head = re.search(r"<thead>(.*?)</thead>", page, re.S)
    assert head
    checks = re.findall(r'<th scope="col">([^<]+)</th>', head.group(1))[1:]
    hosts = [unescape(h) for h in re.findall(r'<th scope="row">(?:<a [^>]+>)?([^<]+)', page)]
    return checks, hosts


def test_the_grid_keeps_one_order_worst_first_then_name() -> None:
    first = html.grid_page(snap(["n8", "zed", "mini", "alpha"]), NOW, 1800)
    again = html.grid_page(snap(["alpha", "mini", "zed", "n8"]), NOW, 1800)
    assert grid_order(first) == grid_order(again)
    checks, hosts = grid_order(first)
    assert checks == ["clients", "logs", "queue_depth", "routes"]
    assert hosts == ["mini", "alpha", "* broker-wide", "n8", "zed"]


def test_every_not_ok_entry_and_every_host_is_a_link() -> None:
    page = html.grid_page(snap(["n8", "mini", "alpha", "zed"]), NOW, 1800)
    not_ok = page.split("<h2>Not OK</h2>")[1]
    entries = re.findall(r"<li>(.*?)</li>", not_ok, re.S)
    assert len(entries) == 2 and all('<a href="/host?host=' in e for e in entries), entries
    for host in ("mini", "alpha", "n8", "zed"):
        assert f'<th scope="row"><a href="/host?host={host}">{host}</a></th>' in page


def test_the_row_page_shows_the_explanation(tmp_path: Path) -> None:
    s = snap(["n8", "mini"], tmp_path)
    page = html.row_page(s, "clients", "mini", s.rounds, NOW, 1800)
    assert page is not None
    text = unescape(page)
    assert "Explanation: mini" in text
    assert "last looked healthy: 2026-03-01 11:45:00 UTC" in text
    assert "likely cause (inference: inferred, to be confirmed): two default routes" in text
    assert "confirm with: the worker log's connection errors" in text
    healthy = unescape(html.row_page(s, "logs", "n8", s.rounds, NOW, 1800) or "")
    assert "nothing is wrong: every row of this host is OK" in healthy
    assert "<script" not in (html.row_page(s, "logs", "n8", s.rounds, NOW, 1800) or "")


def test_the_host_page_over_the_console(tmp_path: Path) -> None:
    s = snap(["n8", "mini"], tmp_path)

    class Fixed:
        def snapshot(self) -> console.Snapshot:
            return s

    c = Console(Fixed(), 900.0, 86400.0, "24h", clock=lambda: NOW)  # type: ignore[arg-type]
    status, ctype, body = c.route("/host", {"host": ["mini"]})
    assert status == 200 and ctype.startswith("text/html")
    text = unescape(body.decode())
    assert '<a href="/row?check=routes&host=mini">routes</a>' in text
    assert "two default routes on one subnet" in text
    missing = c.route("/host", {"host": ["nosuch"]})
    assert missing[0] == 404 and b"no row of host" in missing[2]
