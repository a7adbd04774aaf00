"""Every log source over real SSH in lab hosts, through the real CLI: journald (real journal
files written by systemd-journal-remote, read by the real journalctl), JSON lines, floods
(a one-second burst and a slow flood), and a BusyBox-only host."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.lab import JOURNAL_REMOTE, Lab, LabHost, write_journal
from tests.test_logs_lab import host_lines, items, patrol, write_log

pytestmark = pytest.mark.lab


def _need(*tools: str) -> None:
    missing = [t for t in tools if not (shutil.which(t) or os.path.exists(t))]
    if missing:
        message = "needs " + ", ".join(missing)
        if os.environ.get("FLEETCHECK_REQUIRE_LAB") == "1":
            pytest.fail(message)
        pytest.skip(message)


def us(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000)


def entry(t: datetime, message: str, priority: int = 6, **fields: str) -> dict[str, str | int]:
    return {
        "__REALTIME_TIMESTAMP": us(t),
        "PRIORITY": priority,
        "MESSAGE": message,
        "_SYSTEMD_UNIT": "worker.service",
        "SYSLOG_IDENTIFIER": "rater",
        **fields,
    }


def patrol_timed(config: Path) -> tuple[int, dict[Any, Any], datetime, datetime]:
    """A patrol with the wall clock read just before and just after it."""
    before = datetime.now(UTC)
    code, rows = patrol(config)
    return code, rows, before, datetime.now(UTC)


def assert_age(age: float, written: datetime, before: datetime, after: datetime) -> None:
    """A line written at `written` (its text may drop the fraction of a second) is as old as
    the patrol's clock says: between the clock before the patrol and after it."""
    lo = (before - written).total_seconds() - 0.01
    hi = (after - written.replace(microsecond=0)).total_seconds() + 0.01
    assert lo <= age <= hi, (lo, age, hi)


def journal_table(directory: Path | None = None, **keys: str) -> str:
    extra = "".join(f"{k} = {v}\n" for k, v in keys.items())
    where = f'journal_dir = "{directory}"\n' if directory else ""
    return f'[[hosts.logs]]\nmax_age = "10m"\n{where}{extra}'


