"""broker: the broker's own health, from one PING and one INFO round trip. (incident 8)

A shared Redis/Valkey can fail while CPU and memory look fine: it runs out of client slots
(connect timeouts, rejected connections), it evicts queued jobs under memory pressure (any
policy but noeviction while queues live inside), it turns into a replica, or its replication
link drops. A broker that is down (the connection refused, no route to it, or accepted and
then no answer within socket_timeout: a hung or stopped server) or that answers but refuses
to serve (max clients, LOADING, BUSY, MISCONF, out of memory) is the failure itself: CRIT
here, "could not look" on the other rows, all with the same cause. What keeps fleetcheck
itself from looking (a wrong password, a certificate it will not trust) is UNKNOWN here too.

Counters that only grow (rejected connections, evicted and expired keys) are judged by their
increase since the previous round, read from the state file: one rejection months ago must
not warn until the next restart. The since-start totals stay in the evidence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fleetcheck.config import Duration, FleetConfig, HostConfig
from fleetcheck.core.brokerlink import BrokerFailed, BrokerRefused
from fleetcheck.core.check import Check, Commands, cmd
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.errors import CheckError
from fleetcheck.core.judge import Findings, check_count, check_duration, check_share, exceeds
from fleetcheck.core.model import Result, Status
from fleetcheck.parse.duration import format_duration
from fleetcheck.transport.redis import REFUSED_CONNECTIONS

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.core.discovery import Draft, Sample
    from fleetcheck.lab.demo import DemoFleet


@dataclass(frozen=True)
class BrokerHealthConfig:
    max_ping: Duration = 0.05  # WARN when a PING round trip takes longer
    clients_warn_at: float = 0.8  # WARN at this share of maxclients
    memory_warn_at: float = 0.8  # WARN at this share of maxmemory (when maxmemory is set)
    require_noeviction: bool = True  # WARN on any other maxmemory_policy (queues live here)
    max_rejected: int | None = 0  # WARN past this many connections rejected since the last round
    max_evicted: int | None = 0  # WARN past this many keys evicted since the last round
    max_expired: int | None = None  # WARN past this many keys expired since then (None: report)
    max_blocked: int | None = None  # WARN past this many blocked clients (None: report only)
    max_replica_lag: Duration = 10.0  # WARN when a replica lags its master by more

    def __post_init__(self) -> None:
        check_duration("max_ping", self.max_ping)
        for key in ("clients_warn_at", "memory_warn_at"):
            check_share(key, getattr(self, key))
        check_duration("max_replica_lag", self.max_replica_lag)
        for key in ("max_rejected", "max_evicted", "max_expired", "max_blocked"):
            check_count(key, getattr(self, key))


COUNTERS = {
    "rejected_connections": ("max_rejected", "connections rejected (maxclients reached)"),
    "evicted_keys": ("max_evicted", "keys evicted (maxmemory_policy)"),
    "expired_keys": ("max_expired", "keys expired"),
}


@dataclass(frozen=True)
class BrokerFacts:
    ping_ms: float
    info: dict[str, Any]
    previous: dict[str, Any] | None = None  # what the previous round carried (state file)
    master: str | None = None  # "host:port (via sentinel SERVICE)" when the sentinels chose it


def replicas(info: dict[str, Any]) -> list[dict[str, Any]]:
    """INFO replication's slaveN entries, in order (redis-py parses each into a dict)."""
    entries = (info.get(f"slave{i}") for i in range(_int(info, "connected_slaves") or 0))
    return [e for e in entries if isinstance(e, dict)]


def increases(
    info: dict[str, Any], previous: dict[str, Any] | None
) -> dict[str, tuple[int | None, int | None]]:
    """Per counter: (since start, since the previous round or None when there is no usable
    baseline). A restart (another run_id, or a counter that went down) starts a new baseline
    at zero, so the whole since-start total counts as new."""
    out: dict[str, tuple[int | None, int | None]] = {}
    restarted = previous is not None and previous.get("run_id") != info.get("run_id")
    for key in COUNTERS:
        total = _int(info, key)
        before: Any = (previous or {}).get(key)  # an int when it is a baseline
        if total is None or previous is None or not (restarted or isinstance(before, int)):
            out[key] = (total, None)
        elif restarted or total < before:  # a restart, or CONFIG RESETSTAT
            out[key] = (total, total)
        else:
            out[key] = (total, total - before)
    return out


def refused_summary(e: BrokerFailed, previous: dict[str, Any] | None) -> str:
    """The CRIT line for a failed broker, with the limit it hit when a round saw it."""
    text = e.cause
    if isinstance(e, BrokerRefused) and e.kind == REFUSED_CONNECTIONS:
        limit = (previous or {}).get("maxclients")
        if isinstance(limit, int):
            text += f" (maxclients {limit} reached, as of the previous round)"
    return text


