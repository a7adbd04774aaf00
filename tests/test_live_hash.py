"""live_hash: instants, entry parsing and the verdict (pure tables), then HSCAN on a real
redis-server in the lab."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from fleetcheck.checks.live_hash import (
    CHECK,
    LiveHashConfig,
    LiveHashFacts,
    owner_presence,
)

from fleetcheck.config import ConfigError, HostConfig, from_dict
from fleetcheck.context import PatrolContext
from fleetcheck.model import Status
from fleetcheck.parse.instant import parse_instant
from fleetcheck.reap import LiveScan, parse_entry, read_live, scan_hash, stale_reason
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
        ("2026-11-29 02:21:00-04:00", T),  # EDT, FIELD-NOTES 6
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
def test_parse_entry(value: str, started: float | None, problem: str | None, owner: str | None):
    entry = parse_entry(value if isinstance(value, bytes) else value.encode())
    assert entry.started_at == (pytest.approx(started) if started is not None else None)
    assert (entry.problem or "").startswith(problem or "")
    assert (entry.problem is None) == (problem is None)
    assert entry.owner == owner


def test_parse_entry_other_fields() -> None:
    e = parse_entry(b'{"t0": 5, "node": "big"}', started_field="t0", owner_field="node")
    assert (e.started_at, e.owner) == (5.0, "big")
    assert parse_entry(b'{"t0": 5, "node": "big"}', "t0", None).owner is None


@pytest.mark.parametrize(
    ("started", "problem", "reason"),
    [
        (T - 60, None, ""),
        (T - 900, None, ""),  # exactly max_age: not yet older
        (T - 901, None, "older than max_age (901s)"),
        (T + 10, None, ""),  # small clock skew
        (T + 901, None, "malformed: started_at 901s in the future"),
        (None, "not JSON", "malformed: not JSON"),
    ],
)
def test_stale_reason(started: float | None, problem: str | None, reason: str) -> None:
    assert stale_reason(started, problem, T, 900) == reason


# ---------------------------------------------------------------- evaluate (pure)
def scan_of(*entries: tuple[str, bytes], keep: int = 5, kind: str = "hash") -> LiveScan:
    scan = LiveScan(key="arena:live", kind=kind, keep=keep)
    for name, value in entries:
        scan.add(name, parse_entry(value))
    return scan.finish()


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
        HostConfig(name="mini", addrs=("192.168.1.30",)),
        HostConfig(name="wsl", addrs=("10.0.0.5", "192.168.1.40")),
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
        from_dict(data, "hosts.toml", lambda n: LiveHashConfig if n == "live_hash" else None)


# ---------------------------------------------------------------- lab: the real HSCAN
def fleet_for(lab: Lab, checks: str = "[checks.live_hash]\n"):
    from fleetcheck import registry
    from fleetcheck.config import load

    return load(lab.config(checks=checks, hosts=[]), registry.config_type)


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
    assert facts.server == "redis 7.0.15" and facts.hexpire is False
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

    from fleetcheck.runner import plan, run_patrol

    fleet = replace(fleet, broker=dead)
    report = run_patrol(fleet, plan(fleet, {"live_hash": CHECK}))
    (row,) = report.results
    assert row.status is Status.UNKNOWN
    assert row.summary.startswith("broker 127.0.0.1:1 unreachable:")
