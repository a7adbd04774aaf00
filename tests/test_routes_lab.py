"""The routes check end to end: real route tables in lab namespaces, real sshd, the real CLI."""

from __future__ import annotations

import ipaddress
import shlex
from datetime import UTC, datetime

import pytest
from fleetcheck.checks.routes import CHECK, FEW_LINKS, RoutesConfig, routes_fragment

from fleetcheck.config import HostConfig
from fleetcheck.core.model import Status
from fleetcheck.parse.routes import (
    Interface,
    RouteFacts,
    parse_gathered,
    parse_ip_addr,
    parse_ip_route_get,
    parse_ip_routes,
    parse_ip_rules,
)
from tests.lab import Lab, LabHost, run
from tests.test_logs_lab import patrol

pytestmark = pytest.mark.lab
NOW = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)
HOST = HostConfig(name="lab", ssh="local")


def dummy_subnet(lab: Lab) -> ipaddress.IPv4Network:
    """Another 198.18.x.0/24 for an interface that exists only inside one namespace."""
    third = (int(str(lab.subnet.network_address).split(".")[2]) + 128) % 254 + 1
    return ipaddress.ip_network(f"198.18.{third}.0/24")


def add_dummy(lab: Lab, h: LabHost, name: str) -> str:
    """An interface on a second subnet whose other end stays inside the namespace (a veth
    pair: no dummy module here), so nothing it could send ever leaves the namespace."""
    net = dummy_subnet(lab)
    lab.nsrun(h, "ip", "link", "add", name, "type", "veth", "peer", "name", f"{name}p")
    lab.nsrun(h, "ip", "link", "set", f"{name}p", "up")
    lab.nsrun(h, "ip", "addr", "add", f"{net.network_address + 10}/24", "dev", name)
    lab.nsrun(h, "ip", "link", "set", name, "up")
    return str(net.network_address + 1)


def add_ecmp_host(lab: Lab) -> LabHost:
    """A host named "ecmp": one multipath default over two same-subnet interfaces."""
    ecmp = lab.add_host("ecmp")
    lab.add_interface(ecmp, "eth1", None)
    lab.nsrun(
        ecmp, "ip", "route", "replace", "default",
        "nexthop", "via", lab.gateway, "dev", "eth0",
        "nexthop", "via", lab.gateway, "dev", "eth1",
    )  # fmt: skip
    return ecmp


def test_route_shapes_in_one_patrol(lab: Lab) -> None:
    single = lab.add_host("single")  # one default, metric 0 (no "metric" key in ip -j)
    dual = lab.add_host("dual")
    second = lab.add_interface(dual, "eth1", 200)  # incident 5: same subnet, 2 defaults
    add_ecmp_host(lab)
    latent = lab.add_host("latent")  # the second default's link is down right now
    lab.add_interface(latent, "eth1", 300)
    run("ip", "link", "set", latent.veths[1], "down")
    failover = lab.add_host("failover")  # second default on another subnet, higher metric
    gw2 = add_dummy(lab, failover, "wlan0")
    lab.nsrun(
        failover, "ip", "route", "add", "default", "via", gw2, "dev", "wlan0", "metric", "600"
    )
    vpn = lab.add_host("vpn")  # a VPN interface with its own default, equal metric
    gw3 = add_dummy(lab, vpn, "wg0")
    lab.nsrun(vpn, "ip", "route", "append", "default", "via", gw3, "dev", "wg0")
    policy = lab.add_host("policy")  # a policy-routing table with its own default via eth1
    lab.add_interface(policy, "eth1", None)
    lab.nsrun(policy, "ip", "route", "add", "default", "via", lab.gateway, "dev", "eth1",
              "table", "100")  # fmt: skip
    lab.nsrun(policy, "ip", "rule", "add", "from", policy.extra_addrs[0], "table", "100")

    config = lab.config(checks="[checks.routes]\n")
    code, rows = patrol(config)

    def row(name: str) -> dict:  # type: ignore[type-arg]
        return rows[(name, "routes")]

    r = row("single")
    assert r["status"] == "OK", r["summary"]
    assert r["summary"].startswith(
        f"one default route: via {lab.gateway} dev eth0 [{single.addr}/24]"
    ), r["summary"]
    assert r["metrics"] == {"default_routes": 1, "interfaces": 1, "unscoped_default_routes": 1}
    assert f"broker {lab.gateway} goes out eth0" in r["summary"]

    r = row("dual")
    assert r["status"] == "CRIT", r["summary"]
    assert f"through different interfaces (eth0, eth1) on one subnet {lab.subnet}" in r["summary"]
    assert f"dev eth0 [{dual.addr}/24]" in r["summary"]
    assert f"dev eth1 (metric 200) [{second}/24]" in r["summary"]
    assert "turn one interface off, move it to another subnet, or bond them" in r["summary"]
    assert r["metrics"]["default_routes"] == 2 and r["metrics"]["interfaces"] == 2

    r = row("ecmp")
    assert r["status"] == "CRIT", r["summary"]
    assert "multipath" in r["summary"]

    r = row("latent")
    assert r["status"] == "WARN", r["summary"]
    assert "LINK DOWN" in r["summary"] and "when it comes up" in r["summary"]

    r = row("failover")
    assert r["status"] == "OK", r["summary"]
    assert "judged legitimate failover (eth0 preferred)" in r["summary"]

    r = row("vpn")
    assert r["status"] == "OK", r["summary"]
    assert "judged legitimate: VPN (wg0)" in r["summary"]

    r = row("policy")
    assert r["status"] == "OK", r["summary"]
    assert "policy-routing tables (100; used by ip rule)" in r["summary"]
    assert code == 2


