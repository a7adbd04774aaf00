"""Fault matrix, host side, through a full patrol over real sshd: a host whose clock is
10 minutes off and a host without `ip` each get their own verdict while healthy hosts in the
same patrol stay OK, and the patrol ends within its deadline. (Host down, sshd stopped or
frozen, changed key and auth refused: tests/test_logs_lab.py and test_ssh_transport.py; log
missing, empty, binary, 50 MB line: tests/test_logs_lab.py.) A log rotated mid-read, and
sshd frozen mid-handshake (after its banner), are here too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import fleetcheck
from tests.lab import Lab, LabHost

pytestmark = pytest.mark.lab


def fake_bin(host: LabHost, name: str, script: str) -> Path:
    """A PATH directory for `host`'s sessions: every real tool, with `name` replaced by
    `script` (or left out when script is empty)."""
    d = host.dir / "bin"
    d.mkdir()
    for base in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        if not os.path.isdir(base):
            continue
        for tool in os.listdir(base):
            if tool != name and not (d / tool).exists():
                (d / tool).symlink_to(os.path.join(base, tool))
    if script:
        (d / name).write_text(script)
        (d / name).chmod(0o755)
    return d


def write_log(host: LabHost) -> str:
    path = host.log_path("worker.log")
    now = time.time()
    path.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ INFO tick\n", time.gmtime(now - 30)))
    os.utime(path, (now - 30, now - 30))
    return f'tz = "UTC"\nlogs = [{{ path = "{path}", max_age = "10m" }}]'


def test_clock_off_and_missing_ip(lab: Lab) -> None:
    healthy = lab.add_host("healthy")
    skewed = lab.add_host("skewed", sshd=False)
    real_date = "/usr/bin/date" if os.path.exists("/usr/bin/date") else "/bin/date"
    ahead = fake_bin(
        skewed,
        "date",
        "#!/bin/sh\n"
        'case "$1" in +%s*) echo $(( $(' + real_date + " +%s) + 600 )).0;; "
        "*) exec " + real_date + ' "$@";; esac\n',
    )
    lab.start_sshd(skewed, options=f"SetEnv PATH={ahead}\n")
    noip = lab.add_host("noip", sshd=False)
    lab.start_sshd(noip, options=f"SetEnv PATH={fake_bin(noip, 'ip', '')}\n")
    extra = {h.name: write_log(h) for h in (healthy, skewed, noip)}
    cfg = lab.config(
        checks="[checks.logs]\n[checks.routes]\n", host_extra=extra, patrol='deadline = "20s"\n'
    )
    # fleetcheck()'s timeout (120 s, 6x the deadline) is the hang guard, not a timing
    proc = fleetcheck("run", "-c", str(cfg), "--format", "json", "--no-state")
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    rows = {(r["host"], r["check"]): r for r in report["results"]}

    assert rows[("healthy", "logs")]["status"] == "OK"
    assert rows[("healthy", "routes")]["status"] == "OK"

    skew = rows[("skewed", "logs")]
    assert skew["status"] == "WARN", skew["summary"]
    assert "clock" in skew["summary"].lower()
    assert 590 <= skew["metrics"]["clock_skew_s"] <= 610

    routes = rows[("noip", "routes")]
    # no `ip`: the route table is still read, from /proc/net/route, and the gap is named
    assert routes["status"] == "OK", routes["summary"]
    assert routes["evidence"]["source"] == "/proc/net/route"
    assert "IPv6 defaults not read (no ip -j)" in routes["evidence"]["problems"]
    assert rows[("noip", "logs")]["status"] == "OK"
    assert report["exit_code"] == proc.returncode


def test_log_rotated_mid_read(lab: Lab) -> None:
    """The log is rotated between the host's `stat` and its `tail` (a `tail` shim on the
    host's PATH does the rotation first, deterministically): the verdict is UNKNOWN with the
    reason, never a crash and never a verdict from facts of two different files."""
    h = lab.add_host("rot", sshd=False)
    log = h.log_path("worker.log")
    now = time.time()
    old_line = time.strftime("%Y-%m-%dT%H:%M:%SZ INFO old\n", time.gmtime(now - 7200))
    log.write_text(old_line * 50)
    os.utime(log, (now - 7200, now - 7200))
    real_tail = "/usr/bin/tail" if os.path.exists("/usr/bin/tail") else "/bin/tail"
    shim = fake_bin(
        h,
        "tail",
        "#!/bin/sh\n"
        f"mv {log} {log}.1 && : > {log}\n"  # logrotate's create mode: a new, empty file
        f'exec {real_tail} "$@"\n',
    )
    lab.start_sshd(h, options=f"SetEnv PATH={shim}\n")
    cfg = lab.config(
        checks="[checks.logs]\n",
        host_extra={"rot": f'tz = "UTC"\nlogs = [{{ path = "{log}", max_age = "10m" }}]'},
    )
    proc = fleetcheck("run", "-c", str(cfg), "--format", "json", "--no-state")
    assert "Traceback" not in proc.stderr
    row = json.loads(proc.stdout)["results"][0]
    assert row["status"] == "UNKNOWN"
    assert "changed while being read" in row["summary"] and "rotated" in row["summary"]
    assert (log.parent / "worker.log.1").exists()  # the shim really rotated mid-read


def test_sshd_frozen_mid_handshake(lab: Lab) -> None:
    """A server that sends its SSH banner and then never answers the key exchange (what a
    sshd frozen after accepting looks like to the client): UNKNOWN within connect_timeout,
    while a healthy host in the same patrol is checked normally."""
    healthy = lab.add_host("healthy")
    stuck = lab.add_host("stuck", sshd=False)
    server = (
        "import socket, time\n"
        f"s = socket.create_server(({stuck.addr!r}, 22))\n"
        "print('ready', flush=True)\n"
        "conns = []\n"
        "while True:\n"
        "    c, _ = s.accept()\n"
        "    c.sendall(b'SSH-2.0-OpenSSH_9.2p1 Debian-2\\r\\n')\n"
        "    conns.append(c)  # read nothing more, answer nothing more\n"
    )
    proc = lab.spawn([sys.executable, "-c", server], ns=stuck.ns, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    extra = {h.name: write_log(h) for h in (healthy, stuck)}
    cfg = lab.config(checks="[checks.logs]\n", host_extra=extra, patrol='deadline = "20s"\n')
    out = fleetcheck("run", "-c", str(cfg), "--format", "json", "--no-state")  # hang guard: 120 s
    rows = {r["host"]: r for r in json.loads(out.stdout)["results"]}
    assert rows["healthy"]["status"] == "OK"
    assert rows["stuck"]["status"] == "UNKNOWN"
    summary = rows["stuck"]["summary"].lower()
    assert "timed out after 3s in the key exchange" in summary, summary
    assert "after its banner 'ssh-2.0-openssh_9.2p1" in summary
    assert out.returncode == 3
