"""The logs check without the lab: its pure evaluate (table-driven), the host-output parsers,
and its shell fragment run for real by /bin/sh on this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from fleetcheck.checks.logs import CHECK, ZONE_FRAGMENT, LogsConfig, LogsFacts, log_fragment

from fleetcheck.config import (
    BrokerConfig,
    ConfigError,
    FleetConfig,
    HostConfig,
    PatrolConfig,
    SshConfig,
    build,
)
from fleetcheck.core.hostfacts import LogsHostConfig, LogSpec
from fleetcheck.core.model import Status
from fleetcheck.parse.logtail import LogFacts, ZoneFacts, parse_log_output, parse_zone_output
from tests.conftest import ShiftedClock
from tests.log_rows import by_item, evaluate_one

NOW = datetime(2026, 11, 29, 7, 24, 0, tzinfo=UTC)


def logs_host(name: str, tz: str | None, *logs: LogSpec) -> HostConfig:
    return HostConfig(name=name, ssh="local").with_settings(LogsHostConfig(tz=tz, logs=logs))


CFG = LogsConfig()


def host(tz: str = "America/New_York", **spec: object) -> HostConfig:
    return logs_host("mini", tz, LogSpec(path="/l", **spec))  # type: ignore[arg-type]


def facts(tail: str, mtime: datetime = NOW, skew: float | None = 0.0, **kw: object) -> LogsFacts:
    data = tail.encode()
    lf = LogFacts("/l", "ok", "", mtime.timestamp(), kw.pop("size", len(data)), data)  # type: ignore[arg-type]
    return LogsFacts((lf,), skew, kw.get("zone"))  # type: ignore[arg-type]


# tail, declared tz, mtime, expected status, words in the summary
CASES = [
    # incident 6: 02:21 EDT is 06:21 UTC, minutes ago: not "four hours silent"
    (
        "2026-11-29 02:21:00,123 INFO tick\n",
        "America/New_York",
        NOW,
        Status.OK,
        ["02:21:00 EST = 07:21:00 UTC, 3m00s ago"],
    ),
    (
        "2026-11-29T02:21:00Z tick\n",
        "America/New_York",
        NOW,
        Status.CRIT,
        ["file /l: last line 02:21:00 UTC, 5h03m ago", "crit_age 30m00s"],
    ),
    (
        "2026-11-29T07:10:00Z tick\n",
        "UTC",
        datetime(2026, 11, 29, 7, 10, tzinfo=UTC),
        Status.WARN,
        ["14m00s ago (max_age 10m00s)"],
    ),
    # mtime says now, line read in Chicago says 1 h ago: the zone is wrong, not the log
    (
        "2026-11-29 02:21:00 tick\n",
        "America/Chicago",
        datetime(2026, 11, 29, 7, 21, tzinfo=UTC),
        Status.WARN,
        [
            "declared zone looks wrong: last line 02:21 America/Chicago = 08:21 UTC, "
            "file modified 07:21 UTC (America/New_York"
        ],
    ),
    # a line far in the future that is not a whole-hour zone shift
    ("2026-11-29T09:03:00Z tick\n", "UTC", NOW, Status.WARN, ["in the FUTURE"]),
    # newest of interleaved lines wins; partial first line dropped
    (
        "26:00 partial\n2026-11-29 02:22:00 b\n2026-11-29 02:20:00 a\n",
        "America/New_York",
        NOW,
        Status.OK,
        ["02:22:00 EST"],
    ),
    # syslog in Kolkata
    (
        "Nov 29 12:50:00 box rater: tick\n",
        "Asia/Kolkata",
        NOW,
        Status.OK,
        ["12:50:00 IST = 07:20:00 UTC, 4m00s ago"],
    ),
    # epoch: zone-free
    ("1795937000 tick\n", "America/New_York", NOW, Status.OK, ["(epoch)"]),
]


def test_rotated_between_stat_and_tail_is_unknown() -> None:
    """stat saw 5000 bytes, tail read 40: two different files; judge neither."""
    r = evaluate_one(facts("2026-11-29T07:23:00Z new\n", size=5000), CFG, host("UTC"), NOW)
    assert r.status is Status.UNKNOWN
    assert "changed while being read (stat: " in r.summary


@pytest.mark.parametrize("tail,tz,mtime,status,words", CASES)
def test_evaluate(tail: str, tz: str, mtime: datetime, status: Status, words: list[str]) -> None:
    if tail.startswith("26:00"):  # the read began mid-line: a file longer than the tail
        tail = "x" * (256 - len(tail)) + tail  # exactly tail_bytes were read, as on a host
        r = evaluate_one(
            facts(tail, mtime, size=len(tail) + 1000), CFG, host(tz, tail_bytes=256), NOW
        )
    else:
        r = evaluate_one(facts(tail, mtime), CFG, host(tz), NOW)
    assert r.status is status, r.summary
    for w in words:
        assert w in r.summary, r.summary
    assert set(r.metrics) >= {
        "age_s",
        "mtime_age_s",
        "clock_skew_s",
        "error_lines",
        "size_bytes",
    }


def test_dst_ambiguous_line_says_how_it_was_read() -> None:
    mtime = datetime(2026, 11, 1, 6, 30, 5, tzinfo=UTC)
    r = evaluate_one(facts("2026-11-01 01:30:00 tick\n", mtime), CFG, host(), NOW)
    assert "occurs twice in America/New_York" in r.summary
    assert r.evidence["last_line_at"] == "2026-11-01T06:30:00Z"


def test_clock_skew_warns_and_ages_use_the_host_clock() -> None:
    # the host runs 5 min ahead: its line stamped 07:28 is "now" on its clock
    r = evaluate_one(facts("2026-11-29T07:28:30Z tick\n", skew=300.0), CFG, host("UTC"), NOW)
    assert r.status is Status.WARN
    assert "host clock is 5m00s ahead of ours" in r.summary
    assert r.metrics["clock_skew_s"] == 300.0
    assert 0 < r.metrics["age_s"] < 60


def test_error_flood_thresholds() -> None:
    lines = "".join(
        f"2026-11-29 07:2{i // 60}:{i % 60:02d} ERROR ConnectionError\n" for i in range(120)
    )
    r = evaluate_one(facts(lines), CFG, host("UTC"), NOW)
    assert r.status is Status.WARN
    assert "120 error lines" in r.summary and "over max_error_rate 10/min" in r.summary
    r = evaluate_one(facts(lines), CFG, host("UTC", max_error_rate=0.0), NOW)
    assert r.status is Status.OK and "120 error lines" in r.summary
    r = evaluate_one(facts(lines), CFG, host("UTC", max_error_rate=0.0, max_error_lines=100), NOW)
    assert r.status is Status.WARN and "more than max_error_lines 100" in r.summary


def test_auto_zone_without_an_answer_is_unknown_unless_lines_carry_offsets() -> None:
    zone = ZoneFacts(None, "no $TZ, /etc/localtime link, /etc/timezone or timedatectl", "+0000")
    h = host("auto")
    r = evaluate_one(facts("2026-11-29 07:20:00 tick\n", zone=zone), CFG, h, NOW)
    assert (
        r.status is Status.UNKNOWN
        and "tz = auto but the host's zone could not be found" in r.summary
    )
    r = evaluate_one(facts("2026-11-29T07:20:00Z tick\n", zone=zone), CFG, h, NOW)
    assert r.status is Status.OK


def test_several_logs_are_a_row_each() -> None:
    """Issue 43: each log of a host is an item with its own verdict (its own alert, silence
    and history), never folded into the host's worst."""
    h = logs_host("m", "UTC", LogSpec(path="/a"), LogSpec(path="/b"))
    ok = LogFacts("/a", "ok", "", NOW.timestamp(), 26, b"2026-11-29T07:23:00Z tick\n")
    gone = LogFacts("/b", "missing", "no such file")
    rows = by_item(CHECK.evaluate(LogsFacts((ok, gone), 0.0), CFG, h, NOW))
    assert set(rows) == {"/a", "/b"}
    assert rows["/b"].status is Status.UNKNOWN
    assert rows["/b"].summary == "file /b: no such file"
    assert rows["/a"].status is Status.OK and rows["/a"].host == "m"
    assert rows["/a"].metrics["age_s"] is not None and "logs" not in rows["/a"].metrics