def _int(info: dict[str, Any], key: str) -> int | None:
    try:
        return int(info[key])
    except (KeyError, TypeError, ValueError):
        return None


class BrokerHealthCheck(Check[BrokerHealthConfig, BrokerFacts]):
    name = "broker"
    description = "broker health: PING latency, version, role, clients, memory, eviction policy"
    headline = "ping_s"
    example = """\
[checks.broker]
max_ping = "50ms"                # WARN when a PING round trip takes longer
clients_warn_at = 0.8            # WARN at this share of maxclients
memory_warn_at = 0.8             # WARN at this share of maxmemory (when maxmemory is set)
require_noeviction = true        # WARN on any other maxmemory_policy (queues live in the broker)
max_rejected = 0                 # WARN past this many connections rejected since the previous round
max_evicted = 0                  # WARN past this many keys evicted since the previous round
# max_expired = 100000           # WARN past this many keys expired since then (unset: report only)
max_replica_lag = "10s"          # WARN when a replica lags its master by more
# max_blocked = 100              # WARN past this many blocked clients (unset: report only)
"""
    demo_meaning = "the broker itself is unhealthy or misconfigured (incident 8)"

    def broker_commands(self, fleet: FleetConfig, config: BrokerHealthConfig) -> Commands:
        return (cmd("INFO"),)

    def discover_draft(self, sample: Sample) -> Draft | None:
        from fleetcheck.core.discovery import Draft

        return Draft(("[checks.broker]",))

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """Nothing planted: the demo's broker is healthy (on a busy laptop or CI runner its
        PING may take longer than the production 50ms: not one of its stories)."""
        return 'max_ping = "1s"'

    def probe(
        self, ctx: PatrolContext, host: HostConfig | None, config: BrokerHealthConfig
    ) -> BrokerFacts:
        previous = ctx.carried(self.name, host)
        try:
            ping_ms = self._ping_ms(ctx)
            info = ctx.info()
        except BrokerFailed as e:
            raise CheckError(
                refused_summary(e, previous),
                Status.CRIT,
                cause=e.cause,
                strength=e.failure_strength,
            ) from None
        via = f"via sentinel {ctx.fleet.broker.service}"
        master = None if ctx.master is None else f"{ctx.master[0]}:{ctx.master[1]} ({via})"
        return BrokerFacts(round(ping_ms, 3), info, previous, master)

    @staticmethod
    def _ping_ms(ctx: PatrolContext) -> float:
        """One PING's round trip on the patrol's connection, timed once the connection is
        ours: other broker checks share it, and waiting for it is not the broker's latency."""
        r = ctx.broker()
        pool = r.connection_pool
        try:
            conn = pool.get_connection()
        except Exception as e:
            raise ctx.broker_error(e) from None
        try:
            start = time.perf_counter()
            conn.send_command("PING")
            conn.read_response()
            return (time.perf_counter() - start) * 1000
        except Exception as e:
            conn.disconnect()
            raise ctx.broker_error(e) from None
        finally:
            pool.release(conn)

    def evaluate(
        self, facts: BrokerFacts, config: BrokerHealthConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        from fleetcheck.transport.redis import server_identity

        info = facts.info
        server, version = server_identity(info)
        version_text = ".".join(map(str, version)) or "?"
        role = str(info.get("role", "?"))
        clients, maxclients = _int(info, "connected_clients"), _int(info, "maxclients")
        used, maxmem = _int(info, "used_memory"), _int(info, "maxmemory")
        policy = str(info.get("maxmemory_policy", "?"))
        metrics: dict[str, Any] = {
            "ping_s": round(facts.ping_ms / 1000, 6),
            "connected_clients": clients,
            "maxclients": maxclients,
            "rejected_connections": _int(info, "rejected_connections"),
            "used_memory_bytes": used,
            "maxmemory_bytes": maxmem,
            "blocked_clients": _int(info, "blocked_clients"),
        }
        evidence: dict[str, Any] = {
            "server": server,
            "version": version_text,
            "role": role,
            "master": facts.master,
            "maxmemory_policy": policy,
        }
        findings = Findings()
        _judge_role(info, role, evidence, findings)
        if facts.ping_ms > config.max_ping * 1000:
            findings.warn(f"PING took {facts.ping_ms:.1f} ms (> {config.max_ping * 1000:g} ms)")
        if clients is not None and maxclients:
            share = clients / maxclients
            metrics["clients_ratio"] = round(share, 4)
            if share >= config.clients_warn_at:
                findings.warn(
                    f"{clients} of maxclients {maxclients} connections ({share:.0%}): "
                    "new clients will be refused"
                )
        totals = _judge_counters(info, facts.previous, config, metrics, findings)
        carry: dict[str, Any] = {"run_id": info.get("run_id"), "maxclients": maxclients}
        carry.update({k: v for k, v in totals.items() if v is not None})
        shown_replicas = _judge_replicas(info, config.max_replica_lag, findings)
        if role == "master":
            metrics["replicas"] = len(shown_replicas)
        _judge_memory(used, maxmem, policy, config, metrics, findings)
        blocked = metrics["blocked_clients"]
        if blocked is not None and exceeds(blocked, config.max_blocked):
            findings.warn(f"{blocked} blocked clients (> {config.max_blocked})")

        head = f"{server} {version_text} {role}"
        if facts.master is not None:
            head += f" {facts.master}"
        if shown_replicas:
            head += ", " + ", ".join(
                f"replica {r['addr']} {r['state']}"
                + (f" lag {r['lag_s']}s" if r["lag_s"] is not None else "")
                for r in shown_replicas
            )
        head += f", ping {facts.ping_ms:.1f} ms"
        evidence["since_start"] = totals
        if shown_replicas:
            evidence["replicas"] = shown_replicas
        detail = f"{clients} clients" + (f" of {maxclients}" if maxclients else "")
        if findings:
            evidence["findings"] = findings.evidence()
        return self.result(
            host,
            findings.status,
            findings.summary(head, detail),
            metrics=metrics,
            evidence=evidence,
            carry=carry,
        )


def _judge_role(
    info: dict[str, Any], role: str, evidence: dict[str, Any], findings: Findings
) -> None:
    """A replica is read-only (WARN); one whose link to its master is down is CRIT."""
    if role != "slave":
        return
    link = str(info.get("master_link_status", "?"))
    evidence["master_link_status"] = link
    master = f"{info.get('master_host', '?')}:{info.get('master_port', '?')}"
    if link != "up":
        findings.crit(f"replica of {master} with its link {link}")
    else:
        findings.warn(f"is a read-only replica of {master}")


def _judge_counters(
    info: dict[str, Any],
    previous: dict[str, Any] | None,
    config: BrokerHealthConfig,
    metrics: dict[str, Any],
    findings: Findings,
) -> dict[str, int | None]:
    """Each growing counter judged by its increase since the previous round; the totals."""
    totals = {}
    for key, (total, grown) in increases(info, previous).items():
        limit_key, what = COUNTERS[key]
        limit = getattr(config, limit_key)
        metrics[f"{key}_increase"] = grown
        totals[key] = total
        if grown is not None and exceeds(grown, limit):
            findings.warn(f"{grown} {what} since the previous round ({total} since start)")
    return totals


def _judge_replicas(
    info: dict[str, Any], lag_limit: float, findings: Findings
) -> list[dict[str, Any]]:
    """A replica not online, or lagging more than max_replica_lag, is a WARN; the list."""
    shown = []
    for rep in replicas(info):
        where = f"{rep.get('ip', '?')}:{rep.get('port', '?')}"
        state = str(rep.get("state", "?"))
        lag = _int(rep, "lag")
        shown.append({"addr": where, "state": state, "lag_s": lag})
        if state != "online":
            findings.warn(f"replica {where} is {state}, not online")
        elif lag is not None and lag > lag_limit:
            lags = f"lags {format_duration(lag)} (> {format_duration(lag_limit)})"
            findings.warn(f"replica {where} {lags}")
    return shown


def _judge_memory(
    used: int | None,
    maxmem: int | None,
    policy: str,
    config: BrokerHealthConfig,
    metrics: dict[str, Any],
    findings: Findings,
) -> None:
    """Full memory under noeviction is CRIT (writes refused); a high share, or any policy
    that may evict queued jobs, WARN."""
    if used is not None and maxmem:
        share = used / maxmem
        metrics["memory_ratio"] = round(share, 4)
        if used >= maxmem and policy == "noeviction":
            findings.crit(
                f"memory full ({used} of maxmemory {maxmem} bytes, noeviction): "
                "writes are refused (OOM)"
            )
        elif share >= config.memory_warn_at:
            findings.warn(f"memory {share:.0%} of maxmemory ({used} of {maxmem} bytes)")
    if config.require_noeviction and policy != "noeviction":
        findings.warn(
            f"maxmemory_policy {policy}: queued jobs can be evicted silently "
            "(noeviction turns that into a loud write error)"
        )


CHECK = BrokerHealthCheck()
