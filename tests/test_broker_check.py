"""broker: the verdict table from INFO values (pure), then one real INFO in the lab."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fleetcheck.checks.broker import CHECK, BrokerFacts, BrokerHealthConfig

from fleetcheck.config import ConfigError, from_dict
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.model import Status
from tests.lab import Lab

NOW = datetime(2026, 11, 29, 6, 21, tzinfo=UTC)

HEALTHY: dict[str, Any] = {
    "redis_version": "7.0.15",
    "role": "master",
    "connected_clients": 52,
    "maxclients": 10000,
    "rejected_connections": 0,
    "used_memory": 10_000_000,
    "maxmemory": 0,
    "maxmemory_policy": "noeviction",
    "blocked_clients": 1,
}


def judge(
    ping_ms: float = 0.3,
    cfg: BrokerHealthConfig | None = None,
    previous: dict[str, Any] | None = None,
    **info: Any,
):
    return CHECK.evaluate(
        BrokerFacts(ping_ms, {**HEALTHY, **info}, previous), cfg or BrokerHealthConfig(), None, NOW
    )


RUN = {"run_id": "a" * 40}
BEFORE = {**RUN, "rejected_connections": 2854, "evicted_keys": 10, "expired_keys": 500}


@pytest.mark.parametrize(
    ("previous", "now", "status", "text", "increase"),
    [
        # no previous round (first run, --no-state): the since-start total is not a verdict
        (None, {"rejected_connections": 2854}, Status.OK, "", None),
        # one old rejection, no new ones: no warning until the next restart
        (BEFORE, {"rejected_connections": 2854}, Status.OK, "", 0),
        (
            BEFORE,
            {"rejected_connections": 2860},
            Status.WARN,
            "6 connections rejected (maxclients reached) since the previous round "
            "(2860 since start)",
            6,
        ),
        # restarted in between (another run_id): everything since start is new
        (
            {**BEFORE, "run_id": "b" * 40},
            {"rejected_connections": 3},
            Status.WARN,
            "3 connections rejected (maxclients reached) since the previous round",
            3,
        ),
        # CONFIG RESETSTAT: the counter went down; what it shows now is new
        (BEFORE, {"rejected_connections": 1}, Status.WARN, "1 connections rejected", 1),
    ],
)
def test_rejections_judged_by_their_increase(
    previous: dict[str, Any] | None,
    now: dict[str, Any],
    status: Status,
    text: str,
    increase: int | None,
) -> None:
    r = judge(previous=previous, **{**RUN, "evicted_keys": 10, "expired_keys": 500, **now})
    assert r.status is status, r.summary
    assert text in r.summary
    assert r.metrics["rejected_connections_increase"] == increase
    assert r.evidence["since_start"]["rejected_connections"] == now["rejected_connections"]
    assert r.carry is not None and r.carry["rejected_connections"] == now["rejected_connections"]


def test_evicted_and_expired_keys() -> None:
    r = judge(previous=BEFORE, **{**RUN, "evicted_keys": 25, "expired_keys": 900})
    assert r.status is Status.WARN
    assert "15 keys evicted (maxmemory_policy) since the previous round (25 since start)" in (
        r.summary
    )
    assert "expired" not in r.summary  # report only by default
    assert r.metrics["expired_keys_increase"] == 400
    r = judge(
        cfg=BrokerHealthConfig(max_expired=100),
        previous=BEFORE,
        **{**RUN, "evicted_keys": 10, "expired_keys": 900},
    )
    assert r.status is Status.WARN and "400 keys expired since the previous round" in r.summary


def test_replicas_with_link_state_and_lag() -> None:
    online = {"ip": "10.0.0.2", "port": 6379, "state": "online", "offset": 1, "lag": 0}
    r = judge(connected_slaves=1, slave0=online)
    assert r.status is Status.OK
    assert "replica 10.0.0.2:6379 online lag 0s" in r.summary and r.metrics["replicas"] == 1
    r = judge(connected_slaves=1, slave0={**online, "lag": 42})
    assert r.status is Status.WARN and "replica 10.0.0.2:6379 lags 42s (> 10s)" in r.summary
    r = judge(connected_slaves=1, slave0={**online, "state": "wait_bgsave"})
    assert r.status is Status.WARN and "is wait_bgsave, not online" in r.summary


def test_memory_full_under_noeviction_is_crit() -> None:
    r = judge(used_memory=1000, maxmemory=1000)
    assert r.status is Status.CRIT and "writes are refused (OOM)" in r.summary


def test_healthy() -> None:
    r = judge()
    assert r.status is Status.OK
    version = HEALTHY["redis_version"]  # the table's own input, not this machine's server
    assert r.summary == f"redis {version} master, ping 0.3 ms, 52 clients of 10000"
    assert r.evidence["maxmemory_policy"] == "noeviction"
    assert r.metrics["clients_ratio"] == 0.0052


@pytest.mark.parametrize(
    ("kw", "status", "text"),
    [
        ({"maxmemory_policy": "allkeys-lru"}, Status.WARN, "maxmemory_policy allkeys-lru"),
        ({"connected_clients": 8000}, Status.WARN, "8000 of maxclients 10000 connections (80%)"),
        (
            {"used_memory": 900, "maxmemory": 1000},
            Status.WARN,
            "memory 90% of maxmemory (900 of 1000 bytes)",
        ),
        ({"used_memory": 700, "maxmemory": 1000}, Status.OK, ""),
        (
            {
                "role": "slave",
                "master_host": "10.0.0.1",
                "master_port": 6379,
                "master_link_status": "down",
            },
            Status.CRIT,
            "replica of 10.0.0.1:6379 with its link down",
        ),
        (
            {
                "role": "slave",
                "master_host": "10.0.0.1",
                "master_port": 6379,
                "master_link_status": "up",
            },
            Status.WARN,
            "is a read-only replica of 10.0.0.1:6379",
        ),
        ({"valkey_version": "8.1.1", "redis_version": "7.2.4"}, Status.OK, "valkey 8.1.1"),
    ],
)
def test_findings(kw: dict[str, Any], status: Status, text: str) -> None:
    r = judge(**kw)
    assert r.status is status
    assert text in r.summary


def test_slow_ping_and_options() -> None:
    assert judge(ping_ms=80).status is Status.WARN
    assert "PING took 80.0 ms (> 50 ms)" in judge(ping_ms=80).summary
    relaxed = BrokerHealthConfig(require_noeviction=False, max_rejected=None)
    assert judge(cfg=relaxed, maxmemory_policy="volatile-lru", rejected_connections=9).status is (
        Status.OK
    )
    assert judge(cfg=BrokerHealthConfig(max_blocked=0), blocked_clients=3).status is Status.WARN


def test_worst_finding_first_and_all_listed() -> None:
    r = judge(
        maxmemory_policy="allkeys-lru",
        role="slave",
        master_link_status="down",
        master_host="h",
        master_port=1,
    )
    assert r.status is Status.CRIT
    assert [e["status"] for e in r.evidence["findings"]] == ["CRIT", "WARN"]


def test_missing_info_fields_do_not_crash() -> None:
    r = CHECK.evaluate(
        BrokerFacts(0.2, {"redis_version": "5.0.7"}), BrokerHealthConfig(), None, NOW
    )
    assert r.metrics["maxclients"] is None
    assert r.status is Status.WARN  # policy unknown ("?") is not noeviction: cannot vouch


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"max_ping": "0s"}, "max_ping: must be longer than 0s"),
        ({"clients_warn_at": 0}, "clients_warn_at: must be a share"),
        ({"memory_warn_at": 2}, "memory_warn_at: must be a share"),
        ({"max_rejected": -1}, "max_rejected: must be 0 or more"),
        ({"require_noeviction": "yes"}, "require_noeviction: expected true or false"),
    ],
)
def test_config_errors(table: dict[str, object], message: str) -> None:
    data = {"broker": {"url": "redis://127.0.0.1:1"}, "checks": {"broker": table}}
    with pytest.raises(ConfigError, match=message):
        from_dict(
            data,
            "hosts.toml",
            lambda n: BrokerHealthConfig if n == "broker" else None,
            lambda names: {},
        )


@pytest.mark.lab
def test_real_info(lab: Lab) -> None:
    from fleetcheck.config import load
    from fleetcheck.core import registry

    lab.client().config_set("maxmemory-policy", "allkeys-lru")
    fleet = load(
        lab.config(checks="[checks.broker]\n", hosts=[]),
        registry.config_type,
        registry.host_config_types,
    )
    ctx = PatrolContext(fleet)
    try:
        f = CHECK.probe(ctx, None, fleet.checks["broker"])
    finally:
        ctx.close()
    r = CHECK.evaluate(f, fleet.checks["broker"], None, NOW)
    info = lab.client().info("server")
    version = info.get("valkey_version") or info["redis_version"]  # the server's own word
    assert r.evidence["version"] == version and r.evidence["role"] == "master"
    assert r.metrics["maxclients"] >= 10000 and r.metrics["connected_clients"] >= 1
    assert r.status is Status.WARN and "maxmemory_policy allkeys-lru" in r.summary
    assert f.ping_ms > 0


# ---------------------------------------------------------------- Done when: the incident state
INCIDENT_CHECKS = """
[checks.clients]

