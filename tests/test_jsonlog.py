"""JSON-lines logs: where each logging library puts the time and the level (table tests), epoch
magnitudes told apart, and the logs check's evaluate over JSON tails."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from fleetcheck.checks.logs import LogsConfig, LogsFacts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetcheck.config import ConfigError, HostConfig, build
from fleetcheck.core.hostfacts import LogsHostConfig, LogSpec
from fleetcheck.core.model import Status
from fleetcheck.parse import jsonlog
from fleetcheck.parse.logtail import LogFacts
from fleetcheck.parse.timestamps import Stamp
from tests.log_rows import evaluate_one

NOW = datetime(2026, 11, 29, 7, 24, 0, tzinfo=UTC)
T = NOW - timedelta(minutes=2)  # 07:22:00 UTC
EPOCH = 1795936920  # T as epoch seconds
ERR = re.compile("ERROR|Traceback|Exception")


def utc_of(stamp: Stamp | None) -> datetime | None:
    """The UTC moment of a stamp that carries its own offset (epoch, `Z`, `+05:30`)."""
    if stamp is None or stamp.offset is None:
        return None
    return (stamp.wall - stamp.offset).replace(tzinfo=UTC)


def test_epoch_guard() -> None:
    assert datetime.fromtimestamp(EPOCH, UTC) == T


# line, expected UTC (None: no usable time), how it was told
FAMILIES = [
    # structlog: ISO with zone in `timestamp`
    ('{"event": "tick", "level": "info", "timestamp": "2026-11-29T07:22:00.123456Z"}', T, "iso"),
    # logrus: ISO with offset in `time`
    ('{"level":"info","msg":"tick","time":"2026-11-29T02:22:00-05:00"}', T, "iso"),
    # bunyan: ISO Z in `time`, numeric level
    ('{"name":"app","hostname":"h","pid":1,"level":30,"msg":"tick","time":'
     '"2026-11-29T07:22:00.000Z","v":0}', T, "iso"),
    # pino: epoch milliseconds in `time`
    (f'{{"level":30,"time":{EPOCH}123,"pid":1,"hostname":"h","msg":"tick"}}', T, "ms"),
    # zap production: float epoch seconds in `ts`
    (f'{{"level":"info","ts":{EPOCH}.5,"caller":"main.go:1","msg":"tick"}}', T, "s"),
    # zap with nanosecond epoch in `ts` (zapcore.EpochNanosTimeEncoder)
    (f'{{"level":"info","ts":{EPOCH}000000000,"msg":"tick"}}', T, "ns"),
    # microseconds
    (f'{{"level":"info","ts":{EPOCH}000000,"msg":"tick"}}', T, "us"),
    # epoch seconds as a string
    (f'{{"time":"{EPOCH}","msg":"tick"}}', T, "s"),
    # Logstash / ECS
    ('{"@timestamp":"2026-11-29T07:22:00.000Z","log.level":"info","message":"tick"}', T, "iso"),
    # MongoDB 4.4+: {"t": {"$date": ...}}
    ('{"t":{"$date":"2026-11-29T07:22:00.000+00:00"},"s":"I","c":"NETWORK","msg":"tick"}', T,
     "iso"),
    # Docker json-file: RFC 3339 with nanoseconds
    ('{"log":"tick\\n","stream":"stdout","time":"2026-11-29T07:22:00.123456789Z"}', T, "iso"),
    # no time field at all
    ('{"msg":"tick","level":"info"}', None, ""),
    # a time field holding something that is not a time
    ('{"time":"soon","msg":"tick"}', None, ""),
    ('{"time":true,"msg":"tick"}', None, ""),
    # epoch far outside 2000-2099 in every unit reading
    ('{"time":12345,"msg":"tick"}', None, ""),
]  # fmt: skip


@pytest.mark.parametrize("line,expected,how", FAMILIES)
def test_time_field_families(line: str, expected: datetime | None, how: str) -> None:
    obj = jsonlog.parse_object(line)
    assert obj is not None
    stamp = jsonlog.object_stamp(obj)
    if expected is None:
        assert stamp is None
        return
    assert stamp is not None
    utc = utc_of(stamp)
    assert utc is not None
    assert expected <= utc < expected + timedelta(seconds=1)
    if how in ("s", "ms", "us", "ns"):
        assert stamp.kind == "epoch" and f"(epoch {how})" in stamp.text


# epoch value -> unit: magnitudes from the earliest to the latest plausible time per unit
MAGNITUDES = [
    (946684800, "s"),  # 2000-01-01
    (4102444799, "s"),  # 2099-12-31
    (946684800_000, "ms"),
    (4102444799_999, "ms"),
    (946684800_000_000, "us"),
    (4102444799_999_999, "us"),
    (946684800_000_000_000, "ns"),
    (4102444799_999_999_999, "ns"),
]


@pytest.mark.parametrize("value,unit", MAGNITUDES)
def test_epoch_magnitudes_are_told_apart(value: int, unit: str) -> None:
    assert jsonlog.epoch_unit(value)[1] == unit
    stamp = jsonlog.epoch_stamp(value)
    assert stamp is not None
    assert stamp.wall.year in (2000, 2099)
    assert stamp.text.endswith(f"(epoch {unit})")


def test_nanoseconds_keep_microsecond_precision() -> None:
    stamp = jsonlog.epoch_stamp(1795936920_123456_789)
    assert stamp is not None and stamp.wall.microsecond == 123456
    stamp = jsonlog.epoch_stamp("1795936920.25")
    assert stamp is not None and stamp.wall.microsecond == 250000


def test_naive_iso_time_takes_the_host_zone() -> None:
    obj = jsonlog.parse_object('{"time":"2026-11-29 02:22:00","msg":"tick"}')
    assert obj is not None
    stamp = jsonlog.object_stamp(obj)
    assert stamp is not None and stamp.offset is None  # the caller applies the host's tz


def test_configured_time_field_is_the_only_one_read() -> None:
    obj = {"time": "2026-11-29T01:00:00Z", "meta": {"written": "2026-11-29T07:22:00Z"}}
    assert utc_of(jsonlog.object_stamp(obj, "meta.written")) == T
    assert jsonlog.object_stamp(obj, "missing") is None


LEVELS = [
    ({"level": "error"}, True),
    ({"level": "ERROR"}, True),
    ({"level": "fatal"}, True),
    ({"level": "critical"}, True),
    ({"level": "panic"}, True),
    ({"level": "dpanic"}, True),  # zap
    ({"severity": "CRITICAL"}, True),  # Google Cloud Logging
    ({"lvl": "crit"}, True),  # log15
    ({"levelname": "ERROR"}, True),  # python-json-logger
    ({"log.level": "error"}, True),  # ECS, flat
    ({"log": {"level": "error"}}, True),  # ECS, nested
    ({"level": 50}, True),  # bunyan/pino error
    ({"level": 60}, True),  # bunyan/pino fatal
    ({"level": 40}, False),  # warn
    ({"level": 30}, False),  # info
    ({"level": 3}, True),  # syslog severity (GELF): error
    ({"level": 6}, False),  # syslog info
    ({"level": "warning"}, False),
    ({"level": "info"}, False),
    ({"level": "info", "msg": "ConnectionError retried"}, False),  # the level decides
]


@pytest.mark.parametrize("obj,error", LEVELS)
def test_levels(obj: dict[str, object], error: bool) -> None:
    assert jsonlog.is_error(obj, "", ERR) is error


def test_no_level_falls_back_to_the_error_regex_on_the_message() -> None:
    docker = {"log": "ERROR ConnectionError: No route to host\n", "stream": "stderr"}
    assert jsonlog.is_error(docker, "", ERR) is True
    assert jsonlog.is_error({"log": "tick\n", "stream": "stderr"}, "", ERR) is False
    # Docker wrapping a JSON-lines program: the inner level decides
    inner = {"log": '{"level":"info","msg":"Exception count 0"}\n', "stream": "stdout"}
    assert jsonlog.is_error(inner, "", ERR) is False
    inner_err = {"log": '{"level":"error","msg":"lost broker"}\n', "stream": "stdout"}
    assert jsonlog.is_error(inner_err, "", ERR) is True


@pytest.mark.parametrize(
    "line",
    ["not json", "[1, 2]", '"a string"', "{truncated", "", "   ", '{"a": 1} trailing'],
)
def test_non_objects_are_not_records(line: str) -> None:
    assert jsonlog.parse_object(line) is None


def test_detection() -> None:
    assert jsonlog.looks_like_json(['{"a":1}', "plain", '{"b":2}'])
    assert not jsonlog.looks_like_json(["2026-11-29 07:22:00 tick", '{"a":1}', "x"])
    assert not jsonlog.looks_like_json([])


# ---------------------------------------------------------------- the check over JSON tails

CFG = LogsConfig()


def host(tz: str = "UTC", **spec: object) -> HostConfig:
    spec_ = LogSpec(path="/j", **spec)  # type: ignore[arg-type]
    return HostConfig(name="m", ssh="local").with_settings(LogsHostConfig(tz=tz, logs=(spec_,)))


def facts(tail: str, mtime: datetime = NOW) -> LogsFacts:
    data = tail.encode()
    return LogsFacts((LogFacts("/j", "ok", "", mtime.timestamp(), len(data), data),), 0.0)


def pino(t: datetime, level: int, msg: str) -> str:
    return f'{{"level":{level},"time":{int(t.timestamp() * 1000)},"msg":"{msg}"}}\n'


def test_json_log_detected_read_and_named() -> None:
    tail = "".join(pino(T - timedelta(seconds=30 * i), 30, "tick") for i in range(5, -1, -1))
    r = evaluate_one(facts(tail), CFG, host(), NOW)
    assert r.status is Status.OK, r.summary
    assert r.summary.startswith("JSON lines /j: last line 07:22:00 UTC (epoch), 2m00s ago")
    assert r.evidence["source"] == "json" and r.metrics["error_lines"] == 0


def test_non_json_lines_in_between_are_skipped() -> None:
    tail = (
        pino(T - timedelta(seconds=5), 30, "tick")
        + "Traceback (most recent call last):\n  File x\nValueError: boom\n"
        + pino(T, 50, "lost broker")
    )
    r = evaluate_one(facts(tail), CFG, host(format="json"), NOW)
    assert r.status is Status.OK, r.summary
    # the level-50 record and the raw Traceback line are errors; "ValueError" is not
    assert r.metrics["error_lines"] == 2
    assert r.evidence["last_line_at"] == "2026-11-29T07:22:00Z"


def test_naive_json_times_use_the_hosts_zone() -> None:
    tail = '{"time":"2026-11-29 02:22:00","level":"info","msg":"tick"}\n'
    r = evaluate_one(facts(tail), CFG, host("America/New_York"), NOW)
    assert r.status is Status.OK, r.summary
    assert "02:22:00 EST = 07:22:00 UTC" in r.summary


def test_docker_json_file_as_is() -> None:
    lines = [
        f'{{"log":"worker tick {i}\\n","stream":"stdout","time":"2026-11-29T07:2{i}:00.5Z"}}\n'
        for i in range(3)
    ]
    lines.append(
        '{"log":"ERROR ConnectionError: No route to host\\n","stream":"stderr",'
        '"time":"2026-11-29T07:22:30.123456789Z"}\n'
    )
    r = evaluate_one(facts("".join(lines)), CFG, host(), NOW)
    assert r.status is Status.OK, r.summary
    assert "last line 07:22:30 UTC, 1m30s ago" in r.summary
    assert r.metrics["error_lines"] == 1


def test_json_without_any_time_field_is_unknown_naming_the_fields() -> None:
    r = evaluate_one(facts('{"msg":"tick"}\n{"msg":"tock"}\n'), CFG, host(), NOW)
    assert r.status is Status.UNKNOWN
    assert "no recognised JSON time field (time, ts, timestamp, @timestamp, t)" in r.summary
    r = evaluate_one(facts('{"msg":"tick"}\n'), CFG, host(time_field="when"), NOW)
    assert "no recognised JSON time field (when)" in r.summary


def test_json_error_flood_by_level_warns() -> None:
    tail = "".join(pino(T + timedelta(milliseconds=5 * i), 50, "lost broker") for i in range(400))
    r = evaluate_one(facts(tail), CFG, host(), NOW)
    assert r.status is Status.WARN, r.summary
    assert "400 error lines" in r.summary and "over max_error_rate 10/min" in r.summary


@pytest.mark.parametrize(
    "table,message",
    [
        ({"path": "/j", "format": "json", "regex": "(?P<ts>x)"}, 'regex: not with format = "json"'),
        ({"path": "/j", "format": "%Y-%m-%d %H:%M", "time_field": "t"}, "time_field: only for"),
        ({"path": "/j", "time_field": " "}, "time_field: must not be empty"),
    ],
)
def test_bad_json_log_config(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        build(LogSpec, table, "hosts.toml", "hosts[0].logs[0]")


# ---------------------------------------------------------------- fuzz: never a crash

_json_value = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**20), max_value=10**20),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=40),
        st.sampled_from(["2026-11-29T07:22:00Z", "1795936920", "2026-11-29 02:22:00,5", "50"]),
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=10,
)
_keys = st.sampled_from([*jsonlog.TIME_FIELDS, *jsonlog.LEVEL_FIELDS, "log", "msg", "$date"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_keys, _json_value, max_size=5))
def test_any_json_object_gives_a_stamp_or_none_and_a_verdict(obj: dict[str, object]) -> None:
    line = json.dumps(obj)
    parsed = jsonlog.parse_object(line)
    if parsed is None:  # NaN/inf are not JSON for every reader; json.dumps writes them anyway
        return
    stamp = jsonlog.object_stamp(parsed)
    assert stamp is None or 2000 <= stamp.wall.year < 2100 or stamp.offset is None
    assert jsonlog.is_error(parsed, line, ERR) in (True, False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=8))
def test_any_json_tail_evaluates_to_a_row(lines: list[str]) -> None:
    tail = "".join(line.replace("\n", " ") + "\n" for line in lines)
    r = evaluate_one(facts(tail), CFG, host(format="json"), NOW)
    assert r.summary.startswith("JSON lines /j: ")


@pytest.mark.parametrize("text", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_a_non_finite_epoch_is_no_stamp(text: str) -> None:
    """Python's json reads these (1e999 is infinity); the fuzz test above once found
    {"time": Infinity} raising instead of giving no stamp."""
    obj = jsonlog.parse_object(f'{{"time": {text}, "msg": "tick"}}')
    assert obj is not None and jsonlog.object_stamp(obj) is None
