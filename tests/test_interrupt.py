"""Ctrl-C: patrol mode ends cleanly with the last round's exit code, and the demo tears its
fleet down (namespaces included) when interrupted mid-way."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.conftest import _require_lab
from tests.lab import REGISTRY, Lab, run, wait_for

pytestmark = pytest.mark.lab


def test_ctrl_c_ends_patrol_mode_cleanly() -> None:
    with Lab(netns=False) as lab:
        lab.start_workers(lab.add_host("n8"), 1)
        cfg = lab.config()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fleetcheck",
                "run",
                "-c",
                str(cfg),
                "--every",
                "30s",
                "--no-state",
                "--format",
                "plain",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        lines = []
        while not any(line.startswith("next round at") for line in lines):
            line = proc.stdout.readline()
            assert line, "patrol mode ended before its first round was shown"
            lines.append(line)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0  # the last round was OK
    assert "stopped" in err and "Traceback" not in err


def _lab_namespaces() -> set[str]:
    return {
        line.split()[0]
        for line in run("ip", "netns", "list").stdout.decode().splitlines()
        if line.startswith("fc")
    }


def _lab_started_by(pid: int) -> tuple[str, list[str]] | None:
    """(lab id, namespaces) of the lab process `pid` owns (its registry entry), once it has
    two hosts: the demo's own lab, whatever other labs come and go on a shared machine."""
    for entry in REGISTRY.iterdir() if REGISTRY.is_dir() else ():
        try:
            info = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        if info.get("owner") == pid and len(info.get("namespaces", ())) >= 2:
            return entry.name, list(info["namespaces"])
    return None


def test_ctrl_c_tears_the_demo_down() -> None:
    _require_lab()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetcheck", "demo", "--format", "plain"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        found: list[tuple[str, list[str]]] = []

        def demo_lab_up() -> bool:
            lab = _lab_started_by(proc.pid)
            if lab is not None:
                found.append(lab)
            return lab is not None

        wait_for(demo_lab_up, 60, "the demo's lab with two hosts")
        lab_id, namespaces = found[0]
        assert set(namespaces) <= _lab_namespaces()  # they were there when we interrupted
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    # every namespace of the demo's lab is gone, and its registry entry
    assert not {ns for ns in _lab_namespaces() if ns.startswith(f"fc{lab_id}-")}
    assert not (REGISTRY / lab_id).exists()