def test_journal_sources_and_each_failure(lab: Lab) -> None:
    _need("journalctl", JOURNAL_REMOTE, "setpriv")
    now = datetime.now(UTC)
    healthy, match, stale, burst = (lab.add_host(n) for n in ("healthy", "match", "stale", "burst"))
    absent, empty, nodir = (lab.add_host(n) for n in ("absent", "empty", "nodir"))
    denied = lab.add_unprivileged_host("denied")
    lab.add_host("nojournalctl", sshd_options="SetEnv PATH=/nonexistent\n")

    def journal(h: LabHost, entries: list[dict[str, str | int]]) -> Path:
        d = h.dir / "journal"
        write_journal(d, entries)
        return d

    # a healthy service: a line every 10 s, one error 5 min ago, other units around it
    lines = [entry(now - timedelta(seconds=10 * i), f"pulled job {i}") for i in range(60, 0, -1)]
    lines.insert(30, entry(now - timedelta(minutes=5), "lost broker, retrying", priority=3))
    lines.append(entry(now, "other", _SYSTEMD_UNIT="cron.service", SYSLOG_IDENTIFIER="cron"))
    d_healthy = journal(healthy, lines)
    d_match = journal(match, lines)
    d_stale = journal(stale, [entry(now - timedelta(hours=2), "last words")])
    # 3,000 PRIORITY=3 entries within one second
    t0 = now - timedelta(seconds=20)
    flood = [
        entry(t0 + timedelta(microseconds=300 * i), "ConnectionError: No route to host", 3)
        for i in range(3000)
    ]
    d_burst = journal(burst, flood)
    d_absent = journal(absent, [entry(now, "cron ran", _SYSTEMD_UNIT="cron.service")])
    d_empty = empty.dir / "journal-empty"
    d_empty.mkdir()
    # readable directories, a journal file only root may read (0640 root:root)
    d_denied = journal(denied, lines)
    for p in (lab.dir, denied.dir, d_denied):
        p.chmod(0o755)

    unit = '"worker.service"'
    config = lab.config(
        checks="[checks.logs]\n",
        host_extra={
            "healthy": host_lines("UTC", journal_table(d_healthy, journal=unit)),
            "match": host_lines(
                "America/New_York",
                journal_table(d_match, journal_match='["SYSLOG_IDENTIFIER=rater"]'),
            ),
            "stale": host_lines("UTC", journal_table(d_stale, journal=unit)),
            "burst": host_lines("UTC", journal_table(d_burst, journal=unit)),
            "absent": host_lines("UTC", journal_table(d_absent, journal=unit)),
            "empty": host_lines("UTC", journal_table(d_empty, journal=unit)),
            "nodir": host_lines("UTC", journal_table(nodir.dir / "nowhere", journal=unit)),
            "denied": host_lines("UTC", journal_table(d_denied, journal=unit)),
            "nojournalctl": host_lines("UTC", journal_table(journal=unit)),
        },
    )
    code, rows, before, after = patrol_timed(config)

    def row(name: str) -> tuple[str, str]:
        r = rows[(name, "logs")]
        return r["status"], r["summary"]

    status, summary = row("healthy")
    assert status == "OK", summary
    assert summary.startswith("journal worker.service: last entry ")
    assert "UTC (journal times are UTC)" in summary and " = " not in summary
    assert "1 error entries (PRIORITY <= 3) in the newest 61" in summary
    r = rows[("healthy", "logs")]
    assert r["evidence"]["source"] == "journal" and r["metrics"]["entries"] == 61
    assert r["evidence"]["last_line"] == "pulled job 1"
    assert_age(r["metrics"]["age_s"], now - timedelta(seconds=10), before, after)

    status, summary = row("match")  # the match selects rater's entries in any unit
    assert status == "OK", summary
    assert summary.startswith("journal SYSLOG_IDENTIFIER=rater: last entry")

    status, summary = row("stale")
    assert status == "CRIT", summary
    assert "2h00m ago (crit_age 30m00s)" in summary

    status, summary = row("burst")
    assert status == "WARN", summary
    assert "300 error entries (PRIORITY <= 3) in the newest 300" in summary
    assert "over max_error_rate 10/min" in summary

    status, summary = row("absent")
    assert status == "UNKNOWN", summary
    assert "no entries for unit worker.service in the journal in " in summary
    assert "the unit does not exist on this host or never logged" in summary

    status, summary = row("empty")
    assert status == "UNKNOWN", summary
    assert f"the journal in {d_empty} is empty (no entries at all)" in summary

    status, summary = row("nodir")
    assert status == "UNKNOWN", summary
    assert f"journal directory {nodir.dir / 'nowhere'} not found" in summary

    status, summary = row("denied")
    assert status == "UNKNOWN", summary
    assert "no permission to read the journal in " in summary
    assert "not in the systemd-journal or adm group" in summary
    assert "insufficient permissions" in summary

    status, summary = row("nojournalctl")
    assert status == "UNKNOWN", summary
    assert summary == "journal worker.service: journalctl not found on the host"
    assert code == 2


