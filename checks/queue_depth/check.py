"""queue_depth's check: the probe, its facts and their judging (the settings are the package's,
fleetcheck.checks.queue_depth)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.queue_depth import QueueDepthConfig

from fleetcheck.config import FleetConfig, HostConfig, zone
from fleetcheck.core.check import Check, Commands, Key, cmd
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.declarations import ChartSpec, Line
from fleetcheck.core.errors import CheckError
from fleetcheck.core.judge import limit_text, worst
from fleetcheck.core.model import Result, Status
from fleetcheck.parse.duration import format_duration
from fleetcheck.parse.instant import parse_instant

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.core.discovery import Draft, Sample
    from fleetcheck.lab.demo import DemoFleet


@dataclass(frozen=True)
class Head:
    """The next job of one list, as far as we could read its enqueue time."""

    enqueued_at: float | None
    problem: str | None  # why no enqueue time was read ("not JSON", "no enqueued_at", ...)


@dataclass(frozen=True)
class QueueFacts:
    samples: tuple[dict[str, int], ...]  # per sample: key -> length
    heads: dict[str, Head] = field(default_factory=dict)  # at the last sample, non-empty lists
    read_at: float = 0.0  # epoch of the last sample (head ages are measured from it)


def read_head(raw: bytes | None, enqueued_field: str, assume_tz: Any = None) -> Head | None:
    """Pure: the enqueue time of a head job, None for an empty list."""
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return Head(None, "not JSON")
    except RecursionError:  # nested past the parser's depth: a worker's data, not our bug
        return Head(None, "not JSON (nested too deep)")
    if not isinstance(doc, dict):
        return Head(None, "not a JSON object")
    if enqueued_field not in doc:
        return Head(None, f"no {enqueued_field}")
    try:
        return Head(parse_instant(doc[enqueued_field], assume_tz), None)
    except ValueError as e:
        return Head(None, f"{enqueued_field}: {e}")


class QueueDepthCheck(Check[QueueDepthConfig, QueueFacts]):
    name = "queue_depth"
    description = "summed queue depth against the enqueue cap, and the age of each queue's head"
    headline = "depth"
    charts = (
        ChartSpec(
            "queue",
            "Queue depth (summed) against the cap",
            "over the cap: the enqueue guard is not holding (a race), not a busy fleet",
            lines=(Line("depth", "summed depth"), Line("cap", limit=True)),
            place=10,
        ),
    )
    example = """\
