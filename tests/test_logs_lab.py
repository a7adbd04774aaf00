"""The logs check end to end: real sshd in lab namespaces, the real CLI, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import ShiftedClock
from tests.lab import Lab, LabHost

pytestmark = pytest.mark.lab


def write_log(path: Path, lines: list[str], mtime: datetime | None = None) -> None:
    path.write_text("".join(line + "\n" for line in lines))
    if mtime is not None:
        os.utime(path, (mtime.timestamp(), mtime.timestamp()))


def patrol(config: Path, *extra: str) -> tuple[int, dict[tuple[str | None, ...], dict[str, Any]]]:
    """A patrol's exit code and rows: by (host, check), the worst row of it (a host with one
    log has one), and by (host, check, item), each log's row."""
    proc = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "run", "--format", "json", "-c", str(config), *extra],
        capture_output=True,
        timeout=120,
    )
    assert proc.stderr == b"" or b"Traceback" not in proc.stderr, proc.stderr.decode()
    report = json.loads(proc.stdout)
    rows: dict[tuple[str | None, ...], dict[str, Any]] = {}
    for r in report["results"]:  # worst first
        rows.setdefault((r["host"], r["check"]), r)
        rows[(r["host"], r["check"], r.get("item"))] = r
    return proc.returncode, rows


def items(rows: dict[tuple[str | None, ...], dict[str, Any]], host: str) -> dict[Any, Any]:
    """The logs check's rows of `host`, by item (each log's path, or `journal:...`)."""
    return {k[2]: r for k, r in rows.items() if len(k) == 3 and k[:2] == (host, "logs")}


def log_table(path: Path, **keys: str) -> str:
    extra = "".join(f"{k} = {v}\n" for k, v in keys.items())
    return f'[[hosts.logs]]\npath = "{path}"\nmax_age = "10m"\n{extra}'


def host_lines(tz: str, *tables: str) -> str:
    return f'tz = "{tz}"\n' + "\n".join(tables)


def test_recency_in_each_zone(lab: Lab, clock: ShiftedClock) -> None:
    """The Eastern log written a minute ago is OK (not '5 hours stale') in either DST season;
    the UTC log 2.5 h old is CRIT; a syslog log in Asia/Kolkata, zone found by tz = auto,
    reads right; the DST repeated hour is resolved and says so."""
    east, utc_host, india, dst = (
        lab.add_host("east"),
        lab.add_host("utc"),
        lab.add_host("india", sshd_options="SetEnv TZ=Asia/Kolkata\n"),  # the host's zone
        lab.add_host("dst"),
    )
    now = clock.now().replace(microsecond=0)
    ny = (now - timedelta(minutes=1)).astimezone(ZoneInfo("America/New_York"))
    east_log = east.log_path("rater.log")
    write_log(east_log, [f"{ny:%Y-%m-%d %H:%M:%S},000 INFO tick"], mtime=ny)
    old = now - timedelta(hours=2, minutes=30)
    utc_log = utc_host.log_path("worker.log")
    write_log(utc_log, [f"{old:%Y-%m-%dT%H:%M:%S} INFO pulled job"], mtime=old)
    india_log = india.log_path("syslog")
    ist = (now - timedelta(minutes=2)).astimezone(ZoneInfo("Asia/Kolkata"))
    write_log(india_log, [f"{ist:%b %e %H:%M:%S} india rater[42]: heartbeat"], mtime=ist)
    # 01:30 on the day DST ended in New York, written in the second (EST) pass
    dst_log = dst.log_path("rater.log")
    second_pass = datetime(2026, 11, 1, 6, 30, 30, tzinfo=UTC)
    write_log(dst_log, ["2026-11-01 01:30:00 INFO tick"], mtime=second_pass)

    config = lab.config(
        checks="[checks.logs]\n",
        host_extra={
            "east": host_lines("America/New_York", log_table(east_log)),
            "utc": host_lines("UTC", log_table(utc_log)),
            "india": host_lines("auto", log_table(india_log)),
            "dst": host_lines("America/New_York", log_table(dst_log)),
        },
    )
    before = clock.now()
    code, rows = patrol(config)
    after = clock.now()

    def age_within(row: dict[str, Any], written: datetime) -> None:
        lo = (before - written).total_seconds() - 0.01
        hi = (after - written).total_seconds() + 0.01
        assert lo <= row["metrics"]["age_s"] <= hi, (lo, row["metrics"]["age_s"], hi)

    r = rows[("east", "logs")]
    assert r["status"] == "OK", r["summary"]
    label = f"{ny:%H:%M:%S} {ny.tzname()} = {ny.astimezone(UTC):%H:%M:%S} UTC"
    assert label in r["summary"], r["summary"]
    assert r["evidence"]["tz"] == "America/New_York"
    age_within(r, ny)

    r = rows[("utc", "logs")]
    assert r["status"] == "CRIT", r["summary"]
    assert f"{old:%H:%M:%S} UTC" in r["summary"] and "crit_age 30m00s" in r["summary"]
    age_within(r, old)

    r = rows[("india", "logs")]
    assert r["status"] == "OK", r["summary"]
    assert r["evidence"]["tz"] == "Asia/Kolkata"
    assert f"{ist:%H:%M:%S} IST = " in r["summary"]
    assert r["evidence"]["tz_auto"]["how"].startswith("$TZ")
    assert r["evidence"]["tz_auto"]["offset"] == "+0530"
    age_within(r, ist)

    r = rows[("dst", "logs")]
    assert r["status"] == "CRIT"  # it is weeks old; the point is how it was read
    assert r["evidence"]["last_line_at"] == "2026-11-01T06:30:00Z"
    assert "occurs twice in America/New_York" in r["summary"]
    assert "second occurrence, EST" in r["summary"]
    assert code == 2


