"""rater_probe proves a loop, or says what it proved (issue 24, item 3).

A consumer frozen inside `BLPOP key 0` still takes one envelope: the server hands it to the
blocked connection. Taken is therefore not enough: the connection that took it must be seen
back in its loop (blocked in a pop again, a new command, its idle reset) within the timeout.
Pure: how one watched connection's looks are read (`follow`) and the verdicts. Lab: real
redis-server, real consumer processes (frozen, stalled, healthy, several, BRPOP/BLMOVE, a
polling LPOP consumer)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from fleetcheck.checks.rater_probe import RaterProbeConfig
from fleetcheck.checks.rater_probe.check import CHECK
from fleetcheck.checks.rater_probe.facts import LoopFacts, ProbeFacts, Watched, follow

from fleetcheck.core.model import Status
from fleetcheck.parse.clientlist import Client, parse_client_list
from tests.lab import Lab, wait_for
from tests.test_rater_probe import blocked, not_blocked, probe_rater, row

NOW = datetime(2026, 11, 29, 6, 21, tzinfo=UTC)
INBOX = "arena:rater:inbox"


def c(flags: str = "b", cmd: str = "blpop", idle: int = 0, id: int = 5, **kw: str) -> Client:
    extra = " ".join(f"{k}={v}" for k, v in kw.items())
    line = f"id={id} addr=10.0.0.2:5000 name=rater age=100 idle={idle} flags={flags} "
    (client,) = parse_client_list(line + (extra + " " if extra else "") + f"cmd={cmd}")
    return client


BEFORE = c()  # waiting in its pop when the probe was pushed


# ---------------------------------------------------------------- follow (pure)
@pytest.mark.parametrize(
    ("before", "looks", "state", "how"),
    [
        # healthy: blocked again on the first look
        (BEFORE, [(0.001, 0.002, (c(),))], "back", "waiting in blpop again after 1.0 ms"),
        # served, then a new command (a reply push), then blocked
        (
            BEFORE,
            [(0.001, 0.002, (c("N"),)), (0.003, 0.004, (c("N", "rpush"),))],
            "back",
            "a new command (rpush)",
        ),
        # a busy consumer whose next pops are all served at once: idle stays 0 while time runs
        (BEFORE, [(0.001, 0.002, (c("N"),)), (1.8, 1.9, (c("N", idle=0),))], "back", "idle reset"),
        # frozen inside its pop: served, then nothing, idle growing with the time since the take
        (
            BEFORE,
            [
                (0.001, 0.002, (c("N"),)),
                (1.0, 1.0, (c("N", idle=1),)),
                (2.6, 2.6, (c("N", idle=2),)),
            ],
            "stuck",
            "not back: not blocked, last command blpop, idle 2 s",
        ),
        # the taker's connection closed after the take
        (BEFORE, [(0.001, 0.002, ())], "gone", "its connection closed"),
        # blocked in BLPOP 0 for minutes and still: it was not served, not the taker
        (c(idle=300), [(0.001, 0.002, (c(idle=300),))], "not-taker", "no command since before"),
        # it left its pop while ours still waited: served by something else
        (BEFORE, [(-0.5, -0.5, (c("N"),)), (0.001, 0.002, (c("N"),))], "not-taker", "left its pop"),
        # a look between the poll that last saw ours and the one that missed it says nothing
        (c("N", idle=4), [(-0.001, 0.002, (c("N", idle=4),))], "stuck", "never looked at"),
        # never looked at (every look failed)
        (BEFORE, [], "stuck", "never looked at"),
        # named, busy outside its loop at the push (idle 300, last command get): not the taker
        (c("N", "get", 300), [(0.001, 0.002, (c("N", "get", 300),))], "not-taker", "idle 300 s"),
    ],
)
def test_follow(before: Client, looks: list, state: str, how: str) -> None:
    w = follow(before, looks)
    assert (w.state, how in w.how) == (state, True), w.how


def test_commands_queued_behind_a_pop_are_noted() -> None:
    assert follow(c(qbuf="26"), []).pipelined and not follow(c(), []).pipelined
    # the server runs the queued INCR for a frozen process: not a sign of its loop
    looks = [(0.001, 0.002, (c("N", "incr"),)), (2.6, 2.6, (c("N", "incr", idle=2),))]
    assert follow(c(qbuf="26"), looks).state == "stuck"
    assert follow(c(), looks).state == "back"


# ---------------------------------------------------------------- verdicts (pure)
def facts(
    *watched: Watched, by_name: bool = True, stall_ms: float = 3.0, **kw: object
) -> tuple[ProbeFacts, RaterProbeConfig]:
    """The probe's facts, and the config it ran with (`ack` is the config's)."""
    config = RaterProbeConfig(timeout=10.0, ack=kw.pop("ack", None))  # type: ignore[arg-type]
    base: dict[str, object] = {
        "probe_id": "p-1",
        "consumed": True,
        "latency_ms": stall_ms,
        "inbox_length": 0,
        "stall_ms": stall_ms,
        "loop": LoopFacts(seen=True, by_name=by_name, watched=watched, window_s=2.0),
    }
    base.update(kw)
    return ProbeFacts(**base), config  # type: ignore[arg-type]


def judge(f: tuple[ProbeFacts, RaterProbeConfig], **cfg: object):
    return CHECK.evaluate(f[0], replace(f[1], **cfg), None, NOW)  # type: ignore[arg-type]


BACK = Watched(BEFORE, "back", "waiting in blpop again after 1.0 ms")
STUCK = Watched(BEFORE, "stuck", "not back: not blocked, last command blpop, idle 2 s")
GONE = Watched(c(id=6), "gone", "its connection closed within 2.0 ms of the take")
NOT = Watched(c(id=7, idle=300), "not-taker", "no command since before the take (idle 300 s)")


@pytest.mark.parametrize(
    ("f", "status", "strength", "proof", "words"),
    [
        (facts(BACK), Status.OK, "proof", "returned", "back in its loop (waiting in blpop"),
        (facts(BACK, NOT), Status.OK, "proof", "returned", "; rater 10.0.0.2:5000 (id 5) that"),
        (facts(STUCK), Status.CRIT, "behaviour", "taken", "did not return to its loop within 2s"),
        (facts(STUCK, NOT), Status.CRIT, "behaviour", "taken", "not back: not blocked"),
        (facts(GONE), Status.CRIT, "behaviour", "taken", "its connection then closed"),
        (facts(STUCK, GONE), Status.CRIT, "behaviour", "taken", "(one of 2, none back)"),
        (facts(BACK, STUCK, by_name=False), Status.WARN, "inference", "taken", "set client_name"),
        (facts(NOT), Status.OK, "proof", "new command", "a command issued after the push"),
        (facts(), Status.OK, "proof", "new command", "a polling consumer"),
        (
            facts(NOT, loop=LoopFacts(True, True, (NOT,), 2.0, others_waiting=3)),
            Status.WARN,
            "inference",
            "taken",
            "not by a connection named 'rater' (none of them took it); 3 other connections",
        ),
        # a loop blocked 6 s, then back: a live process whose loop was blocked
        (
            facts(BACK, stall_ms=6000.0),
            Status.WARN,
            "behaviour",
            "returned",
            "the loop was blocked for ~6s",
        ),
        (facts(NOT, stall_ms=6000.0), Status.WARN, "behaviour", "new command", "not a dead one"),
        (facts(STUCK, stall_ms=6000.0), Status.CRIT, "behaviour", "taken", "taken only after"),
        (
            facts(BACK, loop=LoopFacts(seen=False, by_name=False)),
            Status.OK,
            "inference",
            "taken",
            "CLIENT LIST not readable",
        ),
        (
            facts(loop=None, ack="reply:acks", acked=True, ack_detail="id pushed to acks"),
            Status.OK,
            None,
            "replied",
            "(proof: replied; id pushed to acks)",
        ),
        (
            facts(
                loop=None,
                ack="reply:acks",
                acked=True,
                ack_detail="id pushed to acks",
                stall_ms=6000.0,
            ),
            Status.WARN,
            "behaviour",
            "replied",
            "then processed (id pushed to acks): a live process whose loop was blocked",
        ),
    ],
)
def test_loop_verdicts(
    f: tuple[ProbeFacts, RaterProbeConfig],
    status: Status,
    strength: str | None,
    proof: str,
    words: str,
) -> None:
    r = judge(f)
    assert (r.status, r.evidence_strength, r.evidence["proof"]) == (status, strength, proof), (
        r.summary
    )
    assert words in r.summary, r.summary
    if r.status is Status.OK:
        assert "blocked for" not in r.summary


def test_queued_commands_weaken_the_proof() -> None:
    w = Watched(c(qbuf="30"), "back", "a new command (incr) after 1.0 ms")
    r = judge(facts(w))
    assert (r.status, r.evidence_strength) == (Status.OK, "inference")
    assert "its return may be the server running them" in r.summary


def test_max_latency_is_a_setting() -> None:
    assert judge(facts(BACK, stall_ms=2500.0)).status is Status.WARN
    assert judge(facts(BACK, stall_ms=2500.0), max_latency=3.0).status is Status.OK


# ---------------------------------------------------------------- lab
def run(lab: Lab, timeout: str = "5s", table: str = "") -> dict:
    cfg = lab.config(checks=f'[checks.rater_probe]\ntimeout = "{timeout}"\n{table}', hosts=[])
    _, report = probe_rater(cfg)
    return row(report)


@pytest.mark.lab
def test_a_consumer_frozen_inside_blpop_0_is_crit(lab: Lab) -> None:
    rater = lab.start_rater(block_timeout=0)
    wait_for(lambda: blocked(lab), 10, "the rater to block in BLPOP 0")
    lab.freeze(rater)
    try:
        r = run(lab, "2s")
    finally:
        lab.thaw(rater)
    assert r["status"] == "CRIT", r["summary"]
    assert "by a connection that did not return to its loop" in r["summary"]
    assert "rater 127.0.0.1:" in r["summary"] and r["evidence_strength"] == "behaviour"
    assert r["evidence"]["consumed"] is True and r["evidence"]["proof"] == "taken"
    assert lab.client().llen(INBOX) == 0  # it was taken: nothing left to remove


@pytest.mark.lab
def test_a_rater_blocked_6s_is_warn_naming_the_blocked_loop(lab: Lab) -> None:
    stall = lab.dir / "stall"
    lab.start_rater(block_timeout=1.0, stall_file=stall, stall_s=6.0)
    wait_for(lambda: blocked(lab), 10, "the rater to block")
    stall.touch()  # its next turn blocks its loop for 6 s
    wait_for(lambda: not stall.exists() and not_blocked(lab), 10, "the rater's loop to block")
    r = run(lab, "10s")
    assert r["status"] == "WARN", r["summary"]
    assert "the loop was blocked for ~" in r["summary"] and "not a dead one" in r["summary"]
    assert "back in its loop" in r["summary"] and r["evidence_strength"] == "behaviour"
    assert 2.0 < r["metrics"]["stall_s"] <= 6.5


@pytest.mark.lab
def test_a_busy_rater_working_through_a_backlog_is_not_a_blocked_loop(lab: Lab) -> None:
    """40 envelopes ahead of ours, 100 ms of work each: taken after seconds, but something
    ahead moved all along, so the stall is short and the row OK."""
    lab.start_rater(block_timeout=1.0, work_s=0.1)
    wait_for(lambda: blocked(lab), 10, "the rater to block")
    lab.client().rpush(INBOX, *[f'{{"id": "job-{i}"}}' for i in range(40)])
    r = run(lab, "10s")
    assert r["status"] == "OK", r["summary"]
    assert r["metrics"]["inbox_length"] > 0 and r["metrics"]["latency_s"] > 2.0
    assert r["metrics"]["stall_s"] < 1.0


@pytest.mark.lab
@pytest.mark.parametrize("pop", ["blpop", "brpop", "blmove"])
def test_a_healthy_rater_stays_ok_with_proof(lab: Lab, pop: str) -> None:
    lab.start_rater(block_timeout=1.0, pop=pop)
    wait_for(lambda: blocked(lab), 10, "the rater to block")
    r = run(lab, "5s", 'push = "lpush"\n' if pop == "brpop" else "")
    assert (r["status"], r["evidence"]["proof"]) == ("OK", "returned"), r["summary"]
    assert r["evidence_strength"] == "proof" and "back in its loop" in r["summary"]


@pytest.mark.lab
def test_ack_stays_the_strongest_proof(lab: Lab) -> None:
    lab.start_rater(block_timeout=0, reply_key="arena:rater:acks")
    wait_for(lambda: blocked(lab), 10, "the rater to block")
    r = run(lab, "5s", 'ack = "reply:arena:rater:acks"\n')
    assert (r["status"], r["evidence"]["proof"]) == ("OK", "replied"), r["summary"]
    assert "taker" not in r["evidence"]  # the ack proves processing; the loop is not watched


@pytest.mark.lab
def test_several_consumers_on_the_inbox(lab: Lab) -> None:
    """Two healthy raters and, unnamed, a worker waiting on another queue for ever: OK."""
    lab.start_rater(block_timeout=0)
    lab.start_rater(block_timeout=1.0)
    lab.start_rater(block_timeout=0, name="worker", inbox="arena:jobs")
    wait_for(lambda: blocked(lab) and blocked(lab, "worker"), 10, "every consumer to block")
    r = run(lab)
    assert (r["status"], r["evidence"]["proof"]) == ("OK", "returned"), r["summary"]


@pytest.mark.lab
def test_unnamed_consumers_are_found_by_their_pop(lab: Lab) -> None:
    """No connection named 'rater': the ones waiting in list pops at the push are watched.
    A healthy unnamed rater beside a worker blocked on another queue for ever is OK; frozen,
    it is CRIT."""
    worker = lab.start_rater(block_timeout=0, name="", inbox="arena:jobs")
    rater = lab.start_rater(block_timeout=0, name="")
    waiting = lambda: sum("b" in x["flags"] for x in lab.client().client_list()) == 2  # noqa: E731
    wait_for(waiting, 10, "both to block")
    r = run(lab)
    assert (r["status"], r["evidence"]["proof"]) == ("OK", "returned"), r["summary"]
    wait_for(waiting, 10, "both to block again")
    # the worker must have been waiting well before the push (its idle past the watch plus
    # CLIENT LIST's whole-second slack), or it cannot be ruled out as the taker: on a loaded
    # machine the first round can end only a few seconds after it blocked
    oldest = lambda: max(  # noqa: E731
        int(x["idle"]) for x in lab.client().client_list() if "b" in x["flags"]
    )
    wait_for(lambda: oldest() >= 6, 20, "the worker to wait 6 s")
    lab.freeze(rater)
    try:
        r = run(lab, "2s")
    finally:
        lab.thaw(rater)
    assert r["status"] == "CRIT", r["summary"]
    assert worker.poll() is None


@pytest.mark.lab
def test_a_polling_consumer_is_proven_by_its_new_commands(lab: Lab) -> None:
    """LPOP and a short sleep: never blocked in the broker. Named, its idle resetting after
    the take proves its loop; unnamed, the take itself was a command issued after the push."""
    lab.start_rater(pop="lpop")
    wait_for(lambda: bool(lab.client_named("rater")), 10, "the poller to connect")
    r = run(lab)
    assert (r["status"], r["evidence"]["proof"]) == ("OK", "returned"), r["summary"]
    assert "idle reset" in r["summary"]
    r = run(lab, "5s", 'client_name = "nobody"\n')
    assert (r["status"], r["evidence"]["proof"]) == ("OK", "new command"), r["summary"]


@pytest.mark.lab
def test_a_pipelining_consumer(lab: Lab) -> None:
    """BLPOP with an INCR queued behind it in one pipeline. Healthy: OK (never a false CRIT).
    Frozen: the server still runs the queued INCR after the take, which is no sign of the
    process; it is CRIT, not OK."""
    rater = lab.start_rater(block_timeout=1.0, pop="pipeline")
    wait_for(lambda: blocked(lab), 10, "the rater to block")
    r = run(lab)
    assert r["status"] == "OK", r["summary"]
    lab.stop(rater)
    rater = lab.start_rater(block_timeout=0, pop="pipeline", name="frozen")
    wait_for(lambda: blocked(lab, "frozen"), 10, "the second one to block in BLPOP 0")
    lab.freeze(rater)
    try:
        r = run(lab, "2s", 'client_name = "frozen"\n')
    finally:
        lab.thaw(rater)
    assert r["status"] == "CRIT", r["summary"]
