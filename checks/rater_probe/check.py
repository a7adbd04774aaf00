"""rater_probe's check: the probe, its facts and their judging (the settings are the
package's, fleetcheck.checks.rater_probe)."""

from __future__ import annotations

import fnmatch
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.rater_probe import RaterProbeConfig, render_payload

from fleetcheck.config import BrokerConfig, FleetConfig, HostConfig
from fleetcheck.core.check import (
    BrokerCommand,
    Check,
    CheckCommand,
    CommandOption,
    Key,
    Scope,
    cmd,
)
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.errors import CheckError
from fleetcheck.core.hostfacts import logs_of
from fleetcheck.core.model import Report, Result, Status
from fleetcheck.parse.clientlist import Client, parse_client_list
from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.lab.demo import DemoFleet

BLOCKING = {"blpop", "brpop", "blmove", "brpoplpush", "blmpop"}
LIST_POPS = frozenset(BLOCKING)  # the blocking commands that can take a list element
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
        q = self.before.fields.get("qbuf", "0")
        return q.isdigit() and int(q) > 0


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
    q = before.fields.get("qbuf", "0")
    queued = q.isdigit() and int(q) > 0
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
    if blocked:
        c = blocked[0]
        idle = f", idle {c.idle_s} s" if c.idle_s is not None else ""
        return f"rater connected and blocked in {c.cmd or 'a blocking pop'}{idle}"
    c = max(raters, key=lambda c: c.idle_s or 0)
    idle = f", idle {c.idle_s} s" if c.idle_s is not None else ""
    last = f" (last command {c.cmd})" if c.cmd else ""
    return f"rater connected, not blocked{idle}{last}: its loop is stuck outside BLPOP"


