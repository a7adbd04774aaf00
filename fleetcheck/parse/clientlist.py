"""CLIENT LIST, line by line: one `Client` a line, and a `ClientTable` answering the checks'
questions (counts per host, name and command, idle times, ages, waiting clients).

Redis 5 to 8 and Valkey 7.2 to 8 add, drop and reorder fields, so a field is found by its
key wherever it stands, unknown fields are kept (in `Client.fields`) but ignored, and
missing ones get neutral defaults. The first token of a key wins: a later `addr=` (or one
inside a name some server let hold a space) never replaces the line's own. `laddr=` is the
server's side of the socket and is never read as a client.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice

Group = tuple[str, str, str]  # (host, name, cmd)


@dataclass(frozen=True, slots=True)
class Client:
    """One client: host is an IP, or "unix" for a unix-socket client (the line it was read
    from is not compared)."""

    id: int | None
    host: str
    port: int | None
    name: str
    age_s: int | None
    idle_s: int | None
    flags: str
    cmd: str
    line: str = field(default="", compare=False, repr=False)

    @property
    def fields(self) -> dict[str, str]:
        """Every field of its line (first occurrence wins)."""
        return line_fields(self.line)

    @property
    def blocked(self) -> bool:
        return "b" in self.flags


@lru_cache(maxsize=4096)
def normalise_ip(text: str) -> str:
    """Canonical form of an address: '::ffff:1.2.3.4' -> '1.2.3.4', IPv6 compressed.
    Anything that is not an IP is returned unchanged (a host name or socket label)."""
    text = text.strip().strip("[]")
    try:
        ip = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def split_addr(addr: str) -> tuple[str, int | None]:
    """'1.2.3.4:5', '[::1]:5', '::1:5' (old servers) or a unix socket path into (host, port)."""
    if not addr:
        return "", None
    if addr.startswith("/") or addr.startswith("unix"):
        return "unix", None
    if addr.startswith("["):
        host, _, rest = addr[1:].partition("]")
        port_text = rest.lstrip(":")
    else:
        host, sep, port_text = addr.rpartition(":")
        if not sep:
            host, port_text = addr, ""
    port = int(port_text) if port_text.isascii() and port_text.isdigit() else None
    return normalise_ip(host), port


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def line_fields(line: str) -> dict[str, str]:
    """Every key=value of one line; the first occurrence of a key wins."""
    fields: dict[str, str] = {}
    for token in line.strip().split(" "):
        key, sep, value = token.partition("=")
        if sep and key and key not in fields:
            fields[key] = value
    return fields


def parse_line(line: str) -> Client | None:
    """One CLIENT LIST line; None for a blank line or one without an `addr=` field."""
    f = line_fields(line)
    if "addr" not in f:
        return None
    host, port = split_addr(f["addr"])
    name, flags, cmd = f.get("name", ""), f.get("flags", ""), f.get("cmd", "")
    return Client(
        _int(f.get("id")),
        host,
        port,
        name,
        _int(f.get("age")),
        _int(f.get("idle")),
        flags,
        cmd,
        line,
    )


def parse_client_list(text: str | bytes) -> list[Client]:
    """Every line with an `addr=` field, in order (a bytes reply decoded as UTF-8)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return [c for c in map(parse_line, text.splitlines()) if c is not None]


def read_client_table(text: str | bytes) -> ClientTable:
    return ClientTable(parse_client_list(text))


