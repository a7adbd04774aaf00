"""Route parsers and the routes verdict, table-driven. Linux inputs are the shapes the lab
produces (see test_routes_lab.py for the real thing); macOS inputs are RECORDINGS in
tests/recordings/ (we cannot run macOS here), each file marked as such in its header."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fleetcheck.checks.routes import CHECK, RoutesConfig, judge, routes_fragment

from fleetcheck.config import HostConfig
from fleetcheck.core.model import Status
from fleetcheck.parse.routes import (
    DefaultRoute,
    Interface,
    RouteFacts,
    RouteParseError,
    parse_gathered,
    parse_ifconfig,
    parse_ip_routes,
    parse_netstat,
    parse_proc_net_route,
    parse_route_get,
)

RECORDINGS = Path(__file__).parent / "recordings"
NOW = datetime(2026, 11, 29, 7, 0, tzinfo=UTC)
HOST = HostConfig(name="mini", ssh="local")


# ---------------------------------------------------------------- Linux parsers


def test_ip_json_metric_zero_ecmp_linkdown_and_non_unicast() -> None:
    text = (
        '[{"dst":"default","gateway":"198.18.5.1","dev":"eth0","flags":[]},'
        '{"dst":"default","gateway":"198.18.5.1","dev":"eth1","metric":200,"flags":["linkdown"]},'
        '{"dst":"default","metric":50,"flags":[],"nexthops":['
        '{"gateway":"198.18.5.1","dev":"eth2","weight":1,"flags":[]},'
        '{"gateway":"198.18.9.1","dev":"eth3","weight":1,"flags":["linkdown"]}]},'
        '{"type":"unreachable","dst":"default","dev":"lo","metric":4278198272,"flags":[]},'
        '{"dst":"default","gateway":"198.18.5.1","dev":"eth1","table":"100","flags":[]}]'
    )
    routes = parse_ip_routes(text, 4)
    assert [(r.dev, r.metric, r.down, r.ecmp, r.table) for r in routes] == [
        ("eth0", 0, False, False, "main"),
        ("eth1", 200, True, False, "main"),
        ("eth2", 50, False, True, "main"),
        ("eth3", 50, True, True, "main"),
        ("eth1", 0, False, False, "100"),
    ]


def test_ip_json_errors_are_named() -> None:
    with pytest.raises(RouteParseError, match="ip -j route: not JSON"):
        parse_ip_routes('Option "-j" is unknown', 4)
    assert parse_ip_routes("", 4) == []


def test_proc_net_route() -> None:
    text = (
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "eth0\t00000000\t010512C6\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
        "eth1\t00000000\t010512C6\t0003\t0\t0\t200\t00000000\t0\t0\t0\n"
        "eth0\t000512C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        "eth9\t00000000\t010512C6\t0002\t0\t0\t0\t00000000\t0\t0\t0\n"  # not RTF_UP
    )
    assert [(r.dev, r.gateway, r.metric) for r in parse_proc_net_route(text)] == [
        ("eth0", "198.18.5.1", 0),
        ("eth1", "198.18.5.1", 200),
    ]


# ---------------------------------------------------------------- Linux: the ip -batch answer
# Shapes as `ip -j -force -batch -` prints them in the lab (one JSON line per command, a failed
# command's error then `Command failed -:N`, stderr merged in order).

ROUTE4 = '[{"dst":"default","gateway":"198.18.5.1","dev":"eth0","flags":[]}]'
ROUTE6 = '[{"dst":"default","gateway":"fd00::1","dev":"eth0","metric":1024,"flags":[]}]'
ADDR = (
    '[{"ifindex":2,"ifname":"eth0","flags":["UP","LOWER_UP"],"operstate":"UP","addr_info":'
    '[{"family":"inet","local":"198.18.5.10","prefixlen":24},'
    '{"family":"inet6","local":"fd00::10","prefixlen":64}]}]'
)
RULES = '[{"priority":0,"src":"all","table":"local"},{"priority":9,"src":"all","table":"100"}]'
GET = '[{"dst":"198.18.5.1","dev":"eth0","prefsrc":"198.18.5.10","flags":[],"uid":0}]'
UNREACHABLE = "RTNETLINK answers: Network is unreachable"


def linux(*sections: str) -> str:
    return "@@os Linux\n" + "".join(f"{s}\n" for s in sections)


def test_one_batch_answer_gives_every_fact() -> None:
    text = linux("@@ip route4 route6 addr rules get", ROUTE4, ROUTE6, ADDR, RULES, GET)
    facts = parse_gathered(text, "198.18.5.1")
    assert [(r.family, r.dev, r.gateway) for r in facts.routes] == [
        (4, "eth0", "198.18.5.1"),
        (6, "eth0", "fd00::1"),
    ]
    assert facts.interfaces["eth0"].addrs == ("198.18.5.10/24", "fd00::10/64")
    assert facts.rule_tables == {"100"}
    assert (facts.broker_dev, facts.broker_via, facts.problems) == ("eth0", None, ())
    assert (facts.os, facts.source) == ("Linux", "ip -j")


def test_addresses_per_interface_and_ipv6_rules_come_in_their_own_batches() -> None:
    text = linux(
        "@@ip route4 route6 rules",
        ROUTE4,
        ROUTE6,
        RULES,
        "@@ipdev addr addr",
        ADDR,
        'Device "eth9" does not exist.',
        "Command failed -:2",
        "@@ip6rules rules6",
        '[{"priority":7,"src":"fd00::10","srclen":128,"table":"7"}]',
    )
    facts = parse_gathered(text, None)
    assert set(facts.interfaces) == {"eth0"}
    assert facts.rule_tables == {"100", "7"}
    assert facts.problems == ('ip addr: Device "eth9" does not exist.',)


def test_ip_that_stops_without_command_failed_gives_its_words_and_the_rest_not_run() -> None:
    """ip ends a batch on a bad argument (`route get db`: "any valid prefix is expected")
    without a "Command failed" line: its words are that command's reason, never None."""
    bad = 'Error: any valid prefix is expected rather than "db".'
    text = linux("@@ip route4 route6 rules get", ROUTE4, "[]", RULES, bad)
    facts = parse_gathered(text, "db")
    assert facts.problems == (f"ip route get db: {bad}",)
    stopped = linux("@@ip route4 route6 rules get", ROUTE4, bad)
    facts = parse_gathered(stopped, "db")
    assert facts.problems == (
        f"IPv6 default routes not read: {bad}",
        "ip rule: not run (ip stopped before it)",
        "ip route get db: not run (ip stopped before it)",
    )


