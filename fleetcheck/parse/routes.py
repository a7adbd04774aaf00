"""Default routes and interface addresses from Linux (`ip -j`, /proc/net/route) and macOS
(`netstat -rn`, `ifconfig`, `route -n get`) output. Pure functions, no I/O. macOS: a default
with the `I` flag is scoped to its interface (only sockets bound there use it).
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

VPN_PREFIXES = ("tun", "tap", "wg", "utun", "ppp", "ipsec", "tailscale", "zt", "nordlynx", "gpd")


@dataclass(frozen=True)
class DefaultRoute:
    family: int  # 4 or 6
    dev: str
    gateway: str | None
    metric: int = 0
    flags: tuple[str, ...] = ()  # "linkdown", "dead", "onlink"; macOS: the flag letters
    table: str = "main"
    ecmp: bool = False  # one nexthop of a multipath route
    scoped: bool = False  # macOS `I` flag: bound to its interface

    @property
    def down(self) -> bool:
        return "linkdown" in self.flags or "dead" in self.flags

    @property
    def vpn(self) -> bool:
        return self.dev.startswith(VPN_PREFIXES)

    def describe(self) -> str:
        via = f"via {self.gateway} " if self.gateway else ""
        extra = []
        if self.metric:
            extra.append(f"metric {self.metric}")
        if self.down:
            extra.append("LINK DOWN")
        if self.ecmp:
            extra.append("multipath")
        if self.scoped:
            extra.append("scoped")
        if self.table != "main":
            extra.append(f"table {self.table}")
        return f"{via}dev {self.dev}" + (f" ({', '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class Interface:
    name: str
    addrs: tuple[str, ...] = ()  # CIDR, e.g. "198.18.5.10/24"
    up: bool = True

    def networks(self, family: int) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
        ifaces = map(ipaddress.ip_interface, self.addrs)
        return [i.network for i in ifaces if i.version == family and not i.ip.is_link_local]


@dataclass(frozen=True)
class RouteFacts:
    os: str
    source: str  # which commands the facts came from
    routes: tuple[DefaultRoute, ...]
    interfaces: dict[str, Interface] = field(default_factory=dict)
    rule_tables: frozenset[str] = frozenset()  # tables some `ip rule` looks up
    broker_target: str | None = None
    broker_dev: str | None = None
    broker_via: str | None = None
    problems: tuple[str, ...] = ()


_SURPRISES = (TypeError, AttributeError, KeyError, ValueError, IndexError, RecursionError)
P = ParamSpec("P")
R = TypeVar("R")


class RouteParseError(ValueError):
    pass


def _guarded(what: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Route output comes from arbitrary hosts and tool versions: any surprise in its shape
    (a string where an object was expected, a metric that is not a number) is one clean
    RouteParseError naming the source, never a crash."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return fn(*args, **kwargs)
            except RouteParseError:
                raise
            except _SURPRISES as e:
                raise RouteParseError(
                    f"{what}: unexpected output ({type(e).__name__}: {e})"
                ) from None

        return guarded

    return wrap


# ---------------------------------------------------------------- Linux


def _json(text: str, what: str) -> list[Any]:
    """One or more JSON arrays one after another (one `ip -j addr show dev X` per
    interface), as one list."""
    # strict=False: iproute2 writes an interface name's control characters raw (the kernel
    # accepts ESC in a name), which strict JSON refuses; the name is made safe where it is
    # printed (core.safe_text), and the route table is still read
    decoder = json.JSONDecoder(strict=False)
    out: list[Any] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        try:
            value, end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            raise RouteParseError(f"{what}: not JSON ({text[pos : pos + 60]!r})") from None
        out.extend(value if isinstance(value, list) else [value])
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


@_guarded("ip -j route")
def parse_ip_routes(text: str, family: int) -> list[DefaultRoute]:
    """`ip -j [-6] route show default [table all]` -> one DefaultRoute per path."""
    out = []
    for r in _json(text, "ip -j route"):
        if r.get("type", "unicast") != "unicast":
            continue  # unreachable/blackhole/prohibit defaults route nothing out
        table = str(r.get("table", "main"))
        metric = int(r.get("metric", 0))  # metric 0 has no key
        flags = tuple(r.get("flags", ()))
        hops = r.get("nexthops")
        for hop in hops or (r,):  # a multipath route: one DefaultRoute per nexthop
            hop_flags = tuple(hop.get("flags", ())) + flags if hops else flags
            dev, gateway = hop.get("dev", "?"), hop.get("gateway")
            out.append(DefaultRoute(family, dev, gateway, metric, hop_flags, table, bool(hops)))
    return out


@_guarded("ip -j addr")
def parse_ip_addr(text: str) -> dict[str, Interface]:
    out = {}
    for link in _json(text, "ip -j addr"):
        name = link.get("ifname", "?")
        addrs = tuple(
            f"{a['local']}/{a.get('prefixlen', 32)}"
            for a in link.get("addr_info", ())
            if "local" in a
        )
        up = "UP" in link.get("flags", ()) and link.get("operstate") != "DOWN"
        out[name] = Interface(name, addrs, up)
    return out


@_guarded("ip -o addr")
def parse_ip_addr_text(text: str) -> dict[str, Interface]:
    """`ip -o addr show` (old iproute2 without -j)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"\d+:\s+(\S+?)(?:@\S+)?\s+inet6?\s+(\S+)", line)
        if m:
            found.setdefault(m.group(1), []).append(m.group(2))
    return {k: Interface(k, tuple(v)) for k, v in found.items()}