def test_wrongly_declared_zone_warns_and_names_the_likely_zone(
    lab: Lab, clock: ShiftedClock
) -> None:
    h = lab.add_host("mac")
    log = h.log_path("rater.log")
    written = (clock.now() - timedelta(minutes=1)).replace(microsecond=0)
    ny = written.astimezone(ZoneInfo("America/New_York"))
    # written in New York time, but the config says Chicago
    write_log(log, [f"{ny:%Y-%m-%d %H:%M:%S} tick"], mtime=written)
    config = lab.config(
        checks="[checks.logs]\n",
        host_extra={"mac": host_lines("America/Chicago", log_table(log))},
    )
    code, rows = patrol(config)
    r = rows[("mac", "logs")]
    assert r["status"] == "WARN", r["summary"]
    assert r["summary"].startswith(f"file {log}: declared zone looks wrong: last line ")
    misread = ny.replace(tzinfo=ZoneInfo("America/Chicago")).astimezone(UTC)
    assert (
        f"last line {ny:%H:%M} America/Chicago = {misread:%H:%M} UTC, "
        f"file modified {written:%H:%M} UTC"
    ) in r["summary"], r["summary"]
    assert "(America/New_York" in r["summary"]
    assert "by mtime the log is" in r["summary"]
    offset = ny.utcoffset()
    assert offset is not None
    implied = r["evidence"]["zone_check"]["implied_offset_h"]
    assert implied == pytest.approx(offset.total_seconds() / 3600, abs=0.05)
    assert code == 1


