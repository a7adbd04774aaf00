"""`fleetcheck serve` without the lab: pure parts table-tested, then the real server over
loopback reading history files written the way patrols write them."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetcheck.console import html, svg
from fleetcheck.console import source as console
from fleetcheck.console.charts import charts as draw_charts
from fleetcheck.console.server import Auth, parse_listen
from fleetcheck.core.model import Result, Standing, Status
from fleetcheck.rounds import history
from tests.cli import fleetcheck
from tests.history_util import jsonl_append
from tests.lab import wait_for
from tests.serve_util import HOSTILE, basic, get, report, serving, write_config
from tests.standing import recorded


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    "text, expected",
    [
        ("127.0.0.1:8470", ("127.0.0.1", 8470)),
        ("[::1]:9000", ("::1", 9000)),
        (":8080", ("0.0.0.0", 8080)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
    ],
)
def test_parse_listen(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["8470", "127.0.0.1:", "host:http", "::1:80", "1.2.3.4:70000"])
def test_parse_listen_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="--listen"):
        parse_listen(text)


@pytest.mark.parametrize(
    "auth, header, allowed",
    [
        (Auth(), None, True),
        (Auth(token="s3cret"), None, False),
        (Auth(token="s3cret"), "Bearer s3cret", True),
        (Auth(token="s3cret"), "bearer s3cret", True),
        (Auth(token="s3cret"), "Bearer s3cret2", False),
        (Auth(token="s3cret"), "Bearer ", False),
        (Auth(token="s3cret"), basic("x:s3cret")["Authorization"], False),
        (Auth(basic="ops:pw"), basic("ops:pw")["Authorization"], True),
        (Auth(basic="ops:pw"), basic("ops:pX")["Authorization"], False),
        (Auth(basic="ops:pw"), "Basic !!!not-base64", False),
        (Auth(basic="ops:pw"), "Bearer ops:pw", False),
        (Auth(token="t", basic="ops:pw"), "Bearer t", True),
        (Auth(token="t", basic="ops:pw"), basic("ops:pw")["Authorization"], True),
    ],
)
def test_auth(auth: Auth, header: str | None, allowed: bool) -> None:
    assert auth.allows(header) is allowed


@pytest.mark.parametrize(
    "top, expected",
    [(0, [0.0, 1.0]), (1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]), (167, [0, 50, 100, 150, 200])],
)
def test_nice_ticks(top: float, expected: list[float]) -> None:
    assert svg.nice_ticks(top) == pytest.approx(expected)


def test_report_round_trips_through_its_json() -> None:
    r = report(iso(NOW))
    row = Result("logs", "n8", Status.WARN, "x")
    standing = Standing(iso(NOW - timedelta(hours=1)), 3, alerting=True, flapping=True)
    r = recorded(r.started_at, r.duration_s, (*r.results[:2], (row, standing)))
    back = console.report_from_dict(json.loads(json.dumps(r.to_dict())))
    assert back.to_dict() == r.to_dict()


@pytest.mark.parametrize(
    "doc",
    [{}, {"schema": "other"}, {"schema": "fleetcheck.report/1", "results": [{}]}],
)
def test_report_from_dict_rejects(doc: dict[str, object]) -> None:
    with pytest.raises((ValueError, KeyError, TypeError)):
        console.report_from_dict(doc)


def _rounds(tmp_path: Path, statuses: list[Status]) -> list[history.Round]:
    path = tmp_path / "h.jsonl"
    for i, s in enumerate(statuses):
        history.append(report(iso(NOW + timedelta(minutes=15 * i)), s), path)
    return history.load(path)[0]


def test_row_timeline_changes_and_since(tmp_path: Path) -> None:
    rounds = _rounds(tmp_path, [Status.OK, Status.CRIT, Status.CRIT, Status.OK, Status.CRIT])
    points = console.row_timeline(rounds, "logs", "n8")
    assert [p.status for p in points] == [
        Status.OK,
        Status.CRIT,
        Status.CRIT,
        Status.OK,
        Status.CRIT,
    ]
    assert [p.status for p in console.changes(points)] == [
        Status.OK,
        Status.CRIT,
        Status.OK,
        Status.CRIT,
    ]
    assert console.since_from_history(points) == NOW + timedelta(minutes=60)
    assert console.row_timeline(rounds, "logs", "nope") == [
        console.Point(r.started_at, None) for r in rounds
    ]


def test_chart_series(tmp_path: Path) -> None:
    rounds = _rounds(tmp_path, [Status.OK, Status.CRIT, Status.CRIT])
    charts = {
        c.key: c for c in draw_charts(rounds, {"logs": {"n8": ("/var/log/worker.log", 600.0)}})
    }
    queue = {s.label: s for s in charts["queue"].series}
    assert [v for _, v in queue["summed depth"].points] == [20, 167, 167]
    assert queue["cap"].reference and {v for _, v in queue["cap"].points} == {100}
    conns = charts["connections"].series
    assert [(s.label, [v for _, v in s.points]) for s in conns] == [("n8", [12, 12, 12])]
    logs = {s.label: s for s in charts["logs"].series}
    assert [v for _, v in logs["n8"].points] == [9000.0] * 3
    assert logs["max_age"].reference and {v for _, v in logs["max_age"].points} == {600.0}
    assert charts["live"].series == []  # no live_hash rows: the chart says so


def test_a_hosts_log_age_line_follows_its_first_log_among_its_item_rows() -> None:
    """Rows per item (each log its own row): a host's line on the log-age chart is the first
    configured log's (its focus), never the other logs' ages mixed in; a host with no focus
    draws each of its rows."""

    def row(host: str, item: str, age: float) -> dict[str, object]:
        return {"check": "logs", "host": host, "item": item, "metrics": {"age_s": age}}

    rounds = [
        history.Round(NOW + timedelta(minutes=15 * i), Status.OK, {}, {}, rows=(
            row("n8", "/var/log/worker.log", 60.0 + i), row("n8", "/var/log/api.log", 5000.0),
            row("mini", "/var/log/worker.log", 30.0),
        ))
        for i in range(3)
    ]  # fmt: skip
    focus = {"logs": {"n8": ("/var/log/worker.log", 600.0)}}
    logs = {s.label: s for s in {c.key: c for c in draw_charts(rounds, focus)}["logs"].series}
    assert [v for _, v in logs["n8"].points] == [60.0, 61.0, 62.0]
    assert [v for _, v in logs["mini"].points] == [30.0] * 3
    assert logs["max_age"].reference and {v for _, v in logs["max_age"].points} == {600.0}


def test_grid_orders_broker_first_and_keeps_config_order() -> None:
    g = console.grid(report(iso(NOW)))
    assert g.hosts == [console.BROKER, "n8"]
    assert g.checks == ["queue_depth", "clients", "logs"]
    assert (console.BROKER, "clients") not in g.cells


def test_the_cap_line_reads_limits_and_rounds_written_before_them() -> None:
    """The cap is a limit (Result.limits) since limits were kept apart from metrics; a history
    written before that has it among the metrics, and its chart keeps the line."""
    new = {"check": "queue_depth", "host": None, "metrics": {"depth": 20}, "limits": {"cap": 90}}
    old = {"check": "queue_depth", "host": None, "metrics": {"depth": 30, "cap": 100}}
    rounds = [
        history.Round(NOW + timedelta(minutes=i), Status.OK, {}, {}, rows=(row,))
        for i, row in enumerate([old, new])
    ]
    queue = {s.label: s for s in {c.key: c for c in draw_charts(rounds, {})}["queue"].series}
    assert [v for _, v in queue["cap"].points] == [100, 90]
    assert [v for _, v in queue["summed depth"].points] == [30, 20]


def test_a_report_from_a_history_line_has_each_rows_declared_headline(tmp_path: Path) -> None:
    """History lines keep no headline (the check declares it): the console's fallback report
    names the same headline `run --format json` does, and a limit stays a limit."""
    rounds = _rounds(tmp_path, [Status.CRIT])
    by = {(r.check, r.host): r for r in console.report_from_round(rounds[-1]).results}
    assert by[("queue_depth", None)].headline == "depth"
    assert by[("queue_depth", None)].limits == {"cap": 100}
    assert by[("clients", "n8")].headline == "connections"


def _sections(rounds: list[history.Round]) -> str:
    t0, t1 = rounds[0].started_at.timestamp(), rounds[-1].started_at.timestamp()
    return html.sections_of(draw_charts(rounds, {}), t0, t1)


def test_pages_escape_log_content(tmp_path: Path) -> None:
    rounds = _rounds(tmp_path, [Status.CRIT])
    snap = console.Snapshot(console.report_from_round(rounds[-1]), rounds)
    evil_snap = console.Snapshot(report(iso(NOW)), rounds)
    pages = [
        html.grid_page(evil_snap, NOW, 1800),
        html.row_page(evil_snap, "logs", "n8", rounds, NOW, 1800) or "",
        html.charts_page(snap, _sections(rounds), "7d", NOW, 1800),
        svg.line_chart(HOSTILE, [(HOSTILE, [(0, 1), (60, 2)], False)], 0, 60),
    ]
    for page in pages:
        assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&lt;script&gt;" in pages[0] and "&lt;script&gt;" in pages[1]


def test_status_and_shape_read_without_colour() -> None:
    page = html.grid_page(console.Snapshot(report(iso(NOW)), []), NOW, 1800)
    assert "\u2716 CRIT" in page and "\u2714 OK" in page  # text and a shape in each cell
    heights = {svg.STATUS_HEIGHT[s] for s in Status}
    assert len(heights) == len(Status)  # the timeline strip tells them apart by height


# ---------------------------------------------------------------- the real server


def test_console_serves_files_as_patrols_write_them(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "hosts.toml")
    hist_path = tmp_path / "history.jsonl"
    now = datetime.now(UTC)
    history.append(report(iso(now - timedelta(minutes=15)), Status.OK), hist_path)
    history.append(report(iso(now)), hist_path)
    before = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    with serving("-c", str(cfg), "--history", str(hist_path)) as url:
        status, headers, body = get(url + "/")
        assert status == 200
        page = body.decode()
        assert "CRIT" in page and "&lt;script&gt;" in page and "<script" not in page
        assert "script-src" not in headers["Content-Security-Policy"]  # none at all
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Content-Type-Options"] == "nosniff"
        status, _, body = get(url + "/row?check=logs&host=n8")
        assert status == 200 and "last_line" in body.decode()
        status, _, body = get(url + "/row?check=queue_depth&host=")
        assert status == 200 and "depth 167" in body.decode()
        # the cap is a limit: shown under its own heading, not among the metrics
        assert re.search(r"<h2>Limits</h2><table>.*<td>cap</td><td>100</td>", body.decode())
        assert get(url + "/row?check=logs&host=elsewhere")[0] == 404
        assert get(url + "/nothing-here")[0] == 404
        status, _, body = get(url + "/report.json")
        assert status == 200
        assert json.loads(body) == report(iso(now)).to_dict()
        status, _, body = get(url + "/charts")
        assert status == 200 and body.count(b"<svg") == 4
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            status, headers, _ = get(url + "/", method=method, data=b"x")
            assert status == 405 and headers["Allow"] == "GET, HEAD"
        status, headers, body = get(url + "/", method="HEAD")
        assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0
    after = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    assert after == before  # nothing written, not even a lock file


def test_metrics_are_the_textfile_and_pass_promtool(tmp_path: Path) -> None:
    from fleetcheck.render import prometheus

    cfg = write_config(tmp_path / "hosts.toml")
    hist_path = tmp_path / "history.jsonl"
    r = report(iso(datetime.now(UTC)))
    history.append(r, hist_path)
    with serving("-c", str(cfg), "--history", str(hist_path)) as url:
        status, headers, body = get(url + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert body.decode() == prometheus.render(r)
    check = subprocess.run(
        ["promtool", "check", "metrics"], input=body, capture_output=True, timeout=60
    )
    assert check.returncode == 0, check.stderr.decode() + check.stdout.decode()


def test_healthz_turns_503_when_rounds_stop_and_back_when_they_resume(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "hosts.toml", every="2s")
    hist_path = tmp_path / "history.jsonl"
    with serving("-c", str(cfg), "--history", str(hist_path)) as url:
        status, _, body = get(url + "/healthz")
        assert status == 503 and b"no patrol round" in body
        assert get(url + "/metrics")[0] == 503 and get(url + "/report.json")[0] == 503
        assert b"No patrol round recorded yet" in get(url + "/")[2]
        history.append(report(iso(datetime.now(UTC)), Status.OK), hist_path)
        wait_for(lambda: get(url + "/healthz")[0] == 200, 5, "healthz 200 after a round")
        assert "\u2714 OK" in get(url + "/")[2].decode()  # a new round, no restart
        # rounds stop: past 2 x every (4s) the console says so
        wait_for(lambda: get(url + "/healthz")[0] == 503, 30, "healthz 503 once rounds stop")
        status, _, body = get(url + "/healthz")
        assert b"stale: the newest round finished" in body
        assert b"STALE" in get(url + "/")[2]
        history.append(report(iso(datetime.now(UTC))), hist_path)
        wait_for(lambda: get(url + "/healthz")[0] == 200, 5, "healthz 200 when rounds resume")
        assert "\u2716 CRIT" in get(url + "/")[2].decode()


def test_token_is_enforced_on_every_path(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "hosts.toml")
    hist_path = tmp_path / "history.jsonl"
    history.append(report(iso(datetime.now(UTC))), hist_path)
    env = {"FC_TOKEN": "tok-123"}
    with serving(
        "-c", str(cfg), "--history", str(hist_path), "--token-env", "FC_TOKEN", env=env
    ) as url:
        for path in (
            "/",
            "/charts",
            "/row?check=logs&host=n8",
            "/report.json",
            "/metrics",
            "/healthz",
        ):
            status, headers, body = get(url + path)
            assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
            assert b"CRIT" not in body
            assert get(url + path, {"Authorization": "Bearer wrong"})[0] == 401
            assert get(url + path, {"Authorization": "Bearer tok-123"})[0] == 200


def test_basic_auth(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "hosts.toml")
    hist_path = tmp_path / "history.jsonl"
    history.append(report(iso(datetime.now(UTC))), hist_path)
    env = {"FC_BASIC": "ops:pa:ss"}
    with serving(
        "-c", str(cfg), "--history", str(hist_path), "--basic-auth-env", "FC_BASIC", env=env
    ) as url:
        status, headers, _ = get(url + "/")
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        assert get(url + "/", basic("ops:wrong"))[0] == 401
        assert get(url + "/", basic("ops:pa:ss"))[0] == 200


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["--token-env", "FC_UNSET_TOKEN"], {}, "--token-env FC_UNSET_TOKEN: the environment"),
        (["--basic-auth-env", "FC_B"], {"FC_B": "nocolon"}, "expected USER:PASSWORD"),
        (["--window", "a week"], {}, ""),
        (["--every", "0s"], {}, "--every: bad duration '0s': must be longer than 0s"),
    ],
)
def test_serve_usage_errors(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    cfg = write_config(tmp_path / "hosts.toml")
    proc = fleetcheck(
        "serve", "-c", str(cfg), "--listen", "127.0.0.1:0", *args, env=env, timeout=30
    )
    assert proc.returncode == 3
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr


def test_serve_port_in_use_is_a_usage_error(tmp_path: Path) -> None:
    import socket

    cfg = write_config(tmp_path / "hosts.toml")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = fleetcheck("serve", "-c", str(cfg), "--listen", f"127.0.0.1:{port}", timeout=30)
    assert proc.returncode == 3 and re.search(r"--listen 127\.0\.0\.1:\d+: ", proc.stderr)


def test_serve_binds_loopback_by_default(tmp_path: Path) -> None:
    import inspect

    from fleetcheck.cli.serve import serve_cmd

    default = inspect.signature(serve_cmd).parameters["listen"].default
    assert parse_listen(default)[0] == "127.0.0.1"


def test_unreadable_history_lines_and_torn_latest_file(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "hosts.toml")
    hist_path = tmp_path / "history.jsonl"
    jsonl_append(report(iso(datetime.now(UTC))), hist_path)  # a history not yet migrated
    with open(hist_path, "a") as f:
        f.write('{"started_at": "torn\n')
    history.latest_path(hist_path).write_text("{not json")
    with serving("-c", str(cfg), "--history", str(hist_path)) as url:
        status, _, body = get(url + "/")
        page = body.decode()
    assert status == 200
    assert "1 unreadable history lines skipped" in page
    assert "unreadable (ValueError: not a newest-round file" in page
    assert "\u2716 CRIT" in page  # the newest round, from its history line


def test_serve_on_ipv6_loopback(tmp_path: Path) -> None:
    import subprocess as sp
    import sys

    cfg = write_config(tmp_path / "hosts.toml")
    hist_path = tmp_path / "history.jsonl"
    history.append(report(iso(datetime.now(UTC))), hist_path)
    proc = sp.Popen(
        [sys.executable, "-m", "fleetcheck", "serve", "-c", str(cfg), "--history",
         str(hist_path), "--listen", "[::1]:0"],
        stdout=sp.PIPE, stderr=sp.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert re.match(r"fleetcheck serve: http://\[::1\]:\d+/", line), line
        status, _, body = get(line.split()[2] + "healthz")
        assert status == 200 and body.startswith(b"ok: ")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.stderr is not None and "warning" not in proc.stderr.read()


def test_flapping_and_since_show_in_the_grid() -> None:
    row = Result("logs", "n8", Status.WARN, "x")
    standing = Standing(iso(NOW - timedelta(hours=2, minutes=31)), 3, True, flapping=True)
    page = html.grid_page(
        console.Snapshot(recorded(iso(NOW), 1.0, [(row, standing)]), []), NOW, 1800
    )
    assert "for 2h31m" in page and "~ flapping" in page and "\u25b2 WARN" in page
