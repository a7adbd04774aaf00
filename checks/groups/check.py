"""groups's check: the probe, its facts and their judging (the settings are the package's,
fleetcheck.checks.groups)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fleetcheck.checks.groups import GroupsConfig, GroupsHostConfig

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.core.check import Check, Commands, cmd
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.hostfacts import addrs_of
from fleetcheck.core.model import Result, Status, worst

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.lab.demo import DemoFleet

MAX_NAMED = 10  # missing hosts named in the summary; the evidence lists them all


@dataclass(frozen=True)
class GroupFacts:
    """One group with an expectation: its thresholds and each member's connections (None:
    a host with no address to count by)."""

    name: str
    min_hosts: int
    min_clients: int
    members: dict[str, int | None]


def expectations(fleet: FleetConfig) -> dict[str, tuple[int, int, list[HostConfig]]]:
    """{group: (min_hosts, min_group_clients, its hosts)} for every group (0: no expectation;
    a group without one is still counted, so the row always says what it saw)."""
    members: dict[str, list[HostConfig]] = {}
    for h in fleet.hosts:
        for g in h.groups:
            members.setdefault(g, []).append(h)
    out: dict[str, tuple[int, int, list[HostConfig]]] = {}
    for g, hosts in members.items():
        table = f"groups.{g}"
        mh = mc = 0
        for h in hosts:
            own = h.settings(GroupsHostConfig)
            if h.sources.get("min_hosts") == table:
                mh = own.min_hosts
            if h.sources.get("min_group_clients") == table:
                mc = own.min_group_clients
        out[g] = (mh, mc, hosts)
    if not out and fleet.hosts:  # no groups: the fleet as one pool, counted (no expectation)
        out["hosts"] = (0, 0, list(fleet.hosts))
    return out


class GroupsCheck(Check[GroupsConfig, "list[GroupFacts]"]):
    name = "groups"
    description = "each pool of hosts ([groups.NAME] min_hosts) has enough machines at work"
    host_config_type = GroupsHostConfig
    headline = "connected_hosts"
    evidence_strength = "proof"
    example = """\
[checks.groups]
crit_share = 0.5                 # CRIT below this share of a group's min_hosts
"""
    host_example = """\
min_hosts = 0                    # only in [groups.NAME]: its hosts with a broker connection
min_group_clients = 0            # only in [groups.NAME]: broker connections of all its hosts
"""
    no_targets_reason = "the fleet has no hosts"
    demo_meaning = (
        "fewer machines of this pool are at work than it needs, whichever they are: an "
        "autoscaled pool judged as a pool (incident 4)"
    )

    def broker_commands(self, fleet: FleetConfig, config: GroupsConfig) -> Commands:
        return (cmd("CLIENT", "ID"), cmd("CLIENT", "LIST"))

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """The pool is n8, laptop and mini; it needs all three, and mini has no workers."""
        for host in ("n8", "laptop", "mini"):
            fleet.host_keys(host, 'groups = ["pool"]')
        return "\n[groups.pool]\nmin_hosts = 3\n"

    def targets(self, fleet: FleetConfig, config: GroupsConfig) -> list[HostConfig | None]:
        return [None] if expectations(fleet) else []

    def probe(
        self, ctx: PatrolContext, host: HostConfig | None, config: GroupsConfig
    ) -> list[GroupFacts]:
        from fleetcheck.parse.clientlist import normalise_ip

        table = ctx.client_table()
        counts: dict[str, int] = {}
        for (addr, _name, _cmd), n in table.groups().items():
            counts[addr] = counts.get(addr, 0) + n
        facts = []
        for g, (mh, mc, hosts) in sorted(expectations(ctx.fleet).items()):
            members: dict[str, int | None] = {}
            for h in hosts:
                addrs = {normalise_ip(a) for a in (*addrs_of(h), *h.inventory_addrs)}
                members[h.name] = sum(counts.get(a, 0) for a in addrs) if addrs else None
            facts.append(GroupFacts(g, mh, mc, members))
        return facts

    def evaluate(
        self, facts: list[GroupFacts], config: GroupsConfig, host: HostConfig | None, now: datetime
    ) -> Result:
        lines: list[tuple[Status, str]] = []
        evidence: list[dict[str, Any]] = []
        connected_total = 0
        for f in facts:
            up = sorted(n for n, c in f.members.items() if c)
            blind = sorted(n for n, c in f.members.items() if c is None)
            missing = sorted(n for n, c in f.members.items() if c == 0)
            clients = sum(c or 0 for c in f.members.values())
            connected_total += len(up)
            status = Status.OK
            line = f"{len(up)} of {len(f.members)} {f.name} connected to the broker"
            if f.min_hosts and len(up) < f.min_hosts:
                crit = not up or len(up) < config.crit_share * f.min_hosts
                status = Status.CRIT if crit else Status.WARN
                if len(up) + len(blind) >= f.min_hosts:
                    status = Status.UNKNOWN  # the hosts it cannot count could make it
                line += f" (min_hosts {f.min_hosts})"
                named = ", ".join(missing[:MAX_NAMED])
                more = f" and {len(missing) - MAX_NAMED} more" if len(missing) > MAX_NAMED else ""
                if missing:
                    line += f"; missing: {named}{more}"
            if blind:
                line += f"; {len(blind)} without addresses to count by: {', '.join(blind[:5])}"
            if f.min_clients and clients < f.min_clients:
                status = worst([status, Status.WARN])
                line += f"; {clients} broker connections, fewer than min_group_clients " + str(
                    f.min_clients
                )
            lines.append((status, line))
            evidence.append(
                {
                    "group": f.name,
                    "connected": up,
                    "missing": missing,
                    "without_addrs": blind,
                    "connections": clients,
                }
            )
        verdict = worst([status for status, _ in lines])
        shown = [line for status, line in lines if status is not Status.OK] or [x for _, x in lines]
        summary = "; ".join(shown[:MAX_NAMED]) + (
            f"; and {len(shown) - MAX_NAMED} more groups" if len(shown) > MAX_NAMED else ""
        )
        limits = {
            f.name: {"min_hosts": f.min_hosts, "min_group_clients": f.min_clients} for f in facts
        }
        return self.result(
            None,
            verdict,
            summary,
            metrics={"connected_hosts": connected_total},
            evidence=evidence,
            limits=limits,
        )


CHECK = GroupsCheck()