def test_unreadable_logs_are_unknown_with_the_reason(lab: Lab, tmp_path: Path) -> None:
    h = lab.add_host("w")
    marker = tmp_path / "pwned"
    evil = f"{h.dir}/x'; touch {marker}; '"
    empty = h.log_path("empty.log")
    empty.write_bytes(b"")
    binary = h.log_path("core.bin")
    binary.write_bytes(bytes(range(256)) * 64)
    huge = h.log_path("one-line.log")
    with huge.open("wb") as f:  # a 50 MB single line: only tail_bytes of it may be read
        f.write(b"2026-11-29 02:21:00 " + b"x" * (50 * 1024 * 1024))
    noisy = h.log_path("no-stamps.log")
    write_log(noisy, ["starting", "still starting"])
    missing = h.log_path("gone.log")
    fifo = h.log_path("fifo.log")
    os.mkfifo(fifo)
    config = lab.config(
        checks="[checks.logs]\n",
        host_extra={
            "w": host_lines(
                "UTC",
                log_table(Path(evil)),
                log_table(empty),
                log_table(binary),
                log_table(huge),
                log_table(noisy),
                log_table(missing),
                log_table(fifo),
            )
        },
    )
    code, rows = patrol(config)
    assert not marker.exists(), "the log path was executed by the remote shell"
    by_path = items(rows, "w")
    assert set(by_path) == {
        evil,
        str(empty),
        str(binary),
        str(huge),
        str(noisy),
        str(missing),
        str(fifo),
    }
    assert by_path[str(huge)]["metrics"]["size_bytes"] == 50 * 1024 * 1024 + 20
    assert code == 3
    assert by_path[evil]["status"] == "UNKNOWN"
    assert by_path[evil]["summary"].startswith(f"file {evil}: no such file")
    # the empty one is judged by its mtime (tests/test_logs_rotation.py): written just now, OK
    statuses = sorted(r["status"] for r in by_path.values())
    assert statuses == ["OK"] + ["UNKNOWN"] * 6, statuses


@pytest.mark.parametrize(
    "name,content,expected",
    [
        ("binary", bytes(range(256)) * 64, "looks binary"),
        ("huge", b"2026-11-29 02:21:00 " + b"x" * (5 * 1024 * 1024), "no complete line"),
        ("nostamps", b"starting\nstill starting\n", "no parseable timestamp in the last 2 lines"),
        ("missing", None, "no such file"),
    ],
)
def test_each_unreadable_log_reason(
    lab: Lab, name: str, content: bytes | None, expected: str
) -> None:
    h = lab.add_host("w")
    path = h.log_path(f"{name}.log")
    if content is not None:
        path.write_bytes(content)
    config = lab.config(
        checks="[checks.logs]\n", host_extra={"w": host_lines("UTC", log_table(path))}
    )
    _, rows = patrol(config)
    r = rows[("w", "logs")]
    assert r["status"] == "UNKNOWN"
    assert r["summary"].startswith(f"file {path}: {expected}"), r["summary"]


def test_error_flood_warns_with_rate_and_size(lab: Lab) -> None:
    now = datetime.now(UTC)
    h = lab.add_host("w")
    log = h.log_path("worker.log")
    lines = []
    for i in range(600):  # 600 error lines over the last 60 s
        t = now - timedelta(seconds=60 - i / 10)
        lines.append(
            f"{t:%Y-%m-%d %H:%M:%S},000 ERROR redis.exceptions.ConnectionError: "
            "Error 113 connecting to broker. No route to host."
        )
    write_log(log, lines)
    config = lab.config(
        checks="[checks.logs]\n",
        host_extra={"w": host_lines("UTC", log_table(log, tail_bytes="1048576"))},
    )
    code, rows = patrol(config)
    r = rows[("w", "logs")]
    assert r["status"] == "WARN", r["summary"]
    assert "600 error lines" in r["summary"] and "over max_error_rate 10/min" in r["summary"]
    assert r["metrics"]["error_lines"] == 600
    assert r["metrics"]["error_rate_per_s"] > 500 / 60
    assert r["metrics"]["size_bytes"] == log.stat().st_size
    assert code == 1


