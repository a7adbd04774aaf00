"""queue_depth: queue depth against the backpressure cap, and how old the head is.
(incidents 2 and 8)

Depth is the sum of LLEN over several lists (pending plus in-flight), read in one pipelined
round trip per sample. A depth over the cap is not "busy": the cap is enforced by the enqueue
path, so going past it proves the guard is broken (a check-then-act race). Several samples are
taken, all reported, judged on the largest. Where jobs are JSON with an enqueue time, the age
of each list's head (the next job out) is reported too: a short queue can still hold a job that
has waited for two hours.

Its settings ([checks.queue_depth]) are here, the check in `.check` (why: fleetcheck.core.registry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fleetcheck.config import Duration, InvalidValue, zone
from fleetcheck.core.judge import check_count, check_duration, check_share


@dataclass(frozen=True)
class QueueDepthConfig:
    keys: tuple[str, ...]  # the lists whose lengths add up to the depth (required)
    cap: int  # the enqueue guard's cap on the summed depth (required)
    warn_at: float = 0.8  # WARN at or above this share of the cap
    samples: int = 3  # readings per patrol
    interval: Duration = 1.0  # time between readings
    push: Literal["rpush", "lpush"] = "rpush"  # how producers add jobs (the head is the other end)
    enqueued_field: str = "enqueued_at"  # JSON field with the enqueue time (epoch or ISO 8601)
    max_wait: Duration | None = None  # WARN when a head job has waited longer than this
    naive_tz: str | None = None  # zone for ISO times written without offset

    def __post_init__(self) -> None:
        if not self.keys:
            raise InvalidValue("keys", "list at least one queue key")
        if len(set(self.keys)) != len(self.keys):
            raise InvalidValue("keys", "a key is listed twice (it would be counted twice)")
        if any(not k for k in self.keys):
            raise InvalidValue("keys", "a key must not be empty")
        check_count("cap", self.cap, minimum=1)
        check_share("warn_at", self.warn_at, of=" of the cap")
        check_count("samples", self.samples, minimum=1, maximum=60)
        check_duration("interval", self.interval, positive=False, at_most=60)
        check_duration("max_wait", self.max_wait)
        if self.naive_tz is not None:
            zone(self.naive_tz, "naive_tz")

    def queues(self) -> tuple[str, ...]:
        """The fleet's queues these settings name (fleetcheck.core.hostfacts.fleet_queues)."""
        return self.keys


CONFIG_TYPE = QueueDepthConfig
HOST_CONFIG_TYPE = None
