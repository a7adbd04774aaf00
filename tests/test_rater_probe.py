"""rater_probe: verdicts and rater diagnosis (pure), then the probe against a real consumer in
the lab: running (OK), frozen after its pending BLPOP expired (CRIT, inbox unchanged), gone,
acknowledged through a reply list and through its log; and `fleetcheck probe-rater` exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fleetcheck.checks.rater_probe import RaterProbeConfig, render_payload
from fleetcheck.checks.rater_probe.check import CHECK
from fleetcheck.checks.rater_probe.facts import LoopFacts, ProbeFacts, describe_raters, follow

from fleetcheck.config import ConfigError, from_dict
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.model import Status
from fleetcheck.parse.clientlist import parse_client_list
from tests.lab import Lab, wait_for

NOW = datetime(2026, 11, 29, 6, 21, tzinfo=UTC)
INBOX = "arena:rater:inbox"
FLEETCHECK = str(Path(sys.executable).with_name("fleetcheck"))

BLOCKED = "id=5 addr=10.0.0.2:5000 name=rater age=100 idle=0 flags=b cmd=blpop"
STUCK = "id=5 addr=10.0.0.2:5000 name=rater age=900 idle=300 flags=N cmd=get"


def raters(*lines: str):
    return tuple(parse_client_list("\n".join(lines)))


def facts(**kw: object) -> tuple[ProbeFacts, RaterProbeConfig]:
    """The probe's facts, and the config it ran with (`ack` is the config's)."""
    config = RaterProbeConfig(ack=kw.pop("ack", None), ack_host="broker")  # type: ignore[arg-type]
    base: dict[str, object] = {
        "probe_id": "p-1",
        "consumed": True,
        "latency_ms": 12.5,
        "inbox_length": 0,
        "raters": raters(BLOCKED),
    }
    base.update(kw)
    return ProbeFacts(**base), config  # type: ignore[arg-type]


def judge(f: tuple[ProbeFacts, RaterProbeConfig]):
    return CHECK.evaluate(*f, None, NOW)


def test_consumed_is_ok_with_latency() -> None:
    (b,) = raters(BLOCKED)
    back = follow(b, [(0.001, 0.002, raters(BLOCKED))])
    r = judge(facts(loop=LoopFacts(seen=True, by_name=True, watched=(back,), window_s=0.002)))
    assert r.status is Status.OK
    assert r.summary == (
        f"{INBOX}: probe consumed in 12.5 ms; rater 10.0.0.2:5000 (id 5) that could have taken "
        "it: back in its loop (waiting in blpop again after 1.0 ms) (proof: returned)"
    )
    assert r.evidence_strength == "proof" and r.evidence["proof"] == "returned"
    assert r.evidence["consumed"] is True and r.metrics["latency_s"] == 0.0125
    assert r.metrics["inbox_length"] == 0 and r.metrics["rater_blocked"] == 1


def test_taken_but_not_watched_says_what_it_proved() -> None:
    r = judge(facts())
    assert r.status is Status.OK and r.evidence_strength == "inference"
    assert r.summary == (
        f"{INBOX}: probe taken in 12.5 ms (proof: taken only; the taker was not watched: "
        "whether the taker went back to its loop was not seen)"
    )


def test_not_consumed_is_crit_with_position_and_diagnosis() -> None:
    r = judge(
        facts(
            consumed=False,
            latency_ms=None,
            inbox_length=3,
            position=3,
            length_at_deadline=3,
            removed=True,
            raters=raters(STUCK),
        )
    )
    assert r.status is Status.CRIT
    assert r.summary == (
        f"{INBOX}: probe not consumed within 5s (3 entries ahead of it, inbox length 3 "
        "without it; removed again): "
        "rater connected, not blocked, idle 300 s (last command get): its loop is stuck "
        "outside BLPOP"
    )
    assert r.evidence["consumed"] is False and r.metrics["latency_s"] is None


def test_not_removed_is_said_loudly() -> None:
    r = judge(facts(consumed=False, latency_ms=None, position=0, removed=False))
    assert "COULD NOT be removed" in r.summary


def test_consumed_after_timeout_is_crit() -> None:
    r = judge(facts(latency_ms=5003.0))
    assert r.status is Status.CRIT and "past the 5s timeout" in r.summary


@pytest.mark.parametrize(
    ("ack", "acked", "detail", "status", "proof"),
    [
        ("reply:arena:rater:acks", True, "id pushed to arena:rater:acks", Status.OK, "replied"),
        ("log", True, "id logged in broker:/var/log/rater.log", Status.OK, "logged"),
        ("log", False, "id not in broker:/var/log/rater.log within 5s", Status.CRIT, "consumed"),
        ("log", None, "broker: log not readable: refused", Status.UNKNOWN, "consumed"),
    ],
)
def test_ack_proofs(ack: str, acked: bool | None, detail: str, status: Status, proof: str) -> None:
    r = judge(facts(ack=ack, acked=acked, ack_detail=detail))
    assert r.status is status
    assert r.evidence["proof"] == proof
    assert detail in r.summary or detail == r.evidence["ack"]
    if status is Status.CRIT:
        assert "taken is not processed" in r.summary


@pytest.mark.parametrize(
    ("clients", "text"),
    [
        (None, "rater connection unknown (CLIENT LIST unreadable)"),
        ((), "no rater connection (no client named 'rater'): process gone or cut off"),
        (raters(BLOCKED), "rater connected and blocked in blpop, idle 0 s"),
        (raters(STUCK), "rater connected, not blocked, idle 300 s (last command get)"),
        (raters(STUCK, BLOCKED), "rater connected and blocked in blpop"),
    ],
)
def test_describe_raters(clients: object, text: str) -> None:
    assert describe_raters(clients, "rater").startswith(text)  # type: ignore[arg-type]


def test_payload_template() -> None:
    text = render_payload(RaterProbeConfig().payload, "abc", 12.5)
    assert json.loads(text) == {"type": "fleetcheck.probe", "id": "abc", "sent_at": 12.5}
    assert render_payload("probe:{id}", "abc", 1) == "probe:abc"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"payload": '{"type": "x"}'}, "payload: must contain {id}"),
        ({"payload": '{"id": "{id}", oops}'}, "payload: looks like JSON but is not"),
        ({"timeout": "0s"}, "timeout: must be longer than 0s"),
        ({"timeout": "1h"}, "timeout: must be longer than 0s and at most 5m"),
        ({"ack": "email"}, 'ack: must be "log" or "reply:KEY"'),
        ({"ack": "reply:"}, 'ack: must be "log" or "reply:KEY"'),
        ({"ack": "log"}, 'ack_host: ack = "log" needs ack_host'),
        ({"ack": f"reply:{INBOX}"}, "ack: the reply list must not be the inbox"),
        ({"push": "sadd"}, "push: expected one of"),
        ({"inbox": ""}, "inbox: must not be empty"),
        ({"max_latency": "0s"}, "max_latency: must be longer than 0s"),
        ({"max_latency": "1h"}, "max_latency: must be longer than 0s and at most 5m"),
    ],
)
def test_config_errors(table: dict[str, object], message: str) -> None:
    data = {"broker": {"url": "redis://127.0.0.1:1"}, "checks": {"rater_probe": table}}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        from_dict(
            data,
            "hosts.toml",
            lambda n: RaterProbeConfig if n == "rater_probe" else None,
            lambda names: {},
        )


# ---------------------------------------------------------------- lab
def probe_rater(cfg: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [FLEETCHECK, "probe-rater", "-c", str(cfg), "--format", "json", *args],
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard (12x+ the probe's timeouts here), not a timing
    )
    assert proc.stderr == "" or proc.returncode == 3, proc.stderr
    report = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, report


def row(report: dict) -> dict:
    (r,) = report["results"]
    assert r["check"] == "rater_probe"
    return r


def blocked(lab: Lab, name: str = "rater") -> bool:
    clients = lab.client_named(name)
    return bool(clients) and all("b" in c["flags"] for c in clients)


def not_blocked(lab: Lab, name: str = "rater") -> bool:
    clients = lab.client_named(name)
    return bool(clients) and all(
        "b" not in c["flags"] and c.get("qbuf", "0") == "0" for c in clients
    )


@pytest.mark.lab
def test_running_consumer_ok_with_latency(lab: Lab) -> None:
    lab.start_rater(block_timeout=1.0)
    wait_for(lambda: blocked(lab), 10, "the rater to block in BLPOP")
    code, report = probe_rater(lab.config(checks="", hosts=[]), "--timeout", "5s")
    r = row(report)
    assert (code, r["status"]) == (0, "OK")
    assert r["evidence"]["consumed"] is True
    assert 0 < r["metrics"]["latency_s"] < 5
    assert r["summary"].startswith(f"{INBOX}: probe consumed in ")
    assert r["evidence"]["rater"] is None  # CLIENT LIST is only read when there is a failure
    assert lab.client().llen(INBOX) == 0


@pytest.mark.lab
def test_frozen_consumer_crit_within_timeout_and_inbox_untouched(lab: Lab) -> None:
    rater = lab.start_rater(block_timeout=1.0)
    wait_for(lambda: blocked(lab), 10, "the rater to block in BLPOP")
    lab.freeze(rater)
    # its pending BLPOP expires on the server within 1 s; only then can nobody take the probe
    wait_for(lambda: not_blocked(lab), 10, "the frozen rater's BLPOP to expire")
    r0 = lab.client()
    before = [b'{"match": 1}', b'{"match": 2}', b"raw-envelope"]
    r0.rpush(INBOX, *before)
    code, report = probe_rater(lab.config(checks="", hosts=[]), "--timeout", "2s")
    r = row(report)
    assert (code, r["status"]) == (2, "CRIT")
    assert r["evidence"]["consumed"] is False
    assert r["metrics"]["position"] == 3 and r["metrics"]["length_at_deadline"] == 3
    assert "removed again" in r["summary"]
    assert "rater connected, not blocked" in r["summary"]
    assert "its loop is stuck outside BLPOP" in r["summary"]
    assert r0.lrange(INBOX, 0, -1) == before  # exactly what it held before
    lab.thaw(rater)


@pytest.mark.lab
def test_no_consumer_at_all(lab: Lab) -> None:
    code, report = probe_rater(lab.config(checks="", hosts=[]), "--timeout", "300ms")
    r = row(report)
    assert (code, r["status"]) == (2, "CRIT")
    assert "no rater connection (no client named 'rater'): process gone or cut off" in r["summary"]
    assert lab.client().exists(INBOX) == 0  # the list it created is gone again


@pytest.mark.lab
def test_broker_unreachable_exits_3(lab: Lab, tmp_path: Path) -> None:
    cfg = tmp_path / "hosts.toml"
    cfg.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\nconnect_timeout = "500ms"\n')
    code, report = probe_rater(cfg)
    r = row(report)
    assert (code, r["status"]) == (3, "UNKNOWN")
    # the probe could not look; the broker's own failure is the `broker` row's to report
    assert r["summary"].startswith("could not look: broker 127.0.0.1:1 refused the connection")
    assert r["cause"] == r["summary"].removeprefix("could not look: ")


@pytest.mark.lab
def test_usage_errors_exit_3(lab: Lab) -> None:
    proc = subprocess.run(
        [FLEETCHECK, "probe-rater", "-c", str(lab.config(checks="", hosts=[])), "--timeout", "x"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 3 and "--timeout: bad duration" in proc.stderr


@pytest.mark.lab
def test_wrong_type_inbox_pushes_nothing(lab: Lab) -> None:
    lab.client().hset(INBOX, "a", "b")
    code, report = probe_rater(lab.config(checks="", hosts=[]))
    r = row(report)
    assert (code, r["status"]) == (3, "UNKNOWN")
    assert r["summary"] == f"{INBOX} is a hash, not a list: nothing pushed"
    assert lab.client().hgetall(INBOX) == {b"a": b"b"}


@pytest.mark.lab
def test_lpush_inbox_with_brpop_consumer(lab: Lab) -> None:
    lab.start_rater(pop="brpop")
    wait_for(lambda: blocked(lab), 10, "the rater to block in BRPOP")
    checks = '[checks.rater_probe]\npush = "lpush"\ntimeout = "5s"\n'
    code, report = probe_rater(lab.config(checks=checks, hosts=[]))
    assert (code, row(report)["status"]) == (0, "OK")


@pytest.mark.lab
def test_reply_ack(lab: Lab) -> None:
    lab.start_rater(reply_key="arena:rater:acks")
    wait_for(lambda: blocked(lab), 10, "the rater to block")
    checks = '[checks.rater_probe]\nack = "reply:arena:rater:acks"\ntimeout = "5s"\n'
    code, report = probe_rater(lab.config(checks=checks, hosts=[]))
    r = row(report)
    assert (code, r["status"], r["evidence"]["proof"]) == (0, "OK", "replied")
    assert lab.client().llen("arena:rater:acks") == 0  # the reply was for us; cleaned up


@pytest.mark.lab
def test_consumer_that_takes_but_never_acks_is_crit(lab: Lab) -> None:
    lab.start_rater()  # consumes, never replies
    wait_for(lambda: blocked(lab), 10, "the rater to block")
    checks = '[checks.rater_probe]\nack = "reply:arena:rater:acks"\ntimeout = "1s"\n'
    code, report = probe_rater(lab.config(checks=checks, hosts=[]))
    r = row(report)
    assert (code, r["status"]) == (2, "CRIT")
    assert r["evidence"]["consumed"] is True and "not acknowledged" in r["summary"]


@pytest.mark.lab
def test_log_ack_on_a_local_host(lab: Lab) -> None:
    log = lab.dir / "rater.log"
    log.write_text("")
    lab.start_rater(log=log)
    wait_for(lambda: blocked(lab), 10, "the rater to block")
    checks = (
        f'[checks.rater_probe]\nack = "log"\nack_host = "here"\nack_log = "{log}"\n'
        'timeout = "5s"\n\n[[hosts]]\nname = "here"\nssh = "local"\nmin_clients = 0\n'
    )
    code, report = probe_rater(lab.config(checks=checks, hosts=[]))
    r = row(report)
    assert (code, r["status"], r["evidence"]["proof"]) == (0, "OK", "logged"), r["summary"]
    assert r["evidence"]["probe_id"] in log.read_text()


@pytest.mark.lab
def test_log_ack_missing_host_pushes_nothing(lab: Lab) -> None:
    checks = '[checks.rater_probe]\nack = "log"\nack_host = "nowhere"\n'
    code, report = probe_rater(lab.config(checks=checks, hosts=[]))
    r = row(report)
    assert (code, r["status"]) == (3, "UNKNOWN")
    assert "ack_host 'nowhere' is not a host" in r["summary"]
    assert lab.client().exists(INBOX) == 0


@pytest.mark.lab
def test_timeout_too_close_to_the_patrol_deadline_pushes_nothing(lab: Lab) -> None:
    import subprocess as sp

    checks = '[checks.rater_probe]\ntimeout = "8s"\n'
    cfg = lab.config(checks=checks, hosts=[], patrol='deadline = "10s"\n')
    proc = sp.run(
        [FLEETCHECK, "run", "-c", str(cfg), "--format", "json", "--no-state"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    r = row(json.loads(proc.stdout))
    assert r["status"] == "UNKNOWN"
    assert r["summary"] == (
        "timeout 8s leaves less than 5s of the patrol deadline 10s: nothing pushed"
    )
    assert lab.client().exists(INBOX) == 0
    # probe-rater sets its own deadline from the timeout, so the same config probes
    code, report = probe_rater(cfg, "--timeout", "200ms")
    assert code == 2 and row(report)["evidence"]["consumed"] is False


class OldServerContext(PatrolContext):
    """A real patrol context whose INFO says 6.0.5 (before LPOS): the LRANGE path runs against
    the same real server."""

    def info(self) -> dict[str, Any]:
        real = super().info()
        old = {k: v for k, v in real.items() if k not in ("valkey_version", "server_name")}
        return {**old, "redis_version": "6.0.5"}


@pytest.mark.lab
@pytest.mark.parametrize("push", ["rpush", "lpush"])
def test_without_lpos_the_window_is_read_with_lrange(lab: Lab, push: str) -> None:
    from fleetcheck.config import load
    from fleetcheck.core import registry

    r = lab.client()
    fleet = load(lab.config(checks="", hosts=[]), registry.config_type, registry.host_config_types)
    r.config_set("slowlog-log-slower-than", 0)
    r.slowlog_reset()
    r.rpush(INBOX, "a", "b")
    cfg = RaterProbeConfig(push=push, timeout=0.3)  # type: ignore[arg-type]
    ctx = OldServerContext(fleet)
    try:
        f = CHECK.probe(ctx, None, cfg)
    finally:
        ctx.close()
    assert (f.consumed, f.removed, f.position, f.inbox_length) == (False, True, 2, 2)
    assert r.lrange(INBOX, 0, -1) == [b"a", b"b"]
    verbs = {e["command"].split()[0].upper() for e in r.slowlog_get(1000)}
    assert b"LRANGE" in verbs and b"LPOS" not in verbs
    pop = "blpop" if push == "rpush" else "brpop"
    lab.start_rater(pop=pop)
    wait_for(lambda: r.llen(INBOX) == 0, 10, "the rater to drain the inbox")
    wait_for(lambda: blocked(lab), 10, "the rater to block")
    ctx = OldServerContext(fleet)
    try:
        f = CHECK.probe(ctx, None, RaterProbeConfig(push=push, timeout=5.0))  # type: ignore[arg-type]
    finally:
        ctx.close()
    assert f.consumed and f.latency_ms is not None
