"""broker: the broker's own health, from one PING and one INFO round trip. (FIELD-NOTES 8)

A shared Redis/Valkey can fail while CPU and memory look fine: it runs out of client slots
(connect timeouts, rejected connections), it evicts queued jobs under memory pressure (any
policy but noeviction while queues live inside), it turns into a replica, or its replication
link drops. An unreachable broker is reported by the context with one reason for every
broker-side row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleetcheck.check import Check, Scope
from fleetcheck.config import Duration, HostConfig, InvalidValue
from fleetcheck.context import PatrolContext
from fleetcheck.model import Result, Status


@dataclass(frozen=True)
class BrokerHealthConfig:
    max_ping: Duration = 0.05  # WARN when a PING round trip takes longer
    clients_warn_at: float = 0.8  # WARN at this share of maxclients
    memory_warn_at: float = 0.8  # WARN at this share of maxmemory (when maxmemory is set)
    require_noeviction: bool = True  # WARN on any other maxmemory_policy (queues live here)
    max_rejected: int | None = 0  # WARN past this many rejected connections since start
    max_blocked: int | None = None  # WARN past this many blocked clients (None: report only)

    def __post_init__(self) -> None:
        if self.max_ping <= 0:
            raise InvalidValue("max_ping", "must be longer than 0s")
        for key in ("clients_warn_at", "memory_warn_at"):
            if not 0 < getattr(self, key) <= 1:
                raise InvalidValue(key, "must be a share above 0 and at most 1")
        for key in ("max_rejected", "max_blocked"):
            value = getattr(self, key)
            if value is not None and value < 0:
                raise InvalidValue(key, "must be 0 or more")


@dataclass(frozen=True)
class BrokerFacts:
    ping_ms: float
    info: dict[str, Any]


def _int(info: dict[str, Any], key: str) -> int | None:
    try:
        return int(info[key])
    except (KeyError, TypeError, ValueError):
        return None


class BrokerHealthCheck(Check[BrokerHealthConfig, BrokerFacts]):
    name = "broker"
    description = "broker health: PING latency, version, role, clients, memory, eviction policy"
    scope = Scope.BROKER
    config_type = BrokerHealthConfig

    def probe(
        self, ctx: PatrolContext, host: HostConfig | None, config: BrokerHealthConfig
    ) -> BrokerFacts:
        r = ctx.broker()
        try:
            start = time.perf_counter()
            r.ping()
            ping_ms = (time.perf_counter() - start) * 1000
        except Exception as e:
            raise ctx.broker_error(e) from None
        return BrokerFacts(round(ping_ms, 3), ctx.info())

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
        rejected = _int(info, "rejected_connections")
        blocked = _int(info, "blocked_clients")
        metrics: dict[str, Any] = {
            "ping_ms": facts.ping_ms,
            "server": server,
            "version": version_text,
            "role": role,
            "connected_clients": clients,
            "maxclients": maxclients,
            "rejected_connections": rejected,
            "used_memory": used,
            "maxmemory": maxmem,
            "maxmemory_policy": policy,
            "blocked_clients": blocked,
        }
        findings: list[tuple[Status, str]] = []
        if role == "slave":
            link = str(info.get("master_link_status", "?"))
            metrics["master_link_status"] = link
            master = f"{info.get('master_host', '?')}:{info.get('master_port', '?')}"
            if link != "up":
                findings.append((Status.CRIT, f"replica of {master} with its link {link}"))
            else:
                findings.append((Status.WARN, f"is a read-only replica of {master}"))
        if facts.ping_ms > config.max_ping * 1000:
            findings.append(
                (Status.WARN, f"PING took {facts.ping_ms:.1f} ms (> {config.max_ping * 1000:g} ms)")
            )
        if clients is not None and maxclients:
            share = clients / maxclients
            metrics["clients_share"] = round(share, 4)
            if share >= config.clients_warn_at:
                findings.append(
                    (
                        Status.WARN,
                        f"{clients} of maxclients {maxclients} connections ({share:.0%}): "
                        "new clients will be refused",
                    )
                )
        if rejected is not None and config.max_rejected is not None:
            if rejected > config.max_rejected:
                findings.append(
                    (
                        Status.WARN,
                        f"{rejected} connections rejected since start (maxclients reached)",
                    )
                )
        if used is not None and maxmem:
            share = used / maxmem
            metrics["memory_share"] = round(share, 4)
            if share >= config.memory_warn_at:
                findings.append(
                    (Status.WARN, f"memory {share:.0%} of maxmemory ({used} of {maxmem} bytes)")
                )
        if config.require_noeviction and policy != "noeviction":
            findings.append(
                (
                    Status.WARN,
                    f"maxmemory_policy {policy}: queued jobs can be evicted silently "
                    "(noeviction turns that into a loud write error)",
                )
            )
        if blocked is not None and config.max_blocked is not None and blocked > config.max_blocked:
            findings.append((Status.WARN, f"{blocked} blocked clients (> {config.max_blocked})"))

        head = f"{server} {version_text} {role}, ping {facts.ping_ms:.1f} ms"
        if not findings:
            detail = f"{clients} clients" + (f" of {maxclients}" if maxclients else "")
            return self.result(host, Status.OK, f"{head}, {detail}", metrics=metrics)
        findings.sort(key=lambda f: -f[0].rank)
        status = findings[0][0]
        summary = f"{head}: " + "; ".join(text for _, text in findings)
        return self.result(
            host,
            status,
            summary,
            metrics=metrics,
            evidence=[{"status": s.label, "finding": t} for s, t in findings],
        )


CHECK = BrokerHealthCheck()