def test_fleet_failures_each_get_their_own_verdict(lab: Lab) -> None:
    """Host down, sshd stopped, sshd frozen, host key changed, auth refused: each its own
    precise verdict within the timeouts, while the healthy hosts are checked normally."""
    now = datetime.now(UTC)
    hosts: dict[str, LabHost] = {}
    for name in ("ok1", "down", "stopped", "frozen", "rekeyed", "denied", "ok2"):
        opts = "DenyUsers root\n" if name == "denied" else ""
        hosts[name] = lab.add_host(name, sshd_options=opts)
    extra = {}
    for name, h in hosts.items():
        log = h.log_path("w.log")
        write_log(log, [f"{now:%Y-%m-%dT%H:%M:%S}Z tick"])
        extra[name] = host_lines("UTC", log_table(log))
    lab.link_down(hosts["down"])
    lab.stop_sshd(hosts["stopped"])
    lab.freeze_sshd(hosts["frozen"])
    lab.change_host_key(hosts["rekeyed"])
    config = lab.config(checks="[checks.logs]\n", host_extra=extra)
    code, rows = patrol(config)  # its subprocess timeout (120 s) is the hang guard

    def row(name: str) -> tuple[str, str]:
        r = rows[(name, "logs")]
        return r["status"], r["summary"]

    assert row("ok1")[0] == "OK" and row("ok2")[0] == "OK"
    status, summary = row("down")
    # a host gone from the network is the fleet's failure, not fleetcheck's blind spot
    assert status == "CRIT" and rows[("down", "logs")]["evidence_strength"] == "inference"
    assert "no route to" in summary or "connecting to" in summary, summary
    status, summary = row("stopped")
    assert status == "UNKNOWN" and "connection refused by" in summary
    status, summary = row("frozen")
    assert status == "UNKNOWN" and summary.startswith("timed out after 3s waiting for the SSH")
    status, summary = row("rekeyed")
    assert status == "CRIT" and "host key changed" in summary and "man-in-the-middle" in summary
    status, summary = row("denied")
    assert status == "UNKNOWN" and "authentication refused by" in summary
    assert code == 2
    lab.thaw_sshd(hosts["frozen"])


def test_library_formats_over_ssh(lab: Lab, clock: ShiftedClock) -> None:
    """Formats the parser before the library could not read (klog's year-less `I1129`,
    HDFS's `YYMMDD HHMMSS`, logcat) written a minute ago in New York, read right over real
    SSH with no format set, in either DST season; a syslog file last written a year ago is
    read as last year's (CRIT), not as a zone 8,760 hours off."""
    box = lab.add_host("box")
    now = clock.now().replace(microsecond=0)
    ny = ZoneInfo("America/New_York")
    written = (now - timedelta(minutes=1)).astimezone(ny)
    times = [written - timedelta(seconds=s) for s in (20, 10, 0)]
    files = {
        "klog": [f"I{t:%m%d %H:%M:%S}.000000    4242 main.go:42] synced" for t in times],
        "yymmdd-hhmmss": [f"{t:%y%m%d %H%M%S} 148 INFO dfs.DataNode: served" for t in times],
        "logcat": [f"{t:%m-%d %H:%M:%S}.000  1702  2395 D WindowManager: relayout" for t in times],
    }
    paths = {}
    for name, lines in files.items():
        paths[name] = box.log_path(f"{name}.log")
        write_log(paths[name], lines, mtime=written)
    year_ago = (now - timedelta(days=365, minutes=1)).astimezone(ny)
    stale = box.log_path("old-syslog")
    write_log(stale, [f"{year_ago:%b} {year_ago.day:2d} {year_ago:%H:%M:%S} box x: y"], year_ago)
    config = lab.config(
        checks="[checks.logs]\n",
        host_extra={
            "box": host_lines("America/New_York", *(log_table(p) for p in [*paths.values(), stale]))
        },
    )
    _, rows = patrol(config)
    r = rows[("box", "logs", str(stale))]
    by_path = {k: row["evidence"] for k, row in items(rows, "box").items()}
    metrics = {k: row["metrics"] for k, row in items(rows, "box").items()}
    for name, path in paths.items():
        ev = by_path[str(path)]
        assert ev["format"]["name"] == name, ev
        assert ev["last_line_at"] == f"{written.astimezone(UTC):%Y-%m-%dT%H:%M:%S}Z", ev
        assert ev["age_from"] == "line"
        assert 59 <= metrics[str(path)]["age_s"] <= 120, metrics[str(path)]
        if name != "yymmdd-hhmmss":
            assert (
                ev["note"] == f"no year in the line: read as {written.year} (by the file's mtime)"
            )
    ev = by_path[str(stale)]
    assert r["status"] == "CRIT", r["summary"]
    assert f"no year in the line: read as {year_ago.year} (by the file's mtime)" in r["summary"]
    assert "zone" not in r["summary"].split(";")[0], r["summary"]
    assert ev["last_line_at"] == f"{year_ago.astimezone(UTC):%Y-%m-%dT%H:%M:%S}Z"
