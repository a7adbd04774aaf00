"""`config discover`'s hosts: one host per group of addresses whose client names agree, named
from those names (or the ssh alias, or the Ansible inventory), the addresses the config already
claims marked. Pure and table-tested; the broker is read in fleetcheck.discover."""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fleetcheck.config import FleetConfig
from fleetcheck.parse.clientlist import Client, normalise_ip

# Words that name a program or a role, never a machine.
ROLE_WORDS = frozenset(
    """worker workers rater consumer producer client clients redis valkey python py node app
    main job jobs queue queues task tasks beat scheduler web api server celery rq arq dramatiq
    sidekiq bull huey fleetcheck monitor agent proc process thread conn pool sub pub""".split()
)
HALF_OPEN_IDLE = 600  # seconds idle, not blocked: a connection that may have no peer left


# ---------------------------------------------------------------- host names from clients


PID_SUFFIX = re.compile(r"(?:[._-]\d{4,}|\.\d+)$")  # web-04.12345, worker-12345
ORDINAL = re.compile(r"^(.*?)[._-]?\d{1,3}$")
HEX_ID = re.compile(r"[0-9a-f]{8,}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MAX_SHARED = 2  # one machine shows up from at most this many addresses (WSL2 NAT: two)


def host_like(text: str) -> bool:
    """Whether `text` can be a machine's name: a DNS-style label or dotted name with a
    letter in it, not a role word, a pid, a bare number or a hex id."""
    if not 2 <= len(text) <= 253 or not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", text):
        return False
    if text.isdigit() or text in ROLE_WORDS or HEX_ID.fullmatch(text):
        return False
    if re.fullmatch(r"(pid|p|t)\d+", text) or not re.search(r"[a-z]", text):
        return False
    return not re.fullmatch(r"[\d.]+", text)


def name_candidates(name: str) -> list[str]:
    """Machine names a client name may carry, most likely first: the part after `@`
    (`celery@web-04.prod`), else each `:`/`/`-separated part that looks like a host name,
    whole (`worker:ip-10-0-3-17:1` -> ip-10-0-3-17, `rq:worker:web-04.prod` -> web-04.prod,
    `worker-17`, `w1`), a trailing pid taken off (`web-04.12345` -> web-04)."""
    text = name.strip().lower()
    if "@" in text:
        after = re.split(r"[:/\s]", text.rsplit("@", 1)[1])[0]
        after = PID_SUFFIX.sub("", after.strip(".-_"))
        if host_like(after):
            return [after]
    out: list[str] = []
    for seg in re.split(r"[:/|,;\s=#@]+", text):
        seg = seg.strip(".-_")
        stem = PID_SUFFIX.sub("", seg)
        if stem != seg and (stem in ROLE_WORDS or not host_like(stem)):
            continue  # worker-12345: a process, not a machine
        if host_like(stem) and stem not in out:
            out.append(stem)
    return out


def guess_names(names_by_addr: dict[str, list[str]]) -> dict[str, str | None]:
    """addr -> guessed host name (None when its client names hold no name).

    Per address, the candidate seen at the fewest addresses wins (an app prefix on every
    machine is not a machine's name; one at more than MAX_SHARED addresses is a process's),
    then the one most of its clients carry, then the earliest in the name. Names that differ
    only by a trailing number (worker-1 .. worker-12) give their common stem, if a name."""
    per_addr: dict[str, Counter[str]] = {}
    first_pos: dict[str, dict[str, int]] = {}
    for addr, names in names_by_addr.items():
        counts: Counter[str] = Counter()
        pos: dict[str, int] = {}
        for n in names:
            for i, cand in enumerate(name_candidates(n)):
                counts[cand] += 1
                pos[cand] = min(pos.get(cand, i), i)
        per_addr[addr] = counts
        first_pos[addr] = pos
    spread: Counter[str] = Counter()
    for counts in per_addr.values():
        spread.update(counts.keys())
    out: dict[str, str | None] = {}
    for addr, counts in per_addr.items():
        usable = {c: n for c, n in counts.items() if spread[c] <= MAX_SHARED}
        if not usable:
            out[addr] = None
            continue
        best = min(usable, key=lambda t: (spread[t], -usable[t], first_pos[addr][t], t))
        if usable[best] == 1 and len(usable) > 1:
            stems = {ORDINAL.sub(r"\1", c) for c in usable}
            if len(stems) == 1:  # worker-1, worker-2, ...: ordinals of processes
                stem = stems.pop()
                best = stem if host_like(stem) else ""
        out[addr] = best or None
    return out


# ---------------------------------------------------------------- grouping


@dataclass(frozen=True)
class HostDraft:
    name: str
    addrs: tuple[str, ...]
    connections: int
    client_names: tuple[str, ...]
    ssh: str | None  # alias from ~/.ssh/config, else None (then the first address)
    named_from: str  # "client names", "ssh config" or "address"
    claimed: dict[str, str] = field(default_factory=dict)  # addr -> host in the current config
    # connections idle past HALF_OPEN_IDLE and not blocked in a command: with all of them so,
    # the machine may be gone, its sockets left half-open on the broker (drafted commented out)
    idle: int = 0

    @property
    def half_open(self) -> bool:
        return self.connections > 0 and self.idle == self.connections


def claimed_addresses(fleet: FleetConfig) -> dict[str, str]:
    """{address: host} of the addresses the current config's hosts claim (their `addrs`,
    normalised as CLIENT LIST shows them; the first host to claim one keeps it): the draft
    marks the clients that are already a host."""
    from fleetcheck.core.hostfacts import addrs_of

    claimed: dict[str, str] = {}
    for h in fleet.hosts:
        for a in addrs_of(h):
            claimed.setdefault(normalise_ip(a), h.name)
    return claimed


def group_hosts(
    clients: Iterable[Client],
    aliases: dict[str, str] | None = None,
    claimed: dict[str, str] | None = None,
) -> list[HostDraft]:
    """Clients (our own connection, replicas and unix-socket clients already left out) as
    hosts: grouped by address, named, joined by name."""
    aliases = aliases or {}
    claimed = claimed or {}
    by_addr: dict[str, list[Client]] = {}
    for c in clients:
        if c.host and c.host != "unix" and not ({"S", "M"} & set(c.flags)):
            by_addr.setdefault(c.host, []).append(c)
    guesses = guess_names({a: [c.name for c in cs if c.name] for a, cs in by_addr.items()})
    named: dict[str, list[str]] = {}
    how: dict[str, str] = {}
    for addr in by_addr:
        name = guesses[addr]
        source = "client names"
        if name is None and addr in aliases:
            name, source = aliases[addr], "ssh config"
        if name is None and addr in claimed:
            name, source = claimed[addr], "the current config"
        if name is None:
            name, source = "host-" + re.sub(r"[^0-9A-Za-z]+", "-", addr).strip("-"), "address"
        named.setdefault(name, []).append(addr)
        how.setdefault(name, source)
    out = []
    for name, addrs in named.items():
        addrs = sorted(addrs, key=_addr_key)
        cs = [c for a in addrs for c in by_addr[a]]
        alias = next((aliases[a] for a in addrs if a in aliases), None)
        out.append(
            HostDraft(
                name=name,
                addrs=tuple(addrs),
                connections=len(cs),
                client_names=tuple(sorted({c.name for c in cs if c.name})),
                ssh=alias,
                named_from=how[name],
                claimed={a: claimed[a] for a in addrs if a in claimed},
                idle=sum(1 for c in cs if _idle(c)),
            )
        )
    return sorted(out, key=lambda h: _addr_key(h.addrs[0]))


def _idle(c: Client) -> bool:
    """Idle past HALF_OPEN_IDLE and not blocked (flag b: waiting in BLPOP and the like)."""
    return (c.idle_s or 0) >= HALF_OPEN_IDLE and "b" not in c.flags


def _addr_key(addr: str) -> tuple[int, Any]:
    try:
        ip = ipaddress.ip_address(addr)
        return (ip.version, int(ip))
    except ValueError:
        return (9, addr)