def test_a_skewed_clock_warns_on_every_log() -> None:
    h = logs_host("m", "UTC", LogSpec(path="/a"), LogSpec(path="/b"))
    fresh = b"2026-11-29T07:28:30Z tick\n"
    a = LogFacts("/a", "ok", "", NOW.timestamp(), len(fresh), fresh)
    b = LogFacts("/b", "ok", "", NOW.timestamp(), len(fresh), fresh)
    rows = CHECK.evaluate(LogsFacts((a, b), 300.0), CFG, h, NOW)
    assert isinstance(rows, list) and len(rows) == 2
    assert all(
        r.status is Status.WARN and "host clock is 5m00s ahead of ours" in r.summary for r in rows
    )


# ---------------------------------------------------------------- host output parsers


@pytest.mark.parametrize(
    "out,state,detail",
    [
        (
            b"state error stat: cannot statx 'x': No such file or directory\n",
            "missing",
            "no such file",
        ),
        (b"state error stat: cannot statx 'x': Permission denied\n", "denied", "permission denied"),
        (b"state denied\n", "denied", "permission denied"),
        (b"state not-regular\n", "not-regular", "not a regular file"),
        (b"state error stat: weird\n", "error", "stat: weird"),
        (b"garbage", "error", "unexpected output from the host (rc 0)"),
        (b"stat x y\ntail\n", "error", "cannot read stat output 'stat x y'"),
    ],
)
def test_parse_log_output_states(out: bytes, state: str, detail: str) -> None:
    lf = parse_log_output("/l", 0, out)
    assert (lf.state, lf.detail) == (state, detail)


