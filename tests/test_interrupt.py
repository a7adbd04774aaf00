"""Ctrl-C: patrol mode ends cleanly with the last round's exit code, and the demo tears its
fleet down (namespaces included) when interrupted mid-way."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.conftest import _require_lab
from tests.lab import Lab, run, wait_for

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


def test_ctrl_c_tears_the_demo_down() -> None:
    _require_lab()
    before = _lab_namespaces()
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetcheck", "demo", "--format", "plain"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: len(_lab_namespaces() - before) >= 2, 60, "the demo's namespaces")
        demo_namespaces = _lab_namespaces() - before
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    # every namespace of the demo's lab is gone (other labs may come and go meanwhile)
    prefixes = {ns.split("-")[0] + "-" for ns in demo_namespaces}
    assert not {ns for ns in _lab_namespaces() if ns.startswith(tuple(prefixes))}
