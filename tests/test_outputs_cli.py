"""Several outputs from one patrol through the real CLI: JSON on stdout, the Prometheus
textfile, the history line, alerts in a real Alertmanager (respecting fail_after) and the
heartbeat, all at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetcheck.lab import Lab
from fleetcheck.rounds import history as hist
from tests.cli import fleetcheck
from tests.test_alertmanager import active, alertmanager, no_proxies, recorder  # noqa: F401

pytestmark = pytest.mark.lab


def test_one_patrol_feeds_every_output(
    alertmanager: str,  # noqa: F811
    recorder: tuple[str, list[str]],  # noqa: F811
    tmp_path: Path,
) -> None:
    hb_base, seen = recorder
    with Lab(netns=False) as lab:
        n8 = lab.add_host("n8")
        lab.add_host("mini")  # no workers: CRIT
        lab.start_workers(n8, 2)
        cfg = lab.config(patrol='deadline = "20s"\nfail_after = 2\n')
        textfile = tmp_path / "fleetcheck.prom"
        history = tmp_path / "history.jsonl"
        state = tmp_path / "state.json"

        def patrol() -> dict:
            proc = fleetcheck(
                "run",
                "-c",
                str(cfg),
                "--format",
                "json",
                "--textfile",
                str(textfile),
                "--history",
                str(history),
                "--state",
                str(state),
                "--alertmanager",
                alertmanager,
                "--heartbeat",
                f"{hb_base}/ping/abc",
            )
            assert proc.stderr == "", proc.stderr
            assert proc.returncode == 2
            return json.loads(proc.stdout)

        first = patrol()
        assert [r["host"] for r in first["results"] if r["status"] == "CRIT"] == ["mini"]
        assert 'fleetcheck_check_severity{check="clients",host="mini"} 3.0' in textfile.read_text()
        assert len(hist.load(history)[0]) == 1
        assert seen == ["GET /ping/abc"]
        assert active(alertmanager) == {}  # fail_after = 2: one bad round does not page

        patrol()
        assert active(alertmanager) == {("clients", "mini"): "critical"}
        assert len(hist.load(history)[0]) == 2
        assert seen == ["GET /ping/abc", "GET /ping/abc"]


def test_unreachable_outputs_warn_and_keep_the_patrol(tmp_path: Path) -> None:
    with Lab(netns=False) as lab:
        lab.start_workers(lab.add_host("n8"), 1)
        cfg = lab.config()
        dead = "http://127.0.0.1:9"  # discard port: nothing listens
        proc = fleetcheck(
            "run",
            "-c",
            str(cfg),
            "--format",
            "json",
            "--no-state",
            "--alertmanager",
            dead,
            "--heartbeat",
            dead + "/ping/x",
        )
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["status"] == "OK"
    warnings = proc.stderr.strip().splitlines()
    assert len(warnings) == 2 and all(w.startswith("fleetcheck: warning: ") for w in warnings)
    assert "Traceback" not in proc.stderr