@pytest.mark.parametrize(
    ("target", "resolved"),
    [("db", True), ("cafe", True), ("worker-1.example", True), ("198.18.0.7", False),
     ("fd00::1", False)],
)  # fmt: skip
def test_a_broker_name_is_resolved_on_the_host_even_when_it_looks_hex(
    target: str, resolved: bool
) -> None:
    """A name made of hex letters only was taken for an address and asked as `route get
    db`; a name is resolved on the host (getent), an address is asked as it is."""
    first = routes_fragment(target).split("\n")[1]
    assert first.startswith("t=$(getent ahosts ") is resolved, first
    assert target in first


def test_a_failed_route_get_is_a_problem_not_an_error() -> None:
    text = linux(
        "@@ip route4 route6 rules get", ROUTE4, "[]", RULES, UNREACHABLE, "Command failed -:4"
    )
    facts = parse_gathered(text, "192.0.2.9")
    assert facts.broker_dev is None and len(facts.routes) == 1
    assert facts.problems == (f"ip route get 192.0.2.9: {UNREACHABLE}",)


def test_ipv6_disabled_reads_ipv4_and_says_so() -> None:
    no6 = "RTNETLINK answers: Address family not supported by protocol"
    text = linux("@@ip route4 route6 rules", ROUTE4, no6, "Command failed -:2", RULES)
    facts = parse_gathered(text, None)
    assert [r.family for r in facts.routes] == [4]
    assert facts.problems == (f"IPv6 default routes not read: {no6}",)


