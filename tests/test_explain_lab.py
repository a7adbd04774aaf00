"""`fleetcheck explain HOST` on real fleets: the demo's mini (no broker connections, a silent
log, two default routes) and a healthy host beside it; peers compared in a lab group of
three (one host departs) and never in a group of two."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcheck.lab import demo as demo_mod
from tests.conftest import _require_lab
from tests.lab import Lab

pytestmark = pytest.mark.lab


def fleetcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args], capture_output=True, text=True, timeout=180
    )


@pytest.fixture(scope="module")
def demo() -> Iterator[demo_mod.Demo]:
    _require_lab()
    built = demo_mod.build(netns=True)
    try:
        yield built
    finally:
        built.lab.close()


def files(tmp_path: Path) -> list[str]:
    return ["--state", str(tmp_path / "state.json"), "--history", str(tmp_path / "h.jsonl")]


def test_explain_mini_names_the_silence_the_lost_connections_and_the_two_routes(
    demo: demo_mod.Demo, tmp_path: Path
) -> None:
    cfg = str(demo.config)
    run = fleetcheck("run", "-c", cfg, "--format", "json", *files(tmp_path))
    assert run.returncode == 2, run.stderr
    rows = {(r["check"], r["host"]): r for r in json.loads(run.stdout)["results"]}
    last_line_at = rows[("logs", "mini")]["evidence"]["last_line_at"]

    text = fleetcheck("explain", "mini", "-c", cfg, *files(tmp_path))
    assert text.returncode == 2, text.stderr
    out = text.stdout
    assert f"the state file {tmp_path / 'state.json'}" in out
    silent = next(line for line in out.splitlines() if "log silent since its last line" in line)
    stamp = last_line_at.replace("T", " ").replace("Z", " UTC")
    assert silent.strip().startswith(stamp), (silent, last_line_at)
    assert "broker connections gone: no broker connections from " in out
    assert (
        "likely cause (inference: inferred, to be confirmed): two default routes on one subnet, "
        "the known cause of intermittent EHOSTUNREACH" in out
    )
    assert "confirm with: the worker log's connection errors" in out
    assert f"first change: {stamp}: log silent" in out  # the silence came first

    doc = fleetcheck("explain", "mini", "-c", cfg, "--format", "json", *files(tmp_path))
    assert doc.returncode == 2
    told = json.loads(doc.stdout)
    assert told["schema"] == "fleetcheck.explain/1" and told["status"] == "CRIT"
    assert told["first_change"]["check"] == "logs"
    assert told["first_change"]["at"] == last_line_at.split(".")[0].removesuffix("Z") + "Z"
    assert told["cause"]["rows"] == ["routes"] and told["cause"]["strength"] == "inference"
    assert {e["check"] for e in told["timeline"]} == {"logs", "clients", "routes"}
    assert told["lines"][0].startswith("mini: CRIT at ")


def test_explain_a_healthy_host_says_nothing_is_wrong_and_why(
    demo: demo_mod.Demo, tmp_path: Path
) -> None:
    proc = fleetcheck("explain", "laptop", "-c", str(demo.config), *files(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "nothing is wrong: every row of this host is OK in this patrol:" in lines
    for check in ("clients", "logs", "routes"):
        assert any(line.startswith(f"  {check} (proof): ") for line in lines), lines
    # no state or history file there: it says the patrol is all it has
    assert any("no state or history file" in line and "this patrol only" in line for line in lines)
    doc = json.loads(
        fleetcheck(
            "explain", "laptop", "-c", str(demo.config), "-f", "json", *files(tmp_path)
        ).stdout
    )
    assert doc["nothing_wrong"] is True and doc["exit_code"] == 0 and doc["cause"] is None


def test_explain_refuses_an_unknown_host_and_format(demo: demo_mod.Demo) -> None:
    bad = fleetcheck("explain", "nosuch", "-c", str(demo.config))
    assert bad.returncode == 3 and "nosuch: no such host in " in bad.stderr
    fmt = fleetcheck("explain", "mini", "-c", str(demo.config), "--format", "nagios")
    assert fmt.returncode == 3 and "--format nagios: expected text or json" in fmt.stderr


GROUP = "[groups.workers]\nmin_clients = 1\n"


def test_a_group_of_three_names_the_host_that_departs(lab: Lab, tmp_path: Path) -> None:
    hosts = {name: lab.add_host(name, sshd=False) for name in ("w1", "w2", "w3")}
    for name, n in (("w1", 8), ("w2", 8), ("w3", 2)):
        lab.start_workers(hosts[name], n, f"worker-{name}")
    cfg = lab.config(extra=GROUP, host_extra={h: 'groups = ["workers"]' for h in hosts})
    run = fleetcheck("run", "-c", str(cfg), "--format", "json", "--no-state")
    assert run.returncode == 0, run.stdout + run.stderr  # a departure is never a status
    rows = {r["host"]: r for r in json.loads(run.stdout)["results"] if r["check"] == "clients"}
    assert "peers" not in rows["w1"]["evidence"] and "peers" not in rows["w2"]["evidence"]
    (note,) = rows["w3"]["evidence"]["peers"]
    assert note["group"] == "group workers" and note["departs"] == "lower"
    assert note["strength"] == "inference"

    told = fleetcheck("explain", "w3", "-c", str(cfg), *files(tmp_path))
    assert told.returncode == 0, told.stdout + told.stderr
    assert (
        "peers (inference: inferred, to be confirmed): clients: 2 broker connections where its "
        "2 peers (group workers) have a median of 8" in told.stdout
    )
    healthy = fleetcheck("explain", "w1", "-c", str(cfg), *files(tmp_path))
    assert healthy.returncode == 0 and "peers (" not in healthy.stdout


def test_a_group_of_two_is_never_compared(lab: Lab, tmp_path: Path) -> None:
    hosts = {name: lab.add_host(name, sshd=False) for name in ("w1", "w2")}
    lab.start_workers(hosts["w1"], 8, "worker-w1")
    lab.start_workers(hosts["w2"], 1, "worker-w2")
    cfg = lab.config(extra=GROUP, host_extra={h: 'groups = ["workers"]' for h in hosts})
    run = fleetcheck("run", "-c", str(cfg), "--format", "json", "--no-state")
    assert run.returncode == 0, run.stdout + run.stderr
    assert '"peers"' not in run.stdout
    for host in hosts:
        told = fleetcheck("explain", host, "-c", str(cfg), *files(tmp_path))
        assert told.returncode == 0 and "peers (" not in told.stdout
