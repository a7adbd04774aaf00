"""The lab cleans up after itself: every process it started, including sshd's per-session
children (which leave the listener's process group), and every namespace."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.lab import Lab, run

pytestmark = pytest.mark.lab


def netns_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def test_close_kills_sessions_and_namespaces(lab: Lab) -> None:
    h = lab.add_host("n8")
    # a session that outlives its client: sshd's child for it calls setsid()
    client = subprocess.Popen(
        [
            "ssh",
            "-i",
            str(lab.client_key),
            "-o",
            f"UserKnownHostsFile={lab.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            f"root@{h.addr}",
            "sleep 300",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        from tests.lab import wait_for

        ns_pids = lambda: run("ip", "netns", "pids", h.ns).stdout.split()  # noqa: E731
        wait_for(lambda: len(ns_pids()) >= 3, 10, "the ssh session to start")  # sshd x2, sleep
        inside = [int(p) for p in ns_pids()]
        ns_link = netns_of(inside[0])
        lab.close()
        survivors = [p for p in inside if netns_of(p) == ns_link and netns_of(p) is not None]
        assert survivors == []
        assert h.ns not in run("ip", "netns", "list").stdout.decode()
    finally:
        client.kill()
        client.wait()


def test_loopback_lab_needs_no_root_tools() -> None:
    with Lab(netns=False) as lab:
        h = lab.add_host("n8")
        proc = lab.start_workers(h, 2)
        cfg = lab.config()
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "fleetcheck",
                "run",
                "-c",
                str(cfg),
                "--no-state",
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert '"connections": 2' in out.stdout
        assert 'ssh = "local"' in cfg.read_text()
    assert proc.poll() is not None  # closed with the lab


def test_workers_that_cannot_connect_say_why(lab: Lab) -> None:
    """A worker process that dies before "ready" names its last error, not just "did not
    start" (a CI run once failed with nothing more to go on)."""
    h = lab.add_host("n8", sshd=False)
    lab.stop(lab.redis)
    with pytest.raises(RuntimeError, match=r"workers on n8 did not start: .*(refused|Errno)"):
        lab.start_workers(h, 1, "worker-n8", connect_within=0.5)


def test_a_lab_process_that_dies_before_ready_is_started_once_more(lab: Lab) -> None:
    marker = lab.dir / "tried-once"
    script = (
        "import pathlib, sys, time\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n"
        "    m.touch(); sys.exit('first attempt fails')\n"
        "print('ready', flush=True)\n"
        "time.sleep(3600)\n"
    )
    proc = lab._spawn_ready(script, None, "flaky", "the flaky process")
    assert proc.poll() is None
    lab.stop(proc)
    # dies every time: both reasons in the error
    always = "import sys\nsys.exit('no broker here')\n"
    with pytest.raises(RuntimeError, match=r"the doomed process did not start: no broker here$"):
        lab._spawn_ready(always, None, "doomed", "the doomed process")
