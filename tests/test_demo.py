"""`fleetcheck demo`, the README's first command: every check fires on its planted fault and is
OK on the healthy parts, and nothing is left running afterwards."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from fleetcheck.core.model import BROKER_WIDE, STRENGTHS
from tests.conftest import _require_lab
from tests.lab import port_open, wait_for

pytestmark = pytest.mark.lab


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", "demo", "--format", "plain", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


RANK = {"OK": 0, "WARN": 1, "UNKNOWN": 2, "CRIT": 3}


def rows(out: str) -> dict[tuple[str, str], str]:
    """Each (host, check)'s worst status in the table (`logs[PATH]`: one log's row)."""
    found: dict[tuple[str, str], str] = {}
    for line in out.splitlines():
        m = re.match(
            r"^(OK|WARN|CRIT|UNKNOWN)\s+(\* broker-wide|\S+)\s+([a-z_]+)(\[\S*\])?\s", line
        )
        if m:
            key = (m.group(2), m.group(3))
            if RANK[m.group(1)] >= RANK[found.get(key, "OK")]:
                found[key] = m.group(1)
    return found


def lab_dir(out: str) -> str:
    m = re.search(r"(/tmp/fleetcheck-lab-[^/]+)/", out)
    assert m, out
    return m.group(1)


def test_demo_with_namespaces() -> None:
    _require_lab()
    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    proc = demo()
    assert proc.returncode == 2, proc.stderr
    got = rows(proc.stdout)
    assert got[(BROKER_WIDE, "queue_depth")] == "CRIT"
    assert got[(BROKER_WIDE, "live_hash")] == "WARN"
    assert got[("mini", "clients")] == "CRIT"
    assert got[("mini", "logs")] == "CRIT"
    assert got[("mini", "routes")] == "CRIT"
    for host in ("n8", "laptop", "broker"):
        assert got[(host, "clients")] == "OK"
        assert got[(host, "logs")] == "OK"  # n8's Eastern log included: not "5 hours stale"
        assert got[(host, "routes")] == "OK"
    assert got[(BROKER_WIDE, "rater_probe")] == "OK"
    assert got[(BROKER_WIDE, "broker")] == "OK"
    assert got[(BROKER_WIDE, "clients")] == "OK"
    # the explanation: one line for each non-OK row, plus why n8's Eastern log is OK
    explained = re.findall(
        r"^- (.+?) / (\S+) \((\w+)\): ", proc.stdout.split("What the rows mean:")[-1], re.M
    )
    hosts = {"n8", "laptop", "mini", "broker", BROKER_WIDE}
    problems = [(h, c, s) for (h, c), s in got.items() if s != "OK" and h in hosts]
    assert sorted(explained) == sorted([*problems, ("n8", "logs", "OK")]), explained
    # only this demo's namespaces are judged: other labs may come and go on a shared machine
    lab_id = re.search(r"fleetcheck-lab-([0-9a-f]+)-", lab_dir(proc.stdout))
    assert lab_id, proc.stdout
    after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert not {ns for ns in after - before if ns.startswith(f"fc{lab_id.group(1)}-")}
    assert not os.path.exists(lab_dir(proc.stdout))


def test_demo_local_without_namespaces() -> None:
    proc = demo("--local")
    if "needs redis-server" in proc.stderr:
        pytest.skip("redis-server missing")
    assert proc.returncode == 2, proc.stderr
    got = rows(proc.stdout)
    assert got[("mini", "clients")] == "CRIT" and got[("mini", "logs")] == "CRIT"
    assert got[("n8", "logs")] == "OK" and got[("laptop", "logs")] == "OK"
    assert got[(BROKER_WIDE, "clients")] == "OK"
    assert not any(check == "routes" for _, check in got)
    assert not os.path.exists(lab_dir(proc.stdout))


def test_demo_keep_then_stop() -> None:
    proc = demo("--local", "--keep")
    assert proc.returncode == 2, proc.stderr
    # the printed command works as printed, from a shell whose PATH has no venv on it
    m = re.search(r"Patrol it again with:\n  (.+)\n", proc.stdout)
    stop = re.search(r"sh (\S+stop\.sh)", proc.stdout)
    assert m and stop, proc.stdout
    assert " run -c " in m.group(1) and not m.group(1).startswith("fleetcheck ")
    again = subprocess.run(
        ["/bin/sh", "-c", m.group(1) + " --no-state --format json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")},
    )
    assert again.returncode == 2  # the kept fleet still answers
    # every row that is not OK says how strong its evidence is (issue 24)
    report = json.loads(again.stdout)
    bad = [r for r in report["results"] if r["status"] != "OK"]
    assert bad
    for r in bad:
        assert r.get("evidence_strength") in STRENGTHS, r
    port = int(re.search(r"redis://127\.0\.0\.1:(\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
    assert port_open("127.0.0.1", port)
    subprocess.run(["sh", stop.group(1)], check=True, timeout=60)
    assert not os.path.exists(lab_dir(proc.stdout))
    wait_for(lambda: not port_open("127.0.0.1", port), 10, "the kept broker to be stopped")
    left = subprocess.run(["pgrep", "-f", f"127.0.0.1', {port}"], capture_output=True, text=True)
    assert left.stdout == "", "workers of the kept demo survived its stop script"
    gone = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "run", "-c", "/nonexistent"], capture_output=True
    )
    assert gone.returncode == 3