class ClientTable:
    """One CLIENT LIST's clients and the answers the checks ask of them, summarised once
    (every host row asks the same table)."""

    def __init__(self, clients: list[Client]) -> None:
        self._clients = clients
        self._groups = Counter((c.host, c.name, c.cmd) for c in clients)
        self._by_host: dict[str, dict[Group, int]] = {}
        for group, n in self._groups.items():
            self._by_host.setdefault(group[0], {})[group] = n
        self._longest: dict[str, int] = {}
        self._shortest: dict[str, int] = {}
        self._waiting: dict[str, int] = {}
        for c in clients:  # waiting for work: blocked (flag b) or subscribed (flag P)
            self._waiting[c.host] = self._waiting.get(c.host, 0) + (
                "b" in c.flags or "P" in c.flags
            )
            if c.idle_s is not None:
                self._longest[c.host] = max(c.idle_s, self._longest.get(c.host, c.idle_s))
                self._shortest[c.host] = min(c.idle_s, self._shortest.get(c.host, c.idle_s))
        self._ages: dict[float | None, dict[str, dict[int, int]]] = {}

    def __len__(self) -> int:
        return len(self._clients)

    def clients(self) -> list[Client]:
        return self._clients

    def groups(self) -> Counter[Group]:
        """How many clients have each (host, name, cmd), in order of first appearance."""
        return self._groups

    def groups_of(self, host: str) -> dict[Group, int]:
        """groups() of one host."""
        return self._by_host.get(host, {})

    def hosts(self) -> set[str]:
        """The hosts with at least one client."""
        return {c.host for c in self._clients}

    def max_idle(self) -> dict[str, int]:
        """Each host's longest idle time in seconds (hosts with no readable idle left out)."""
        return self._longest

    def min_idle(self) -> dict[str, int]:
        """Each host's shortest idle time in seconds: how long ago its chattiest client
        last sent a command (hosts with no readable idle left out)."""
        return self._shortest

    def waiting(self) -> dict[str, int]:
        """Each host's clients waiting for work: blocked (flag `b`: BLPOP, BRPOP, BLMOVE,
        BZPOPMIN, XREAD(GROUP) BLOCK, WAIT...) or subscribed (flag `P`); 0 for a host with
        none."""
        return self._waiting

    def ages(self, below: float | None = None) -> dict[str, dict[int, int]]:
        """Each host's clients counted by age in seconds (clients with no readable age
        left out; with `below`, only those younger than `below` seconds), kept per bound."""
        per_host = self._ages.get(below)
        if per_host is None:
            per_host = self._ages[below] = {}
            for c in self._clients:
                age = c.age_s
                if age is not None and (below is None or age < below):
                    mine = per_host.setdefault(c.host, {})
                    mine[age] = mine.get(age, 0) + 1
        return per_host

    def all_ages(self, below: float | None = None) -> dict[int, int]:
        """Every client counted by age in seconds (with `below`: only those younger)."""
        return dict(sum(map(Counter, self.ages(below).values()), Counter[int]()))

    def behaviour_of(self, host: str, below: float | None = None) -> tuple[dict[int, int], int]:
        """(ages(below), waiting()) of one host: (its clients by age, how many wait for work)."""
        return self.ages(below).get(host, {}), self.waiting().get(host, 0)

    def select(self, keep: Callable[[str, str], bool], limit: int) -> list[tuple[str, str, str]]:
        """(addr, name, cmd) of the first `limit` clients for which keep(host, name) holds;
        addr as the line wrote it."""
        if limit < 0:
            raise ValueError(f"limit must be 0 or more, not {limit}")
        picked = (c for c in self._clients if keep(c.host, c.name))
        return [(c.fields.get("addr", c.host), c.name, c.cmd) for c in islice(picked, limit)]

    def without_own(self, own_id: int) -> ClientTable:
        """The table without the client `own_id` (the connection that asked) and its sibling
        the rater probe's (named NAME-probe), from the same host: left in, they read as "an
        address no host claims"."""
        own = next((c for c in self._clients if c.id == own_id), None)
        ours = {own.name, f"{own.name}-probe"} if own is not None and own.name else set()
        host = own.host if own is not None else None
        return ClientTable(
            [c for c in self._clients if c.id != own_id and not (c.name in ours and c.host == host)]
        )


_NAME_TOKEN = re.compile(r"([:\-_./@#|= ]+)")
_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")


@lru_cache(maxsize=4096)
def name_pattern(name: str) -> str:
    """A client name with its instance part generalised, so a host's workers count as one
    kind: `worker:n8:17` -> `worker:n8:*`, `celery@n8-4121` -> `celery@n8-*`. A token that
    is a number, a long hex id or a UUID becomes `*`, and so do the trailing digits of the
    last token (`w12` -> `w*`); a token inside the name that mixes letters and digits (`n8`)
    names a place and is kept. An empty name is `(no name)`."""
    if not name:
        return "(no name)"
    parts = _NAME_TOKEN.split(_UUID.sub("0", name))
    tokens = [i for i in range(0, len(parts), 2) if parts[i]]
    for i in tokens:
        t = parts[i]
        if t.isdigit() or _is_id(t):
            parts[i] = "*"
    if tokens and parts[tokens[-1]] != "*":
        last = parts[tokens[-1]]
        stem = last.rstrip("0123456789")
        if stem != last and stem:
            parts[tokens[-1]] = stem + "*"
    return "".join(parts)


def _is_id(token: str) -> bool:
    """A long hex id (8+ hex digits with at least one digit), as pids and uuids print."""
    return (
        len(token) >= 8
        and all(c in "0123456789abcdefABCDEF" for c in token)
        and any(c.isdigit() for c in token)
    )
