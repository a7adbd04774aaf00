"""rater_probe's facts: what the probe saw, and the pure reading of the connections it watched
(who could have taken the envelope, and whether each went back to its loop)."""

from __future__ import annotations

from dataclasses import dataclass

from fleetcheck.parse.clientlist import Client
from fleetcheck.parse.duration import format_duration

LIST_POPS = frozenset({"blpop", "brpop", "blmove", "brpoplpush", "blmpop"})  # can take ours
IDLE_SLACK_S = 1.5  # CLIENT LIST's idle is in whole seconds of a cached server clock
RETURN_MIN_S = 2.0  # a taker gets at least this long after the take to be seen back
LOOK_EVERY_S = 0.05  # while ours waits, the watched connections are looked at this often
LOG_TAIL_BYTES = 4 * 1024 * 1024
GRACE_S = 5.0  # patrol time the probe needs beyond its timeout (ack, LREM, diagnosis)


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
    inbox: str
    probe_id: str
    timeout: float
    consumed: bool
    latency_ms: float | None  # push to first poll that no longer saw the envelope
    inbox_length: int  # elements in the inbox when ours was pushed (ours excluded)
    position: int | None = None  # not consumed: where ours still was
    length_at_deadline: int | None = None  # not consumed: inbox length then (ours excluded)
    removed: bool = False  # we took our envelope back out
    ack: str | None = None
    acked: bool | None = None  # None: not asked for, or could not look
    ack_detail: str = ""
    raters: tuple[Client, ...] | None = None  # None: not read (no failure) or unreadable
    rater_pattern: str = "rater"
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
