"""Ctrl-C: patrol mode ends cleanly with the last round's exit code, and the demo tears its
fleet down (namespaces included) when interrupted mid-way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import _require_lab
from tests.lab import REGISTRY, Lab, run, wait_for
from tests.servers import Server, fleet_toml

pytestmark = pytest.mark.lab

FLEETCHECK = str(Path(sys.executable).with_name("fleetcheck"))


def _ctrl_c_heard() -> None:
    """In the child before exec: SIGINT back to its default. A test run started in the
    background by a non-interactive shell (nohup ... &) inherits SIGINT ignored, and Python
    then installs no KeyboardInterrupt handler: the Ctrl-C under test would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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
            preexec_fn=_ctrl_c_heard,
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
        preexec_fn=_ctrl_c_heard,
    )
    try:
        found: list[tuple[str, list[str]]] = []

        def demo_lab_up() -> bool:
            lab = _lab_started_by(proc.pid)
            # the registry names a namespace before it is made (so a crash still cleans it up)
            if lab is not None and set(lab[1]) <= _lab_namespaces():
                found.append(lab)
                return True
            return False

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


def _connected_to(port: int) -> bool:
    """Some socket on this machine has an established TCP connection to 127.0.0.1:port."""
    target = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return any(row[2] == target and row[3] == "01" for row in rows)


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0] in ("T", "t")


def test_ctrl_c_before_the_first_round_exits_130(tmp_path: Path) -> None:
    """Interrupted while its first round waits on a frozen broker, patrol mode has judged
    nothing: it must not exit 0 (OK) but 130, as an interrupted command does."""
    with Server() as server:
        cfg = tmp_path / "hosts.toml"
        cfg.write_text(
            fleet_toml(
                f'url = "{server.url}"\nconnect_timeout = "60s"\nsocket_timeout = "60s"',
                extra='deadline = "60s"',
            ).replace('deadline = "20s"\n', "")
        )
        os.killpg(server.proc.pid, signal.SIGSTOP)
        wait_for(lambda: _stopped(server.proc.pid), 10, "the broker to stop")
        proc = subprocess.Popen(
            [FLEETCHECK, "run", "-c", str(cfg), "--every", "30s", "--no-state", "-f", "plain"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_ctrl_c_heard,
        )
        try:
            # the first round's broker connection is up; its first command gets no answer
            wait_for(lambda: _connected_to(server.port), 30, "the patrol's broker connection")
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
            os.killpg(server.proc.pid, signal.SIGCONT)
    assert proc.returncode == 130, (out, err)
    assert out == "" and "Traceback" not in err