@_guarded("ip -j rule")
def parse_ip_rules(text: str) -> frozenset[str]:
    return frozenset(
        str(r["table"])
        for r in _json(text, "ip -j rule")
        if "table" in r and str(r["table"]) not in ("local", "main", "default")
    )


@_guarded("ip -j route get")
def parse_ip_route_get(text: str) -> tuple[str | None, str | None]:
    data = _json(text, "ip -j route get")
    if not data:
        return None, None
    return data[0].get("dev"), data[0].get("gateway")


@_guarded("/proc/net/route")
def parse_proc_net_route(text: str) -> list[DefaultRoute]:
    """/proc/net/route: hex, little-endian addresses; default = destination and mask 0."""
    out = []
    for line in text.splitlines()[1:]:
        cols = line.split()
        if len(cols) < 8:
            continue
        dev, dest, gw, flags, metric, mask = cols[0], cols[1], cols[2], cols[3], cols[6], cols[7]
        if dest != "00000000" or mask != "00000000":
            continue
        if not int(flags, 16) & 0x1:  # RTF_UP
            continue
        gateway = str(ipaddress.IPv4Address(int(gw, 16).to_bytes(4, "little")))
        out.append(DefaultRoute(4, dev, None if gateway == "0.0.0.0" else gateway, int(metric)))
    return out


# ---------------------------------------------------------------- macOS / BSD


@_guarded("netstat -rn")
def parse_netstat(text: str, family: int = 4) -> list[DefaultRoute]:
    """`netstat -rn [-f inet|inet6]`: every `default` row of the Internet (or Internet6)
    section, scoped (`I` flag) rows marked as such."""
    out = []
    section = None
    columns: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if s in ("Internet:", "Internet6:"):
            section = 4 if s == "Internet:" else 6
            columns = []
            continue
        if s.startswith("Destination"):
            columns = s.split()
            if section is None:
                section = family
            continue
        if section != family or not columns or not s:
            continue
        cols = s.split()
        if cols[0] != "default":
            continue
        row = dict(zip(columns, cols, strict=False))
        # Expire may be empty; Netif is then the last column present
        netif = row.get("Netif")
        if netif is None or netif.isdigit():
            netif = cols[-1] if not cols[-1].isdigit() else cols[-2]
        flags = row.get("Flags", "")
        gateway = row.get("Gateway")  # may be `link#N` (an interface, no router)
        out.append(DefaultRoute(family, netif, gateway, 0, tuple(flags), scoped="I" in flags))
    return out