@pytest.mark.parametrize(
    "sections,error",
    [
        (  # the IPv4 dump itself failed: nothing to judge
            ["@@ip route4 route6", "Error: some kernel refusal", "Command failed -:1", "[]"],
            "ip route show 0.0.0.0/0: Error: some kernel refusal",
        ),
        (  # a failure reported for a command whose turn has passed
            ["@@ip route4 route6 rules", ROUTE4, ROUTE6, "oops", "Command failed -:1"],
            "command 1 failed out of turn",
        ),
        (  # more JSON lines than commands asked
            ["@@ip route4 route6", ROUTE4, ROUTE6, RULES],
            "more answers than the 2 asked",
        ),
        (  # an old ip printed text for one command: the next answer is not a route dump
            ["@@ip route4 route6 rules", "default via 198.18.5.1 dev eth0", RULES, RULES],
            "the answer for route4 has no 'dst'",
        ),
        (  # the shell printed a marker instead of an answer over MAX_IP_OUTPUT
            ["@@ip route4 route6 rules", "@@cut 2000000"],
            "ip printed 2000000 bytes, more than read",
        ),
        (  # an answer that is not JSON at all
            ["@@ip route4 route6", "[{not json"],
            "ip -batch: unexpected output",
        ),
    ],
    ids=["route4-failed", "out-of-turn", "too-many", "wrong-shape", "cut", "not-json"],
)
def test_a_misread_batch_is_a_named_error(sections: list[str], error: str) -> None:
    with pytest.raises(RouteParseError, match=re.escape(error)):
        parse_gathered(linux(*sections), None)


# ---------------------------------------------------------------- macOS parsers (recordings)


def recording(name: str) -> str:
    text = (RECORDINGS / name).read_text()
    assert text.startswith("# RECORDING"), "recorded outputs must say so in their header"
    return text


def test_netstat_big_sur_format_scoped_rows() -> None:
    facts = parse_gathered(recording("macos14-wired-and-wifi-same-subnet.txt"), "192.168.1.5")
    v4 = [r for r in facts.routes if r.family == 4]
    assert [(r.dev, r.gateway, r.scoped) for r in v4] == [
        ("en0", "192.168.1.1", False),
        ("en1", "192.168.1.1", True),
    ]
    assert facts.interfaces["en0"].addrs[-1] == "192.168.1.20/24"
    assert facts.interfaces["en1"].addrs[-1] == "192.168.1.21/24"
    assert (facts.broker_dev, facts.os) == ("en0", "Darwin")


def test_netstat_vpn_link_gateway_and_point_to_point() -> None:
    facts = parse_gathered(recording("macos13-full-tunnel-vpn-utun.txt"), None)
    v4 = [r for r in facts.routes if r.family == 4]
    assert [(r.dev, r.gateway, r.scoped) for r in v4] == [
        ("utun3", "link#17", False),
        ("en0", "10.0.0.1", True),
    ]
    assert facts.interfaces["utun3"].addrs == ("10.8.0.2/32",)


def test_netstat_legacy_columns() -> None:
    routes = parse_netstat(recording("macos10-single-legacy-columns.txt"), 4)
    assert [(r.dev, r.gateway, r.flags) for r in routes] == [
        ("en0", "10.10.10.1", ("U", "G", "S", "c"))
    ]


@pytest.mark.parametrize(
    "name,status,words",
    [
        (
            "macos14-wired-and-wifi-same-subnet.txt",
            Status.CRIT,
            [
                "(en0, en1) on one subnet 192.168.1.0/24",
                "bond them",
                "broker 192.168.1.5 goes out en0",
            ],
        ),
        ("macos13-full-tunnel-vpn-utun.txt", Status.OK, ["one unscoped IPv4 default"]),
        (
            "macos10-single-legacy-columns.txt",
            Status.OK,
            ["one default route: via 10.10.10.1 dev en0"],
        ),
    ],
)
def test_macos_recordings_verdicts(name: str, status: Status, words: list[str]) -> None:
    target = "192.168.1.5" if "wifi" in name else None
    facts = parse_gathered(recording(name), target)
    r = CHECK.evaluate(facts, RoutesConfig(), HOST, NOW)
    assert r.status is status, r.summary
    for w in words:
        assert w in r.summary, r.summary