# `ip` without JSON: one that refuses -j (iproute2 before 4.13), one that ignores it and
# prints text (JSON for some objects only, as in the releases between)
OLD_IP = {
    "refuses -j": 'case "$1" in -j) echo \'Option "-j" is unknown\' >&2; exit 255;; esac\n',
    "ignores -j": 'case "$1" in -j) shift;; esac\n',
}


@pytest.mark.parametrize("old_ip", OLD_IP)
def test_proc_net_route_fallback_reads_the_same_table(lab: Lab, old_ip: str) -> None:
    """Without `ip -j` the fragment falls back to /proc/net/route; run that branch for real
    by putting an `ip` shim first on PATH that behaves like an old iproute2."""
    h = lab.add_host("old")
    lab.add_interface(h, "eth1", 200)
    shim = h.dir / "bin"
    shim.mkdir()
    ip_path = run("sh", "-c", "command -v ip").stdout.decode().strip()
    (shim / "ip").write_text(f'#!/bin/sh\n{OLD_IP[old_ip]}exec {ip_path} "$@"\n')
    (shim / "ip").chmod(0o755)
    out = lab.nsrun(
        h, "env", f"PATH={shim}:/usr/sbin:/usr/bin:/sbin:/bin", "sh", "-c", routes_fragment(None)
    ).stdout.decode()
    facts = parse_gathered(out, None)
    assert facts.source == "/proc/net/route"
    assert sorted((r.dev, r.gateway, r.metric) for r in facts.routes) == [
        ("eth0", lab.gateway, 0),
        ("eth1", lab.gateway, 200),
    ]
    assert f"{h.extra_addrs[0]}/24" in facts.interfaces["eth1"].addrs


# an iproute2 whose `route` and `rule` ignore -j while `addr` answers in JSON (releases
# between 4.13 and the JSON of every object), batches included
JSON_FOR_ADDR_ONLY = r"""j=; fam=; batch=
while [ $# -gt 0 ]; do
  case "$1" in -j) j=-j;; -4|-6) fam=$1;; -force) ;; -batch) batch=1; shift;; *) break;; esac
  shift
done
if [ -n "$batch" ]; then
  while IFS= read -r line; do
    case "$line" in addr*) REAL $j $fam $line;; *) REAL $fam $line;; esac
  done
  exit 0
fi
case "$1" in addr|a) exec REAL $j $fam "$@";; *) exec REAL $fam "$@";; esac
"""


def test_an_ip_with_json_for_addresses_only_falls_back_on_a_host_without_defaults(
    lab: Lab,
) -> None:
    """With no default route the first answer of the batch is the addresses' JSON: that is
    not a JSON answer to the routes question, so the fragment reads /proc (it took the JSON
    path and the row was UNKNOWN "the answer for route4 has no 'dst'")."""
    h = lab.add_host("nodefault")
    lab.nsrun(h, "ip", "route", "del", "default")
    shim = h.dir / "bin"
    shim.mkdir()
    ip_path = run("sh", "-c", "command -v ip").stdout.decode().strip()
    (shim / "ip").write_text("#!/bin/sh\n" + JSON_FOR_ADDR_ONLY.replace("REAL", ip_path))
    (shim / "ip").chmod(0o755)
    env = ["env", f"PATH={shim}:/usr/sbin:/usr/bin:/sbin:/bin"]
    batch = lab.nsrun(h, *env, "sh", "-c", "printf 'route show\\naddr show\\n' | ip -j -batch -")
    assert batch.stdout.decode().count('"ifindex"') >= 1  # the shim answers as described
    out = lab.nsrun(h, *env, "sh", "-c", routes_fragment(None)).stdout.decode()
    facts = parse_gathered(out, None)
    assert facts.source == "/proc/net/route"
    assert facts.routes == ()