class RaterProbeCheck(Check[RaterProbeConfig, ProbeFacts]):
    name = "rater_probe"
    description = "pushes one probe envelope into the rater's inbox and times its consumption"
    scope = Scope.BROKER
    config_type = RaterProbeConfig
    headline = "latency_s"
    example = """\
# WRITES TO YOUR BROKER: every patrol PUSHES one probe envelope into the `inbox` list below (and
# removes it again with LREM if nobody takes it within `timeout`). Leave this table out if
# nothing may be written to the broker.
[checks.rater_probe]
inbox = "arena:rater:inbox"      # the list the rater pops from
push = "rpush"                   # how the probe envelope is added ("rpush" or "lpush")
timeout = "5s"                   # the envelope must be taken (and acknowledged) within this
# the envelope's template ({id} and {sent_at} are filled in):
payload = '{"type": "fleetcheck.probe", "id": "{id}", "sent_at": {sent_at}}'
client_name = "rater"            # CLIENT SETNAME of the rater's connection (glob allowed)
max_latency = "2s"               # taken later, nothing ahead moving: WARN "the loop was blocked"
# ack = "log"                    # stronger proof: "log" (id seen in the rater's log) or "reply:KEY"
# ack_host = "broker"            # ack = "log": the host whose log shows the id
# ack_log = "/var/log/arena/rater.log"  # ack = "log": that log (default: the host's first log)
"""
    demo_meaning = (
        "a test envelope pushed to the rater's inbox was not consumed in time: its "
        "loop is not running, whatever its process and log say (incidents 6, 7)"
    )

    def broker_commands(
        self, fleet: FleetConfig, config: RaterProbeConfig
    ) -> tuple[BrokerCommand, ...]:
        """The push goes in one MULTI ... EXEC with CLIENT ID and LIST; the removal is LREM."""
        inbox = Key(config.inbox)
        out = [
            cmd("INFO"),
            cmd("TYPE", inbox),
            cmd("MULTI"),
            cmd(config.push.upper(), inbox, "x", writes=True),
            cmd("EXEC"),
            cmd("LREM", inbox, "1", "x", writes=True),
            cmd("LPOS", inbox, "x"),
            cmd("LLEN", inbox),
            cmd("LRANGE", inbox, "0", "0"),
            cmd("CLIENT", "ID"),
            cmd("CLIENT", "LIST"),
        ]
        if (config.ack or "").startswith("reply:"):
            reply = Key((config.ack or "").split(":", 1)[1])
            out += [cmd("LPOS", reply, "x"), cmd("LRANGE", reply, "0", "0")]
        return tuple(out)

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """A healthy rater on the broker's machine, consuming its inbox for real."""
        inbox = "arena:rater:inbox"
        host = fleet.hosts["broker"] if fleet.netns else None
        fleet.lab.start_rater(host, inbox=inbox, log=fleet.log_path("broker"))
        return f'inbox = "{inbox}"\ntimeout = "5s"'

    def probe(
        self, ctx: PatrolContext, host: HostConfig | None, config: RaterProbeConfig
    ) -> ProbeFacts:
        from fleetcheck.transport.redis import supports

        deadline_s = ctx.fleet.patrol.deadline
        if config.timeout + GRACE_S > deadline_s:
            # cut by the patrol deadline, the probe could not take its envelope back
            raise CheckError(
                f"timeout {format_duration(config.timeout)} leaves less than "
                f"{format_duration(GRACE_S)} of the patrol deadline {format_duration(deadline_s)}: "
                "nothing pushed"
            )
        ctx.broker()
        ack_host = self._ack_host(ctx, config)  # refuse a bad ack setup before writing
        try:
            info = ctx.info()
            kind = ctx.broker().type(config.inbox)
        except CheckError:
            raise
        except Exception as e:
            raise ctx.broker_error(e) from None
        r = ctx.probe_broker()
        kind_text = kind.decode() if isinstance(kind, bytes) else str(kind)
        if kind_text not in ("list", "none"):
            raise CheckError(f"{config.inbox} is a {kind_text}, not a list: nothing pushed")
        has_lpos = supports(info, "lpos")
        raters: tuple[Client, ...] | None = None  # read only when the probe fails

        import uuid

        probe_id = str(uuid.uuid4())
        envelope = render_payload(config.payload, probe_id, time.time()).encode()
        from_head = config.push == "rpush"  # consumers pop the other end
        list_id = supports(info, "client_list_id")
        command = "RPUSH" if from_head else "LPUSH"
        start = time.perf_counter()
        pushed, failure, before = self._push_watching(r, command, config, envelope)
        if before is None and failure is None and pushed is None:  # the MULTI was refused
            start = time.perf_counter()
            pushed, failure = self._push_once(r, command, config, envelope)
        if failure is not None:
            if pushed is False:  # the broker answered with an error: nothing was written
                raise ctx.broker_error(failure) from None
            cleaned = self._clean_up(r, config.inbox, envelope)
            raise CheckError(
                f"{config.inbox}: push uncertain ({ctx.broker_error(failure).reason}); {cleaned}"
            )
        length = int(pushed)
        deadline = start + config.timeout
        window = length  # ours can only move towards the consumer's end
        by_name, watch = self._candidates(before, config.client_name)
        looks: list[tuple[float, float, tuple[Client, ...]]] = []

        consumed, latency_ms, position = False, None, None
        polls = 0
        last_seen = last_progress = last_look = start
        stall = 0.0
        try:
            while True:
                position = self._position(r, config.inbox, envelope, window, from_head, has_lpos)
                now = time.perf_counter()
                if position is None:
                    consumed, latency_ms = True, (now - start) * 1000
                    stall = max(stall, now - last_progress)
                    break
                if position < window - 1:  # entries ahead of ours were taken: the loop moves
                    stall = max(stall, now - last_progress)
                    last_progress = now
                last_seen = now
                window = position + 1
                if now >= deadline:
                    break
                if watch and list_id and now - last_look >= LOOK_EVERY_S:
                    seen = self._look(r, watch, list_id)
                    last_look = time.perf_counter()
                    if seen is not None:
                        looks.append((last_look, last_look, seen))  # re-based on the take later
                polls += 1
                time.sleep(min(0.001 if polls < 200 else 0.005, max(0.0, deadline - now)))
        except Exception as e:
            self._take_back(r, config, envelope)
            raise ctx.broker_error(e) from None

        removed, length_at_deadline = False, None
        if not consumed:
            n_removed, length_at_deadline = self._take_back(r, config, envelope)
            removed = n_removed > 0
            if not removed:  # taken between our last look and the LREM: consumed, but late
                consumed, latency_ms = True, (time.perf_counter() - start) * 1000
                position = None

        acked, ack_detail = None, ""
        loop: LoopFacts | None = None
        if consumed and config.ack:
            acked, ack_detail = self._await_ack(ctx, config, probe_id, ack_host, deadline, has_lpos)
        elif consumed and latency_ms is not None and latency_ms <= config.timeout * 1000:
            take_late, take_early = start + latency_ms / 1000, last_seen
            loop = self._watch_return(
                r, before, by_name, watch, looks, list_id, take_early, take_late, deadline
            )
        if not consumed or acked is False:
            # CLIENT LIST is the priciest read there is (tens of ms with 10k clients): only
            # when there is something to explain, and the patrol's shared copy refreshed by id
            raters = self._raters(ctx, config.client_name)
            raters = self._refresh(ctx, raters, config.client_name, info)
        return ProbeFacts(
            inbox=config.inbox,
            probe_id=probe_id,
            timeout=config.timeout,
            consumed=consumed,
            latency_ms=None if latency_ms is None else round(latency_ms, 3),
            inbox_length=length - 1,
            position=position,
            length_at_deadline=length_at_deadline,
            removed=removed,
            ack=config.ack,
            acked=acked,
            ack_detail=ack_detail,
            raters=raters,
            rater_pattern=config.client_name,
            stall_ms=round(stall * 1000, 3) if consumed else None,
            loop=loop,
        )

    # ------------------------------------------------------------ helpers (I/O)
    @staticmethod
    def _push_once(
        r: Any, command: str, config: RaterProbeConfig, envelope: bytes
    ) -> tuple[Any, Exception | None]:
        """Send the push exactly once on a connection of the probe's client, bypassing the
        client's retry. (reply, None) when it landed; (False, error) when the broker refused
        it (nothing written); (None, error) when its fate is unknown."""
        import redis

        pool = r.connection_pool
        conn = pool.get_connection()  # connecting may retry: nothing is sent yet
        try:
            conn.send_command(command, config.inbox, envelope)
            return conn.read_response(), None
        except redis.ResponseError as e:
            return False, e
        except Exception as e:
            conn.disconnect()
            return None, e
        finally:
            pool.release(conn)

    @staticmethod
    def _push_watching(
        r: Any, command: str, config: RaterProbeConfig, envelope: bytes
    ) -> tuple[Any, Exception | None, tuple[Client, ...] | None]:
        """The push, sent once, in one MULTI with CLIENT ID and CLIENT LIST: the connections
        as they are at the very moment of the push (who was waiting in a pop), in the same
        round trip. (reply, None, clients but our own) when it landed; (False, error, None)
        when the broker refused the push; (None, error, None) when its fate is unknown;
        (None, None, None) when the MULTI was refused as a whole (CLIENT not permitted to
        this user): nothing was written, the caller pushes alone."""
        import redis

        pool = r.connection_pool
        conn = pool.get_connection()
        try:
            conn.send_packed_command(
                conn.pack_commands(
                    [
                        ("MULTI",),
                        ("CLIENT", "ID"),
                        ("CLIENT", "LIST"),
                        (command, config.inbox, envelope),
                        ("EXEC",),
                    ]
                )
            )
            replies: list[Any] = []
            for _ in range(5):
                try:
                    replies.append(conn.read_response())
                except redis.ResponseError as e:
                    replies.append(e)
        except Exception as e:
            conn.disconnect()
            return None, e, None
        finally:
            pool.release(conn)
        result = replies[-1]
        if isinstance(result, Exception) or not isinstance(result, list) or len(result) != 3:
            return None, None, None  # EXECABORT (or no transaction): nothing was written
        own, listing, pushed = result
        if isinstance(pushed, Exception):
            return False, pushed, None
        if isinstance(listing, Exception) or isinstance(own, Exception):
            return pushed, None, None
        try:
            clients = parse_client_list(listing)
        except Exception:
            return pushed, None, None
        return pushed, None, tuple(c for c in clients if c.id != int(own))

    @staticmethod
    def _candidates(
        before: tuple[Client, ...] | None, pattern: str
    ) -> tuple[bool, tuple[Client, ...]]:
        """The connections that could take the envelope: those named `client_name` when any
        is connected (the user said which they are), else every connection waiting in a
        list pop at the push (the broker does not say on which key)."""
        if not before:
            return False, ()
        named = tuple(c for c in before if fnmatch.fnmatchcase(c.name, pattern))
        if named:
            return True, named
        return False, tuple(c for c in before if c.blocked and c.cmd in LIST_POPS)

    @staticmethod
    def _look(r: Any, watch: tuple[Client, ...], list_id: bool) -> tuple[Client, ...] | None:
        """The watched connections as they are now (None: unreadable)."""
        ids = [c.id for c in watch if c.id is not None]
        try:
            if list_id:
                raw = r.execute_command("CLIENT", "LIST", "ID", *ids)
            else:
                raw = r.execute_command("CLIENT", "LIST")
            wanted = set(ids)
            return tuple(c for c in parse_client_list(raw) if c.id in wanted)
        except Exception:
            return None

    def _watch_return(
        self,
        r: Any,
        before: tuple[Client, ...] | None,
        by_name: bool,
        watch: tuple[Client, ...],
        looks: list[tuple[float, float, tuple[Client, ...]]],
        list_id: bool,
        take_early: float,
        take_late: float,
        deadline: float,
    ) -> LoopFacts:
        """Watch the connections that could have taken the envelope until each is back in
        its loop (or cannot have been the taker), or the deadline: the probe's own, but at
        least RETURN_MIN_S after the take. Looks come quick then slower (2 ms doubling to
        100 ms): a healthy loop is settled in one or two round trips. The take happened
        between `take_early` (ours last seen) and `take_late` (first seen gone)."""
        if before is None:
            return LoopFacts(seen=False, by_name=False)
        if not watch:
            return LoopFacts(seen=True, by_name=by_name)

        def rebased(t: float, seen: tuple[Client, ...]) -> tuple[float, float, tuple[Client, ...]]:
            return (t - take_late, t - take_early, seen)

        timeline = [rebased(t, seen) for t, _, seen in looks]
        end = max(deadline, take_late + RETURN_MIN_S)
        pause = 0.002
        while True:
            seen = self._look(r, watch, list_id)
            now = time.perf_counter()
            if seen is not None:
                timeline.append(rebased(now, seen))
            states = [follow(c, timeline) for c in watch]
            if not any(w.state == "stuck" for w in states) or now >= end:
                break
            time.sleep(min(pause, max(0.0, end - now)))
            pause = min(pause * 2, 0.1)
        others = 0
        if by_name:
            ids = {c.id for c in watch}
            others = sum(1 for c in before if c.blocked and c.cmd in LIST_POPS and c.id not in ids)
        return LoopFacts(
            seen=True,
            by_name=by_name,
            others_waiting=others,
            watched=tuple(states),
            window_s=round(max(0.0, time.perf_counter() - take_late), 3),
        )

    @staticmethod
    def _clean_up(r: Any, inbox: str, envelope: bytes) -> str:
        """Remove every copy of our (unique) envelope after an uncertain push."""
        try:
            removed = int(r.lrem(inbox, 0, envelope))
        except Exception:
            return "COULD NOT check the inbox for it: look for it by its id"
        if removed:
            return f"removed again ({removed} cop{'y' if removed == 1 else 'ies'})"
        return "it is not in the inbox (not pushed, or already taken)"

    @staticmethod
    def _position(
        r: Any, inbox: str, envelope: bytes, window: int, from_head: bool, has_lpos: bool
    ) -> int | None:
        """Where our envelope is, counted from the consumer's end; None once it is gone.

        Only the first `window` elements from the consumer's end are searched: ours cannot be
        further away than where it was last seen, so each look stays short on the server.
        """
        if has_lpos:
            if from_head:
                pos = r.execute_command("LPOS", inbox, envelope, "RANK", 1, "MAXLEN", window)
                return None if pos is None else int(pos)
            pipe = r.pipeline(transaction=False)
            pipe.execute_command("LPOS", inbox, envelope, "RANK", -1, "MAXLEN", window)
            pipe.llen(inbox)
            pos, length = pipe.execute()
            return None if pos is None else max(0, int(length) - 1 - int(pos))
        if from_head:
            items = r.lrange(inbox, 0, window - 1)
        else:
            items = list(reversed(r.lrange(inbox, -window, -1)))
        try:
            return items.index(envelope)
        except ValueError:
            return None

    @staticmethod
    def _take_back(r: Any, config: RaterProbeConfig, envelope: bytes) -> tuple[int, int | None]:
        """LREM exactly our envelope (one copy); (removed, inbox length afterwards)."""
        try:
            pipe = r.pipeline(transaction=False)
            pipe.lrem(config.inbox, 1 if config.push == "rpush" else -1, envelope)
            pipe.llen(config.inbox)
            removed, length = pipe.execute()
            return int(removed), int(length)
        except Exception:
            return 0, None

    @staticmethod
    def _ack_host(ctx: PatrolContext, config: RaterProbeConfig) -> HostConfig | None:
        if config.ack != "log":
            return None
        try:
            h = ctx.fleet.host(config.ack_host or "")
        except KeyError:
            raise CheckError(
                f"ack_host {config.ack_host!r} is not a host in {ctx.fleet.path}: nothing pushed"
            ) from None
        if h.ssh is None:
            raise CheckError(f"ack_host {h.name} has no ssh, so its log cannot be read")
        if not (config.ack_log or any(log.path for log in logs_of(h))):
            raise CheckError(f"ack_host {h.name} has no log files; set ack_log to the rater's log")
        return h

    @staticmethod
    def _raters(ctx: PatrolContext, pattern: str) -> tuple[Client, ...] | None:
        try:
            clients = ctx.client_list()
        except Exception:
            return None
        return tuple(c for c in clients if fnmatch.fnmatchcase(c.name, pattern))

    @staticmethod
    def _refresh(
        ctx: PatrolContext,
        raters: tuple[Client, ...] | None,
        pattern: str,
        info: dict[str, Any],
    ) -> tuple[Client, ...] | None:
        """The rater connections as they are now (CLIENT LIST ID: cheap with 10k clients)."""
        from fleetcheck.transport.redis import supports

        if not raters or not supports(info, "client_list_id"):
            return raters
        ids = [c.id for c in raters if c.id is not None]
        try:
            raw = ctx.broker().execute_command("CLIENT", "LIST", "ID", *ids)
        except Exception:
            return raters
        return tuple(c for c in parse_client_list(raw) if fnmatch.fnmatchcase(c.name, pattern))

    def _await_ack(
        self,
        ctx: PatrolContext,
        config: RaterProbeConfig,
        probe_id: str,
        host: HostConfig | None,
        deadline: float,
        has_lpos: bool,
    ) -> tuple[bool | None, str]:
        assert config.ack is not None
        if config.ack == "log":
            assert host is not None
            return self._await_log(ctx, config, probe_id, host, deadline)
        key = config.ack.split(":", 1)[1]
        r = ctx.probe_broker()
        ident = probe_id.encode()
        try:
            while True:
                if has_lpos:
                    found = r.execute_command("LPOS", key, ident, "MAXLEN", 1000) is not None
                else:
                    found = ident in r.lrange(key, 0, 999)
                if found:
                    # the reply was for us: leave the list as it was
                    r.lrem(key, 1, ident)  # type: ignore[arg-type]  # bytes are fine on the wire
                    return True, f"id pushed to {key}"
                if time.perf_counter() >= deadline:
                    return False, f"id not pushed to {key} within {format_duration(config.timeout)}"
                time.sleep(0.002)
        except Exception as e:
            return None, f"reply list {key} unreadable: {ctx.broker_error(e).reason}"

    @staticmethod
    def _await_log(
        ctx: PatrolContext,
        config: RaterProbeConfig,
        probe_id: str,
        host: HostConfig,
        deadline: float,
    ) -> tuple[bool | None, str]:
        path = config.ack_log or next(log.path for log in logs_of(host) if log.path)
        wait = max(0.0, deadline - time.perf_counter())
        # one exec that polls on the host (every exec costs the host a login shell)
        script = (
            f"f={_quote(path)}; id={_quote(probe_id)}; n={int(wait * 10) + 1}\n"
            '[ -r "$f" ] || { echo "unreadable"; exit 3; }\n'
            "while :; do\n"
            f'  tail -c {LOG_TAIL_BYTES} "$f" | grep -F -q -- "$id" && {{ echo found; exit 0; }}\n'
            '  n=$((n - 1)); [ "$n" -le 0 ] && exit 1\n'
            "  sleep 0.1\n"
            "done"
        )
        try:
            result = ctx.shell(host).run(script, wait + 5.0, 4096)
        except CheckError as e:
            return None, f"{host.name}: log not readable: {e.reason}"
        out = result.stdout.decode("utf-8", "replace")
        if "found" in out:
            return True, f"id logged in {host.name}:{path}"
        if "unreadable" in out:
            return None, f"{host.name}:{path} is not readable"
        if result.rc is None:
            return None, f"{host.name}: log search did not finish"
        return False, f"id not in {host.name}:{path} within {format_duration(config.timeout)}"

    # ------------------------------------------------------------ judgement (pure)
    def evaluate(
        self, facts: ProbeFacts, config: RaterProbeConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        raters = describe_raters(facts.raters, facts.rater_pattern)
        proof = None
        if facts.consumed:
            proof = "consumed"
            if facts.acked:
                proof = "logged" if facts.ack == "log" else "replied"
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
        limit = format_duration(facts.timeout)
        inbox = facts.inbox

        def row(status: Status, summary: str, strength: str | None = None) -> Result:
            return self.result(
                host,
                status,
                summary,
                metrics=metrics,
                evidence=evidence,
                evidence_strength=strength,
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
        if facts.latency_ms is not None and facts.latency_ms > facts.timeout * 1000:
            return row(
                Status.CRIT,
                f"{inbox}: probe consumed only after {latency}, past the {limit} timeout: "
                + raters,
            )
        if facts.ack and facts.acked is False:
            return row(
                Status.CRIT,
                f"{inbox}: probe taken in {latency} but not acknowledged ({facts.ack_detail}): "
                f"taken is not processed (a frozen consumer can still own a pending BLPOP); "
                + raters,
            )
        if facts.ack and facts.acked is None:
            return row(
                Status.UNKNOWN,
                f"{inbox}: probe taken in {latency}, but the {facts.ack} acknowledgement could "
                f"not be checked: {facts.ack_detail}",
            )
        stalled = facts.stall_ms is not None and facts.stall_ms > config.max_latency * 1000
        stall = f"~{format_duration(facts.stall_ms / 1000)}" if facts.stall_ms else ""
        if facts.stall_ms is not None:
            metrics["stall_s"] = round(facts.stall_ms / 1000, 6)
        blocked_loop = (
            f"the loop was blocked for {stall} (nothing ahead of the probe moved meanwhile; "
            f"max_latency {format_duration(config.max_latency)})"
        )
        if facts.ack:  # acknowledged: the strongest proof there is
            how = f"; {facts.ack_detail}" if facts.acked else ""
            if stalled:
                return row(
                    Status.WARN,
                    f"{inbox}: probe taken only after {latency}: {blocked_loop}, then "
                    f"processed ({facts.ack_detail}): a live process whose loop was blocked, "
                    "not a dead one",
                    "behaviour",
                )
            return row(Status.OK, f"{inbox}: probe consumed in {latency} (proof: {proof}{how})")
        return self._judge_loop(facts, row, evidence, metrics, latency, stalled, blocked_loop)

    def _judge_loop(
        self,
        facts: ProbeFacts,
        row: Any,
        evidence: dict[str, Any],
        metrics: dict[str, Any],
        latency: str,
        stalled: bool,
        blocked_loop: str,
    ) -> Result:
        """Taken, no ack: did the connection that took it go back to its loop? (pure)"""
        inbox = facts.inbox
        loop = facts.loop
        if loop is None or not loop.seen:
            evidence["proof"] = "taken"
            why = (
                "CLIENT LIST not readable with the push"
                if loop is not None
                else "the taker was not watched"
            )
            if stalled:
                return row(
                    Status.WARN,
                    f"{inbox}: probe taken only after {latency}: {blocked_loop}; a pop issued "
                    f"that late means a live process ({why}: its return to its loop unseen)",
                    "behaviour",
                )
            return row(
                Status.OK,
                f"{inbox}: probe taken in {latency} (proof: taken only; {why}: whether the "
                "taker went back to its loop was not seen)",
                "inference",
            )
        watched = loop.watched
        evidence["taker"] = [
            {"connection": who(w.before), "state": w.state, "how": w.how} for w in watched
        ][:10]
        possible = [w for w in watched if w.state != "not-taker"]
        back = [w for w in possible if w.state == "back"]
        bad = [w for w in possible if w.state in ("stuck", "gone")]
        metrics["takers_possible"] = len(possible)
        metrics["takers_back"] = len(back)
        window = format_duration(loop.window_s)
        if not possible and loop.others_waiting:
            # none of the named ones took it, and others were waiting in pops at the push:
            # one of those may have taken it without ever coming back
            evidence["proof"] = "taken"
            return row(
                Status.WARN,
                f"{inbox}: probe taken in {latency}, not by a connection named "
                f"{facts.rater_pattern!r} (none of them took it); {loop.others_waiting} other "
                "connections were waiting in pops (the broker does not say on which key): "
                "which took it cannot be told; set client_name to match every consumer",
                "inference",
            )
        if not possible:
            evidence["proof"] = "new command"
            whom = (
                f"no connection named {facts.rater_pattern!r}" if loop.by_name else "no connection"
            )
            text = (
                f"taken by a command issued after the push ({whom} was waiting in a pop for "
                "it: a polling consumer, or a loop that popped again)"
            )
            if stalled:
                return row(
                    Status.WARN,
                    f"{inbox}: probe taken only after {latency}, {text}: {blocked_loop}; a "
                    "live process with a blocked loop, not a dead one",
                    "behaviour",
                )
            return row(
                Status.OK,
                f"{inbox}: probe consumed in {latency}, {text} (proof: new command)",
                "proof",
            )
        if bad and not back:
            evidence["proof"] = "taken"
            w = bad[0]
            many = f" (one of {len(possible)}, none back)" if len(possible) > 1 else ""
            late = f"; it was taken only after {latency}" if stalled else ""
            what = (
                "its connection then closed (the consumer died or dropped it)"
                if w.state == "gone"
                else f"{w.how}"
            )
            return row(
                Status.CRIT,
                f"{inbox}: probe taken in {latency} by a connection that did not return to its "
                f"loop within {window}: {who(w.before)}{many}, {what}; taken is not processed "
                f"(a process frozen inside its pop still takes one envelope){late}",
                "behaviour",
            )
        if bad:
            evidence["proof"] = "taken"
            hint = "" if loop.by_name else "; set client_name to the consumer's name"
            return row(
                Status.WARN,
                f"{inbox}: probe taken in {latency} by one of {len(possible)} connections "
                f"waiting in pops (the broker does not say on which key): {len(back)} back "
                f"in their loop, {len(bad)} not ({who(bad[0].before)}, {bad[0].how}); which "
                f"took it cannot be told{hint}",
                "inference",
            )
        evidence["proof"] = "returned"
        w = back[0]
        taker = who(w.before) if len(possible) == 1 else f"each of the {len(possible)} connections"
        how = w.how if len(possible) == 1 else "each back in its loop"
        queued = any(x.pipelined for x in back)
        note = (
            "; commands were queued behind its pop: its return may be the server running them"
            if queued
            else ""
        )
        if stalled:
            return row(
                Status.WARN,
                f"{inbox}: probe taken only after {latency}: {blocked_loop}; then {taker} that "
                f"could have taken it was back in its loop ({how}): a live process whose loop "
                "was blocked, not a dead one",
                "behaviour",
            )
        return row(
            Status.OK,
            f"{inbox}: probe consumed in {latency}; {taker} that could have taken it: back in "
            f"its loop ({how}) (proof: returned{note})",
            "inference" if queued else "proof",
        )


# ------------------------------------------------------------ the `probe-rater` command
COMMANDS = (
    CheckCommand(
        name="probe-rater",
        help="Only the rater probe: push one envelope into its inbox and time its consumption. "
        "Exit 0 consumed, 2 not consumed, 3 broker unreachable.",
        run="fleetcheck.checks.rater_probe.check:probe_rater_command",
        options=(
            CommandOption("--timeout", "How long the rater gets, e.g. 5s.", "duration", "DURATION"),
        ),
        report=True,
    ),
)


def probe_deadline(config: RaterProbeConfig, broker: BrokerConfig) -> float:
    """The patrol deadline of a lone probe: far past the probe's own bound, so the deadline
    never cuts it before it takes its envelope back."""
    per_call = broker.connect_timeout + broker.socket_timeout
    return 2 * config.timeout + 3 * (broker.retries + 1) * per_call + 10


def probe_rater_command(fleet: FleetConfig, timeout: float | None = None) -> Report:
    """`fleetcheck probe-rater`: the probe alone, with the config's `[checks.rater_probe]`
    (`timeout` overriding its own), under `probe_deadline`."""
    from dataclasses import replace

    from fleetcheck.config import ConfigError
    from fleetcheck.core.runner import Planned, run_patrol

    cfg = fleet.checks.get("rater_probe") or RaterProbeConfig()
    if timeout is not None:
        try:
            cfg = replace(cfg, timeout=timeout)
        except ValueError as e:
            raise ConfigError(f"--timeout: {getattr(e, 'message', e)}") from None
    patrol = replace(fleet.patrol, deadline=probe_deadline(cfg, fleet.broker))
    return run_patrol(replace(fleet, patrol=patrol), [Planned(CHECK, cfg, None)])


CHECK = RaterProbeCheck()


def _quote(text: str) -> str:
    """shlex.quote, imported when a fragment is built: validating a config (every patrol,
    also a broker-only one) imports this module and needs no shlex."""
    import shlex

    return shlex.quote(text)