[checks.live_hash]
max_age = "15m"

[checks.queue_depth]
keys = ["q:pending", "q:inflight"]
cap = 100
samples = 3
interval = "50ms"

[checks.broker]
"""


@pytest.mark.lab
def test_incident_state_through_the_real_cli(lab: Lab) -> None:
    import json
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tests.lab import incident_live_hash

    mini = lab.add_host("mini", sshd=False)  # SIGKILLed by the deploy: no connections
    wsl = lab.add_host("wsl", sshd=False)  # seen from two addresses (WSL2 behind NAT)
    big = lab.add_host("big", sshd=False)
    second = lab.add_interface(wsl, "eth1")
    lab.start_workers(wsl, 3, "wsl-worker")
    lab.start_workers(wsl, 2, "wsl-worker", source=second)
    lab.start_workers(big, 5, "big-worker")
    r = lab.client()
    r.hset("arena:live", mapping=incident_live_hash(time.time(), "mini", "big"))
    r.rpush("q:pending", *[f"job{i}" for i in range(120)])
    r.rpush("q:inflight", *[f"job{i}" for i in range(47)])
    r.close()  # the test's own connection is not part of the fleet

    cfg = lab.config(checks=INCIDENT_CHECKS)
    fleetcheck = str(Path(sys.executable).with_name("fleetcheck"))
    proc = subprocess.run(
        [fleetcheck, "run", "-c", str(cfg), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = json.loads(proc.stdout)
    rows = {(x["check"], x["host"]): x for x in report["results"]}
    assert proc.returncode == 2 and report["exit_code"] == 2, proc.stderr

    row = rows[("clients", "mini")]
    assert (row["status"], row["summary"]) == (
        "CRIT",
        f"no broker connections from {mini.addr}",
    )
    assert row["metrics"]["connections"] == 0
    row = rows[("clients", "wsl")]
    assert row["status"] == "OK"
    assert row["metrics"]["connections"] == 5
    assert row["metrics"]["by_addr"] == {wsl.addr: 3, second: 2}
    assert rows[("clients", "big")]["metrics"]["connections"] == 5
    assert rows[("clients", None)]["status"] == "OK"

    row = rows[("live_hash", None)]
    assert row["status"] == "CRIT"
    assert {k: row["metrics"][k] for k in ("entries", "fresh", "stale", "malformed")} == {
        "entries": 263,
        "fresh": 44,
        "stale": 219,
        "malformed": 19,
    }
    assert row["summary"].startswith(
        "arena:live: 219 of 263 entries stale (200 older than 15m00s, 19 malformed)"
    )
    assert "confirmed leak: mini not connected to the broker" in row["summary"]
    assert row["evidence"]["confirmed_leaks"] == ["mini"]
    assert 4 * 3600 < row["metrics"]["oldest_age_s"] < 4.5 * 3600

    row = rows[("queue_depth", None)]
    assert row["status"] == "CRIT"
    assert row["summary"].startswith("depth 167 > cap 100: the enqueue guard is not holding")
    assert row["metrics"]["depth"] == 167 and "cap" not in row["metrics"]  # a limit, not a reading
    assert row["limits"]["cap"] == 100
    assert row["metrics"]["lengths"] == {"q:pending": 120, "q:inflight": 47}
    assert row["evidence"]["samples"] == [167, 167, 167]

    row = rows[("broker", None)]
    assert row["status"] == "OK", row["summary"]
    assert row["evidence"]["maxmemory_policy"] == "noeviction"
    assert len(rows) == 7  # clients: 3 hosts + the broker-wide row