@_guarded("ifconfig")
def parse_ifconfig(text: str) -> dict[str, Interface]:
    out: dict[str, Interface] = {}
    name = None
    addrs: list[str] = []
    up = True

    def flush() -> None:
        if name is not None:
            out[name] = Interface(name, tuple(addrs), up)

    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+):\s+flags=\w+<([^>]*)>", line)
        if m:
            flush()
            name, addrs, up = m.group(1), [], "UP" in m.group(2).split(",")
            continue
        s = line.strip()
        m4 = re.match(r"inet (\d+\.\d+\.\d+\.\d+)(?: --> \S+)? netmask (0x[0-9a-fA-F]+|\S+)", s)
        if m4 and name:
            mask = m4.group(2)
            if mask.startswith("0x"):
                prefix = bin(int(mask, 16)).count("1")
            else:
                prefix = ipaddress.IPv4Network(f"0.0.0.0/{mask}").prefixlen
            addrs.append(f"{m4.group(1)}/{prefix}")
            continue
        m6 = re.match(r"inet6 ([0-9a-fA-F:]+)(?:%\S+)? prefixlen (\d+)", s)
        if m6 and name:
            addrs.append(f"{m6.group(1)}/{m6.group(2)}")
    flush()
    return out


@_guarded("route -n get")
def parse_route_get(text: str) -> tuple[str | None, str | None]:
    """`route -n get X` on macOS/BSD: (interface, gateway)."""
    dev = gw = None
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        if key == "interface":
            dev = value.strip() or None
        elif key == "gateway":
            gw = value.strip() or None
    return dev, gw


# ---------------------------------------------------------------- the gathered fragment


# what the first object of each `ip -j` answer must have: a misread batch is an error, never
# one command's answer taken for another's
_ANSWER_KEY = dict.fromkeys(("route4", "route6", "get"), "dst") | {"addr": "ifname"}
_ANSWER_KEY |= dict.fromkeys(("rules", "rules6"), "priority")


@dataclass(frozen=True)
class IpAnswer:
    name: str  # what the fragment asked (the section header's word for it)
    json: str | None  # its JSON line
    error: str | None  # or what ip said when it failed


@_guarded("ip -batch")
def parse_ip_batch(text: str) -> list[IpAnswer]:
    """One `ip -j -force -batch -` answer with stderr merged, after a header naming its
    commands: each command printed one JSON line, or its error lines then `Command failed
    -:N`. ip flushes after each command, so the answers come in order; ip that stops (a bad
    argument ends the batch without "Command failed") leaves its words to the command it was
    on and the rest "not run". Anything else (a JSON line too many, a failure out of turn, an
    answer of the wrong shape) is an error."""
    head, _, body = text.partition("\n")
    names = head.split()
    json_lines: list[str | None] = [None] * len(names)
    errors: list[str | None] = [None] * len(names)
    i = 0
    said: list[str] = []
    for line in body.split("\n"):
        s = line.strip()
        if not s:
            continue
        failed = re.fullmatch(r"Command failed \S*:(\d+)", s)
        if failed:
            n = int(failed.group(1))
            if n - 1 != i or n > len(names):
                raise RouteParseError(f"ip -batch: command {n} failed out of turn")
            errors[i] = "; ".join(said)[:200] or "failed"
            i, said = i + 1, []
        elif s.startswith("["):
            if i >= len(names):
                raise RouteParseError(f"ip -batch: more answers than the {len(names)} asked")
            first = json.loads(s, strict=False) if s != "[]" else []
            key = _ANSWER_KEY.get(names[i])
            if first and key and (not isinstance(first[0], dict) or key not in first[0]):
                raise RouteParseError(f"ip -batch: the answer for {names[i]} has no {key!r}")
            json_lines[i] = s
            i, said = i + 1, []
        else:
            said.append(s)
    if said and i < len(names):  # ip stopped on this command without "Command failed"
        errors[i] = "; ".join(said)[:200]
        i += 1
    for k in range(i, len(names)):
        errors[k] = "not run (ip stopped before it)"
    return [IpAnswer(n, j, e) for n, j, e in zip(names, json_lines, errors, strict=True)]


