"""Issue 22 item 14: `nan`, `inf`, negative or huge numbers from a host's `stat` (a log's
mtime) or `date` (its clock) are bad host data: an UNKNOWN row "host reported an unusable
time: ...", not "internal error in check logs" (what the code before the fix gave: float()
accepts them, datetime.fromtimestamp/timedelta then raise inside the check).

The lab test runs real patrols over real sshd against hosts whose `date` / `stat` on PATH
print those numbers; the parser tests pin each value's reason."""

from __future__ import annotations

import json
import os
import time

import pytest

from fleetcheck.parse.gathered import parse_clock, parse_gathered
from fleetcheck.parse.logtail import parse_log_output
from tests.cli import fleetcheck
from tests.lab import Lab
from tests.test_faults_hosts import fake_bin

BAD = [
    ("nan", "not a number"),
    ("inf", "infinite"),
    ("-1e12", "before 1970"),
    ("-5", "before 1970"),
    ("99999999999999999999", "after the year 9999"),
    ("1e300", "after the year 9999"),
]


@pytest.mark.parametrize(("value", "why"), BAD)
def test_item14_stat_mtime_that_is_no_time(value: str, why: str) -> None:
    lf = parse_log_output("/var/log/w.log", 0, f"stat {value} 120\ntail\nline\n".encode())
    assert lf.state == "error" and lf.mtime is None
    assert lf.detail.startswith(f"host reported an unusable time: {why}")
    assert value[:40] in lf.detail


def test_item14_negative_size_is_refused() -> None:
    lf = parse_log_output("/var/log/w.log", 0, b"stat 1700000000 -3\ntail\n")
    assert lf.state == "error" and "unusable size" in lf.detail


@pytest.mark.parametrize(("value", "why"), BAD)
def test_item14_date_clock_that_is_no_time(value: str, why: str) -> None:
    out = f"@@n0nce clock {value}\n".encode()
    epoch, problem = parse_clock("n0nce", out)
    assert epoch is None and problem is not None
    assert problem.startswith(f"host reported an unusable time: {why}")
    assert parse_gathered("n0nce", out)[1] is None  # never a bogus clock into the core


def test_item14_usable_times_still_read() -> None:
    assert parse_clock("n", b"@@n clock 1700000000.25\n") == (1700000000.25, None)
    assert parse_clock("n", b"@@n clock 0\n") == (0.0, None)
    assert parse_log_output("/l", 0, b"stat 0 0\ntail\n").state == "ok"


REAL_DATE = "/usr/bin/date" if os.path.exists("/usr/bin/date") else "/bin/date"
REAL_STAT = "/usr/bin/stat" if os.path.exists("/usr/bin/stat") else "/bin/stat"


@pytest.mark.lab
def test_item14_lab_hosts_printing_unusable_times_are_unknown_with_the_reason(lab: Lab) -> None:
    healthy = lab.add_host("healthy")
    hosts = {"healthy": healthy}
    for i, (value, _) in enumerate([BAD[0], BAD[1], BAD[4]]):
        h = lab.add_host(f"clock{i}", sshd=False)
        shim = fake_bin(
            h,
            "date",
            f'#!/bin/sh\ncase "$1" in +%s*) echo {value};; *) exec {REAL_DATE} "$@";; esac\n',
        )
        lab.start_sshd(h, options=f"SetEnv PATH={shim}\n")
        hosts[h.name] = h
    for i, (value, _) in enumerate([BAD[0], BAD[2], BAD[5]]):
        h = lab.add_host(f"mtime{i}", sshd=False)
        shim = fake_bin(
            h,
            "stat",
            f"#!/bin/sh\n[ \"$2\" = -c ] && {{ echo '{value} 42'; exit 0; }}\n"
            f'exec {REAL_STAT} "$@"\n',
        )
        lab.start_sshd(h, options=f"SetEnv PATH={shim}\n")
        hosts[h.name] = h
    extra = {}
    for name, h in hosts.items():
        path = h.log_path("worker.log")
        now = time.time()
        path.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ INFO tick\n", time.gmtime(now - 30)))
        os.utime(path, (now - 30, now - 30))
        extra[name] = f'tz = "UTC"\nlogs = [{{ path = "{path}", max_age = "10m" }}]'
    cfg = lab.config(checks="[checks.logs]\n", host_extra=extra, patrol='deadline = "30s"\n')
    proc = fleetcheck("run", "-c", str(cfg), "--format", "json", "--no-state")
    assert "Traceback" not in proc.stderr, proc.stderr
    rows = {r["host"]: r for r in json.loads(proc.stdout)["results"]}
    assert rows["healthy"]["status"] == "OK", rows["healthy"]["summary"]
    for name in hosts:
        if name == "healthy":
            continue
        row = rows[name]
        assert row["status"] == "UNKNOWN", (name, row["summary"])
        assert "host reported an unusable time" in row["summary"], (name, row["summary"])
        assert "internal error" not in row["summary"]
