"""The SSH transport at fleet scale on the real lab: 100 hosts behind one stock OpenSSH
bastion (default MaxStartups 10:30:100) share one connection to it, and a patrol of more
hosts than its RLIMIT_NOFILE still reaches them all."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import _require_lab
from tests.lab import Lab, LabHost

pytestmark = pytest.mark.lab

N = 100


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[Lab, list[LabHost], LabHost]]:
    _require_lab()
    with Lab() as lab:
        hosts = [lab.add_host(f"t{i:03d}") for i in range(N)]
        bastion = lab.add_host("bastion", sshd=False)
        lab.start_sshd(bastion, max_startups=None, log_level="INFO")  # stock limits
        yield lab, hosts, bastion


def patrol(config: Path, nofile: int | None = None) -> dict[str, object]:
    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "run", "-c", str(config), "--format", "json",
         "--no-state"],
        capture_output=True, text=True, timeout=300, preexec_fn=limit,
        cwd=Path(__file__).resolve().parent.parent, env=dict(os.environ),
    )  # fmt: skip
    assert proc.stdout, proc.stderr[-3000:]
    report: dict[str, object] = json.loads(proc.stdout)
    return report


def logins(bastion: LabHost) -> int:
    return (bastion.dir / "sshd.log").read_text().count("Accepted publickey for root")


def test_hosts_behind_one_stock_bastion_share_one_connection(
    fleet: tuple[Lab, list[LabHost], LabHost],
) -> None:
    lab, hosts, bastion = fleet
    ssh_config = lab.dir / "ssh_config_bastion"
    ssh_config.write_text(f"Host * !{bastion.addr}\n  ProxyJump root@{bastion.addr}\n")
    config = lab.config(checks="[checks.routes]\n", hosts=hosts, patrol='deadline = "120s"\n')
    config.write_text(
        config.read_text().replace('config_file = "/dev/null"', f'config_file = "{ssh_config}"')
    )
    before = logins(bastion)
    report = patrol(config)
    rows = report["results"]
    assert isinstance(rows, list) and len(rows) == N
    bad = [r for r in rows if r["status"] != "OK"]
    assert not bad, bad[:3]
    used = logins(bastion) - before
    assert 1 <= used <= 4, used
    # every target saw its session come from the bastion, not from us
    log = (hosts[0].dir / "sshd.log").read_text()
    assert "Accepted" not in log  # LogLevel ERROR there: nothing to learn, but no errors
    assert "error" not in log.lower()


def test_patrol_of_more_hosts_than_its_open_file_limit(
    fleet: tuple[Lab, list[LabHost], LabHost],
) -> None:
    """RLIMIT_NOFILE 64 and 100 hosts: hosts in flight are bounded by what the limit allows
    (each holds a socket and a channel pipe), so no row is lost to 'Too many open files'."""
    lab, hosts, _ = fleet
    config = lab.config(checks="[checks.routes]\n", hosts=hosts, patrol='deadline = "120s"\n')
    report = patrol(config, nofile=64)
    rows = report["results"]
    assert isinstance(rows, list) and len(rows) == N
    bad = [r for r in rows if r["status"] != "OK"]
    assert not bad, bad[:3]
    assert N > 64


def test_handshakes_dropped_by_maxstartups_are_retried(lab: Lab) -> None:
    """24 host entries on one sshd that takes 2 unauthenticated connections at a time
    (MaxStartups 2) and drops the rest before its banner, all asked at once (fixed
    concurrency): each dropped handshake is retried with backoff inside the connect
    budget, every row gets its verdict, and the report says handshakes were retried."""
    h = lab.add_host("busy", sshd=False)
    lab.start_sshd(h, max_startups="2")
    config = lab.config(
        checks="[checks.routes]\n",
        hosts=[h],
        patrol='deadline = "60s"\nadaptive = false\nconcurrency = 24\n',
    )
    head, sep, rest = config.read_text().partition("[[hosts]]")
    block, _, checks = rest.partition("[checks")
    hosts = "".join(
        sep + block.replace('name = "busy"', f'name = "busy{i:02d}"') for i in range(24)
    )
    # the retries need room: 24 handshakes through 2 slots on a machine shared with others
    head = head.replace('connect_timeout = "3s"', 'connect_timeout = "20s"')
    config.write_text(head + hosts + "[checks" + checks)
    report = patrol(config)
    rows = report["results"]
    assert isinstance(rows, list) and len(rows) == 24
    bad = [r for r in rows if r["status"] != "OK"]
    assert not bad, bad[:3]
    notes = report.get("notes")
    assert isinstance(notes, list)
    assert any("dropped by a busy sshd" in n and "were retried" in n for n in notes), notes


def test_a_hosts_connection_closes_as_soon_as_its_facts_are_in(lab: Lab) -> None:
    """Host `quick` answers at once; host `held` waits (its `ip` blocks until a gate file
    exists, so no sleep decides anything). quick's sshd logs the disconnect while the patrol
    is still waiting for `held`: connections are not held until the patrol ends."""
    from tests.lab import wait_for
    from tests.test_faults_hosts import fake_bin

    quick = lab.add_host("quick", sshd=False)
    lab.start_sshd(quick, log_level="INFO")  # logs the login
    held = lab.add_host("held", sshd=False)
    gate = lab.dir / "gate"
    shim = fake_bin(
        held,
        "ip",
        f'#!/bin/sh\nwhile [ ! -e {gate} ]; do sleep 0.05; done\nexec /usr/sbin/ip "$@"\n'
        if os.path.exists("/usr/sbin/ip")
        else f'#!/bin/sh\nwhile [ ! -e {gate} ]; do sleep 0.05; done\nexec /sbin/ip "$@"\n',
    )
    lab.start_sshd(held, options=f"SetEnv PATH={shim}\n")
    config = lab.config(checks="[checks.routes]\n", patrol='deadline = "60s"\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetcheck", "run", "-c", str(config), "--format", "json",
         "--no-state"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    try:
        log = quick.dir / "sshd.log"

        def established() -> int:
            out = lab.nsrun(quick, "ss", "-Htn", "state", "established", "( sport = :22 )")
            return len(out.stdout.decode().strip().splitlines())

        # logged in (LogLevel INFO), then no connection left on quick's sshd
        wait_for(lambda: "Accepted publickey" in log.read_text(), 30, "quick's login")
        wait_for(lambda: established() == 0, 30, "quick's connection to be closed")
        assert proc.poll() is None  # the patrol still waits for `held`
    finally:
        gate.write_text("")
        out, err = proc.communicate(timeout=60)
    rows = {r["host"]: r for r in json.loads(out)["results"]}
    assert rows["quick"]["status"] == "OK" and rows["held"]["status"] == "OK", rows


def test_a_connection_that_completes_after_the_deadline_is_closed(lab: Lab) -> None:
    """The patrol ends (deadline) while a host's sshd is frozen; it is thawed afterwards and
    the connect completes in the lane still waiting for it: that connection is closed at
    once (no command runs over it), not used or left open after the patrol."""
    from fleetcheck.config import load
    from fleetcheck.core import registry, runner
    from tests.lab import wait_for
    from tests.test_faults_hosts import fake_bin

    h = lab.add_host("late", sshd=False)
    ran = lab.dir / "late-ran"  # the host's `ip` marks that the gathered script ran
    real_ip = "/usr/sbin/ip" if os.path.exists("/usr/sbin/ip") else "/sbin/ip"
    shim = fake_bin(h, "ip", f'#!/bin/sh\ntouch {ran}\nexec {real_ip} "$@"\n')
    lab.start_sshd(h, log_level="INFO", options=f"SetEnv PATH={shim}\n")
    config = lab.config(checks="[checks.routes]\n", patrol='deadline = "1s"\n')
    config.write_text(
        config.read_text().replace('connect_timeout = "3s"', 'connect_timeout = "20s"')
    )
    fleet = load(config, registry.config_type, registry.host_config_types)
    lab.freeze_sshd(h)
    try:
        report = runner.run_patrol(fleet, runner.plan(fleet, registry.available()))
    finally:
        lab.thaw_sshd(h)
    (row,) = report.results
    assert row.status.label == "UNKNOWN" and "patrol deadline" in row.summary
    log = h.dir / "sshd.log"

    def established() -> int:
        out = lab.nsrun(h, "ss", "-Htn", "state", "established", "( sport = :22 )")
        return len(out.stdout.decode().strip().splitlines())

    wait_for(lambda: "Accepted publickey" in log.read_text(), 30, "the late login")
    wait_for(lambda: established() == 0, 30, "the late connection to be closed")
    assert not ran.exists()  # closed at once: the patrol's commands never ran after it ended
