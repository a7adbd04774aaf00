"""The routes check end to end: real route tables in lab namespaces, real sshd, the real CLI."""

from __future__ import annotations

import ipaddress

import pytest
from fleetcheck.checks.routes import routes_fragment

from fleetcheck.parse.routes import parse_gathered
from tests.lab import Lab, LabHost, run
from tests.test_logs_lab import patrol

pytestmark = pytest.mark.lab


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


def test_route_shapes_in_one_patrol(lab: Lab) -> None:
    single = lab.add_host("single")  # one default, metric 0 (no "metric" key in ip -j)
    dual = lab.add_host("dual")
    second = lab.add_interface(dual, "eth1", 200)  # incident 5: same subnet, 2 defaults
    ecmp = lab.add_host("ecmp")  # one multipath default over two same-subnet interfaces
    lab.add_interface(ecmp, "eth1", None)
    lab.nsrun(
        ecmp, "ip", "route", "replace", "default",
        "nexthop", "via", lab.gateway, "dev", "eth0",
        "nexthop", "via", lab.gateway, "dev", "eth1",
    )  # fmt: skip
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


def test_proc_net_route_fallback_reads_the_same_table(lab: Lab) -> None:
    """Without `ip -j` the fragment falls back to /proc/net/route; run that branch for real
    by hiding `ip -j` behind a shim that refuses -j."""
    h = lab.add_host("old")
    lab.add_interface(h, "eth1", 200)
    shim = h.dir / "bin"
    shim.mkdir()
    ip_path = run("sh", "-c", "command -v ip").stdout.decode().strip()
    (shim / "ip").write_text(
        f'#!/bin/sh\ncase "$1" in -j) echo \'Option "-j" is unknown\' >&2; exit 255;; esac\n'
        f'exec {ip_path} "$@"\n'
    )
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
