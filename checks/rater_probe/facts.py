"""rater_probe's facts and their judgement (pure): what the probe saw, the reading of the
connections it watched (who could have taken the envelope, and whether each went back to its
loop), and what that proves, and how strongly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetcheck.checks.rater_probe import RaterProbeConfig

from fleetcheck.core.model import Result, Status
from fleetcheck.parse.clientlist import Client
from fleetcheck.parse.duration import format_duration

LIST_POPS = frozenset({"blpop", "brpop", "blmove", "brpoplpush", "blmpop"})  # can take ours
IDLE_SLACK_S = 1.5  # CLIENT LIST's idle is in whole seconds of a cached server clock


@dataclass(frozen=True)
class Watched:
    """One connection that could have taken the envelope, followed after the take.

    `state`: "back" (seen back in its loop: blocked in a pop again, a new command, or its idle
    reset after the take), "stuck" (served and no command since, to the end of the watch),
    "gone" (its connection closed after the take) or "not-taker" (it cannot have taken it:
    no interaction since before the take, or it left its pop while ours was still waiting).
    """

    before: Client  # as it was at the push (in the same MULTI as the push)
    state: str
    how: str  # one phrase: "blocked again in blpop after 3 ms", "not back: idle 4 s", ...
    last: Client | None = None  # as last seen

    @property
    def pipelined(self) -> bool:
        """Commands were queued behind its pop at the push: its "return" may be the server
        running them, not its process."""
        return _queued(self.before)


def _queued(c: Client) -> bool:
    q = c.fields.get("qbuf", "0")
    return q.isascii() and q.isdigit() and int(q) > 0


@dataclass(frozen=True)
class LoopFacts:
    """What the connections that could have taken the envelope did after the take."""

    seen: bool  # CLIENT LIST was read with the push (False: not permitted / unreadable)
    by_name: bool  # watched: the connections named client_name (else: blocked in list pops)
    watched: tuple[Watched, ...] = ()
    window_s: float = 0.0  # how long after the take they were watched
    others_waiting: int = 0  # by name: other connections waiting in list pops at the push


def follow(before: Client, looks: list[tuple[float, float, tuple[Client, ...]]]) -> Watched:
    """One watched connection's story from the looks at it (pure).

    Each look is (seconds since the take at the latest, at the earliest, the clients seen);
    negative times are looks while the envelope still waited (both negative) or may have
    (one negative: a look between the poll that last saw it and the one that missed it,
    which says nothing either way). The earliest bound judges
    "no interaction since the take" (conservative: never excludes the real taker), the
    latest judges "idle reset after the take" (a new command)."""
    last: Client | None = before
    queued = _queued(before)
    for since_lo, since_hi, clients in looks:
        c = next((x for x in clients if x.id == before.id), None)
        if since_hi < 0:  # ours was still in the list
            if c is None:
                return Watched(before, "not-taker", "closed while ours still waited", None)
            if before.blocked and not c.blocked:
                return Watched(before, "not-taker", "left its pop while ours still waited", c)
            continue
        if since_lo < 0:  # between ours last seen and first missed: before or after the take
            continue
        ms = f"{since_lo * 1000:.1f} ms" if since_lo < 10 else format_duration(since_lo)
        if c is None:
            return Watched(before, "gone", f"its connection closed within {ms} of the take", last)
        last = c
        if c.idle_s is not None and c.idle_s > since_hi + IDLE_SLACK_S:
            return Watched(
                before, "not-taker", f"no command since before the take (idle {c.idle_s} s)", c
            )
        if c.blocked:
            return Watched(before, "back", f"waiting in {c.cmd or 'a pop'} again after {ms}", c)
        # a command queued behind its pop before the push runs without the process: only a
        # pop again (or the idle reset) shows a connection with such a queue is back
        if c.cmd not in LIST_POPS and (before.blocked or c.cmd != before.cmd) and not queued:
            return Watched(before, "back", f"a new command ({c.cmd}) after {ms}", c)
        if c.idle_s is not None and c.idle_s + IDLE_SLACK_S < since_lo:
            return Watched(before, "back", f"a new command (idle reset) after {ms}", c)
    if last is None or last is before:
        return Watched(before, "stuck", "never looked at after the take", None)
    idle = f", idle {last.idle_s} s" if last.idle_s is not None else ""
    return Watched(
        before,
        "stuck",
        f"not back: not blocked, last command {last.cmd or '?'}{idle}",
        last,
    )


def who(c: Client) -> str:
    """A connection in a few words: `rater 10.0.0.2:5000 (id 5)`."""
    addr = c.fields.get("addr") or f"{c.host}:{c.port}"
    return f"{c.name or 'unnamed'} {addr} (id {c.id})"


@dataclass(frozen=True)
class ProbeFacts:
    """What the probe saw (its settings, inbox, timeout, ack, client_name, are the config's)."""

    probe_id: str
    consumed: bool
    latency_ms: float | None  # push to first poll that no longer saw the envelope
    inbox_length: int  # elements in the inbox when ours was pushed (ours excluded)
    position: int | None = None  # not consumed: where ours still was
    length_at_deadline: int | None = None  # not consumed: inbox length then (ours excluded)
    removed: bool = False  # we took our envelope back out
    acked: bool | None = None  # None: not asked for, or could not look
    ack_detail: str = ""
    raters: tuple[Client, ...] | None = None  # None: not read (no failure) or unreadable
    stall_ms: float | None = None  # taken: the longest time nothing ahead of ours moved
    loop: LoopFacts | None = None  # taken (no ack): did the taker return to its loop?


def describe_raters(raters: tuple[Client, ...] | None, pattern: str) -> str:
    """One phrase on what the rater's broker connection is doing (pure)."""
    if raters is None:
        return "rater connection unknown (CLIENT LIST unreadable)"
    if not raters:
        return f"no rater connection (no client named {pattern!r}): process gone or cut off"
    blocked = [c for c in raters if c.blocked]
    c = blocked[0] if blocked else max(raters, key=lambda c: c.idle_s or 0)
    idle = f", idle {c.idle_s} s" if c.idle_s is not None else ""
    if blocked:
        return f"rater connected and blocked in {c.cmd or 'a blocking pop'}{idle}"
    last = f" (last command {c.cmd})" if c.cmd else ""
    return f"rater connected, not blocked{idle}{last}: its loop is stuck outside BLPOP"


# ---------------------------------------------------------------- judgement
MakeRow = Callable[..., Result]


def judge(facts: ProbeFacts, config: RaterProbeConfig, make_row: MakeRow) -> Result:
    """The probe's verdict (pure): `make_row(status, summary, metrics=, evidence=,
    evidence_strength=)` builds the check's row."""
    raters = describe_raters(facts.raters, config.client_name)
    proof: str | None = None
    if facts.consumed:
        proof = ("logged" if config.ack == "log" else "replied") if facts.acked else "consumed"
    metrics: dict[str, Any] = {
        "latency_s": None if facts.latency_ms is None else round(facts.latency_ms / 1000, 6),
        "inbox_length": facts.inbox_length,
    }
    if facts.raters is not None:
        metrics["rater_connections"] = len(facts.raters)
        metrics["rater_blocked"] = sum(1 for c in facts.raters if c.blocked)
    evidence: dict[str, Any] = {
        "consumed": facts.consumed,
        "proof": proof,
        "probe_id": facts.probe_id,
        "rater": raters if facts.raters is not None else None,
        "raters": [
            {
                "addr": c.fields.get("addr", c.host),
                "name": c.name,
                "flags": c.flags,
                "cmd": c.cmd,
                "idle_s": c.idle_s,
            }
            for c in (facts.raters or ())
        ][:10],
    }
    if facts.ack_detail:
        evidence["ack"] = facts.ack_detail
    limit = format_duration(config.timeout)
    inbox = config.inbox

    def row(status: Status, summary: str, strength: str | None = None) -> Result:
        return make_row(
            status, summary, metrics=metrics, evidence=evidence, evidence_strength=strength
        )

    if not facts.consumed:
        metrics["position"] = facts.position
        metrics["length_at_deadline"] = facts.length_at_deadline
        where = f"{facts.position} entries ahead of it"
        if facts.length_at_deadline is not None:
            where += f", inbox length {facts.length_at_deadline} without it"
        back = "removed again" if facts.removed else "COULD NOT be removed"
        return row(
            Status.CRIT,
            f"{inbox}: probe not consumed within {limit} ({where}; {back}): {raters}",
        )
    latency = f"{facts.latency_ms:.1f} ms" if facts.latency_ms is not None else "?"
    if facts.latency_ms is not None and facts.latency_ms > config.timeout * 1000:
        return row(
            Status.CRIT,
            f"{inbox}: probe consumed only after {latency}, past the {limit} timeout: " + raters,
        )
    if config.ack and facts.acked is False:
        return row(
            Status.CRIT,
            f"{inbox}: probe taken in {latency} but not acknowledged ({facts.ack_detail}): "
            f"taken is not processed (a frozen consumer can still own a pending BLPOP); " + raters,
        )
    if config.ack and facts.acked is None:
        return row(
            Status.UNKNOWN,
            f"{inbox}: probe taken in {latency}, but the {config.ack} acknowledgement could "
            f"not be checked: {facts.ack_detail}",
        )
    stalled = facts.stall_ms is not None and facts.stall_ms > config.max_latency * 1000
    stall = f"~{format_duration(facts.stall_ms / 1000)}" if facts.stall_ms else ""
    if facts.stall_ms is not None:
        metrics["stall_s"] = round(facts.stall_ms / 1000, 6)
    blocked = (
        f"the loop was blocked for {stall} (nothing ahead of the probe moved meanwhile; "
        f"max_latency {format_duration(config.max_latency)})"
    )

    def late(after: str, before: str = ": ") -> Result:
        """Taken after a stall: `after` the words for it, what proves the process alive."""
        text = f"{inbox}: probe taken only after {latency}{before}{blocked}{after}"
        return row(Status.WARN, text, "behaviour")

    if config.ack:  # acknowledged: the strongest proof there is
        how = f"; {facts.ack_detail}" if facts.acked else ""
        if stalled:
            return late(f", then processed ({facts.ack_detail}): {_ALIVE}")
        return row(Status.OK, f"{inbox}: probe consumed in {latency} (proof: {proof}{how})")
    return _judge_loop(Taken(facts, config, row, late, evidence, metrics, latency, stalled))


_ALIVE = "a live process whose loop was blocked, not a dead one"


@dataclass(frozen=True)
class Taken:
    """A probe taken and not acknowledged, as its judging steps share it."""

    facts: ProbeFacts
    config: RaterProbeConfig
    row: Any  # builds the check's row: (status, summary, strength)
    late: Any  # builds the WARN row of a take after a stall
    evidence: dict[str, Any]
    metrics: dict[str, Any]
    latency: str
    stalled: bool  # taken only after max_latency with nothing ahead moving


def _judge_loop(t: Taken) -> Result:
    """Taken, no ack: did the connection that took it go back to its loop? (pure)"""
    loop, inbox, latency = t.facts.loop, t.config.inbox, t.latency
    if loop is None or not loop.seen:
        why = "CLIENT LIST not readable with the push" if loop else "the taker was not watched"
        t.evidence["proof"] = "taken"
        if t.stalled:
            return t.late(
                f"; a pop issued that late means a live process ({why}: its "
                "return to its loop unseen)"
            )
        return t.row(
            Status.OK,
            f"{inbox}: probe taken in {latency} (proof: taken only; {why}: whether the "
            "taker went back to its loop was not seen)",
            "inference",
        )
    t.evidence["taker"] = [
        {"connection": who(w.before), "state": w.state, "how": w.how} for w in loop.watched
    ][:10]
    possible = [w for w in loop.watched if w.state != "not-taker"]
    back = [w for w in possible if w.state == "back"]
    bad = [w for w in possible if w.state in ("stuck", "gone")]
    t.metrics["takers_possible"] = len(possible)
    t.metrics["takers_back"] = len(back)
    if not possible:
        return _judge_no_taker(t, loop)
    if bad:
        t.evidence["proof"] = "taken"
    if bad and not back:
        w = bad[0]
        many = f" (one of {len(possible)}, none back)" if len(possible) > 1 else ""
        late = f"; it was taken only after {latency}" if t.stalled else ""
        what = (
            "its connection then closed (the consumer died or dropped it)"
            if w.state == "gone"
            else w.how
        )
        return t.row(
            Status.CRIT,
            f"{inbox}: probe taken in {latency} by a connection that did not return to its "
            f"loop within {format_duration(loop.window_s)}: {who(w.before)}{many}, {what}; "
            "taken is not processed (a process frozen inside its pop still takes one "
            f"envelope){late}",
            "behaviour",
        )
    if bad:
        hint = "" if loop.by_name else "; set client_name to the consumer's name"
        return t.row(
            Status.WARN,
            f"{inbox}: probe taken in {latency} by one of {len(possible)} connections "
            f"waiting in pops (the broker does not say on which key): {len(back)} back "
            f"in their loop, {len(bad)} not ({who(bad[0].before)}, {bad[0].how}); which "
            f"took it cannot be told{hint}",
            "inference",
        )
    t.evidence["proof"] = "returned"
    one = len(possible) == 1
    taker = who(back[0].before) if one else f"each of the {len(possible)} connections"
    how = back[0].how if one else "each back in its loop"
    queued = any(x.pipelined for x in back)
    if t.stalled:
        return t.late(
            f"; then {taker} that could have taken it was back in its loop ({how}): {_ALIVE}"
        )
    note = "; commands were queued behind its pop: its return may be the server running them"
    return t.row(
        Status.OK,
        f"{inbox}: probe consumed in {latency}; {taker} that could have taken it: back in "
        f"its loop ({how}) (proof: returned{note if queued else ''})",
        "inference" if queued else "proof",
    )


def _judge_no_taker(t: Taken, loop: LoopFacts) -> Result:
    """Taken, but by none of the watched connections: a command issued after the push, or
    (others waiting in pops) one that cannot be told."""
    inbox, latency, pattern = t.config.inbox, t.latency, t.config.client_name
    if loop.others_waiting:
        # none of the named ones took it, and others were waiting in pops at the push:
        # one of those may have taken it without ever coming back
        t.evidence["proof"] = "taken"
        return t.row(
            Status.WARN,
            f"{inbox}: probe taken in {latency}, not by a connection named {pattern!r} "
            f"(none of them took it); {loop.others_waiting} other connections were waiting "
            "in pops (the broker does not say on which key): which took it cannot be told; "
            "set client_name to match every consumer",
            "inference",
        )
    t.evidence["proof"] = "new command"
    whom = f"no connection named {pattern!r}" if loop.by_name else "no connection"
    text = (
        f"taken by a command issued after the push ({whom} was waiting in a pop for "
        "it: a polling consumer, or a loop that popped again)"
    )
    if t.stalled:
        return t.late("; a live process with a blocked loop, not a dead one", f", {text}: ")
    return t.row(
        Status.OK, f"{inbox}: probe consumed in {latency}, {text} (proof: new command)", "proof"
    )