def test_a_thousand_interfaces_are_judged_like_two(lab: Lab) -> None:
    """A container host with 1,000 extra interfaces (veth ends, each with an address): the
    fragment asks only for the default routes' interfaces, so the row is the two-interface
    host's row, not UNKNOWN "not JSON" from a cut `ip -j addr`."""
    small, big = lab.add_host("small"), lab.add_host("big")
    for h in (small, big):
        lab.add_interface(h, "eth1", 200)
    batch = big.dir / "links.batch"
    batch.write_text("".join(f"link add c{i} type veth peer name c{i}p\n" for i in range(500)))
    lab.nsrun(big, "ip", "-batch", str(batch))
    addrs = []
    for i in range(500):
        a = f"10.{i // 250}.{i % 250}.1"  # never routed: stays inside the namespace
        addrs.append(f"addr add {a}/32 dev c{i}")
        addrs.append(f"addr add 10.{i // 250 + 8}.{i % 250}.1/32 dev c{i}p")
    batch.write_text("\n".join(addrs) + "\n")
    lab.nsrun(big, "ip", "-batch", str(batch))
    count = len(lab.nsrun(big, "ip", "-o", "link", "show").stdout.splitlines())
    assert count >= 1000 + 3
    all_addrs = lab.nsrun(big, "ip", "-j", "addr", "show").stdout
    assert len(all_addrs) > 262144  # what the old fragment cut to "not JSON"

    config = lab.config(checks="[checks.routes]\n")
    _, rows = patrol(config)
    r_small, r_big = rows[("small", "routes")], rows[("big", "routes")]
    assert r_small["status"] == r_big["status"] == "CRIT", r_big["summary"]

    def shape(r: dict, h: LabHost) -> str:  # type: ignore[type-arg]
        return r["summary"].replace(h.addr, "A").replace(h.extra_addrs[0], "B")

    assert shape(r_big, big) == shape(r_small, small)
    assert r_big["metrics"] == r_small["metrics"]

    # a /sys that does not show this namespace's interfaces (here: an empty tmpfs over
    # /sys/class/net) makes the fragment ask for all addresses; the answer is too long, so it
    # asks again per default-route interface: the same facts, one batch more
    frag = routes_fragment(lab.gateway)
    out, runs = with_ip_counted(lab, big, frag)
    hidden = 'mount -t tmpfs none /sys/class/net && exec sh -c "$0"'
    blind, blind_runs = with_ip_counted(
        lab, big, f"unshare -m sh -c {shlex.quote(hidden)} {shlex.quote(frag)}"
    )
    assert (runs, blind_runs) == (2, 3)
    seen, seen_blind = parse_gathered(out, lab.gateway), parse_gathered(blind, lab.gateway)
    assert seen_blind.routes == seen.routes and len(seen.routes) == 2
    assert seen_blind.interfaces == seen.interfaces and set(seen.interfaces) == {"eth0", "eth1"}


def ip_one_at_a_time(lab: Lab, h: LabHost, target: str) -> RouteFacts:
    """The reference: the same facts from `ip -j`, one command (and process) per question,
    as the fragment asked them before it batched them."""

    def ip(*args: str) -> str:
        return lab.nsrun(h, "ip", "-j", *args, check=False).stdout.decode()

    routes = parse_ip_routes(ip("-4", "route", "show", "default", "table", "all"), 4)
    routes += parse_ip_routes(ip("-6", "route", "show", "default", "table", "all"), 6)
    ifaces: dict[str, Interface] = {}
    for dev in sorted({r.dev for r in routes}):
        ifaces.update(parse_ip_addr(ip("addr", "show", "dev", dev)))
    rules = parse_ip_rules(ip("rule", "show")) | parse_ip_rules(ip("-6", "rule", "show"))
    dev, via = parse_ip_route_get(ip("route", "get", target))
    return RouteFacts("Linux", "ip -j", tuple(routes), ifaces, rules, target, dev, via)


def with_ip_counted(lab: Lab, h: LabHost, script: str) -> tuple[str, int]:
    """`script` run by sh in the host's namespace, with an `ip` first on PATH that counts its
    runs; what it printed and how many `ip` processes it started."""
    shim = h.dir / "count-bin"
    shim.mkdir(exist_ok=True)
    log = h.dir / "ip-runs"
    log.write_text("")
    real = run("sh", "-c", "command -v ip").stdout.decode().strip()
    (shim / "ip").write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real} "$@"\n')
    (shim / "ip").chmod(0o755)
    path = f"PATH={shim}:/usr/sbin:/usr/bin:/sbin:/bin"
    out = lab.nsrun(h, "env", path, "sh", "-c", script).stdout.decode()
    return out, len(log.read_text().splitlines())


