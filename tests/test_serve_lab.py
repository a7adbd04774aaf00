"""`fleetcheck serve` over the demo fleet (the lab with the incidents of docs/incidents.md planted),
looked at by a real headless Chromium: the incident state shows, no console error, a hostile
log line stays text, /report.json and /metrics are what `run` wrote.

FLEETCHECK_DOCS_SCREENSHOTS=1 also writes docs/console.md's screenshots into docs/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcheck.lab import demo as demo_mod
from tests import browser
from tests.cli import fleetcheck
from tests.conftest import _require_lab
from tests.serve_util import get, serving

DOCS = Path(__file__).resolve().parent.parent / "docs"
ROUNDS, QUEUE_STEP, STALE_STEP = 5, 15, 3
DEPTH = 167 + (ROUNDS - 1) * QUEUE_STEP  # the demo's 120 + 47, then growing
STALE = 14 + (ROUNDS - 1) * STALE_STEP
HOSTILE = '<script>console.error("pwned")</script><img src=x onerror="console.error(1)">'


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[demo_mod.Demo, Path]]:
    """The demo fleet, patrolled twice into a history; mini's log ends in a hostile line."""
    _require_lab()
    if browser.CHROMIUM is None:
        pytest.fail("chromium missing (bash .ci/bootstrap installs it)")
    d = demo_mod.build(netns=True)
    try:
        mini_log = d.lab.hosts["mini"].dir / "worker.log"
        st = mini_log.stat()
        last = mini_log.read_text().splitlines()[-1].split()[0]  # its newest timestamp
        with open(mini_log, "a") as f:
            f.write(f"{last} ERROR {HOSTILE}\n")
        os.utime(mini_log, (st.st_atime, st.st_mtime))
        out = tmp_path_factory.mktemp("serve-lab")
        for i in range(ROUNDS):
            if i:  # the fleet moves between rounds, so the charts have a shape
                r = d.lab.client(client_name="fleetcheck")  # ignored by the clients check
                now = time.time()
                r.rpush("arena:queue", *[json.dumps({"id": f"r{i}.{j}", "enqueued_at": now})
                                         for j in range(QUEUE_STEP)])  # fmt: skip
                r.hset("arena:live", mapping={
                    f"zz{i}.{j}": json.dumps({"started_at": now - 7200, "host": "mini"})
                    for j in range(STALE_STEP)
                })  # fmt: skip
                r.close()
            if i == 2:
                d.lab.start_workers(d.lab.hosts["laptop"], 3, "worker-laptop")
            proc = fleetcheck(
                "run", "-c", str(d.config), "--history", str(out / "history.jsonl"),
                "--state", str(out / "state.json"), "--textfile", str(out / "fleet.prom"),
                "--format", "json", timeout=180,
            )  # fmt: skip
            assert proc.returncode == 2, proc.stderr
        (out / "run.json").write_text(proc.stdout)
        yield d, out
    finally:
        d.lab.close()


def cells(page: str) -> dict[tuple[str, str], str]:
    """(host, check) -> status label, read from the grid's links."""
    found = {}
    for m in re.finditer(
        r'<a href="/row\?check=([^&]+)&amp;host=([^"]*)"[^>]*><span class="st st-(\w+)">', page
    ):
        found[(m.group(2) or "(broker)", m.group(1))] = m.group(3)
    return found


def samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


@pytest.mark.lab
def test_console_shows_the_incidents(fleet: tuple[demo_mod.Demo, Path]) -> None:
    d, out = fleet
    with serving("-c", str(d.config), "--history", str(out / "history.jsonl")) as url:
        status, _, body = get(url + "/")
        assert status == 200
        got = cells(body.decode())
        assert got[("mini", "clients")] == "CRIT", got
        assert got[("mini", "logs")] == "CRIT", got
        assert got[("mini", "routes")] == "CRIT", got
        assert got[("(broker)", "queue_depth")] == "CRIT", got
        assert got[("(broker)", "live_hash")] == "WARN", got
        clients = [r["summary"] for r in json.loads((out / "run.json").read_text())["results"]
                   if r["check"] == "clients" and r["host"] is None]  # fmt: skip
        assert got[("(broker)", "clients")] == "OK", (got, clients)
        for host in ("n8", "laptop", "broker"):
            assert got[(host, "clients")] == "OK" and got[(host, "logs")] == "OK", got
        status, _, body = get(url + "/report.json")
        assert status == 200
        assert json.loads(body) == json.loads((out / "run.json").read_text())
        status, _, body = get(url + "/metrics")
        assert status == 200
        served, textfile = samples(body.decode()), samples((out / "fleet.prom").read_text())
        assert served.keys() == textfile.keys()  # the --textfile's names and labels
        for key, value in served.items():  # its values (the JSON keeps 6 decimals)
            assert value == pytest.approx(textfile[key], abs=1e-5), key
        check = subprocess.run(
            ["promtool", "check", "metrics"], input=body, capture_output=True, timeout=60
        )
        assert check.returncode == 0, check.stderr.decode() + check.stdout.decode()
        status, _, body = get(url + "/charts")
        page = body.decode()
        assert f"summed depth {DEPTH}" in page and "cap 100" in page  # over its cap
        assert f"stale {STALE}" in page  # the live hash's zombies
        assert ">n8 12<" in page and ">laptop 7<" in page  # connections per host