def test_ifconfig_and_route_get() -> None:
    ifaces = parse_ifconfig(
        "en5: flags=8822<BROADCAST,SMART,SIMPLEX,MULTICAST> mtu 1500\n"
        "\tinet 172.16.0.9 netmask 0xfffff000 broadcast 172.16.15.255\n"
    )
    assert ifaces["en5"] == Interface("en5", ("172.16.0.9/20",), up=False)
    assert parse_route_get("   route to: default\n    gateway: 10.0.0.1\n  interface: en0\n") == (
        "en0",
        "10.0.0.1",
    )


def test_gathered_without_a_table_is_an_error() -> None:
    with pytest.raises(RouteParseError, match="no route table"):
        parse_gathered("@@os Plan9\n", None)


# ---------------------------------------------------------------- the verdict


def R(dev: str, gw: str | None = "10.0.0.1", metric: int = 0, **kw: object) -> DefaultRoute:
    return DefaultRoute(kw.pop("family", 4), dev, gw, metric, **kw)  # type: ignore[arg-type]


IF = {
    "eth0": Interface("eth0", ("10.0.0.5/24",)),
    "wlan0": Interface("wlan0", ("10.0.0.6/24",)),
    "wwan0": Interface("wwan0", ("100.64.3.2/30",)),
    "wg0": Interface("wg0", ("10.8.0.2/32",)),
}

JUDGE = [
    ([R("eth0")], Status.OK, "one default route"),
    ([], Status.WARN, "no IPv4 default route"),
    ([R("eth0", flags=("linkdown",))], Status.WARN, "the only IPv4 default route's link is down"),
    ([R("eth0"), R("wlan0", metric=600)], Status.CRIT, "on one subnet 10.0.0.0/24"),
    # same gateway, interfaces we know nothing about: still one subnet
    ([R("ethX"), R("ethY")], Status.CRIT, "one subnet the same gateway 10.0.0.1"),
    ([R("eth0"), R("wlan0", flags=("linkdown",))], Status.WARN, "is link-down now"),
    ([R("eth0"), R("wwan0", "100.64.3.1", 700)], Status.OK, "judged legitimate failover"),
    ([R("eth0"), R("wwan0", "100.64.3.1", 0)], Status.WARN, "equal metrics"),
    ([R("eth0"), R("eth0", "10.0.0.254")], Status.WARN, "on one interface with equal metrics"),
    ([R("eth0"), R("wg0", None)], Status.OK, "judged legitimate: VPN (wg0)"),
    ([R("eth0", ecmp=True), R("wwan0", "100.64.3.1", ecmp=True)], Status.OK, "multipath (ECMP)"),
    ([R("eth0", ecmp=True), R("wlan0", ecmp=True)], Status.CRIT, "one subnet"),
    ([R("eth0"), R("wlan0", table="100")], Status.OK, "policy-routing tables (100; no ip rule"),
    ([R("eth0"), R("wlan0", "10.0.0.1", scoped=True)], Status.CRIT, "one subnet"),
    ([R("eth0"), R("wwan0", "100.64.3.1", scoped=True)], Status.OK, "macOS scoped"),
    (
        [R("eth0"), R("eth0", "fe80::1", family=6), R("wlan0", "fe80::1", family=6)],
        Status.CRIT,
        "IPv6 default routes through different interfaces (eth0, wlan0) on one subnet the "
        "same gateway fe80::1",
    ),
]


@pytest.mark.parametrize("routes,status,words", JUDGE)
def test_judge(routes: list[DefaultRoute], status: Status, words: str) -> None:
    got, reason = judge(RouteFacts("Linux", "ip -j", tuple(routes), IF))
    assert got is status, reason
    assert words in reason, reason


