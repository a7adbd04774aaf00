"""rater_probe's check: its declarations and the probe's course (the settings are the
package's, fleetcheck.checks.rater_probe; the broker I/O is `.broker_io`, the facts `.facts`, the
judgement `.judging`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.rater_probe import RaterProbeConfig, render_payload
from fleetcheck.checks.rater_probe import broker_io as bio
from fleetcheck.checks.rater_probe.facts import (
    GRACE_S,
    LOOK_EVERY_S,
    LoopFacts,
    ProbeFacts,
)
from fleetcheck.checks.rater_probe.judging import judge

from fleetcheck.config import BrokerConfig, FleetConfig, HostConfig
from fleetcheck.core.check import (
    Check,
    CheckCommand,
    CommandOption,
    Commands,
    Key,
    cmd,
)
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.errors import CheckError
from fleetcheck.core.model import Report, Result
from fleetcheck.parse.clientlist import Client
from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.lab.demo import DemoFleet


@dataclass
class _Wait:
    """The envelope's course in the inbox, up to its take or the deadline."""

    consumed: bool = False
    latency_ms: float | None = None
    position: int | None = None
    last_seen: float = 0.0
    stall: float = 0.0


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
        from fleetcheck.transport.redis import supports

        info, ack_host = self._before_push(ctx, config)
        r = ctx.probe_broker()
        has_lpos = supports(info, "lpos")
        list_id = supports(info, "client_list_id")

        import uuid

        probe_id = str(uuid.uuid4())
        envelope = render_payload(config.payload, probe_id, time.time()).encode()
        start = time.perf_counter()
        pushed, failure, before = bio.push(r, config.push.upper(), config, envelope)
        if failure is None and pushed is None:  # the MULTI was refused: nothing written
            start = time.perf_counter()
            pushed, failure, _ = bio.push(r, config.push.upper(), config, envelope, watch=False)
        if failure is not None:
            if pushed is False:  # the broker answered with an error: nothing was written
                raise ctx.broker_error(failure) from None
            n, left = bio.take_back(r, config.inbox, envelope)
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
        deadline = start + config.timeout
        by_name, watch = bio.candidates(before, config.client_name)
        looks: list[tuple[float, float, tuple[Client, ...]]] = []
        try:
            # the watched connections are looked at while ours waits only where CLIENT LIST ID is
            watching = watch if list_id else ()
            wait = self._wait_taken(r, config, envelope, length, start, has_lpos, watching, looks)
        except Exception as e:
            bio.take_back(r, config.inbox, envelope)
            raise ctx.broker_error(e) from None

        removed, length_at_deadline = False, None
        if not wait.consumed:
            n_removed, length_at_deadline = bio.take_back(r, config.inbox, envelope)
            removed = n_removed > 0
            if not removed:  # taken between our last look and the LREM: consumed, but late
                wait.consumed, wait.latency_ms = True, (time.perf_counter() - start) * 1000
                wait.position = None

        acked, ack_detail = None, ""
        loop: LoopFacts | None = None
        if wait.consumed and config.ack:
            acked, ack_detail = bio.await_ack(ctx, config, probe_id, ack_host, deadline, has_lpos)
        elif (
            wait.consumed
            and wait.latency_ms is not None
            and wait.latency_ms <= config.timeout * 1000
        ):
            take_late, take_early = start + wait.latency_ms / 1000, wait.last_seen
            loop = bio.watch_return(
                r, before, by_name, watch, looks, list_id, take_early, take_late, deadline
            )
        raters: tuple[Client, ...] | None = None  # read only when the probe fails
        if not wait.consumed or acked is False:  # read only when there is something to explain
            raters = bio.raters(r, config.client_name)
        return ProbeFacts(
            inbox=config.inbox,
            probe_id=probe_id,
            timeout=config.timeout,
            consumed=wait.consumed,
            latency_ms=None if wait.latency_ms is None else round(wait.latency_ms, 3),
            inbox_length=length - 1,
            position=wait.position,
            length_at_deadline=length_at_deadline,
            removed=removed,
            ack=config.ack,
            acked=acked,
            ack_detail=ack_detail,
            raters=raters,
            rater_pattern=config.client_name,
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
        ack_host = bio.ack_host(ctx, config)  # refuse a bad ack setup before writing
        try:
            info = ctx.info()
            kind = ctx.broker().type(config.inbox)
        except CheckError:
            raise
        except Exception as e:
            raise ctx.broker_error(e) from None
        kind_text = kind.decode() if isinstance(kind, bytes) else str(kind)
        if kind_text not in ("list", "none"):
            raise CheckError(f"{config.inbox} is a {kind_text}, not a list: nothing pushed")
        return info, ack_host

    @staticmethod
    def _wait_taken(
        r: Any,
        config: RaterProbeConfig,
        envelope: bytes,
        length: int,
        start: float,
        has_lpos: bool,
        watch: tuple[Client, ...],
        looks: list[tuple[float, float, tuple[Client, ...]]],
    ) -> _Wait:
        """Poll where the envelope is until it is taken or the timeout, noting the longest
        time nothing ahead of it moved, and looking at the watched connections meanwhile."""
        from_head = config.push == "rpush"  # consumers pop the other end
        deadline = start + config.timeout
        window = length  # ours can only move towards the consumer's end
        wait = _Wait(last_seen=start)
        polls = 0
        last_progress = last_look = start
        while True:
            wait.position = bio.position(r, config.inbox, envelope, window, from_head, has_lpos)
            now = time.perf_counter()
            if wait.position is None:
                wait.consumed, wait.latency_ms = True, (now - start) * 1000
                wait.stall = max(wait.stall, now - last_progress)
                return wait
            if wait.position < window - 1:  # entries ahead of ours were taken: the loop moves
                wait.stall = max(wait.stall, now - last_progress)
                last_progress = now
            wait.last_seen = now
            window = wait.position + 1
            if now >= deadline:
                return wait
            if watch and now - last_look >= LOOK_EVERY_S:
                seen = bio.look(r, watch, True)
                last_look = time.perf_counter()
                if seen is not None:
                    looks.append((last_look, last_look, seen))  # re-based on the take later
            polls += 1
            time.sleep(min(0.001 if polls < 200 else 0.005, max(0.0, deadline - now)))

    def evaluate(
        self, facts: ProbeFacts, config: RaterProbeConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        return judge(facts, config, partial(self.result, host))


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