def test_one_ip_batch_reads_what_ip_one_command_at_a_time_reads(lab: Lab) -> None:
    """Every route shape, IPv4 and IPv6, policy tables in both families, a host with more
    interfaces than FEW_LINKS, a target that is not reachable: the batched fragment gives the
    facts and the row that `ip -j` asked one question at a time gives, in one `ip` process on
    a host with few interfaces, two with many, one more for IPv6 rules with a policy table."""
    single = lab.add_host("single")
    dual = lab.add_host("dual")
    lab.add_interface(dual, "eth1", 200)
    ecmp = add_ecmp_host(lab)
    six = lab.add_host("six")  # dual-stack, incident 5 in both families, an IPv6 policy table
    lab.add_interface(six, "eth1", 300)
    for dev, addr in (("eth0", "fd00:18::10/64"), ("eth1", "fd00:18::11/64")):
        lab.nsrun(six, "ip", "-6", "addr", "add", addr, "dev", dev, "nodad")
    lab.nsrun(six, "ip", "-6", "route", "add", "default", "via", "fd00:18::1", "dev", "eth0")
    lab.nsrun(six, "ip", "-6", "route", "add", "default", "via", "fd00:18::1", "dev", "eth1",
              "metric", "2000")  # fmt: skip
    lab.nsrun(six, "ip", "-6", "route", "add", "default", "via", "fd00:18::1", "dev", "eth1",
              "table", "7")  # fmt: skip
    lab.nsrun(six, "ip", "-6", "rule", "add", "from", "fd00:18::11", "table", "7")
    policy = lab.add_host("policy")
    lab.add_interface(policy, "eth1", None)
    lab.nsrun(policy, "ip", "route", "add", "default", "via", lab.gateway, "dev", "eth1",
              "table", "100")  # fmt: skip
    lab.nsrun(policy, "ip", "rule", "add", "from", policy.extra_addrs[0], "table", "100")
    many = lab.add_host("many")  # more interfaces than FEW_LINKS: addresses asked per device
    lab.add_interface(many, "eth1", 200)
    batch = many.dir / "links.batch"
    batch.write_text(
        "".join(f"link add m{i} type veth peer name m{i}p\n" for i in range(FEW_LINKS // 2 + 1))
    )
    lab.nsrun(many, "ip", "-batch", str(batch))
    lonely = lab.add_host("lonely")  # no default route; the target is off its subnet
    lab.nsrun(lonely, "ip", "route", "del", "default")
    unreachable = str(dummy_subnet(lab).network_address + 1)

    cases = [
        (single, lab.gateway, 1),
        (dual, lab.gateway, 1),
        (ecmp, lab.gateway, 1),
        (six, lab.gateway, 2),
        (policy, lab.gateway, 2),
        (many, lab.gateway, 2),
        (lonely, unreachable, 1),
    ]
    rows = {}
    for h, target, ip_runs in cases:
        out, runs = with_ip_counted(lab, h, routes_fragment(target))
        facts = parse_gathered(out, target)
        want = ip_one_at_a_time(lab, h, target)
        assert runs == ip_runs, (h.name, out)
        assert facts.routes == want.routes, h.name
        assert {r.dev: facts.interfaces[r.dev] for r in facts.routes} == want.interfaces
        assert (facts.broker_dev, facts.broker_via) == (want.broker_dev, want.broker_via)
        if any(r.table != "main" for r in want.routes):
            assert facts.rule_tables == want.rule_tables, h.name
        got_row = CHECK.evaluate(facts, RoutesConfig(), HOST, NOW)
        want_row = CHECK.evaluate(want, RoutesConfig(), HOST, NOW)
        assert (got_row.status, got_row.summary) == (want_row.status, want_row.summary)
        assert got_row.metrics == want_row.metrics
        assert got_row.evidence["routes"] == want_row.evidence["routes"]
        rows[h.name] = got_row
    assert rows["dual"].status is Status.CRIT, rows["dual"].summary
    assert rows["six"].status is Status.CRIT, rows["six"].summary
    six_crit = "IPv6 default routes through different interfaces (eth0, eth1) on one subnet fd00"
    assert six_crit in rows["six"].summary, rows["six"].summary
    assert "(7; used by ip rule)" in rows["six"].summary, rows["six"].summary
    assert "(100; used by ip rule)" in rows["policy"].summary, rows["policy"].summary
    assert rows["lonely"].evidence["problems"] == [
        f"ip route get {unreachable}: RTNETLINK answers: Network is unreachable"
    ]