def test_parse_log_output_keeps_the_tail_bytes_exactly() -> None:
    lf = parse_log_output("/l", 0, b"stat 1795937000 42\ntail\nline one\n\x00tail\nx")
    assert (lf.mtime, lf.size, lf.tail) == (1795937000.0, 42, b"line one\n\x00tail\nx")


@pytest.mark.parametrize(
    "text,name,how",
    [
        (
            "TZ=America/New_York\noffset=-0500\nlocaltime=/usr/share/zoneinfo/Etc/UTC\n",
            "America/New_York",
            "$TZ",
        ),
        ("TZ=:Asia/Kolkata\n", "Asia/Kolkata", "$TZ"),
        ("TZ=\nlocaltime=/usr/share/zoneinfo/Europe/Berlin\n", "Europe/Berlin", "/etc/localtime"),
        (
            "TZ=\nlocaltime=/var/db/timezone/zoneinfo/America/Chicago\n",
            "America/Chicago",
            "/etc/localtime",
        ),  # macOS
        ("TZ=\nlocaltime=../usr/share/zoneinfo/posix/Asia/Tokyo\n", "Asia/Tokyo", "/etc/localtime"),
        ("TZ=\nlocaltime=\netc_timezone=Europe/London\n", "Europe/London", "/etc/timezone"),
        ("TZ=\ntimedatectl=Australia/Sydney\n", "Australia/Sydney", "timedatectl"),
        ("TZ=CST6CDT-bogus\nlocaltime=\n", None, "$TZ 'CST6CDT-bogus' is not an IANA zone"),
        ("TZ=\noffset=+0000\n", None, "no $TZ"),
    ],
)
def test_parse_zone_output(text: str, name: str | None, how: str) -> None:
    z = parse_zone_output(text)
    assert z.name == name
    assert z.how.startswith(how)


# ---------------------------------------------------------------- the fragments, run for real


def run_sh(script: str, *prefix: str) -> bytes:
    return subprocess.run(
        [*prefix, "/bin/sh", "-c", script], capture_output=True, check=True
    ).stdout


