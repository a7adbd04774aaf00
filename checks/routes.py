"""routes: does a host have two default routes on one subnet? (incident 5)

Two defaults through different interfaces on one subnet (wired and Wi-Fi) make the OS flip
between them: CRIT, also when the second is macOS-scoped. Multiple defaults with an
explanation (VPN, ECMP, distinct metrics, policy tables, scoped defaults on other subnets) are
OK with the reason in the summary; the rest WARN. Facts come from the host's one gathered
exec (`ip -j` on Linux with /proc and BusyBox fallbacks, `netstat`/`ifconfig`/`route` on
macOS/BSD), asking only about the interfaces that carry a default route."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import asdict, dataclass
from datetime import datetime
from shlex import quote
from typing import TYPE_CHECKING, Any

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.core.check import HostCheck
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.declarations import Cause, Clue
from fleetcheck.core.errors import CheckError
from fleetcheck.core.judge import Findings
from fleetcheck.core.model import Result, Status

if TYPE_CHECKING:  # the demo's lab and the route parser: never imported by config checks
    from fleetcheck.lab.demo import DemoFleet
    from fleetcheck.parse.routes import DefaultRoute, Interface, RouteFacts

ADVICE = "turn one interface off, move it to another subnet, or bond them"


@dataclass(frozen=True)
class RoutesConfig:
    # the address whose route is looked up on each host; default: the broker's host
    target: str | None = None


# the interfaces that carry a default route, from /proc/net/route (destination and mask 0)
_DEFAULT_DEVS_PROC = 'awk \'NR>1 && $2=="00000000" && $8=="00000000" {print $1}\' /proc/net/route'
# ... from `netstat -rn`: the Netif column of `default` rows, found by the header's position
_DEFAULT_DEVS_NETSTAT = (
    'awk \'$1=="Destination"{c=0; for(i=1;i<=NF;i++) if($i=="Netif") c=i} '
    '$1=="default"&&c{print $c}\''
)
MAX_DEVS = 64  # default routes' interfaces asked about (a host with more is judged on these)
FEW_LINKS = 32  # up to this many interfaces, all their addresses come with the routes
ALL_ADDRS_UP_TO = 262144  # bytes: a larger answer with all addresses is asked again without
MAX_IP_OUTPUT = 1048576  # bytes of one `ip` answer printed; a longer one becomes `@@cut N`

# Linux: each question is one `ip -j -force -batch -` with stderr merged. Every command
# prints one JSON line, or its error and `Command failed -:N` (ip flushes after each command,
# so the order holds); the section header names the commands for the parser. `ipq` asks for
# the default routes, the rules, the target's route and, on a host with few interfaces, all
# addresses; whether the answer is JSON tells whether this `ip` speaks it (no separate probe).
_IP_ASK = r"""nl='
'
ipq() {
  names='route4 route6'; q="route show 0.0.0.0/0 table all${nl}route show ::/0 table all"
  if [ -n "$1" ]; then names="$names addr"; q="$q${nl}addr show"; fi
  names="$names rules"; q="$q${nl}rule show"
  if [ -n "$t" ]; then names="$names get"; q="$q${nl}route get $t"; fi
  b=$(ip -j -force -batch - 2>&1 <<EOF
$q
EOF
)
}
out() {
  if [ ${#2} -gt {MAX_IP_OUTPUT} ]; then printf '%s\n@@cut %s\n' "$1" ${#2}
  else printf '%s\n%s\n' "$1" "$2"; fi
}
set -- /sys/class/net/*
few=; [ $# -le {FEW_LINKS} ] && few=1
ipq "$few"
"""
# With JSON: addresses of the default routes' interfaces (when not all came already), found
# in the route dumps by shell builtins, in one more batch; IPv6 rules (`-6` is global, so a
# batch of their own) only when a default route sits in a policy-routing table.
_IP_JSON = r"""  if [ -n "$few" ] && [ ${#b} -gt {ALL_ADDRS_UP_TO} ]; then few=; ipq ''; fi
  os=; read -r os 2>/dev/null </proc/sys/kernel/ostype || os=$(uname -s 2>/dev/null)
  printf '@@os %s\n' "$os"
  out "@@ip $names" "$b"
  routes=${b%%\[\{\"priority\"*}
  if [ -z "$few" ]; then
    r=$routes; devs=' '; n=0; k=0
    while [ $n -lt {MAX_DEVS} ] && [ $k -lt 1024 ]; do
      case "$r" in *\"dev\":\"*) ;; *) break;; esac
      r=${r#*\"dev\":\"}; d=${r%%\"*}; k=$((k+1))
      case "$d" in ''|*[!A-Za-z0-9_.:@-]*) continue;; esac
      case "$devs" in *" $d "*) continue;; esac
      devs="$devs$d "; n=$((n+1))
    done
    names=; q=
    for d in $devs; do names="$names addr"; q="$q${nl}addr show dev $d"; done
    if [ -n "$q" ]; then
      a=$(ip -j -force -batch - 2>&1 <<EOF
$q
EOF
)
      out "@@ipdev$names" "$a"
    fi
  fi
  case "$routes" in *\"table\":\"*)
    a=$(ip -j -6 -force -batch - 2>&1 <<EOF
rule show
EOF
)
    out '@@ip6rules rules6' "$a" ;;
  esac ;;
"""


def _filled(template: str) -> str:
    """The template with each `{LIMIT}` (upper case; the shell's own braces stay) filled."""
    limits = {"MAX_DEVS": MAX_DEVS, "FEW_LINKS": FEW_LINKS, "MAX_IP_OUTPUT": MAX_IP_OUTPUT}
    limits["ALL_ADDRS_UP_TO"] = ALL_ADDRS_UP_TO
    return re.sub(r"\{([A-Z_]+)\}", lambda m: str(limits[m[1]]), template)


def _is_ip(text: str) -> bool:
    try:
        return bool(ipaddress.ip_address(text))
    except ValueError:
        return False


def routes_fragment(target: str | None) -> str:
    """POSIX sh, every section bounded; the target address is shell-quoted and checked.
    Addresses are asked only for the interfaces that carry a default route (`ip -j addr show
    dev X`, `ifconfig X`) unless the host has few interfaces, so a container host with a
    thousand veths costs what a laptop does. On Linux with `ip -j` the whole fragment is one
    `ip` process on most hosts (no pipe through `head`, no probe, `uname` read from /proc):
    each process costs the host more than the netlink answers it prints. Runs under dash,
    bash and BusyBox ash with only BusyBox applets."""
    if not target:
        ask = "t=\n"
    elif _is_ip(target):
        ask = f"t={quote(target)}\n"
    else:  # a name, also one of hex letters only ("cafe", "db"): the host resolves it
        ask = f"t=$(getent ahosts {quote(target)} 2>/dev/null | awk 'NR==1{{print $1}}')\n"
    each_dev = (
        f"sort -u | head -n {MAX_DEVS} | while read -r d; do\n"
        "    case \"$d\" in ''|*[!A-Za-z0-9_.:@-]*) continue;; esac\n"
    )
    return (
        "LC_ALL=C; export LC_ALL\n"
        + ask
        + 'case "$t" in *[!0-9a-fA-F.:]*) t=;; esac\n'
        + _filled(_IP_ASK)
        + 'case "$b" in\n'
        # JSON: the first command (the IPv4 default routes) answered in JSON, as an empty
        # list or routes (`dst` first, or `type` for a route that is not unicast), or failed
        # as a batch command does. An `ip` without -j (BusyBox's, or none at all) prints
        # something else; so does one that ignores -j for routes but not for addresses,
        # whose first line is the addresses' JSON when the host has no default route.
        + "'[]'*|'[{\"dst\":'*|'[{\"type\":'*|*\"Command failed -:1$nl\"*|*'Command failed -:1')\n"
        + _filled(_IP_JSON)
        + "*)\n"
        "  os=$(uname -s 2>/dev/null); printf '@@os %s\\n' \"$os\"\n"
        '  case "$os" in\n'
        "  Darwin|*BSD|DragonFly)\n"
        "    n4=$(netstat -rn -f inet 2>&1 | head -c 262144)\n"
        "    n6=$(netstat -rn -f inet6 2>&1 | head -c 262144)\n"
        '    printf \'@@netstat\\n%s\\n@@netstat6\\n%s\\n@@ifconfig\\n\' "$n4" "$n6"\n'
        f'    printf \'%s\\n%s\\n\' "$n4" "$n6" | {_DEFAULT_DEVS_NETSTAT} | {each_dev}'
        '      ifconfig "$d" 2>/dev/null | head -c 65536\n'
        "    done\n"
        '    if [ -n "$t" ]; then echo @@get; route -n get "$t" 2>&1 | head -c 4096; fi ;;\n'
        "  *)\n"
        "    echo @@proc; head -c 262144 /proc/net/route\n"
        "    echo @@addrtext\n"
        f"    {_DEFAULT_DEVS_PROC} | {each_dev}"
        '      ip -o addr show dev "$d" 2>/dev/null | head -c 65536\n'
        "    done ;;\n"
        "  esac ;;\n"
        "esac"
    )


class RoutesCheck(HostCheck[RoutesConfig, "RouteFacts"]):
    name = "routes"
    description = "default routes per host: two on one subnet is CRIT (ARP flux, EHOSTUNREACH)"
    headline = "default_routes"
    # explain: a route problem is the most upstream cause (it explains lost connections)
    clues = (Clue("default routes: {summary}"),)
    causes = (
        Cause(
            "two default routes on one subnet, the known cause of intermittent EHOSTUNREACH",
            'the worker log\'s connection errors (EHOSTUNREACH, "No route to host")',
            "unscoped_default_routes",
            2,
            statuses=("CRIT",),
            upstream=10,
        ),
        Cause(
            "its default routes are not as they should be: {summary}",
            "`ip route show default` (macOS: `netstat -rn`) on the host",
            upstream=10,
        ),
    )
    example = """\
[checks.routes]
# target = "192.168.1.5"         # address whose route each host looks up (default: the broker)
"""
    demo_meaning = (
        "two default routes through two interfaces on one subnet: the OS flips between "
        "them and connections drop; keep one interface per subnet or bond them (incident 5)"
    )

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """mini's Wi-Fi up beside its wired link, on one subnet (needs namespaces)."""
        if not fleet.netns:
            return None
        fleet.lab.add_interface(fleet.hosts["mini"], "wifi0", metric=600)
        return ""

    @staticmethod
    def target_for(config: RoutesConfig, fleet: FleetConfig) -> str | None:
        """The address whose route each host looks up: configured, else the broker's."""
        return config.target or fleet.broker.host

    def remote_commands(
        self, host: HostConfig, config: RoutesConfig, fleet: FleetConfig
    ) -> dict[str, str]:
        return {"table": routes_fragment(self.target_for(config, fleet))}

    def probe_host(self, ctx: PatrolContext, host: HostConfig, config: RoutesConfig) -> RouteFacts:
        from fleetcheck.parse.routes import RouteParseError, parse_gathered

        frag = ctx.host_facts(host, self).get("table")
        try:
            return parse_gathered(frag.text, self.target_for(config, ctx.fleet))
        except RouteParseError as e:
            raise CheckError(f"cannot read the route table: {e}") from None

    def evaluate_host(
        self, facts: RouteFacts, config: RoutesConfig, host: HostConfig, now: datetime
    ) -> Result:
        from fleetcheck.parse.routes import Interface

        def addrs(dev: str) -> tuple[str, ...]:
            return facts.interfaces.get(dev, Interface(dev)).addrs

        status, verdict = judge(facts)
        live = [r for r in facts.routes if r.table == "main"]
        shown = "; ".join(_show(r, facts.interfaces) for r in live) or "none"
        broker = ""
        if facts.broker_target:
            if facts.broker_dev:
                via = f" via {facts.broker_via}" if facts.broker_via else ""
                broker = f"; broker {facts.broker_target} goes out {facts.broker_dev}{via}"
            else:
                broker = f"; route to broker {facts.broker_target} unknown"
        summary = f"{verdict}: {shown}{broker}"
        main_unscoped = [r for r in live if not r.scoped]
        metrics = {
            "default_routes": len(live),
            "interfaces": len({r.dev for r in live}),
            "unscoped_default_routes": len(main_unscoped),
        }
        evidence: dict[str, Any] = {
            "os": facts.os,
            "source": facts.source,
            "routes": [
                asdict(r) | {"flags": list(r.flags), "addrs": list(addrs(r.dev))}
                for r in facts.routes
            ],
            "broker": {
                "target": facts.broker_target,
                "dev": facts.broker_dev,
                "via": facts.broker_via,
            },
        }
        if facts.problems:
            evidence["problems"] = list(facts.problems)
        return self.result(host, status, summary, metrics=metrics, evidence=evidence)


def _show(r: DefaultRoute, ifaces: dict[str, Interface]) -> str:
    iface = ifaces.get(r.dev)
    fam = [
        a for a in (iface.addrs if iface else ()) if ipaddress.ip_interface(a).version == r.family
    ]
    fam = [a for a in fam if not ipaddress.ip_interface(a).ip.is_link_local] or fam
    addr = f" [{', '.join(fam[:2])}]" if fam else ""
    return r.describe() + addr


def same_subnet(a: DefaultRoute, b: DefaultRoute, ifaces: dict[str, Interface]) -> str | None:
    """The shared subnet of two routes' interfaces (or why they are judged on one), or None."""
    ia, ib = ifaces.get(a.dev), ifaces.get(b.dev)
    if ia and ib:
        for na in ia.networks(a.family):
            for nb in ib.networks(b.family):
                if na.overlaps(nb):
                    return str(na if na.prefixlen >= nb.prefixlen else nb)
    if a.gateway and a.gateway == b.gateway and not a.gateway.startswith("link#"):
        return f"the same gateway {a.gateway}"
    for r, other in ((a, ib), (b, ia)):
        if r.gateway and other and not r.gateway.startswith("link#"):
            try:
                gw = ipaddress.ip_address(r.gateway.split("%")[0])
            except ValueError:
                continue
            for n in other.networks(r.family):
                if gw in n:
                    return str(n)
    return None


def _family_verdict(
    family: int, routes: list[DefaultRoute], ifaces: dict[str, Interface]
) -> tuple[Status, str] | None:
    """The verdict on one family's main-table defaults, None when there is nothing to say."""
    if len(routes) < 2:
        if routes and routes[0].down and not routes[0].scoped:
            return Status.WARN, f"the only IPv{family} default route's link is down"
        return None
    devs = sorted({r.dev for r in routes})
    pairs = [
        (a, b, s)
        for i, a in enumerate(routes)
        for b in routes[i + 1 :]
        if a.dev != b.dev and (s := same_subnet(a, b, ifaces))
    ]
    live_pairs = [(a, b, s) for a, b, s in pairs if not a.down and not b.down]
    if pairs:
        a, b, s = (live_pairs or pairs)[0]
        if live_pairs:
            return Status.CRIT, (
                f"{len(routes)} IPv{family} default routes through different interfaces "
                f"({a.dev}, {b.dev}) on one subnet {s}: {ADVICE}"
            )
        down = a if a.down else b
        return Status.WARN, (
            f"second IPv{family} default via {down.dev} on the same subnet {s} is link-down "
            f"now; when it comes up the host has two defaults on one subnet: {ADVICE}"
        )
    unscoped = [r for r in routes if not r.scoped]
    if len(unscoped) < 2:
        return (
            Status.OK,
            f"one unscoped IPv{family} default; the others are macOS scoped routes on "
            "other subnets (used only by sockets bound to them)",
        )
    if any(r.vpn for r in unscoped):
        vpn = ", ".join(sorted({r.dev for r in unscoped if r.vpn}))
        return Status.OK, f"{len(unscoped)} IPv{family} defaults, judged legitimate: VPN ({vpn})"
    if all(r.ecmp for r in unscoped):
        return (
            Status.OK,
            f"IPv{family} multipath (ECMP) default over {', '.join(devs)} on different "
            "subnets, judged legitimate",
        )
    metrics = [r.metric for r in unscoped]
    if len(set(metrics)) == len(metrics):
        best = min(unscoped, key=lambda r: r.metric)
        return (
            Status.OK,
            f"{len(unscoped)} IPv{family} defaults on different subnets with distinct "
            f"metrics, judged legitimate failover ({best.dev} preferred)",
        )
    where = "one interface" if len(devs) == 1 else "different subnets"
    return (
        Status.WARN,
        f"{len(unscoped)} IPv{family} default routes on {where} with equal metrics: "
        "which one wins is not defined; give them distinct metrics or remove one",
    )


def judge(facts: RouteFacts) -> tuple[Status, str]:
    """The verdict and its one-line reason."""
    main = [r for r in facts.routes if r.table == "main"]
    policy = [r for r in facts.routes if r.table != "main"]
    verdicts = Findings()
    for family in (4, 6):
        found = _family_verdict(family, [r for r in main if r.family == family], facts.interfaces)
        if found is not None:
            verdicts.add(*found)
    if not verdicts:
        v4 = [r for r in main if r.family == 4]
        if not v4:
            if facts.broker_dev:
                verdicts.add(Status.OK, "no IPv4 default route (the broker is reachable)")
            else:
                verdicts.add(Status.WARN, "no IPv4 default route")
        else:
            verdicts.add(Status.OK, "one default route")
    if policy:
        used = [r for r in policy if r.table in facts.rule_tables]
        note = (
            f"{len(policy)} more in policy-routing tables "
            f"({', '.join(sorted({r.table for r in policy}))}"
            + ("; used by ip rule" if used else "; no ip rule uses them")
            + "), judged legitimate"
        )
        verdicts.add(Status.OK, note)
    return verdicts.status, verdicts.joined()


CHECK = RoutesCheck()