def test_summary_lists_every_route_and_the_broker_path() -> None:
    facts = RouteFacts(
        "Linux",
        "ip -j",
        (R("eth0"), R("wlan0", metric=600)),
        IF,
        broker_target="10.0.0.9",
        broker_dev="eth0",
    )
    r = CHECK.evaluate(facts, RoutesConfig(), HOST, NOW)
    assert r.status is Status.CRIT
    assert "via 10.0.0.1 dev eth0 [10.0.0.5/24]" in r.summary
    assert "via 10.0.0.1 dev wlan0 (metric 600) [10.0.0.6/24]" in r.summary
    assert r.summary.endswith("broker 10.0.0.9 goes out eth0")
    assert r.metrics == {"default_routes": 2, "interfaces": 2, "unscoped_default_routes": 2}
    assert len(r.evidence["routes"]) == 2


def test_fragment_quotes_the_target(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    # a name (not an address) is resolved on the host with getent: shim it, so this test
    # never sends a DNS query anywhere
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "getent").write_text('#!/bin/sh\necho "getent $*" >> "$GETENT_LOG"\nexit 2\n')
    (shim / "getent").chmod(0o755)
    log = tmp_path / "getent.log"
    out = subprocess.run(
        ["/bin/sh", "-c", routes_fragment(f"x'; touch {marker}; '")],
        capture_output=True,
        check=True,
        env={"PATH": f"{shim}:/usr/sbin:/usr/bin:/sbin:/bin", "GETENT_LOG": str(log)},
    ).stdout.decode()
    assert log.read_text() == f"getent ahosts x'; touch {marker}; '\n"  # one argument, intact
    assert not marker.exists()
    assert out.startswith("@@os Linux")


@pytest.mark.parametrize(
    "name",
    [
        "macos14-wired-and-wifi-same-subnet.txt",
        "macos13-full-tunnel-vpn-utun.txt",
        "macos10-single-legacy-columns.txt",
    ],
)
def test_macos_branch_asks_ifconfig_only_for_default_route_interfaces(
    name: str, tmp_path: Path
) -> None:
    """The fragment's Darwin branch run by /bin/sh, with uname, netstat, ifconfig and route
    answering from a RECORDING (we cannot run macOS here) and no `ip`: `ifconfig X` is asked
    only for the default routes' interfaces, and the facts equal those of the recorded full
    output."""
    from fleetcheck.parse.routes import split_sections

    sections = split_sections(recording(name))
    for key in ("netstat", "netstat6", "ifconfig", "get"):
        (tmp_path / key).write_text(sections.get(key, "") + "\n")
    shim = tmp_path / "bin"
    shim.mkdir()
    asked = tmp_path / "asked"
    scripts = {
        "uname": "echo Darwin",
        "netstat": (
            f'case "$*" in *inet6*) cat {tmp_path}/netstat6;; *) cat {tmp_path}/netstat;; esac'
        ),
        "ifconfig": (
            f'echo "$1" >> {asked}\n'
            'awk -v d="$1" \'/^[^ \\t]/ {on = index($0, d ":") == 1} on\' '
            f"{tmp_path}/ifconfig"
        ),
        "route": f"cat {tmp_path}/get",
        "ip": 'echo "sh: ip: command not found" >&2; exit 127',  # macOS has none
    }
    for tool, body in scripts.items():
        (shim / tool).write_text(f"#!/bin/sh\n{body}\n")
        (shim / tool).chmod(0o755)
    out = subprocess.run(
        ["/bin/sh", "-c", routes_fragment("192.168.1.5")],
        capture_output=True,
        check=True,
        env={"PATH": f"{shim}:/usr/bin:/bin"},
    ).stdout.decode()
    facts = parse_gathered(out, "192.168.1.5")
    recorded = parse_gathered(recording(name), "192.168.1.5")
    devs = {r.dev for r in recorded.routes}
    assert sorted(asked.read_text().split()) == sorted(devs)
    assert facts.routes == recorded.routes
    assert facts.interfaces == {d: i for d, i in recorded.interfaces.items() if d in devs}
    assert judge(facts) == judge(recorded)