def test_fragment_quotes_a_hostile_path(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = f"x'; touch {marker}; '"
    out = run_sh(log_fragment(LogSpec(path=path)))
    assert not marker.exists()
    assert parse_log_output(path, 0, out).state == "missing"
    # a real file with spaces, quotes and $ in its name is read
    odd = tmp_path / "it's a $HOME `log`"
    odd.write_bytes(b"a\n" * 10)
    lf = parse_log_output(str(odd), 0, run_sh(log_fragment(LogSpec(path=str(odd), tail_bytes=256))))
    assert lf.state == "ok" and lf.size == 20 and lf.tail == b"a\n" * 10


def test_fragment_bounds_the_tail(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    big.write_bytes(b"y" * 1_000_000)
    lf = parse_log_output(
        str(big), 0, run_sh(log_fragment(LogSpec(path=str(big), tail_bytes=4096)))
    )
    assert lf.size == 1_000_000 and len(lf.tail) == 4096


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
def test_fragment_reports_permission_denied(tmp_path: Path) -> None:
    secret = tmp_path / "private"
    secret.mkdir()
    log = secret / "app.log"
    log.write_text("x\n")
    secret.chmod(0o700)
    tmp_path.chmod(0o755)
    nobody = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    lf = parse_log_output(str(log), 0, run_sh(log_fragment(LogSpec(path=str(log))), *nobody))
    assert (lf.state, lf.detail) == ("denied", "permission denied")
    # readable directory, unreadable file
    secret.chmod(0o755)
    log.chmod(0o600)
    lf = parse_log_output(str(log), 0, run_sh(log_fragment(LogSpec(path=str(log))), *nobody))
    assert lf.state == "denied"


def test_zone_fragment_reads_tz_from_the_environment() -> None:
    out = subprocess.run(
        ["/bin/sh", "-c", ZONE_FRAGMENT],
        capture_output=True,
        check=True,
        env={"PATH": os.environ["PATH"], "TZ": "America/New_York"},
    ).stdout.decode()
    z = parse_zone_output(out)
    assert z.name == "America/New_York" and z.offset in ("-0500", "-0400")


def test_remote_commands_one_fragment_per_log_plus_zone() -> None:
    h = logs_host("m", "auto", LogSpec(path="/a"), LogSpec(path="/b"))
    fleet = FleetConfig(
        path="t.toml",
        broker=BrokerConfig(url="redis://127.0.0.1:6379/0"),
        ssh=SshConfig(),
        patrol=PatrolConfig(),
        hosts=(h,),
    )
    assert set(CHECK.remote_commands(h, CFG, fleet)) == {"log0", "log1", "tz"}
    h2 = logs_host("m", "UTC", LogSpec(path="/a"))
    assert set(CHECK.remote_commands(h2, CFG, fleet)) == {"log0"}


# ---------------------------------------------------------------- config errors


@pytest.mark.parametrize(
    "table,message",
    [
        ({"path": "/l", "format": "%Y-%m-%d %H:%M:%S %Z"}, "format: %Z"),
        ({"path": "/l", "format": "%Y"}, "format: format has no hour"),
        ({"path": "/l", "regex": "(?P<when>.*)"}, "regex: needs a named group"),
        ({"path": "/l", "error_regex": "("}, "error_regex: not a valid regular expression"),
        ({"path": "/l", "max_error_rate": -1}, "max_error_rate: must be 0 (off) or more"),
        ({"path": "/l", "max_error_lines": -1}, "max_error_lines: must be 0 or more"),
        ({"path": "/l", "max_age": "5m", "crit_age": "1m"}, "crit_age: must not be shorter"),
    ],
)
def test_bad_log_config_is_refused(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build(LogSpec, table, "hosts.toml", "hosts[0].logs[0]")


def test_host_with_logs_needs_a_zone() -> None:
    with pytest.raises(ConfigError, match="a host with logs needs tz"):
        build(LogsHostConfig, {"logs": [{"path": "/l"}]}, "h", "hosts[0]")


def test_logs_config_rejects_a_zero_skew() -> None:
    with pytest.raises(ConfigError, match="max_clock_skew"):
        build(LogsConfig, {"max_clock_skew": 0}, "h", "checks.logs")


def test_epoch_case_is_really_recent() -> None:
    # guard for the epoch row of CASES: 1795937000 is 07:23:20 UTC on 2026-11-29
    assert datetime.fromtimestamp(1795937000, UTC) == NOW - timedelta(seconds=40)


# ---------------------------------------------------------------- floods from the lines' own times


def stamped(t: datetime, text: str, frac: bool = True) -> str:
    return f"{t:%Y-%m-%d %H:%M:%S}{f',{t.microsecond // 1000:03d}' if frac else ''} {text}\n"


def flood_case(name: str) -> tuple[str, Status, list[str]]:
    err = "ERROR redis.exceptions.ConnectionError: Error 113 connecting. No route to host."
    t0 = NOW - timedelta(seconds=30)
    if name == "burst-one-timestamp":  # 3,000 lines stamped with one whole second
        return (
            "".join(stamped(t0, err, frac=False) for _ in range(3000)),
            Status.WARN,
            ["3000 error lines", "a burst: 3000 within one second (at least 3,000/s)"],
        )
    if name == "burst-subsecond":  # 3,000 lines within 0.3 s, millisecond stamps
        return (
            "".join(stamped(t0 + timedelta(microseconds=100 * i), err) for i in range(3000)),
            Status.WARN,
            ["3000 error lines", "a burst: 3000 within one second (at least 3,000/s) (over"],
        )
    if name == "seed-flood":  # one error every 4 ms for hours: the tail holds ~2 s of it
        return (
            "".join(stamped(t0 + timedelta(milliseconds=4 * i), err) for i in range(500)),
            Status.WARN,
            ["500 error lines", "251/s (over max_error_rate 10/min)"],
        )
    if name == "slow-flood":  # one error every 3 s for an hour: 20/min
        return (
            "".join(stamped(NOW - timedelta(seconds=3 * i), err) for i in range(1200, 0, -1)),
            Status.WARN,
            ["1200 error lines", "20.0/min (over max_error_rate 10/min)"],
        )
    if name == "healthy-with-a-traceback":  # a line every 5 s; one error with its traceback
        lines = [
            stamped(NOW - timedelta(seconds=5 * i), "INFO pulled job") for i in range(600, 0, -1)
        ]
        tb = [
            stamped(NOW - timedelta(seconds=1000), "ERROR job 17 failed"),
            "Traceback (most recent call last):\n",
            '  File "worker.py", line 3, in run\n',
            "ValueError: Exception in job 17\n",
        ]
        lines[400:400] = tb
        return "".join(lines), Status.OK, ["3 error lines"]
    if name == "traceback-burst-in-quiet-log":  # 12 error lines of one record, same ms
        lines = [stamped(NOW - timedelta(seconds=60), "ERROR worker crashed")]
        lines += ["Traceback: Exception while handling Exception\n"] * 11
        return "".join(lines), Status.OK, ["12 error lines"]
    raise AssertionError(name)


@pytest.mark.parametrize(
    "name",
    [
        "burst-one-timestamp",
        "burst-subsecond",
        "seed-flood",
        "slow-flood",
        "healthy-with-a-traceback",
        "traceback-burst-in-quiet-log",
    ],
)
def test_flood_rate_from_the_lines_own_times(name: str) -> None:
    tail, status, words = flood_case(name)
    r = evaluate_one(facts(tail), CFG, host("UTC", tail_bytes=16 * 1024 * 1024), NOW)
    assert r.status is status, r.summary
    for w in words:
        assert w in r.summary, r.summary


def test_unstamped_error_lines_count_toward_max_error_lines() -> None:
    tail = stamped(NOW - timedelta(seconds=10), "INFO start") + "Traceback: boom\n" * 5
    tail = "Exception before any stamp\n" * 3 + tail
    r = evaluate_one(facts(tail, size=len(tail)), CFG, host("UTC", max_error_lines=7), NOW)
    assert r.status is Status.WARN, r.summary
    assert r.metrics["error_lines"] == 8 and "more than max_error_lines 7" in r.summary


def test_burst_rate_is_at_least_n_per_second() -> None:
    tail = "".join(stamped(NOW, "ERROR x", frac=False) for _ in range(50))
    r = evaluate_one(facts(tail), CFG, host("UTC"), NOW)
    assert r.metrics["error_rate_per_s"] == 50


def test_one_error_record_has_no_rate() -> None:
    r = evaluate_one(facts(stamped(NOW, "ERROR x") + "Traceback\n"), CFG, host("UTC"), NOW)
    assert r.metrics["error_lines"] == 2 and r.metrics["error_rate_per_s"] is None
    assert r.status is Status.OK


@pytest.mark.parametrize(
    "zone", ["America/New_York", "Europe/Berlin", "Australia/Sydney", "Asia/Kolkata"]
)
def test_a_local_log_a_minute_old_is_ok_in_any_season(clock: ShiftedClock, zone: str) -> None:
    """A log in local time without an offset, written a minute before the test clock's
    instant: OK, read in the zone's offset of that season and labelled with its abbreviation
    (EST in January, EDT in July; AEDT/AEST the other way round)."""
    now = clock.now().replace(microsecond=0)
    written = (now - timedelta(minutes=1)).astimezone(ZoneInfo(zone))
    tail = f"{written:%Y-%m-%d %H:%M:%S} INFO tick\n"
    r = evaluate_one(facts(tail, written), CFG, host(zone), now)
    assert r.status is Status.OK, r.summary
    label = f"{written:%H:%M:%S} {written.tzname()} = {written.astimezone(UTC):%H:%M:%S} UTC"
    assert label in r.summary, r.summary
    assert r.metrics["age_s"] == 60