[checks.queue_depth]
keys = ["arena:queue", "arena:queue:processing"]   # lists whose lengths sum to the depth (required)
cap = 100                        # the enqueue guard's cap on the summed depth (required)
warn_at = 0.8                    # WARN at or above this share of the cap
samples = 3                      # readings per patrol, all reported, judged on the max
interval = "1s"                  # time between readings
push = "rpush"                   # how jobs are added ("rpush"/"lpush"; the head is the other end)
enqueued_field = "enqueued_at"   # JSON field with the enqueue time (epoch or ISO 8601)
# max_wait = "10m"               # WARN when a head job has waited longer than this
# naive_tz = "UTC"               # zone for ISO times written without offset
"""
    demo_meaning = (
        "the summed depth is over the cap, which proves the enqueue guard is not "
        "holding (a check-then-act race), not merely that the fleet is busy (incident 2)"
    )

    def broker_commands(self, fleet: FleetConfig, config: QueueDepthConfig) -> Commands:
        head = "0" if config.push == "rpush" else "-1"
        return tuple(
            c
            for key in config.keys
            for c in (
                cmd("LLEN", Key(key)),
                cmd("LINDEX", Key(key), head),
                cmd("TYPE", Key(key)),
            )
        )

    def discover_draft(self, sample: Sample) -> Draft | None:
        """Lists that look like queues, and those their consumers or frameworks name."""
        from fleetcheck.core.discovery import TODO, Draft, comment, queue_guesses, toml_str

        lines = []
        queues = queue_guesses(sample.keys)
        sized = {k.key: k.size for k in sample.keys if k.type == "list"}
        extra = [q for q in sorted(sample.consumer_queues) if q not in {k.key for k in queues}]
        blocked = sum(1 for c in sample.clients if "b" in c.flags)
        if blocked:
            lines.append(
                f"# {blocked} clients wait in a blocking pop: CLIENT LIST names the command, "
                "not its keys; the queues below come from the keys and known frameworks' shapes"
            )
        if not (queues or extra):
            return Draft((*lines, "# no list looked like a queue"))
        names = [k.key for k in queues] + extra
        keys = ", ".join(toml_str(k) for k in names)
        sizes = ", ".join(f"{k} {sized.get(k, 0)}" for k in names)
        lines += ["[checks.queue_depth]", f"keys = [{keys}]  # lengths now: {comment(sizes)}"]
        lines += [
            f"#   {comment(q)}: {comment(sample.consumer_queues[q])} (empty now)"
            for q in extra
            if sized.get(q, 0) == 0
        ]
        lines.append(f'cap = "{TODO}"  # TODO: the cap your enqueue guard enforces on their sum')
        return Draft(tuple(lines), tuple(names))

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """167 jobs queued or in flight against a cap of 100."""
        jobs = [json.dumps({"id": i, "enqueued_at": fleet.now - 300 + i}) for i in range(120)]
        with fleet.lab.client() as r:
            r.rpush("arena:queue", *jobs)
            r.rpush("arena:queue:processing", *[json.dumps({"id": i}) for i in range(47)])
        return 'keys = ["arena:queue", "arena:queue:processing"]\ncap = 100\nsamples = 1'

    def probe(
        self, ctx: PatrolContext, host: HostConfig | None, config: QueueDepthConfig
    ) -> QueueFacts:
        import redis

        r = ctx.broker()
        head_index = 0 if config.push == "rpush" else -1
        tz = zone(config.naive_tz, "naive_tz") if config.naive_tz else None
        samples: list[dict[str, int]] = []
        heads: dict[str, Head] = {}
        read_at = 0.0
        for i in range(config.samples):
            if i:
                time.sleep(config.interval)
            last = i == config.samples - 1
            keys = config.keys * (2 if last else 1)  # lengths, then (last) each list's head
            pipe = r.pipeline(transaction=False)
            for key in config.keys:
                pipe.llen(key)
            for key in keys[len(config.keys) :]:
                pipe.lindex(key, head_index)
            try:
                replies = pipe.execute(raise_on_error=False)
            except Exception as e:
                raise ctx.broker_error(e) from None
            read_at = time.time()
            for key, reply in zip(keys, replies, strict=True):
                if isinstance(reply, redis.ResponseError) and "WRONGTYPE" in str(reply):
                    raise CheckError(f"{key} is a {self._type(ctx, key)}, not a list")
                if isinstance(reply, Exception):
                    raise ctx.broker_error(reply)
            n = len(config.keys)
            samples.append({k: int(v) for k, v in zip(config.keys, replies[:n], strict=True)})
            for key, raw in zip(keys[n:], replies[n:], strict=True):
                head = read_head(raw, config.enqueued_field, tz)
                if head is not None:
                    heads[key] = head
        return QueueFacts(tuple(samples), heads, read_at)

    @staticmethod
    def _type(ctx: PatrolContext, key: str) -> str:
        try:
            raw = ctx.broker().type(key)
        except Exception:
            return "value of another type"
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    def evaluate(
        self, facts: QueueFacts, config: QueueDepthConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        if not facts.samples:
            return self.result(host, Status.UNKNOWN, "no queue samples were taken")
        depths = [sum(s.values()) for s in facts.samples]
        peak = max(range(len(depths)), key=lambda i: depths[i])
        depth, lengths, cap = depths[peak], facts.samples[peak], config.cap
        spread = ", ".join(f"{k} {n}" for k, n in lengths.items())
        seen = f" (samples {', '.join(map(str, depths))})" if len(depths) > 1 else ""
        if depth > cap:
            status = Status.CRIT
            summary = f"depth {depth} > cap {cap}: the enqueue guard is not holding ({spread})"
        elif depth >= config.warn_at * cap:
            status = Status.WARN
            summary = (
                f"depth {depth} is {depth / cap:.0%} of cap {cap} "
                f"(warn at {config.warn_at:.0%}; {spread})"
            )
        else:
            status = Status.OK
            summary = f"depth {depth} of cap {cap} ({spread})"
        summary += seen

        waits: dict[str, float] = {}
        unreadable: dict[str, str] = {}
        for key, head in facts.heads.items():
            if head.enqueued_at is None:
                unreadable[key] = head.problem or "unreadable"
            else:
                waits[key] = round(max(0.0, facts.read_at - head.enqueued_at), 3)
        metrics: dict[str, Any] = {"depth": depth, "lengths": lengths}
        evidence: dict[str, Any] = {"samples": depths}
        if waits:
            oldest_key = max(waits, key=lambda k: waits[k])
            oldest = waits[oldest_key]
            metrics["oldest_wait_s"] = oldest
            evidence["wait_by_key"] = waits
            summary += f"; oldest head job waited {format_duration(oldest)} ({oldest_key})"
            if config.max_wait is not None and oldest > config.max_wait:
                status = worst([status, Status.WARN])
                summary += f" > {limit_text('max_wait', config.max_wait)}"
        if unreadable:
            evidence["head_unreadable"] = unreadable
            if config.max_wait is not None:
                status = worst([status, Status.UNKNOWN])
                summary += "; head age unknown for " + ", ".join(
                    f"{k} ({why})" for k, why in unreadable.items()
                )
        return self.result(
            host, status, summary, metrics=metrics, evidence=evidence or None, limits={"cap": cap}
        )


CHECK = QueueDepthCheck()
