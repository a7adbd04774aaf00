"""live_hash: instants, entry parsing and the verdict (pure tables), then HSCAN on a real
redis-server in the lab."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import redis
from fleetcheck.checks.live_hash import (
    CHECK,
    LiveHashConfig,
    LiveHashFacts,
    owner_presence,
)
from fleetcheck.checks.live_hash.scan import (
    LiveScan,
    any_stale,
    live_scan,
    read_live,
    scan_hash,
    stale_counts,
    stale_reason,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.config import ConfigError, HostConfig, from_dict
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.hostfacts import ClientsHostConfig
from fleetcheck.core.model import Status
from fleetcheck.parse.instant import parse_instant
from fleetcheck.parse.live_entry import read_entry
from tests.lab import Lab

NOW = datetime(2026, 11, 29, 6, 21, tzinfo=UTC)
T = NOW.timestamp()


# ---------------------------------------------------------------- parse_instant
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1700000000, 1700000000.0),
        (1700000000.25, 1700000000.25),
        ("1700000000", 1700000000.0),
        (" 1700000000.5 ", 1700000000.5),
        (b"1700000000", 1700000000.0),
        (1700000000123, 1700000000.123),  # epoch milliseconds (Date.now())
        ("1700000000123", 1700000000.123),
        (0, 0.0),
        ("2026-11-29T06:21:00Z", T),
        ("2026-11-29T06:21:00+00:00", T),
        ("2026-11-29 02:21:00-04:00", T),  # EDT, incident 6
        ("2026-11-29T06:21:00.000Z", T),
        ("20261129T062100Z", T),  # basic format (dateutil)
    ],
)
def test_parse_instant_accepts(value: object, expected: float) -> None:
    assert parse_instant(value) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "not a time"),
        (None, "not a time"),
        (float("nan"), "not a time"),
        (float("inf"), "not a time"),
        (-5, "negative"),
        ("", "empty"),
        ("   ", "empty"),
        ("yesterday", "not epoch seconds or ISO 8601"),
        ("2026-11-29T06:21:00", "without a zone"),  # a zone-less time means nothing
        ("2026-13-40T00:00:00Z", "not epoch seconds or ISO 8601"),
        ([1, 2], "a list"),
        ({"a": 1}, "a dict"),
        (b"\xff\xfe", "undecodable"),
        (1e30, "out of range"),
    ],
)
def test_parse_instant_refuses(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_instant(value)


def test_parse_instant_naive_with_assumed_zone() -> None:
    assert parse_instant("2026-11-29T01:21:00", ZoneInfo("America/New_York")) == T
    assert parse_instant("2026-11-29T06:21:00", UTC) == T


# ---------------------------------------------------------------- entries
@pytest.mark.parametrize(
    ("value", "started", "problem", "owner"),
    [
        ('{"started_at": 100, "host": "mini"}', 100.0, None, "mini"),
        ('{"started_at": "2026-11-29T06:21:00Z"}', T, None, None),
        ('{"started_at": 100, "host": 7}', 100.0, None, None),  # owner must be a string
        ("not json", None, "not JSON", None),
        (b"\xff\xfe", None, "not JSON", None),
        ("[1, 2]", None, "not a JSON object (list)", None),
        ('"text"', None, "not a JSON object (str)", None),
        ('{"host": "mini"}', None, "no started_at", "mini"),
        ('{"started_at": "soon"}', None, "started_at: not epoch", None),
        ('{"started_at": null}', None, "started_at: not a time", None),
        ('{"started_at": "2026-11-29T06:21:00"}', None, "started_at: ISO time without", None),
    ],
)
def test_read_entry(value: str, started: float | None, problem: str | None, owner: str | None):
    got_start, got_problem, got_owner = read_entry(
        value if isinstance(value, bytes) else value.encode()
    )
    assert got_start == (pytest.approx(started) if started is not None else None)
    assert (got_problem or "").startswith(problem or "")
    assert (got_problem is None) == (problem is None)
    assert got_owner == owner


def test_read_entry_other_fields() -> None:
    got = read_entry(b'{"t0": 5, "node": "big"}', started_field="t0", owner_field="node")
    assert got == (5.0, None, "big")
    assert read_entry(b'{"t0": 5, "node": "big"}', "t0", None)[2] is None


@pytest.mark.parametrize(
    ("started", "problem", "reason"),
    [
        (T - 60, None, ""),
        (T - 900, None, ""),  # exactly max_age: not yet older
        (T - 901, None, "older than max_age (15m01s)"),
        (T + 10, None, ""),  # small clock skew
        (T + 901, None, "malformed: started_at 15m01s in the future"),
        (None, "not JSON", "malformed: not JSON"),
    ],
)
def test_stale_reason(started: float | None, problem: str | None, reason: str) -> None:
    assert stale_reason(started, problem, T, 900) == reason


# ---------------------------------------------------------------- evaluate (pure)
def scan_of(*entries: tuple[str, bytes], keep: int = 5, kind: str = "hash") -> LiveScan:
    scan = LiveScan(key="arena:live", kind=kind, keep=keep)
    for name, value in entries:
        scan.add_values(name, *read_entry(value))
    return scan


def entry(name: str, age: float, host: str | None = None) -> tuple[str, bytes]:
    doc: dict[str, object] = {"started_at": T - age}
    if host:
        doc["host"] = host
    return name, json.dumps(doc).encode()


def evaluate(scan: LiveScan, cfg: LiveHashConfig | None = None, **kw: object):
    facts = LiveHashFacts(
        scan,
        dict(kw.get("owners", {})),  # type: ignore[call-overload]
        bool(kw.get("hexpire", False)),
        str(kw.get("server", "redis 7.0.15")),
    )
    return CHECK.evaluate(facts, cfg or LiveHashConfig(), None, NOW)


def test_all_fresh_is_ok() -> None:
    r = evaluate(scan_of(entry("a", 60), entry("b", 600)))
    assert r.status is Status.OK
    assert r.summary == "arena:live: 2 entries, all younger than 15m00s, oldest 10m00s"
    assert r.metrics == {"entries": 2, "fresh": 2, "stale": 0, "malformed": 0, "oldest_age_s": 600}


def test_absent_key_is_ok_and_wrong_type_unknown() -> None:
    r = evaluate(scan_of(kind="none"))
    assert r.status is Status.OK and "absent" in r.summary
    assert r.metrics["entries"] == 0 and r.metrics["oldest_age_s"] is None
    r = evaluate(scan_of(kind="list"))
    assert (r.status, r.summary) == (Status.UNKNOWN, "arena:live is a list, not a hash")


def test_empty_hash_is_ok() -> None:
    r = evaluate(scan_of())
    assert r.status is Status.OK and r.metrics["entries"] == 0


@pytest.mark.parametrize(
    ("fresh", "old", "bad", "cfg", "status"),
    [
        (10, 1, 0, LiveHashConfig(), Status.WARN),
        (10, 0, 1, LiveHashConfig(), Status.WARN),  # malformed alone is stale
        (5, 5, 0, LiveHashConfig(), Status.WARN),  # exactly half: not past the share
        (4, 5, 1, LiveHashConfig(), Status.CRIT),  # 60 % stale
        (10, 3, 0, LiveHashConfig(crit_share=None, crit_count=2), Status.CRIT),
        (10, 2, 0, LiveHashConfig(crit_share=None, crit_count=2), Status.WARN),
        (0, 9, 0, LiveHashConfig(crit_share=None), Status.WARN),  # no CRIT rule at all
        (1, 1, 0, LiveHashConfig(crit_share=0.0), Status.CRIT),
    ],
)
def test_stale_counts_and_thresholds(
    fresh: int, old: int, bad: int, cfg: LiveHashConfig, status: Status
) -> None:
    items = [entry(f"f{i}", 30) for i in range(fresh)]
    items += [entry(f"o{i}", 3600 + i) for i in range(old)]
    items += [(f"m{i}", b"garbage") for i in range(bad)]
    r = evaluate(scan_of(*items), cfg)
    assert r.status is status
    assert r.metrics["stale"] == old + bad and r.metrics["malformed"] == bad
    assert r.metrics["fresh"] == fresh and r.metrics["entries"] == fresh + old + bad


def test_incident_shape_numbers_and_evidence() -> None:
    items = [entry(f"fresh{i}", 60 + i, "big") for i in range(44)]
    items += [entry(f"old{i}", 3600 + i, "mini") for i in range(200)]
    items += [(f"bad{i}", b'{"host": "mini"}') for i in range(19)]
    r = evaluate(scan_of(*items), owners={"mini": False, "big": True})
    assert r.status is Status.CRIT
    assert r.metrics == {
        "entries": 263,
        "fresh": 44,
        "stale": 219,
        "malformed": 19,
        "oldest_age_s": 3799,
    }
    assert r.summary.startswith(
        "arena:live: 219 of 263 entries stale (200 older than 15m00s, 19 malformed), "
        "oldest 1h03m; confirmed leak: mini not connected to the broker"
    )
    ex = r.evidence["stale_examples"]
    assert [e["id"] for e in ex[:5]] == ["old199", "old198", "old197", "old196", "old195"]
    assert ex[0]["age_s"] == 3799 and ex[0]["confirmed_leak"] is True
    assert ex[5]["malformed"] == "no started_at" and ex[5]["owner"] == "mini"
    assert r.evidence["stale_by_owner"] == {"mini": 219}
    assert r.evidence["confirmed_leaks"] == ["mini"]
    assert "no per-field TTL" in r.evidence["advice"]


def test_advice_follows_server_features() -> None:
    scan = scan_of(entry("a", 5000))
    r = evaluate(scan, hexpire=True, server="redis 7.4.1")
    assert "has HEXPIRE" in r.evidence["advice"]
    r = evaluate(scan, hexpire=False, server="valkey 8.1.0")
    assert "valkey 8.1.0 has no per-field TTL" in r.evidence["advice"]


def test_owner_connected_is_not_a_confirmed_leak() -> None:
    r = evaluate(scan_of(entry("a", 5000, "big")), owners={"big": True})
    assert r.evidence["confirmed_leaks"] == []
    assert "confirmed_leak" not in r.evidence["stale_examples"][0]
    assert "confirmed leak" not in r.summary


def test_future_start_is_malformed() -> None:
    r = evaluate(scan_of(entry("a", -5000), entry("b", 10)))
    assert r.status is Status.WARN
    assert (r.metrics["malformed"], r.metrics["stale"], r.metrics["fresh"]) == (1, 1, 1)
    assert r.evidence["future_starts"] == 1


def test_keep_bounds_evidence_memory() -> None:
    scan = scan_of(*[entry(f"o{i}", 1000 + i) for i in range(50)], keep=3)
    assert [n for _, n, _ in scan.oldest] == ["o49", "o48", "o47"]
    r = evaluate(scan, LiveHashConfig(show=3))
    assert len(r.evidence["stale_examples"]) == 3 and r.metrics["stale"] == 50


def test_owner_presence() -> None:
    hosts = (
        HostConfig(name="mini").with_settings(ClientsHostConfig(addrs=("192.168.1.30",))),
        HostConfig(name="wsl").with_settings(ClientsHostConfig(addrs=("10.0.0.5", "192.168.1.40"))),
        HostConfig(name="noaddr"),
    )
    connected = {"192.168.1.40", "10.9.9.9"}
    got = owner_presence(
        ["mini", "wsl", "192.168.1.30", "10.9.9.9", "10.1.1.1", "noaddr", "stranger"],
        hosts,
        connected,
    )
    assert got == {
        "mini": False,
        "wsl": True,
        "192.168.1.30": False,
        "10.9.9.9": True,
        "10.1.1.1": False,
        "noaddr": None,
        "stranger": None,
    }


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"max_age": "0s"}, "max_age: must be longer than 0s"),
        ({"max_age": "soon"}, "max_age: bad duration"),
        ({"crit_share": 1.5}, "crit_share: must be at least 0 and below 1"),
        ({"crit_count": -1}, "crit_count: must be 0 or more"),
        ({"scan_count": 100000}, "scan_count: must be between 10 and 5000"),
        ({"naive_tz": "Mars/Base"}, "naive_tz: unknown time zone"),
        ({"key": ""}, "key: must not be empty"),
        ({"started_field": ""}, "started_field: must not be empty"),
        ({"show": 1000}, "show: must be between 0 and 100"),
        ({"maxage": "1s"}, "maxage: unknown key"),
    ],
)
def test_config_errors(table: dict[str, object], message: str) -> None:
    data = {"broker": {"url": "redis://127.0.0.1:1"}, "checks": {"live_hash": table}}
    with pytest.raises(ConfigError, match=message):
        from_dict(
            data,
            "hosts.toml",
            lambda n: LiveHashConfig if n == "live_hash" else None,
            lambda names: {},
        )


# ---------------------------------------------------------------- lab: the real HSCAN
def fleet_for(lab: Lab, checks: str = "[checks.live_hash]\n"):
    from fleetcheck.config import load
    from fleetcheck.core import registry

    return load(
        lab.config(checks=checks, hosts=[]), registry.config_type, registry.host_config_types
    )


@pytest.mark.lab
def test_scan_reads_every_field_once_in_small_calls(lab: Lab) -> None:
    r = lab.client()
    now = datetime.now(UTC).timestamp()
    mapping = {f"m{i}": json.dumps({"started_at": now - (i % 2000)}) for i in range(3000)}
    r.hset("arena:live", mapping=mapping)
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 10000)
    r.slowlog_reset()
    got = dict(scan_hash(lab.client(), "arena:live", 500))
    assert len(got) == 3000 and got[b"m7"] == mapping["m7"].encode()
    log = r.slowlog_get(10000)
    names = {e["command"].split()[0].upper() for e in log}
    assert b"HGETALL" not in names and "HGETALL" not in names
    hscans = [e for e in log if b"HSCAN" in e["command"].upper()]
    assert len(hscans) >= 3  # cursor walked in pieces, not one big call
    assert all(e["command"].split()[-1] == b"500" for e in hscans)


@pytest.mark.lab
def test_probe_on_real_broker(lab: Lab) -> None:
    r = lab.client()
    now = datetime.now(UTC)
    r.hset(
        "arena:live",
        mapping={
            "a": json.dumps({"started_at": now.timestamp() - 30, "host": "ghost"}),
            "b": json.dumps({"started_at": (now - timedelta(hours=2)).isoformat()}),
            "c": "{broken",
        },
    )
    fleet = fleet_for(lab)
    ctx = PatrolContext(fleet)
    try:
        facts = CHECK.probe(ctx, None, fleet.checks["live_hash"])
        result = CHECK.evaluate(facts, fleet.checks["live_hash"], None, ctx.clock())
    finally:
        ctx.close()
    assert result.status is Status.CRIT  # 2 of 3 stale: past the 0.5 share
    assert (result.metrics["entries"], result.metrics["stale"], result.metrics["malformed"]) == (
        3,
        2,
        1,
    )
    # per capability, never by version string: the server's own answers are the oracle
    info = r.info("server")
    name = "valkey" if info.get("valkey_version") else "redis"
    assert facts.server == f"{name} {info.get('valkey_version') or info['redis_version']}"
    try:
        r.execute_command("HEXPIRE", "fc:no-such-key", 60, "FIELDS", 1, "f")
        has_hexpire = True
    except redis.ResponseError as e:
        assert "unknown command" in str(e).lower()
        has_hexpire = False
    assert facts.hexpire is has_hexpire
    assert r.hlen("arena:live") == 3  # the check never writes


@pytest.mark.lab
def test_wrong_type_and_absent_key(lab: Lab) -> None:
    lab.client().rpush("arena:live", "x")
    scan = read_live(lab.client(), "arena:live")
    assert scan.kind == "list" and scan.entries == 0
    scan = read_live(lab.client(), "nothing:here")
    assert scan.kind == "none"


@pytest.mark.lab
def test_unreachable_broker_is_unknown_with_the_reason(lab: Lab) -> None:
    from fleetcheck.config import BrokerConfig

    fleet = fleet_for(lab)
    dead = BrokerConfig(url="redis://127.0.0.1:1/0", connect_timeout=0.5)
    from dataclasses import replace

    from fleetcheck.core.runner import plan, run_patrol

    fleet = replace(fleet, broker=dead)
    report = run_patrol(fleet, plan(fleet, {"live_hash": CHECK}))
    (row,) = report.results
    assert row.status is Status.UNKNOWN
    assert row.summary.startswith("could not look: broker 127.0.0.1:1 refused the connection")
    assert row.cause is not None and row.cause in row.summary


# ---------------------------------------------------------------- hostile values
HOSTILE = [
    b'{"started_at": -0}',
    b'{"started_at": 5, "started_at": 6}',  # duplicate start: json keeps the last
    b'{"started\\u005fat": 5}',  # escaped key names the start
    b'{"started_at": 5, "host": "caf\\u00e9"}',
    '{"started_at": 5, "host": "caf\u00e9"}'.encode(),
    b'{"started_at": 5, "host": "\xff"}',  # not UTF-8: not JSON at all
    b'{"started_at": 5, "tags": ["a"]}',
    b'{"started_at": NaN}',
    b'{"started_at": 5, "x": Infinity}',
    b'{"started_at": 1e400}',  # inf: not a time
    b'{"started_at": 05}',
    b'\xef\xbb\xbf{"started_at": 5}',  # BOM: json refuses
    b'{"started_at": 1' + b"0" * 400 + b"}",  # json reads a huge int; float() overflows
    b'{"started_at": "a\tb"}',  # raw control character: not JSON
    b'{"host": "a", "started_at": 5, "host": "b"}',
    b'{"started_at": 1700000000, "host": "' + b"h" * 100 + b'"}',  # owner cut to 64
    b"{}",
    b"",
    b" \t\r\n",
    b"NaN",
]


def test_duplicate_keys_and_long_owners_read_as_json_keeps_them() -> None:
    assert read_entry(b'{"started_at": 5, "started_at": 6}') == (6.0, None, None)
    assert read_entry(b'{"host": "a", "started_at": 5, "host": "b"}') == (5.0, None, "b")
    assert read_entry(b'{"started_at": 1, "host": "' + b"h" * 100 + b'"}')[2] == "h" * 64
    assert read_entry(b'{"started_at": 5, "host": "  padded  "}')[2] == "padded"


@st.composite
def live_values(draw: st.DrawFn) -> bytes:
    """Values near the common shape: json.dumps of any members, hand-written members with
    duplicate keys and raw number texts, now and then damaged."""
    names = st.sampled_from(["started_at", "host", "id", "Started_at", ""])
    scalars = st.one_of(
        st.integers(min_value=-(10**20), max_value=10**20),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12),
        st.sampled_from(["2026-11-29T06:21:00Z", "2026-11-29T06:21:00", " 5 "]),
        st.none(),
        st.lists(st.integers(), max_size=2),
    )
    pairs = draw(st.lists(st.tuples(names, scalars), max_size=5))
    members = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs]
    number = r"-?(0|[1-9][0-9]{0,25}|0[0-9]+)(\.[0-9]{0,5})?([eE][-+]?[0-9]{1,4})?"
    start = f'"started_at": {draw(st.from_regex(number, fullmatch=True))}'
    members.insert(draw(st.integers(0, len(members))), start)
    raw = ("{" + ", ".join(members) + "}").encode()
    if draw(st.booleans()):  # damage it
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut] + draw(st.binary(max_size=3)) + raw[cut + draw(st.integers(0, 2)) :]
    return raw


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.sampled_from(HOSTILE), live_values(), st.binary(max_size=12)))
def test_any_value_reads_as_a_start_or_a_problem_never_an_error(value: bytes) -> None:
    started, problem, owner = read_entry(value)
    assert (started is None) != (problem is None)
    assert started is None or math.isfinite(started)
    assert owner is None or 0 < len(owner) <= 64


# ---------------------------------------------------------------- a scan's reduction
def reference_scan(replies: list[list[bytes]], keep: int = 5) -> LiveScan:
    """What the scan must hold: each field in turn, read through json, first reading wins."""
    scan = LiveScan(key="arena:live", kind="hash", keep=keep)
    seen: set[bytes] = set()
    for items in replies:
        for name, value in zip(items[0::2], items[1::2], strict=True):
            if name not in seen:
                seen.add(name)
                scan.add_values(name, *read_entry(value))
    return scan


def reduced_scan(replies: list[list[bytes]], keep: int = 5) -> LiveScan:
    pairs = [(n, v) for items in replies for n, v in zip(items[0::2], items[1::2], strict=True)]
    return live_scan("arena:live", pairs, keep=keep)


def canonical(scan: LiveScan) -> tuple[object, ...]:
    owned = sorted(
        (repr(s), scan.owner_names[o] if o >= 0 else "")
        for s, o in zip(scan.starts, scan.owners, strict=True)
    )
    return (
        scan.entries,
        scan.malformed,
        owned,
        scan.malformed_samples,
        sorted(scan.malformed_owners.items()),
        [(repr(s), n, o) for s, n, o in scan.oldest],
    )


def test_reducer_equals_field_by_field_on_a_mixed_reply() -> None:
    values = [
        b'{"started_at": 100, "host": "mini"}',
        b'{"started_at": 50.5, "host": "big"}',
        b"not json",
        b'{"host": "big", "started_at": 10}',  # owner first: one by one
        b'{"started_at": "1970-01-01T00:00:20Z", "host": "mini"}',
        b'{"started_at": 30000, "host": "mini"}',
        b'{"started_at": 1700000000123}',  # milliseconds in the bulk
        b'{"host": "mini"}',
        b'{"started_at": 5, "host": "line\nbreak"}',  # not JSON: a raw newline in a string
        b'{"started_at": 7, "host": "big"}',
    ]
    first = [x for i, v in enumerate(values[:5]) for x in (f"m{i}".encode(), v)]
    second = [x for i, v in enumerate(values[5:], 5) for x in (f"m{i}".encode(), v)]
    second += [b"m0", b'{"started_at": 1, "host": "late"}']  # a field again: first wins
    replies = [first, [], second]
    for keep in (1, 3, 20):
        assert canonical(reduced_scan(replies, keep)) == canonical(reference_scan(replies, keep))
    scan = reduced_scan(replies)
    assert scan.entries == 10 and scan.malformed == 3
    assert [n for _, n, _ in scan.oldest] == ["m9", "m3", "m4", "m1", "m0"]


def test_oldest_few_ties_go_by_id_whatever_the_order() -> None:
    v = b'{"started_at": 100, "host": "h"}'
    forward = [[b"b", v, b"a", v, b"c", v]]
    backward = [[b"c", v, b"a", v, b"b", v]]
    for replies in (forward, backward):
        assert [n for _, n, _ in reduced_scan(replies, keep=2).oldest] == ["a", "b"]


# ---------------------------------------------------------------- stale_counts equals stale_reason
def reference_counts(scan: LiveScan, t: float, max_age: float) -> tuple[int, int, dict[str, int]]:
    old = future = 0
    by_owner: dict[str, int] = dict(scan.malformed_owners)
    for start, index in zip(scan.starts, scan.owners, strict=True):
        reason = stale_reason(start, None, t, max_age)
        if not reason:
            continue
        if reason.startswith("malformed"):
            future += 1
        else:
            old += 1
        if index >= 0:
            name = scan.owner_names[index]
            by_owner[name] = by_owner.get(name, 0) + 1
    return old, future, by_owner


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(
                st.floats(min_value=0, max_value=2e10),
                st.sampled_from([T - 900, T + 900, T - 900.0000001, T + 900.0000001, T, 0.0]),
            ),
            st.sampled_from([None, "a", "b"]),
        ),
        max_size=60,
    ),
    st.sampled_from([900.0, 0.001, 1e9]),
)
def test_stale_counts_equal_stale_reason(rows: list[tuple[float, str | None]], max_age: float):
    scan = LiveScan(key="k", kind="hash")
    for i, (start, owner) in enumerate(rows):
        scan.add_values(f"m{i}", start, None, owner)
    scan.add_values("bad", None, "not JSON", "c")
    old, future, by_owner = stale_counts(scan, T, max_age)
    assert (old, future, dict(by_owner)) == reference_counts(scan, T, max_age)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.floats(min_value=0, max_value=2e10),
            st.sampled_from([T - 900, T + 900, T - 900.0000001, T + 900.0000001, T]),
        ),
        max_size=30,
    ),
    st.booleans(),
    st.sampled_from([900.0, 0.001, 1e9]),
    st.integers(min_value=0, max_value=3),
)
def test_any_stale_equals_stale_counts(
    starts: list[float], malformed: bool, max_age: float, keep: int
) -> None:
    """The probe's shortcut (the scan's edges only) agrees with counting every entry."""
    scan = LiveScan(key="k", kind="hash", keep=keep)
    for i, start in enumerate(starts):
        scan.add_values(f"m{i}", start, None, None)
    if malformed:
        scan.add_values("bad", None, "not JSON", None)
    old, future, _ = stale_counts(scan, T, max_age)
    assert any_stale(scan, T, max_age) == bool(old or future or scan.malformed)


# ---------------------------------------------------------------- lab: the real scan
@pytest.mark.lab
def test_read_live_equals_field_by_field_on_a_real_hash(lab: Lab) -> None:
    from tests.lab import incident_live_hash

    r = lab.client()
    now = datetime.now(UTC).timestamp()
    mapping: dict[str, str] = dict(incident_live_hash(now))
    for i in range(4000):  # enough for many replies; a few odd values among them
        doc: dict[str, object] = {"started_at": now - i, "host": f"h{i % 3}"}
        if i % 97 == 0:
            doc = {"host": "h1", "started_at": (now - i) * 1000}  # owner first, milliseconds
        mapping[f"bulk:{i}"] = json.dumps(doc)
    mapping["odd:newline"] = '{"started_at": 5,\n "host": "h0"}'  # valid JSON
    r.hset("arena:live", mapping=mapping)
    scan = read_live(lab.client(), "arena:live", count=50, keep=7)
    reference = reference_scan([[x for kv in r.hgetall("arena:live").items() for x in kv]], 7)
    # HGETALL order differs from HSCAN's: malformed samples are the first few seen
    assert canonical(scan)[:3] == canonical(reference)[:3]
    assert canonical(scan)[4:] == canonical(reference)[4:]
    # the incident's 19 malformed include one start a day ahead: evaluate calls that malformed
    assert scan.entries == len(mapping) and scan.malformed == 18


@pytest.mark.lab
def test_a_scan_stopped_early_leaves_no_reply_in_flight(lab: Lab) -> None:
    r = lab.client()
    r.hset("arena:live", mapping={f"m{i}": "{}" for i in range(2000)})
    client = lab.client(single_connection_client=False)
    pairs = scan_hash(client, "arena:live", 100)
    next(pairs)
    pairs.close()
    # had the connection gone back to the pool with a reply unread, this would read it
    assert client.ping() is True
    assert client.hlen("arena:live") == 2000
    assert client.get("nothing") is None


@pytest.mark.lab
def test_scan_survives_its_connection_being_killed(lab: Lab) -> None:
    r = lab.client()
    r.hset("arena:live", mapping={f"m{i}": json.dumps({"started_at": i}) for i in range(3000)})
    from fleetcheck.config import BrokerConfig
    from fleetcheck.transport.redis import connect

    client = connect(BrokerConfig(url=f"redis://127.0.0.1:{lab.redis_port}/0", retries=2))
    seen: set[bytes] = set()
    killed = 0
    for i, (name, _value) in enumerate(scan_hash(client, "arena:live", 100)):
        seen.add(name)
        if i == 300:  # mid-scan: the next HSCAN meets a closed connection
            killed = r.client_kill_filter(_type="normal", skipme=True)
    assert killed >= 1 and len(seen) == 3000


@pytest.mark.lab
def test_fields_returned_twice_after_a_shrink_count_once(lab: Lab) -> None:
    """Redis returns some fields again when the hash shrinks mid-scan (HDEL below 10 % fill):
    play that for real, keep the replies, and check the reducer counts each field once."""
    r = lab.client()
    # whether a field comes back depends on where the shrink's rehash stands when the next
    # HSCAN lands (a busy machine moves it): every point of the scan, up to three times
    for at in [*range(2, 60)] * 3:
        r.delete("t:live")
        r.hset("t:live", mapping={f"f{i}": json.dumps({"started_at": i}) for i in range(5000)})
        replies: list[list[bytes]] = []
        cursor = 0
        while True:  # one HSCAN at a time, so the delete lands between two of them
            cursor, chunk = r.hscan("t:live", cursor, count=100)
            replies.append([x for kv in chunk.items() for x in kv])
            if len(replies) == at:  # delete most fields not returned yet: the table shrinks
                got = {f for rep in replies for f in rep[0::2]}
                left = [f for n in range(5000) if (f := f"f{n}".encode()) not in got]
                if left:  # none when every field came already (HDEL takes one at least)
                    r.hdel("t:live", *left[:4400])
            if cursor == 0:
                break
        names = [f for rep in replies for f in rep[0::2]]
        if len(names) > len(set(names)):
            break
    else:
        pytest.fail("no field came back twice: this redis-server never repeats, test it anew")
    scan = reduced_scan(replies)
    assert scan.entries == len(set(names)) < len(names)
    assert canonical(scan) == canonical(reference_scan(replies))