def _linux_facts(s: dict[str, str], os_name: str, target: str | None) -> RouteFacts:
    """The `ip -j` batches: default routes, addresses, rules and the target's route."""
    if "cut" in s:
        raise RouteParseError(f"ip printed {s['cut'].strip()} bytes, more than read")
    answers = [a for key in ("ip", "ipdev", "ip6rules") if key in s for a in parse_ip_batch(s[key])]
    by: dict[str, list[IpAnswer]] = {}
    for a in answers:
        by.setdefault(a.name, []).append(a)
    problems: list[str] = []

    def one(name: str) -> IpAnswer | None:
        return by[name][0] if by.get(name) else None

    v4 = one("route4")
    if v4 is None or v4.json is None:
        why = v4.error if v4 is not None and v4.error else "no answer"
        raise RouteParseError(f"ip route show 0.0.0.0/0: {why}")
    routes = parse_ip_routes(v4.json, 4)
    v6 = one("route6")
    if v6 is not None and v6.json is not None:
        routes += parse_ip_routes(v6.json, 6)
    else:
        problems.append(f"IPv6 default routes not read: {v6.error if v6 else 'no answer'}")
    ifaces: dict[str, Interface] = {}
    rules: frozenset[str] = frozenset()
    for a in by.get("addr", []) + by.get("rules", []) + by.get("rules6", []):
        if a.json is None:
            problems.append(f"ip {'addr' if a.name == 'addr' else 'rule'}: {a.error}")
        elif a.name == "addr":
            ifaces.update(parse_ip_addr(a.json))
        else:
            rules |= parse_ip_rules(a.json)
    dev = via = None
    get = one("get")
    if target and get is not None:
        if get.json is not None:
            dev, via = parse_ip_route_get(get.json)
        else:
            problems.append(f"ip route get {target}: {get.error}")
    return RouteFacts(
        os_name, "ip -j", tuple(routes), ifaces, rules, target, dev, via, tuple(problems)
    )


def split_sections(text: str) -> dict[str, str]:
    """`@@name [value]` lines start sections (`@@os Linux` names the OS)."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.split("\n"):
        m = re.fullmatch(r"@@(\w+)(?: (.*))?", line)
        if m:
            current = m.group(1)
            sections[current] = [m.group(2)] if m.group(2) else []
            continue
        if current is not None:
            sections[current].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in sections.items()}


@_guarded("route facts")
def parse_gathered(text: str, target: str | None) -> RouteFacts:
    s = split_sections(text)
    os_name = s.get("os", "").strip() or "unknown"
    if "netstat" in s:
        routes = parse_netstat(s["netstat"], 4) + parse_netstat(s.get("netstat6", ""), 6)
        ifaces = parse_ifconfig(s.get("ifconfig", ""))
        dev, via = parse_route_get(s.get("get", "")) if target else (None, None)
        source = "netstat -rn, ifconfig, route -n get"
        return RouteFacts(os_name, source, tuple(routes), ifaces, frozenset(), target, dev, via)
    if "ip" in s:
        return _linux_facts(s, os_name, target)
    if "proc" in s:
        routes = parse_proc_net_route(s["proc"])
        ifaces = parse_ip_addr_text(s.get("addrtext", ""))
        problems = ("IPv6 defaults not read (no ip -j)",)
        return RouteFacts(os_name, "/proc/net/route", tuple(routes), ifaces, problems=problems)
    raise RouteParseError(f"no route table in the host's output (os {os_name!r})")
