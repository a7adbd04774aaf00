"""A log emptied by rotation while its writer keeps the old file open (issue 24, item 7).

logrotate's create mode renames the log and makes a new, empty one; a writer that does not
reopen keeps writing to the renamed file, so the watched file stays empty for ever. It used to
be UNKNOWN "empty file" at any age; it is judged by its mtime like any silent log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from fleetcheck.checks.logs import CHECK, LogsConfig, LogsFacts

from fleetcheck.config import HostConfig
from fleetcheck.core.hostfacts import LogsHostConfig, LogSpec
from fleetcheck.core.model import Status
from fleetcheck.parse.logtail import LogFacts
from tests.lab import Lab, wait_for
from tests.log_rows import by_item

NOW = datetime(2026, 11, 29, 7, 24, 0, tzinfo=UTC)


def judge(rotated_at: datetime, *extra: LogFacts) -> tuple[Status, str, object, dict]:
    specs = (LogSpec(path="/l", max_age=600.0),) + tuple(LogSpec(path=e.path) for e in extra)
    h = HostConfig(name="mini", ssh="local").with_settings(LogsHostConfig(tz="UTC", logs=specs))
    empty = LogFacts("/l", "ok", "", rotated_at.timestamp(), 0, b"")
    r = by_item(CHECK.evaluate(LogsFacts((empty, *extra), 0.0), LogsConfig(), h, NOW))["/l"]
    return r.status, r.summary, r.evidence_strength, {**r.metrics, **r.evidence}


@pytest.mark.parametrize(
    ("ago", "status", "words"),
    [
        (
            timedelta(minutes=3, seconds=10),
            Status.OK,
            "file /l: empty since 07:20:50 UTC (rotated or created then), 3m10s ago",
        ),
        (
            timedelta(minutes=12),
            Status.WARN,
            "file /l: empty since 07:12:00 UTC (rotated, truncated or created then), 12m00s "
            "ago: nothing written since (max_age 10m00s); a writer may still hold the rotated "
            "file (reopen the log after rotation)",
        ),
        (
            timedelta(minutes=45),
            Status.CRIT,
            "file /l: empty since 06:39:00 UTC (rotated, truncated or created then), 45m00s "
            "ago: nothing written since (crit_age 30m00s)",
        ),
        (
            timedelta(days=2),
            Status.CRIT,
            "file /l: empty since 07:24:00 UTC on 2026-11-27 (rotated",
        ),
    ],
)
def test_an_empty_log_is_judged_by_its_mtime(ago: timedelta, status: Status, words: str) -> None:
    got, summary, strength, facts = judge(NOW - ago)
    assert got is status and summary.startswith(words), summary
    assert strength == (None if status is Status.OK else "behaviour")
    assert facts["age_from"] == "mtime" and facts["last_line_at"] is None
    assert facts["age_s"] == facts["mtime_age_s"] == ago.total_seconds()
    assert facts["empty_since"] == (NOW - ago).isoformat().replace("+00:00", "Z")


def test_an_empty_log_beside_a_healthy_one_keeps_its_strength() -> None:
    fresh = b"2026-11-29T07:23:00Z tick\n"
    ok = LogFacts("/a", "ok", "", NOW.timestamp(), len(fresh), fresh)
    status, summary, strength, _ = judge(NOW - timedelta(minutes=12), ok)
    assert (status, strength) == (Status.WARN, "behaviour")
    assert "other logs" not in summary  # the healthy one is a row of its own


# ---------------------------------------------------------------- lab: a real writer
WRITER = """\
import sys, time
from datetime import datetime, timezone
f = open(sys.argv[1], "a", buffering=1)
print("ready", flush=True)
while True:
    f.write(datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ INFO match done\\n"))
    time.sleep(0.05)
"""


def patrol_row(lab: Lab, cfg: object) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "run", "-c", str(cfg), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    (row,) = [r for r in json.loads(proc.stdout)["results"] if r["check"] == "logs"]
    return row


@pytest.mark.lab
def test_a_log_rotated_under_a_writer_that_keeps_the_old_file_escalates(lab: Lab) -> None:
    h = lab.add_host("w")
    log = h.log_path("worker.log")
    writer = lab.spawn(
        [sys.executable, "-c", WRITER, str(log)], ns=h.ns or None, stdout=subprocess.PIPE
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == b"ready"
    wait_for(lambda: log.exists() and log.stat().st_size > 0, 10, "the writer's first line")
    cfg = lab.config(
        checks="[checks.logs]\n",
        host_extra={"w": f'tz = "UTC"\nlogs = [{{ path = "{log}", max_age = "10m" }}]'},
    )
    assert patrol_row(lab, cfg)["status"] == "OK"  # the writer's own lines

    rotated = log.with_name("worker.log.1")
    os.rename(log, rotated)  # logrotate's create mode, with no reopen of the writer
    log.touch()
    grown = rotated.stat().st_size
    wait_for(lambda: rotated.stat().st_size > grown, 10, "the writer to go on in the old file")

    r = patrol_row(lab, cfg)  # freshly rotated: as fresh as a line that old
    assert r["status"] == "OK" and "empty since" in r["summary"], r["summary"]
    for minutes, status, limit in ((12, "WARN", "max_age 10m00s"), (40, "CRIT", "crit_age")):
        t = time.time() - minutes * 60  # the rotation happened that long ago
        os.utime(log, (t, t))
        r = patrol_row(lab, cfg)
        assert r["status"] == status, r["summary"]
        assert r["evidence_strength"] == "behaviour"
        assert limit in r["summary"] and "a writer may still hold the rotated file" in r["summary"]
        assert log.stat().st_size == 0 and writer.poll() is None  # still writing elsewhere
    assert rotated.stat().st_size > grown
