"""clients: is every machine present in the broker's CLIENT LIST? (incident 4)

Global numbers hid a machine that was dead for 2.5 hours; a per-host count of broker
connections shows it within one patrol. A host may connect from several addresses (WSL2 NAT),
all counted as one host. One broker-wide row lists clients from addresses no host claims.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.core.check import Check, Scope
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.hostfacts import ClientsHostConfig, addrs_of, claimed_addrs
from fleetcheck.core.judge import check_count, exceeds
from fleetcheck.core.model import Result, Status
from fleetcheck.parse.clientlist import ClientTable, normalise_ip

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.lab.demo import DemoFleet


@dataclass(frozen=True)
class ClientsConfig:
    max_unknown: int = 0  # WARN when more clients than this come from unclaimed addresses
    ignore_names: tuple[str, ...] = ("fleetcheck",)  # client names never counted as unknown

    def __post_init__(self) -> None:
        check_count("max_unknown", self.max_unknown)


Group = tuple[str, str, str]  # (host, name, cmd)


@dataclass(frozen=True)
class ClientsFacts:
    """Counts, not clients: 10,000 connections are a few distinct (host, name, cmd)."""

    groups: Mapping[Group, int]  # clients by (host, name, cmd); a host row: its own only
    claimed: frozenset[str]  # every address some host claims
    max_idle: Mapping[str, int] = field(default_factory=dict)  # longest idle_s per host
    strays: tuple[tuple[str, str, str], ...] = ()  # broker row: (addr, name, cmd), first 20


def facts_of(
    table: ClientTable,
    claimed: frozenset[str],
    mine: Collection[str] | None = None,
    ignore_names: Collection[str] = (),
) -> ClientsFacts:
    """A host row's facts (`mine`: its normalised addresses) or the broker row's (None)."""
    idle = table.max_idle()
    if mine is not None:
        own: dict[Group, int] = {}
        for h in mine:
            own.update(table.groups_of(h))
        return ClientsFacts(own, claimed, {h: idle[h] for h in mine if h in idle})
    strays = table.select(lambda h, name: h not in claimed and name not in ignore_names, 20)
    return ClientsFacts(table.groups(), claimed, idle, tuple(strays))


class ClientsCheck(Check[ClientsConfig, ClientsFacts]):
    name = "clients"
    description = "per-host presence in the broker's CLIENT LIST (connections per address)"
    scope = Scope.BROKER
    config_type = ClientsConfig
    host_config_type = ClientsHostConfig
    headline = ("connections", "clients")  # a host row's, the broker-wide row's
    example = """\
[checks.clients]
max_unknown = 0                  # clients from addresses no host claims: WARN past this many
ignore_names = ["fleetcheck"]    # client names never counted as unknown
"""
    host_example = """\
addrs = ["192.168.1.20", "192.168.1.21"]     # its addresses in CLIENT LIST (WSL2 NAT can add one)
min_clients = 10                             # fewer broker connections: WARN; none: CRIT
"""
    demo_meaning = (
        "no broker connection from this machine: its workers are gone or cut off, while "
        "queue depth and throughput still look fine because the others absorb the work (incident 4)"
    )

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """Workers on n8, laptop and broker; mini has none: the silently dead machine."""
        fleet.lab.start_workers(fleet.hosts["n8"], 12, "worker-n8")
        fleet.lab.start_workers(fleet.hosts["laptop"], 4, "worker-laptop")
        fleet.lab.start_workers(fleet.hosts["broker"], 2, "worker-broker")
        fleet.host_keys("n8", "min_clients = 10")
        return ""

    def demo_explain(self, result: Result) -> str | None:
        if result.host is None and result.status is not Status.OK:
            return "broker clients from addresses no host claims: an unknown machine or tool"
        return super().demo_explain(result)

    def targets(self, fleet: FleetConfig, config: ClientsConfig) -> list[HostConfig | None]:
        def wanted(h: HostConfig) -> bool:
            own = h.settings(ClientsHostConfig)
            return bool(own.addrs) or own.min_clients > 0

        return [None, *(h for h in fleet.hosts if wanted(h))]

    def probe(
        self, ctx: PatrolContext, host: HostConfig | None, config: ClientsConfig
    ) -> ClientsFacts:
        table = ctx.client_table()
        claimed = ctx.once("clients:claimed", lambda: claimed_addrs(ctx.fleet))
        mine = None if host is None else {normalise_ip(a) for a in addrs_of(host)}
        return facts_of(table, claimed, mine, config.ignore_names)

    def evaluate(
        self, facts: ClientsFacts, config: ClientsConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        if host is None:
            return self._unknown_clients(facts, config)
        own = host.settings(ClientsHostConfig)
        if not own.addrs:
            return self.result(
                host,
                Status.UNKNOWN,
                "no addrs configured, so its broker connections cannot be "
                "told apart (add the addresses it connects from)",
            )
        mine = {normalise_ip(a) for a in own.addrs}
        groups = [(k, n) for k, n in facts.groups.items() if k[0] in mine]
        counts: Counter[str] = Counter()
        for (addr, _name, _cmd), n in groups:
            counts[addr] += n
        by_addr = {normalise_ip(a): counts.get(normalise_ip(a), 0) for a in own.addrs}
        total = sum(by_addr.values())
        metrics = {"connections": total, "by_addr": by_addr}
        idle = [s for h, s in facts.max_idle.items() if h in mine]
        evidence = {
            "names": sorted({k[1] for k, _ in groups if k[1]}),
            "max_idle_s": max(idle) if idle else None,
            "commands": sorted({k[2] for k, _ in groups if k[2]}),
        }
        spread = ", ".join(f"{a}: {n}" for a, n in by_addr.items())
        if total == 0:
            status = Status.CRIT if own.min_clients > 0 else Status.OK
            summary = f"no broker connections from {', '.join(by_addr)}"
        elif total < own.min_clients:
            status = Status.WARN
            summary = (
                f"{total} broker connection{'s' if total != 1 else ''}, "
                f"fewer than min_clients {own.min_clients} ({spread})"
            )
        else:
            status = Status.OK
            summary = f"{total} broker connection{'s' if total != 1 else ''} ({spread})"
        limits = {"min_clients": own.min_clients}
        return self.result(host, status, summary, metrics=metrics, evidence=evidence, limits=limits)

    def _unknown_clients(self, facts: ClientsFacts, config: ClientsConfig) -> Result:
        counts: Counter[str] = Counter()
        for (addr, name, _cmd), n in facts.groups.items():
            if addr not in facts.claimed and name not in config.ignore_names:
                counts[addr] += n
        unknown = sum(counts.values())
        clients = sum(facts.groups.values())
        listed = ", ".join(f"{a} ({n})" for a, n in counts.most_common(10))
        metrics = {
            "clients": clients,
            "unknown_clients": unknown,
            "unknown_by_addr": dict(counts),
        }
        evidence = [{"addr": a, "name": n, "cmd": c} for a, n, c in facts.strays[:20]]
        if exceeds(unknown, config.max_unknown):
            return self.result(
                None,
                Status.WARN,
                f"{unknown} broker clients from addresses no host claims: {listed}",
                metrics=metrics,
                evidence=evidence,
            )
        tail = f"; unclaimed: {listed}" if unknown else ""
        return self.result(
            None,
            Status.OK,
            f"{clients} broker clients, {unknown} from unclaimed addresses" + tail,
            metrics=metrics,
            evidence=evidence,
        )


CHECK = ClientsCheck()