def test_detector_sees_console_errors_and_scripts(tmp_path: Path) -> None:
    """The browser checks below would prove nothing if they could not see an error: a page
    whose script runs is seen, and so is an inline script our CSP refuses."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from fleetcheck.console.server import SECURITY_HEADERS

    page = tmp_path / "bad.html"
    page.write_text('<p>x</p><script>console.error("detector-check")</script>')
    loaded = browser.load(page.as_uri())
    assert any("detector-check" in line for line in loaded.console)
    assert "<script>" in loaded.dom

    class Unescaped(BaseHTTPRequestHandler):  # what a console that forgot to escape would do
        def do_GET(self) -> None:  # noqa: N802
            body = f"<!DOCTYPE html><p>{HOSTILE}</p>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            for k, v in SECURITY_HEADERS.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Unescaped)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        seen = browser.load(f"http://127.0.0.1:{server.server_address[1]}/")
    finally:
        server.shutdown()
        server.server_close()
    assert any("Content Security Policy" in line for line in seen.console), seen.console
    assert not any('"pwned"' in line for line in seen.console)  # refused, not run


@pytest.mark.lab
def test_chromium_renders_grid_and_row_without_errors_and_log_line_as_text(
    fleet: tuple[demo_mod.Demo, Path], tmp_path: Path
) -> None:
    d, out = fleet
    with serving("-c", str(d.config), "--history", str(out / "history.jsonl")) as url:
        grid = browser.load(url + "/")
        assert grid.console == [], grid.console
        assert "CRIT" in grid.dom and "mini" in grid.dom
        row = browser.load(url + "/row?check=logs&host=mini")
        assert row.console == [], row.console
        # the hostile line is in the page as text, and nothing of it became an element
        assert "&lt;script&gt;console.error(" in row.dom  # evidence: last_line
        assert "&lt;img src=x onerror=" in row.dom
        assert "<script" not in row.dom.lower() and "<img" not in row.dom.lower()
        assert "<script" not in grid.dom.lower()
        charts = browser.load(url + "/charts")
        assert charts.console == [], charts.console
        assert charts.dom.count("<svg") == 4
        shots = DOCS if os.environ.get("FLEETCHECK_DOCS_SCREENSHOTS") == "1" else tmp_path
        shots.mkdir(exist_ok=True)
        for name, path, height in (("grid", "/", 720), ("charts", "/charts", 700)):
            target = shots / f"console-{name}.png"
            assert browser.screenshot(url + path, target, 1280, height) == []
            assert target.stat().st_size > 10_000


def test_docs_screenshots_are_committed() -> None:
    for name in ("grid", "charts"):
        shot = DOCS / f"console-{name}.png"
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"(console-{name}.png)" in (DOCS / "console.md").read_text()


@pytest.mark.lab
def test_serve_every_patrols_itself(fleet: tuple[demo_mod.Demo, Path], tmp_path: Path) -> None:
    from tests.lab import wait_for

    d, _ = fleet
    hist_path = tmp_path / "own.jsonl"
    with serving("-c", str(d.config), "--history", str(hist_path), "--every", "1h") as url:
        wait_for(lambda: get(url + "/healthz")[0] == 200, 120, "the console's own first round")
        doc = json.loads(get(url + "/report.json")[2])
        assert doc["status"] == "CRIT"
    from fleetcheck.rounds import history

    assert len(history.load(hist_path)[0]) == 1  # its own round, into its history
