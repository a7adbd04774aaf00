"""rater_probe: is the rater's loop alive? Push one envelope and watch it leave. (incidents 6, 7)

A process that exists and logs is not a loop that answers. The hard proof is behavioural: push
a uniquely marked envelope into the rater's inbox and see that exact envelope taken within the
timeout. Not taken: CRIT, and the envelope is removed again (LREM of exactly that value), so
the inbox holds what it held before. Taken is not yet processed: a process frozen inside its
`BLPOP key 0` still takes one envelope (the server hands it to the blocked connection). So the
push goes in one MULTI with CLIENT LIST (who waited in a pop at that very instant), and after
the take the connections that could have taken it are watched until each is back in its loop
(waiting in a pop again, a new command, its idle reset) or the deadline: a taker that did not
return is CRIT; a take after a stall past `max_latency` with nothing ahead moving is WARN, the
signature of a live process whose loop was blocked (field note 7). `ack` asks for the strongest
proof instead: the id in the rater's log, or the id pushed back to a reply list. Every row says
what it proved (`proof` in the evidence) and how strongly (its evidence strength).

This check is the only thing a patrol writes to the broker, and it writes at most once: the
push is sent once on a connection of its own, never retried (a retry after a timeout can land
a second copy). A push whose fate is unknown (the connection dropped before the reply) is
cleaned up by its unique envelope, every copy, before any verdict is given.

Its settings ([checks.rater_probe]) are here, the check in `.check` (why: fleetcheck.core.registry).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from fleetcheck.config import Duration, InvalidValue
from fleetcheck.core.judge import check_duration

DEFAULT_PAYLOAD = '{"type": "fleetcheck.probe", "id": "{id}", "sent_at": {sent_at}}'


@dataclass(frozen=True)
class RaterProbeConfig:
    inbox: str = "arena:rater:inbox"  # the list the rater pops from
    push: Literal["rpush", "lpush"] = "rpush"  # how producers add to the inbox
    timeout: Duration = 5.0  # the envelope must be taken (and acknowledged) within this
    payload: str = DEFAULT_PAYLOAD  # template; {id} and {sent_at} are filled in
    client_name: str = "rater"  # CLIENT SETNAME of the rater's connection (glob allowed)
    ack: str | None = None  # stronger proof: "log" or "reply:KEY"
    ack_host: str | None = None  # ack = "log": the host whose log shows the id
    ack_log: str | None = None  # ack = "log": that log's path (default: the host's first log)
    max_latency: Duration = 2.0  # taken later than this, nothing ahead moving: the loop was blocked

    def __post_init__(self) -> None:
        if not self.inbox:
            raise InvalidValue("inbox", "must not be empty")
        check_duration("timeout", self.timeout, at_most=300)
        check_duration("max_latency", self.max_latency, at_most=300)
        if "{id}" not in self.payload:
            raise InvalidValue("payload", "must contain {id} (the probe finds its envelope by it)")
        sample = render_payload(self.payload, "00000000-0000-4000-8000-000000000000", 0.0)
        if sample.lstrip().startswith(("{", "[")):
            try:
                json.loads(sample)
            except ValueError as e:
                raise InvalidValue("payload", f"looks like JSON but is not: {e}") from None
        if self.ack is not None:
            if self.ack == "log":
                if not self.ack_host:
                    raise InvalidValue("ack_host", 'ack = "log" needs ack_host (a host name)')
            elif not (self.ack.startswith("reply:") and len(self.ack) > len("reply:")):
                raise InvalidValue("ack", 'must be "log" or "reply:KEY"')
            if self.ack == f"reply:{self.inbox}":
                raise InvalidValue("ack", "the reply list must not be the inbox")


def render_payload(template: str, probe_id: str, sent_at: float) -> str:
    return template.replace("{id}", probe_id).replace("{sent_at}", f"{sent_at:.6f}")


CONFIG_TYPE = RaterProbeConfig
HOST_CONFIG_TYPE = None
