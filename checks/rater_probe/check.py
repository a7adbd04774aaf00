"""rater_probe's check: its declarations, the probe's course and its I/O with the broker and
the ack host (the settings are the package's, fleetcheck.checks.rater_probe; the facts and
their judgement `.facts`)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from functools import partial
from shlex import quote
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.rater_probe import RaterProbeConfig, render_payload
from fleetcheck.checks.rater_probe.facts import LIST_POPS, LoopFacts, ProbeFacts, follow, judge

from fleetcheck.config import BrokerConfig, FleetConfig, HostConfig
from fleetcheck.core.check import Check, CheckCommand, CommandOption, Commands, Key, cmd
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.errors import CheckError
from fleetcheck.core.hostfacts import logs_of
from fleetcheck.core.model import Report, Result
from fleetcheck.parse.clientlist import Client, parse_client_list
from fleetcheck.parse.duration import format_duration
from fleetcheck.transport.redis import supports

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.lab.demo import DemoFleet

RETURN_MIN_S = 2.0  # a taker gets at least this long after the take to be seen back
LOOK_EVERY_S = 0.05  # while ours waits, the watched connections are looked at this often
LOG_TAIL_BYTES = 4 * 1024 * 1024
GRACE_S = 5.0  # patrol time the probe needs beyond its timeout (ack, LREM, diagnosis)


@dataclass
class _Course:
    """The envelope's course: what the probe pushed and on what broker, the connections
    that could take it, and (as it goes) its course in the inbox to its take or the deadline."""

    r: Any  # the probe's own broker client
    config: RaterProbeConfig
    envelope: bytes
    start: float  # perf_counter at the push
    has_lpos: bool
    list_id: bool  # CLIENT LIST ID is there: the watched connections are read by id
    before: tuple[Client, ...] | None  # the connections at the push (None: not readable)
    consumed: bool = False
    latency_ms: float | None = None
    position: int | None = None
    last_seen: float = 0.0
    stall: float = 0.0
    looks: list[tuple[float, float, tuple[Client, ...]]] = field(default_factory=list)

    @property
    def deadline(self) -> float:
        return self.start + self.config.timeout


class RaterProbeCheck(Check[RaterProbeConfig, ProbeFacts]):
    name = "rater_probe"
    description = "pushes one probe envelope into the rater's inbox and times its consumption"
    demo_meaning = (
        "a test envelope pushed to the rater's inbox was not consumed in time: its "
        "loop is not running, whatever its process and log say (incidents 6, 7)"
    )
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

    def broker_commands(self, fleet: FleetConfig, config: RaterProbeConfig) -> Commands:
        """The push goes in one MULTI ... EXEC with CLIENT ID and LIST; the removal is LREM."""
        inbox = Key(config.inbox)
        out = [
            cmd("INFO"),
            cmd("TYPE", inbox),
            cmd("MULTI"),
            cmd(config.push.upper(), inbox, "x", writes=True),
            cmd("EXEC"),
            cmd("LREM", inbox, "0", "x", writes=True),
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
        info, ack_host = self._before_push(ctx, config)
        r = ctx.probe_broker()
        has_lpos = supports(info, "lpos")
        list_id = supports(info, "client_list_id")

        probe_id = str(uuid.uuid4())
        envelope = render_payload(config.payload, probe_id, time.time()).encode()
        start = time.perf_counter()
        pushed, failure, before = push(r, config, envelope)
        if failure is not None:
            if pushed is False:  # the broker answered with an error: nothing was written
                raise ctx.broker_error(failure) from None
            n, left = take_back(r, config.inbox, envelope)
            cleaned = (
                "COULD NOT check the inbox for it: look for it by its id"
                if left is None
                else f"removed again ({n} cop{'y' if n == 1 else 'ies'})"
                if n
                else "it is not in the inbox (not pushed, or already taken)"
            )
            raise CheckError(
                f"{config.inbox}: push uncertain ({ctx.broker_error(failure).reason}); {cleaned}"
            )
        length = int(pushed)
        wait = _Course(r, config, envelope, start, has_lpos, list_id, before)
        by_name, watch = candidates(before, config.client_name)
        try:
            # the watched connections are looked at while ours waits only where CLIENT LIST ID is
            self._wait_taken(wait, length, watch if list_id else ())
        except Exception as e:
            take_back(r, config.inbox, envelope)
            raise ctx.broker_error(e) from None

        removed, length_at_deadline = False, None
        if not wait.consumed:
            n_removed, length_at_deadline = take_back(r, config.inbox, envelope)
            removed = n_removed > 0
            if not removed:  # taken between our last look and the LREM: consumed, but late
                wait.consumed, wait.latency_ms = True, (time.perf_counter() - start) * 1000
                wait.position = None

        acked, ack_detail = None, ""
        loop: LoopFacts | None = None
        if wait.consumed and config.ack:
            acked, ack_detail = await_ack(ctx, wait, probe_id, ack_host)
        elif (
            wait.consumed
            and wait.latency_ms is not None
            and wait.latency_ms <= config.timeout * 1000
        ):
            loop = watch_return(wait, by_name, watch)
        raters = None  # read only when there is something to explain
        if not wait.consumed or acked is False:
            raters = look(r, name=config.client_name)
        return ProbeFacts(
            probe_id=probe_id,
            consumed=wait.consumed,
            latency_ms=None if wait.latency_ms is None else round(wait.latency_ms, 3),
            inbox_length=length - 1,
            position=wait.position,
            length_at_deadline=length_at_deadline,
            removed=removed,
            acked=acked,
            ack_detail=ack_detail,
            raters=raters,
            stall_ms=round(wait.stall * 1000, 3) if wait.consumed else None,
            loop=loop,
        )

    @staticmethod
    def _before_push(
        ctx: PatrolContext, config: RaterProbeConfig
    ) -> tuple[dict[str, Any], HostConfig | None]:
        """Everything that refuses the probe before anything is written: a timeout the patrol
        deadline would cut, a bad ack set-up, an inbox that is not a list. (INFO, ack host)"""
        deadline_s = ctx.fleet.patrol.deadline
        if config.timeout + GRACE_S > deadline_s:
            # cut by the patrol deadline, the probe could not take its envelope back
            raise CheckError(
                f"timeout {format_duration(config.timeout)} leaves less than "
                f"{format_duration(GRACE_S)} of the patrol deadline {format_duration(deadline_s)}: "
                "nothing pushed"
            )
        ctx.broker()
        ack_host = find_ack_host(ctx, config)  # refuse a bad ack setup before writing
        info = ctx.info()
        try:
            kind = ctx.broker().type(config.inbox)
        except Exception as e:
            raise ctx.broker_error(e) from None
        kind_text = kind.decode() if isinstance(kind, bytes) else str(kind)
        if kind_text not in ("list", "none"):
            raise CheckError(f"{config.inbox} is a {kind_text}, not a list: nothing pushed")
        return info, ack_host

    @staticmethod
    def _wait_taken(wait: _Course, length: int, watch: tuple[Client, ...]) -> None:
        """Poll where the envelope is until it is taken or the timeout, noting the longest
        time nothing ahead of it moved, and looking at the watched connections meanwhile."""
        r, config, start, deadline = wait.r, wait.config, wait.start, wait.deadline
        from_head = config.push == "rpush"  # consumers pop the other end
        window = length  # ours can only move towards the consumer's end
        wait.last_seen = start
        polls = 0
        last_progress = last_look = start
        while True:
            wait.position = position(
                r, config.inbox, wait.envelope, window, from_head, wait.has_lpos
            )
            now = time.perf_counter()
            if wait.position is None:
                wait.consumed, wait.latency_ms = True, (now - start) * 1000
                wait.stall = max(wait.stall, now - last_progress)
                return
            if wait.position < window - 1:  # entries ahead of ours were taken: the loop moves
                wait.stall = max(wait.stall, now - last_progress)
                last_progress = now
            wait.last_seen = now
            window = wait.position + 1
            if now >= deadline:
                return
            if watch and now - last_look >= LOOK_EVERY_S:
                seen = look(r, watch, True)
                last_look = time.perf_counter()
                if seen is not None:
                    wait.looks.append((last_look, last_look, seen))  # re-based on the take later
            polls += 1
            time.sleep(min(0.001 if polls < 200 else 0.005, max(0.0, deadline - now)))

    def evaluate(
        self, facts: ProbeFacts, config: RaterProbeConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        return judge(facts, config, partial(self.result, host))


# ------------------------------------------------------------ the broker I/O
def push(
    r: Any, config: RaterProbeConfig, envelope: bytes, watch: bool = True
) -> tuple[Any, Exception | None, tuple[Client, ...] | None]:
    """The push, sent exactly once on a connection of the probe's client (never its retry),
    in one MULTI with CLIENT ID and CLIENT LIST when `watch`: the connections as they are at
    the very moment of the push (who was waiting in a pop), in the same round trip; pushed
    again without them when the MULTI was refused for CLIENT (not permitted to this user:
    nothing was written). (reply, None, clients but our own or None) when it landed;
    (False, error, None) when the broker refused the push (nothing written); (None, error,
    None) when its fate is unknown."""
    import redis

    listing = [("CLIENT", "ID"), ("CLIENT", "LIST")] if watch else []
    commands = [("MULTI",), *listing, (config.push.upper(), config.inbox, envelope), ("EXEC",)]
    pool = r.connection_pool
    conn = pool.get_connection()  # connecting may retry: nothing is sent yet
    try:
        conn.send_packed_command(conn.pack_commands(commands))
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as e:
                replies.append(e)
    except Exception as e:
        conn.disconnect()
        return None, e, None
    finally:
        pool.release(conn)
    if isinstance(replies[0], Exception):  # MULTI refused: the push ran on its own
        result = [replies[-2]]
    elif isinstance(replies[-2], Exception):  # the push refused (EXECABORT): not written
        return False, replies[-2], None
    elif isinstance(replies[-1], Exception) or not isinstance(replies[-1], list):
        if watch:  # EXECABORT for CLIENT: nothing was written
            return push(r, config, envelope, watch=False)
        return None, RuntimeError(f"EXEC answered {replies[-1]!r}"), None
    else:
        result = replies[-1]
    if isinstance(result[-1], Exception):
        return False, result[-1], None
    if len(result) != 3 or any(isinstance(x, Exception) for x in result):
        return result[-1], None, None
    own, listing_raw, pushed = result
    try:
        clients = parse_client_list(listing_raw)
    except Exception:
        return pushed, None, None
    return pushed, None, tuple(c for c in clients if c.id != int(own))


def candidates(before: tuple[Client, ...] | None, pattern: str) -> tuple[bool, tuple[Client, ...]]:
    """The connections that could take the envelope: those named `client_name` when any
    is connected (the user said which they are), else every connection waiting in a
    list pop at the push (the broker does not say on which key)."""
    if not before:
        return False, ()
    named = tuple(c for c in before if fnmatchcase(c.name, pattern))
    if named:
        return True, named
    return False, tuple(c for c in before if c.blocked and c.cmd in LIST_POPS)


def look(
    r: Any, watch: tuple[Client, ...] = (), list_id: bool = False, name: str = "*"
) -> tuple[Client, ...] | None:
    """The connections as they are now (None: CLIENT LIST unreadable): the `watch`ed ones
    (read by id where CLIENT LIST ID is), or every one named `name`."""
    ids = [c.id for c in watch if c.id is not None]
    try:
        raw = r.execute_command("CLIENT", "LIST", *(("ID", *ids) if list_id else ()))
        clients = parse_client_list(raw)
    except Exception:
        return None
    wanted = set(ids)
    return tuple(c for c in clients if (c.id in wanted or not watch) and fnmatchcase(c.name, name))


def watch_return(wait: _Course, by_name: bool, watch: tuple[Client, ...]) -> LoopFacts:
    """Watch the connections that could have taken the envelope until each is back in
    its loop (or cannot have been the taker), or the deadline: the probe's own, but at
    least RETURN_MIN_S after the take. Looks come quick then slower (2 ms doubling to
    100 ms): a healthy loop is settled in one or two round trips. The take happened
    between ours last seen and first seen gone."""
    before, take_early = wait.before, wait.last_seen
    take_late = wait.start + (wait.latency_ms or 0.0) / 1000
    if before is None:
        return LoopFacts(seen=False, by_name=False)
    if not watch:
        return LoopFacts(seen=True, by_name=by_name)

    def rebased(t: float, seen: tuple[Client, ...]) -> tuple[float, float, tuple[Client, ...]]:
        return (t - take_late, t - take_early, seen)

    timeline = [rebased(t, seen) for t, _, seen in wait.looks]
    end = max(wait.deadline, take_late + RETURN_MIN_S)
    pause = 0.002
    while True:
        seen = look(wait.r, watch, wait.list_id)
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


def position(
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


def take_back(r: Any, inbox: str, envelope: bytes) -> tuple[int, int | None]:
    """LREM every copy of our (unique) envelope: (removed, inbox length afterwards; None:
    the inbox could not be read)."""
    try:
        pipe = r.pipeline(transaction=False)
        pipe.lrem(inbox, 0, envelope)
        pipe.llen(inbox)
        removed, length = pipe.execute()
        return int(removed), int(length)
    except Exception:
        return 0, None


def find_ack_host(ctx: PatrolContext, config: RaterProbeConfig) -> HostConfig | None:
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


def await_ack(
    ctx: PatrolContext, wait: _Course, probe_id: str, host: HostConfig | None
) -> tuple[bool | None, str]:
    config = wait.config
    assert config.ack is not None
    if config.ack == "log":
        assert host is not None
        return await_log(ctx, config, probe_id, host, wait.deadline)
    key = config.ack.split(":", 1)[1]
    r = ctx.probe_broker()
    ident = probe_id.encode()
    try:
        while True:
            if position(r, key, ident, 1000, True, wait.has_lpos) is not None:
                # the reply was for us: leave the list as it was
                r.lrem(key, 1, ident)  # type: ignore[arg-type]  # bytes are fine on the wire
                return True, f"id pushed to {key}"
            if time.perf_counter() >= wait.deadline:
                return False, f"id not pushed to {key} within {format_duration(config.timeout)}"
            time.sleep(0.002)
    except Exception as e:
        return None, f"reply list {key} unreadable: {ctx.broker_error(e).reason}"


def await_log(
    ctx: PatrolContext, config: RaterProbeConfig, probe_id: str, host: HostConfig, deadline: float
) -> tuple[bool | None, str]:
    path = config.ack_log or next(log.path for log in logs_of(host) if log.path)
    wait = max(0.0, deadline - time.perf_counter())
    # one exec that polls on the host (every exec costs the host a login shell)
    script = (
        f"f={quote(path)}; id={quote(probe_id)}; n={int(wait * 10) + 1}\n"
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