def test_json_logs_over_ssh(lab: Lab) -> None:
    now = datetime.now(UTC)
    h = lab.add_host("app")
    pino = h.log_path("app.jsonl")
    write_log(
        pino,
        [
            f'{{"level":30,"time":{int((now - timedelta(seconds=s)).timestamp() * 1000)},'
            f'"msg":"tick"}}'
            for s in (90, 60, 30)
        ]
        + ["not json: a raw stderr line in between"],
    )
    docker = h.log_path("container-json.log")
    stamp = (now - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
    write_log(
        docker,
        [
            '{"log":"ERROR ConnectionError: No route to host\\n","stream":"stderr",'
            f'"time":"{stamp}"}}'
        ],
    )
    zap = h.log_path("zap.log")  # format = "json" declared, configured time field
    epoch = (now - timedelta(seconds=20)).timestamp()
    write_log(zap, [f'{{"L":"ERROR","when":{epoch},"M":"lost broker"}}'])
    config = lab.config(
        checks="[checks.logs]\n",
        host_extra={
            "app": host_lines(
                "UTC",
                f'[[hosts.logs]]\npath = "{pino}"\n',
                f'[[hosts.logs]]\npath = "{docker}"\n',
                f'[[hosts.logs]]\npath = "{zap}"\nformat = "json"\ntime_field = "when"\n',
            )
        },
    )
    code, rows, before, after = patrol_timed(config)
    assert {r["status"] for r in items(rows, "app").values()} == {"OK"}
    logs = {k: r["metrics"] for k, r in items(rows, "app").items()}
    sources = {k: r["evidence"]["source"] for k, r in items(rows, "app").items()}
    assert sources[str(pino)] == "json" and logs[str(pino)]["error_lines"] == 0
    assert_age(logs[str(pino)]["age_s"], now - timedelta(seconds=30), before, after)
    assert logs[str(docker)]["error_lines"] == 1
    assert_age(logs[str(docker)]["age_s"], now - timedelta(seconds=5), before, after)
    assert logs[str(zap)]["error_lines"] == 1  # no level field: the regex on the whole line
    assert all(r["summary"].startswith("JSON lines ") for r in items(rows, "app").values())
    assert code == 0
    # a JSON log whose records carry no time field: UNKNOWN naming the fields looked for
    notime = h.log_path("notime.jsonl")
    write_log(notime, ['{"level":"info","msg":"tick"}'] * 3)
    config = lab.config(
        checks="[checks.logs]\n",
        host_extra={"app": host_lines("UTC", f'[[hosts.logs]]\npath = "{notime}"\n')},
    )
    code, rows = patrol(config)
    r = rows[("app", "logs")]
    assert r["status"] == "UNKNOWN" and code == 3
    assert r["summary"].startswith(f"JSON lines {notime}: no parseable timestamp in the last 3")
    assert "no recognised JSON time field (time, ts, timestamp, @timestamp, t)" in r["summary"]


def test_burst_and_slow_flood_warn_through_the_cli(lab: Lab) -> None:
    """Default settings: a one-second burst of 3,000 ConnectionError lines and a slow flood
    (one error every 3 s for an hour) are WARN; a healthy log with an occasional error is
    OK."""
    now = datetime.now(UTC)
    h = lab.add_host("w")
    err = "ERROR redis.exceptions.ConnectionError: Error 113 connecting. No route to host."
    burst = h.log_path("burst.log")
    second = (now - timedelta(seconds=10)).replace(microsecond=0)
    write_log(burst, [f"{second:%Y-%m-%d %H:%M:%S} {err}"] * 3000)
    slow = h.log_path("slow.log")
    write_log(
        slow,
        [f"{now - timedelta(seconds=3 * i):%Y-%m-%dT%H:%M:%S}Z {err}" for i in range(1200, 0, -1)],
    )
    healthy = h.log_path("healthy.log")
    lines = [
        f"{now - timedelta(seconds=5 * i):%Y-%m-%d %H:%M:%S},000 INFO pulled job"
        for i in range(700, 0, -1)
    ]
    lines[500:500] = [
        f"{now - timedelta(seconds=900):%Y-%m-%d %H:%M:%S},000 ERROR job failed",
        "Traceback (most recent call last):",
        "ValueError: Exception in job",
    ]
    write_log(healthy, lines)
    config = lab.config(
        checks="[checks.logs]\n",
        host_extra={
            "w": host_lines(
                "UTC",
                f'[[hosts.logs]]\npath = "{burst}"\n',
                f'[[hosts.logs]]\npath = "{slow}"\n',
                f'[[hosts.logs]]\npath = "{healthy}"\n',
            )
        },
    )
    code, rows = patrol(config)
    by_log = items(rows, "w")
    r = by_log[str(burst)]
    logs = {k: row["metrics"] for k, row in by_log.items()}
    assert r["status"] == "WARN", r["summary"]
    assert r["summary"].startswith(f"file {burst}: last line ")
    assert "a burst: " in r["summary"] and "within one second (at least " in r["summary"]
    assert "(over max_error_rate 10/min)" in r["summary"]
    assert by_log[str(slow)]["status"] == "WARN" and by_log[str(healthy)]["status"] == "OK"
    assert logs[str(burst)]["error_rate_per_s"] >= logs[str(burst)]["error_lines"]
    assert 15 / 60 < logs[str(slow)]["error_rate_per_s"] < 25 / 60
    assert logs[str(healthy)]["error_lines"] == 3
    assert logs[str(healthy)]["error_rate_per_s"] is None  # one record has no rate
    assert code == 1
    # each alone: the verdicts the summary counted
    for path, status in ((slow, "WARN"), (healthy, "OK")):
        cfg = lab.config(
            checks="[checks.logs]\n",
            host_extra={"w": host_lines("UTC", f'[[hosts.logs]]\npath = "{path}"\n')},
        )
        _, rows = patrol(cfg)
        assert rows[("w", "logs")]["status"] == status, rows[("w", "logs")]["summary"]


def test_busybox_host_runs_the_gathered_script(lab: Lab) -> None:
    """A host with only BusyBox: ash runs the one gathered script; stat, tail, head, awk, ip
    and date are BusyBox applets; there is no journalctl, no getent, no `ip -j`."""
    _need("busybox")
    now = datetime.now(UTC)
    bb = lab.add_busybox_host("alpine")
    log = bb.log_path("worker.log")
    write_log(log, [f"{now - timedelta(seconds=30):%Y-%m-%dT%H:%M:%S}Z INFO tick"])
    jlog = bb.log_path("app.jsonl")
    write_log(jlog, [f'{{"level":"info","ts":{(now - timedelta(seconds=40)).timestamp()}}}'])
    lab.add_interface(bb, "eth1", 200)  # incident 5 on an Alpine box
    config = lab.config(
        checks="[checks.logs]\n[checks.routes]\n",
        host_extra={
            "alpine": host_lines(
                "auto",
                f'[[hosts.logs]]\npath = "{log}"\n',
                f'[[hosts.logs]]\npath = "{jlog}"\n',
                '[[hosts.logs]]\njournal = "worker.service"\n',
            )
        },
    )
    code, rows, before, after = patrol_timed(config)
    by_log = items(rows, "alpine")
    logs = {k: row["metrics"] for k, row in by_log.items()}
    assert_age(logs[str(log)]["age_s"], now - timedelta(seconds=30), before, after)
    assert logs[str(log)]["size_bytes"] == log.stat().st_size
    sources = {k: row["evidence"]["source"] for k, row in by_log.items()}
    assert_age(logs[str(jlog)]["age_s"], now - timedelta(seconds=40), before, after)
    assert sources[str(jlog)] == "json"
    r = by_log["journal:worker.service"]
    assert r["status"] == "UNKNOWN"
    assert r["summary"] == "journal worker.service: journalctl not found on the host"
    assert by_log[str(log)]["status"] == by_log[str(jlog)]["status"] == "OK"
    assert r["metrics"]["clock_skew_s"] is not None  # BusyBox date: whole seconds
    assert abs(r["metrics"]["clock_skew_s"]) < 2
    routes = rows[("alpine", "routes")]
    assert routes["status"] == "CRIT", routes["summary"]
    assert routes["evidence"]["source"] == "/proc/net/route"
    assert f"dev eth0 [{bb.addr}/24]" in routes["summary"]
    assert f"dev eth1 (metric 200) [{bb.extra_addrs[0]}/24]" in routes["summary"]
    assert code == 2  # CRIT (routes) outranks UNKNOWN


def test_one_exec_per_host_per_patrol_with_every_source(lab: Lab) -> None:
    """A host with a text log, a JSON log, a journal source, tz = auto and the routes check:
    still exactly one remote exec per patrol (sshd counts each session's command)."""
    _need("journalctl", JOURNAL_REMOTE)
    now = datetime.now(UTC)
    counter = lab.dir / "execs"
    counter.write_text("")
    h = lab.add_host("w", sshd_options=f"ForceCommand echo exec >> {counter}; exec /bin/sh -s\n")
    text = h.log_path("w.log")
    write_log(text, [f"{now:%Y-%m-%dT%H:%M:%S}Z tick"])
    js = h.log_path("w.jsonl")
    write_log(js, [f'{{"level":"info","time":"{now:%Y-%m-%dT%H:%M:%S}Z"}}'])
    d = h.dir / "journal"
    write_journal(d, [entry(now, "tick")])
    config = lab.config(
        checks="[checks.logs]\n[checks.routes]\n",
        host_extra={
            "w": host_lines(
                "auto",
                f'[[hosts.logs]]\npath = "{text}"\n',
                f'[[hosts.logs]]\npath = "{js}"\n',
                journal_table(d, journal='"worker.service"'),
            )
        },
    )
    code, rows = patrol(config)
    assert rows[("w", "logs")]["status"] == "OK", rows[("w", "logs")]["summary"]
    assert rows[("w", "routes")]["status"] == "OK", rows[("w", "routes")]["summary"]
    assert counter.read_text().splitlines() == ["exec"]
    patrol(config)
    assert counter.read_text().splitlines() == ["exec", "exec"]
