"""CLIENT LIST, field by field.

Redis 5 to 8 and Valkey 7.2 to 8 add, drop and reorder fields, so unknown fields are kept
but ignored and missing ones get neutral defaults. The client's own address is `addr=`;
`laddr=` is the server's side of the socket and must never be counted as a client.

Speed (10,000 clients, ~2.7 MB): one server's lines all have the same fields in the same
order, so the list is read column-wise: one regular-expression pass over the whole text
checks every line against the first line's keys up to the last key we read and captures
only the values we use. `cmd` stands 16 keys after the others in Redis 6.2+ and Valkey:
walking those keys was a third of the pass, so the pattern skips to the line's last
" cmd=" instead, and a count of " cmd=" in the whole text proves it is each line's only
one. Anything else (tabs, blank lines, non-ASCII, lines of different shapes, a repeated
key before the last one read, an id or age not in canonical decimal) goes line by line
(`parse_line`); tests prove both give the same clients and fields.

The clients check never builds a Client: it asks a ClientTable for counts per (host, name,
cmd) and each host's longest idle time, made from a count of the (host part, name, cmd)
texts and a set of the (host part, idle) texts, so Python sees only distinct values and
converts each once; a per-host index serves a fleet's host rows. Ages are counted apart and
only below a bound when one is given (ClientTable._ages_of). Client rows (tuples that
keep their line: `fields` is read from it when asked) are made for the checks that want
them, from a second pass that also reads the port, age and flags.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from itertools import chain, compress, count, islice, repeat
from math import ceil
from operator import itemgetter
from socket import AF_INET, inet_ntop, inet_pton
from typing import Any, overload


class Client(tuple[Any, ...]):
    """One client: id, host (an IP, or "unix" for a unix-socket client), port, name, age_s,
    idle_s, flags, cmd; `fields` holds every field of its line (first occurrence wins).
    Equal when those eight are equal (fields are not compared, as before)."""

    __slots__ = ()

    def __new__(
        cls,
        id: int | None,
        host: str,
        port: int | None,
        name: str,
        age_s: int | None,
        idle_s: int | None,
        flags: str,
        cmd: str,
        fields: dict[str, str] | str | None = None,
    ) -> Client:
        return tuple.__new__(cls, (id, host, port, name, age_s, idle_s, flags, cmd, fields))

    id: int | None = property(itemgetter(0))  # type: ignore[assignment]
    host: str = property(itemgetter(1))  # type: ignore[assignment]
    port: int | None = property(itemgetter(2))  # type: ignore[assignment]
    name: str = property(itemgetter(3))  # type: ignore[assignment]
    age_s: int | None = property(itemgetter(4))  # type: ignore[assignment]
    idle_s: int | None = property(itemgetter(5))  # type: ignore[assignment]
    flags: str = property(itemgetter(6))  # type: ignore[assignment]
    cmd: str = property(itemgetter(7))  # type: ignore[assignment]

    @property
    def fields(self) -> dict[str, str]:
        raw = self[8]
        if isinstance(raw, str):  # the line it was read from
            return line_fields(raw)
        return dict(raw or {})

    @property
    def blocked(self) -> bool:
        return "b" in self[6]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Client):
            return NotImplemented
        return self[:8] == other[:8]

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, Client):
            return NotImplemented
        return self[:8] != other[:8]

    def __hash__(self) -> int:
        return hash(self[:8])

    def __repr__(self) -> str:
        names = ("id", "host", "port", "name", "age_s", "idle_s", "flags", "cmd")
        return "Client(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, self, strict=False)) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Client, tuple(self))


@lru_cache(maxsize=4096)
def normalise_ip(text: str) -> str:
    """Canonical form of an address: '::ffff:1.2.3.4' -> '1.2.3.4', IPv6 compressed.
    Anything that is not an IP is returned unchanged (a host name or socket label).

    Cached, and an address already in canonical IPv4 form is known by inet_pton/inet_ntop
    (~1 us) rather than ipaddress (~20 us): a fleet of 100 hosts asks for each of their
    addresses once a row."""
    try:  # inet_pton takes exactly four decimal parts (no leading zeros in glibc's)
        if inet_ntop(AF_INET, inet_pton(AF_INET, text)) == text:
            return text
    except (OSError, ValueError):  # not an IPv4 address; NUL; not ASCII
        pass
    import ipaddress

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
    port = int(port_text) if port_text.isdigit() else None
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
    fields = line_fields(line)
    if "addr" not in fields:
        return None
    host, port = split_addr(fields["addr"])
    return Client(
        _int(fields.get("id")),
        host,
        port,
        fields.get("name", ""),
        _int(fields.get("age")),
        _int(fields.get("idle")),
        fields.get("flags", ""),
        fields.get("cmd", ""),
        fields,
    )


def parse_client_list(text: str | bytes) -> list[Client]:
    return read_client_table(text).clients()


Group = tuple[str, str, str]  # (host, name, cmd)


class ClientTable:
    """One CLIENT LIST as read, for callers that want answers about 10,000 clients without
    10,000 objects: `groups()` counts them by (host, name, cmd), `max_idle()` gives each
    host's longest idle time, `select()` the first few that match; `clients()` makes the
    Client rows when someone wants them.

    Read column-wise (see the module docstring) the table holds one tuple of text values a
    line (host part, name, age, idle, flags, cmd) and converts a value once per
    distinct value; read line by line it holds the Clients. A reply read as bytes stays
    bytes on the column path (the pass makes 60,000 values, and a bytes value costs less to
    make than a str): its values are decoded once per distinct value, like the numbers."""

    def __init__(
        self,
        clients: list[Client] | None = None,
        found: list[tuple[Any, ...]] | None = None,
        text: str | bytes = "",
        lines: Sequence[int] | None = None,
    ) -> None:
        self._rows = clients
        self._found = found  # the column path: one tuple a line, values in _COUNTED order
        self._raw = text  # as read: str, or ASCII bytes on the column path
        self._decoded = text if isinstance(text, str) else None
        self._lines = lines  # each row's line in text (None: row i is line i)
        self._summary: tuple[Counter[Group], dict[str, int], dict[str, int]] | None = None
        # column path: clients by (host part, name, cmd, flags) as written
        self._raw_groups: Counter[tuple[Any, Any, Any, Any]] = Counter()
        self._waiting: dict[str, int] | None = None
        self._aged: dict[int | None, tuple[dict[str, dict[int, int]], dict[int, int]]] = {}
        self._hosts: dict[Any, str] | None = None
        self._by_host: dict[str, dict[Group, int]] | None = None
        self._text_lines = len(found) if found is not None and lines is None else None

    def __len__(self) -> int:
        if self._found is not None:
            return len(self._found)
        return len(self._rows or ())

    @property
    def _text(self) -> str:
        """The list as text (a bytes reply decoded when first asked)."""
        if self._decoded is None:
            self._decoded = _str(self._raw)
        return self._decoded

    def clients(self) -> list[Client]:
        if self._rows is None:
            lines = self._text.split("\n")
            cols = _by_columns(self._text)
            if cols is not None:
                rows = _clients_of(cols, lines[: len(cols["addr"])])
            else:  # every line is a client here: the column reader found an addr on each
                rows = [c for c in map(parse_line, lines) if c is not None]
            if self._lines is not None:
                rows = list(map(rows.__getitem__, self._lines))
            self._rows = rows
        return self._rows

    def _host_of(self) -> dict[Any, str]:
        """Each distinct host part of an `addr` (the text before its last colon) -> the
        client's host, as split_addr reads it (read_client_table keeps this path only where
        the host does not depend on the port)."""
        if self._hosts is None:
            self._hosts = {h: _host_part(_str(h)) for h in set(map(_HOST, self._found or ()))}
        return self._hosts

    def _summarise(self) -> tuple[Counter[Group], dict[str, int], dict[str, int]]:
        if self._summary is None:
            groups: Counter[Group] = Counter()
            longest: dict[str, int] = {}
            shortest: dict[str, int] = {}
            if self._found is None:
                for c in self.clients():
                    groups[c.host, c.name, c.cmd] += 1
                    if c.idle_s is not None:
                        if c.idle_s > longest.get(c.host, c.idle_s - 1):
                            longest[c.host] = c.idle_s
                        if c.idle_s < shortest.get(c.host, c.idle_s + 1):
                            shortest[c.host] = c.idle_s
            else:
                # counted and deduplicated by the C loops of Counter and set over the rows'
                # text; Python sees only the distinct (host part, name, cmd, flags) and
                # (host part, idle) pairs, and converts each distinct text once. Flags are
                # in the groups' key for waiting() (a pool's clients mostly share theirs);
                # ages are not: they are counted apart, and only as far as asked (_ages_of)
                found, hosts = self._found, self._host_of()
                raw = self._raw_groups = Counter(map(_GROUP, found))
                # each distinct name, cmd and flags text decoded (and its flags read) once
                text = {v: _str(v) for v in set(chain.from_iterable(map(_GROUP_TEXTS, raw)))}
                waits = {f: _waits(text[f]) for f in set(map(_FLAGS, raw))}
                waiting: dict[str, int] = {}
                for (h, name, cmd, flags), n in raw.items():
                    host = hosts[h]
                    groups[host, text[name], text[cmd]] += n
                    waiting[host] = waiting.get(host, 0) + (n if waits[flags] else 0)
                self._waiting = waiting
                idle_pairs = set(map(_HOST_IDLE, found))
                seconds_of = {t: _int(t) for t in set(map(_SECOND, idle_pairs))}
                known = [(hosts[h], s) for h, t in idle_pairs if (s := seconds_of[t]) is not None]
                # by seconds, so the last pair of a host is its longest (or, reversed, its
                # shortest): dict() keeps it, in C; the hosts' order was a set's anyway
                longest = dict(sorted(known, key=_SECOND))
                shortest = dict(sorted(known, key=_SECOND, reverse=True))
            self._summary = (groups, longest, shortest)
        return self._summary

    def _ages_of(self, below: float | None) -> tuple[dict[str, dict[int, int]], dict[int, int]]:
        """(each host's clients by age in seconds, every client by age), of the clients
        younger than `below` seconds only (None: all of them).

        Why a bound: a round judges ages only against the time since its previous round (who
        connected since?), and a fleet's pools are mostly older than that. On the column
        path the young rows are picked in C by their age text, from the set of the texts
        "0" .. below-1 (ages are canonical decimal there), so Python sees only those rows'
        distinct (host part, age) pairs; counting every age of 10,000 clients (hashing a
        text a row, walking ~2,000 distinct pairs) cost more than the rest of the summary.
        Beyond AGE_TEXTS (an hour) every age is counted. Kept per bound: the clients check
        asks with a few bounds a patrol (see its probe)."""
        key = None if below is None else max(ceil(below), 0)
        known = self._aged.get(key)
        if known is not None:
            return known
        if key == 0:  # none is younger than no time
            return self._aged.setdefault(0, ({}, {}))
        pairs: Iterable[tuple[tuple[str, int], int]]
        if self._found is None:
            pairs = Counter(
                (c.host, c.age_s)
                for c in self.clients()
                if c.age_s is not None and (key is None or c.age_s < key)
            ).items()
        else:
            found, hosts = self._found, self._host_of()
            rows: Iterable[tuple[str, ...]] = found
            if key is not None and key <= AGE_TEXTS:
                young = _age_texts(key, isinstance(self._raw, bytes))
                rows = compress(found, map(young.__contains__, map(_AGE, found)))
            texts = Counter(map(_HOST_AGE, rows))
            # each distinct age text converted once (a fleet-wide restart: every client is
            # young, ~100 hosts times the seconds it took), then the pairs in one walk
            seconds_of = {t: _int(t) for t in set(map(_SECOND, texts))}
            pairs = (
                ((hosts[h], s), n)
                for (h, t), n in texts.items()
                if (s := seconds_of[t]) is not None and (key is None or s < key)
            )
        per_host: dict[str, dict[int, int]] = {}
        every: dict[int, int] = {}
        for (host, seconds), n in pairs:
            ages = per_host.get(host)
            if ages is None:
                ages = per_host[host] = {}
            ages[seconds] = ages.get(seconds, 0) + n
            every[seconds] = every.get(seconds, 0) + n
        self._aged[key] = (per_host, every)
        return per_host, every

    def all_ages(self, below: float | None = None) -> dict[int, int]:
        """Every client counted by age in seconds (with `below`: only those younger)."""
        return self._ages_of(below)[1]

    def ages(self, below: float | None = None) -> dict[str, dict[int, int]]:
        """Each host's clients counted by age in seconds (clients with no readable age
        left out; with `below`, only those younger than `below` seconds): who connected
        since when, without an object per client."""
        return self._ages_of(below)[0]

    def waiting(self) -> dict[str, int]:
        """Each host's clients waiting for work: blocked (flag `b`: BLPOP, BRPOP, BLMOVE,
        BZPOPMIN, XREAD(GROUP) BLOCK, WAIT...) or subscribed (flag `P`); 0 for a host with
        none. On the column path counted with the groups (_summarise), whose key holds the
        flags."""
        if self._found is not None:
            self._summarise()  # counted with the groups there
        if self._waiting is None:
            out = dict.fromkeys((h for h, _, _ in self.groups()), 0)
            for c in self.clients():
                out[c.host] += _waits(c.flags)
            self._waiting = out
        return self._waiting

    def behaviour_of(self, host: str, below: float | None = None) -> tuple[dict[int, int], int]:
        """(ages(below), waiting()) of one host: (its clients by age, how many wait for work)."""
        return self._ages_of(below)[0].get(host, {}), self.waiting().get(host, 0)

    def min_idle(self) -> dict[str, int]:
        """Each host's shortest idle time in seconds: how long ago its chattiest client
        last sent a command (hosts with no readable idle left out)."""
        return self._summarise()[2]

    def groups(self) -> Counter[Group]:
        """How many clients have each (host, name, cmd), in order of first appearance."""
        return self._summarise()[0]

    def groups_of(self, host: str) -> dict[Group, int]:
        """groups() of one host (an index built once: a fleet asks it once a host)."""
        if self._by_host is None:
            index: dict[str, dict[Group, int]] = {}
            for group, n in self.groups().items():
                index.setdefault(group[0], {})[group] = n
            self._by_host = index
        return self._by_host.get(host, {})

    def hosts(self) -> set[str]:
        """The hosts with at least one client (from the distinct host parts: no rows made)."""
        if self._found is None:
            return {c.host for c in self.clients()}
        hosts = self._host_of()
        return {hosts[h] for h in set(map(_HOST, self._found))}

    def max_idle(self) -> dict[str, int]:
        """Each host's longest idle time in seconds (hosts with no readable idle left out)."""
        return self._summarise()[1]

    def select(self, keep: Callable[[str, str], bool], limit: int) -> list[tuple[str, str, str]]:
        """(addr, name, cmd) of the first `limit` clients for which keep(host, name) holds;
        addr as the line wrote it (the host if the line had none)."""
        if limit < 0:
            raise ValueError(f"limit must be 0 or more, not {limit}")
        found = self._found
        if found is None:
            picked = (c for c in self.clients() if keep(c.host, c.name))
            return [(c.fields.get("addr", c.host), c.name, c.cmd) for c in islice(picked, limit)]
        hosts = self._host_of()
        self._summarise()  # its count of the raw (host part, name, cmd) is reused here
        pairs = {(h, name) for h, name, _, _ in self._raw_groups}
        wanted = {(h, name) for h, name in pairs if keep(hosts[h], _str(name))}
        out: list[tuple[str, str, str]] = []
        if not wanted or limit <= 0:
            return out
        near = {h for h, _ in wanted}  # only their rows are looked at one by one
        rows: list[tuple[int, int]] = []  # (row, its line)
        for i in compress(count(), map(near.__contains__, map(_HOST, found))):
            if (found[i][0], found[i][1]) in wanted:
                rows.append((i, i if self._lines is None else self._lines[i]))
                if len(rows) == limit:
                    break
        # the port is not read on this path: each picked row's addr comes from its line,
        # and the text is cut into lines only as far as the last one picked
        lines = self._text.split("\n", max(line for _, line in rows) + 1) if rows else []
        for i, line in rows:
            out.append((line_fields(lines[line])["addr"], _str(found[i][1]), _str(found[i][5])))
        return out

    def without_own(self, own_id: int) -> ClientTable:
        """The table without the client `own_id` (the connection that asked) and its sibling
        the rater probe's (named NAME-probe), from the same host: left in, they read as "an
        address no host claims"."""
        found = self._found
        if found is None:
            clients = self.clients()
            own = next((c for c in clients if c.id == own_id), None)
            ours = {own.name, f"{own.name}-probe"} if own is not None and own.name else set()
            return ClientTable(
                [
                    c
                    for c in clients
                    if c.id != own_id
                    and not (own is not None and c.name in ours and c.host == own.host)
                ]
            )
        fast = self._own_rows(own_id)
        if fast is not None:
            drop = fast
            if not drop:
                return self
            return self._without(drop)
        # the exact way for what _own_rows leaves: the rows are found in the text (ids and
        # names hold no space: a whole token is the key's value) and checked against the
        # values the pass captured
        drop = self._rows_holding("id", str(own_id))
        if not drop:
            return self
        hosts = self._host_of()
        first = min(drop)  # ours: the first line of that id (found last first)
        own_name, own_host = found[first][1], hosts[found[first][0]]
        if own_name:
            probe = b"-probe" if isinstance(own_name, bytes) else "-probe"
            for name in (own_name, own_name + probe):
                drop += [
                    i
                    for i in self._rows_holding("name", name)
                    if i not in drop and found[i][1] == name and hosts[found[i][0]] == own_host
                ]
        return self._without(drop)

    def _without(self, drop: list[int]) -> ClientTable:
        """The column-path table without the rows `drop` (a few)."""
        found = self._found
        assert found is not None
        rows = found.copy()
        for i in sorted(set(drop), reverse=True):  # a few rows
            del rows[i]
        lines: Sequence[int]
        if self._lines is None:  # row i was line i: a few lines now left out
            lines = _LinesWithout(len(found), drop)
        else:
            gone = set(drop)
            lines = [line for i, line in enumerate(self._lines) if i not in gone]
        table = ClientTable(found=rows, text=self._raw, lines=lines)
        table._decoded = self._decoded
        table._hosts, table._text_lines = self._hosts, self._text_lines
        return table

    def _own_rows(self, own_id: int) -> list[int] | None:
        """without_own's rows on the column path of a whole list (row i is line i, each
        line starting with its id, as every known server writes them): the line of our id
        found in the text (one scan, no line counted), its name and host read from that
        line, then every row of that name or NAME-probe from that host picked from the
        captured names in C (ours among them). [] when the id is in no line; None where
        this does not hold (an id on two lines, our connection with no name, a table
        already filtered): the caller's exact way then.

        Why: the server does not keep its newest connections at the list's end (Redis
        rotates its client list as its cron walks it), so finding our line's number by
        counting line breaks, and each name by searching the text, measured ~5 ms of a
        10,000-client list: a tenth of the clients check."""
        found = self._found
        text: Any = self._raw  # str, or bytes on the column path
        if found is None or self._lines is not None:
            return None
        raw = isinstance(text, bytes)
        nl: Any = b"\n" if raw else "\n"
        space: Any = b" " if raw else " "
        token: Any = (b"id=%d" % own_id) if raw else f"id={own_id}"
        if not text.startswith(token[:3]):
            return None  # lines that do not start with their id: not a known server's
        ends = (space, nl, text[:0])  # what may follow a whole token (or the text's end)
        starts = [0] if text.startswith(token) else []
        at = text.find(nl + token)
        while at >= 0:
            starts.append(at + 1)
            at = text.find(nl + token, at + 1)
        starts = [a for a in starts if text[a + len(token) : a + len(token) + 1] in ends]
        if len(starts) > 1:
            return None  # an id on two lines: not a server's list
        if not starts:
            return []
        end = text.find(nl, starts[0])
        fields = line_fields(_str(text[starts[0] : end if end >= 0 else len(text)]))
        name, addr = fields.get("name", ""), fields.get("addr", "")
        if not name or ":" not in addr:
            return None
        own_host = _host_part(addr.rpartition(":")[0])
        ours: set[Any] = {name, name + "-probe"}
        if raw:
            ours = {n.encode() for n in ours}
        hosts = self._host_of()
        return [
            i
            for i in compress(count(), map(ours.__contains__, map(_NAME, found)))
            if hosts[found[i][0]] == own_host
        ]

    def _rows_holding(self, key: str, value: str | bytes) -> list[int]:
        """The rows (column path) whose line holds `key=value` as a whole token, last
        first, found in the text from its end. Keys
        and values hold no space, so a whole token is that key's value, except where a line
        repeats a key: the key the lines start with (the id, in every server's list) is
        looked for there only, in the canonical decimal the pass checked; any other key's
        rows must be checked against their captured values by the caller. An id that is
        not the first key is read from every line, as parse_line reads it."""
        if isinstance(self._raw, bytes):
            raw = value if isinstance(value, bytes) else value.encode()
            return self._rows_in(self._raw, f"{key}=".encode(), raw, b"\n", b" ")
        return self._rows_in(self._raw, f"{key}=", _str(value), "\n", " ")

    def _rows_in(self, text: Any, key: Any, value: Any, nl: Any, space: Any) -> list[int]:
        """_rows_holding in the text as read (str or bytes: `key` with its "=", `nl` and
        `space` of the text's kind)."""
        total = self._text_lines
        if total is None:  # a table not from read_client_table: its lines counted once
            total = self._text_lines = text.count(nl) + (not text.endswith(nl))
        first = text.startswith(key)  # every line's first key (the pass checked)
        if key in ("id=", b"id=") and not first:  # no known server: the slow, exact way
            wanted = _int(_str(value))
            lines = [
                i
                for i, line in enumerate(self._text.split("\n"))
                if _int(line_fields(line).get("id")) == wanted
            ]
            return self._rows_of_lines(lines[::-1])
        token = key + value
        lines = []
        after = int(not text.endswith(nl))  # lines from `below` on (+1: an unended one)
        below = end = len(text)
        while (at := text.rfind(token, 0, end)) >= 0:
            end = at + len(token) - 1  # an earlier occurrence may overlap this one
            stop = at + len(token)
            start = text.rfind(nl, 0, at) + 1
            if at != start and (first or text[at - 1 : at] != space):
                continue
            if stop < len(text) and text[stop : stop + 1] not in (space, nl):
                continue
            if start == below:  # a second occurrence on a line already taken
                continue
            after += text.count(nl, start, below)
            below = start
            lines.append(total - after)
        return self._rows_of_lines(lines)

    def _rows_of_lines(self, lines: list[int]) -> list[int]:
        """The rows read from these lines of the text (a line left out has none)."""
        if self._lines is None:
            return lines
        rows = []
        for line in lines:
            row = bisect_left(self._lines, line)
            if row < len(self._lines) and self._lines[row] == line:
                rows.append(row)
        return rows


class _LinesWithout(Sequence[int]):
    """Each row's line when a few lines of a table whose row i was line i are left out (our
    own connection and its probe's): computed when asked, not a list of 10,000 numbers
    (select and clients ask, the clients check never does)."""

    def __init__(self, lines: int, gone: Iterable[int]) -> None:
        gone = sorted(set(gone))
        # the row at which each gap starts counting: row i is line i + the gaps at or before it
        self._gaps = [line - k for k, line in enumerate(gone)]
        self._len = lines - len(gone)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...
    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._len))]
        if i < 0:
            i += self._len
        if not 0 <= i < self._len:
            raise IndexError(i)
        return i + bisect_right(self._gaps, i)


def _str(value: str | bytes) -> str:
    """A value of the list as text (the column path's bytes are ASCII)."""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def _waits(flags: str) -> int:
    """1 when a client's flags say it waits for work (blocked or subscribed), else 0."""
    return 1 if "b" in flags or "P" in flags else 0


def _host_part(h: str) -> str:
    if h.startswith(("/", "unix", "[")) or not h:
        return split_addr(h + ":0")[0]
    return normalise_ip(h)


def read_client_table(text: str | bytes) -> ClientTable:
    found = _counted_rows(text)  # a bytes reply read as bytes (see ClientTable)
    if found is not None:
        hosts = {h: _str(h) for h in set(map(_HOST, found))}
        # split_addr ends a bracketed host at its "]": without one, the port would be part
        # of the host, and this path does not read ports
        if not any(h.startswith("[") and "]" not in h for h in hosts.values()):
            table = ClientTable(found=found, text=text)
            table._hosts = {raw: _host_part(h) for raw, h in hosts.items()}
            return table
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        client = parse_line(line)
        if client is not None:
            out.append(client)
    return ClientTable(out)


# the keys Client rows read, and the ones the clients check counts (in the column path's
# tuples, in this order)
_NEEDED = ("id", "addr", "name", "age", "idle", "flags", "cmd")
# no id: a table is asked for one id a patrol (its own connection's), found in the text
# (ClientTable.without_own) instead of a value captured on 10,000 lines
_COUNTED = ("addr", "name", "age", "idle", "flags", "cmd")
_HOST, _NAME, _AGE, _IDLE = map(itemgetter, (0, 1, 2, 3))
# raw groups: (host part, name, cmd, flags): waiting clients counted with the groups
_GROUP, _HOST_IDLE, _HOST_AGE = itemgetter(0, 1, 5, 4), itemgetter(0, 3), itemgetter(0, 2)
_SECOND = itemgetter(1)
_GROUP_TEXTS, _FLAGS = itemgetter(1, 2, 3), itemgetter(3)  # of a raw group's key
AGE_TEXTS = 3600  # ages_of picks young rows by text up to this bound (seconds), then counts all


@lru_cache(maxsize=8)
def _age_texts(below: int, as_bytes: bool = False) -> frozenset[str | bytes]:
    """The canonical texts of the ages 0 .. below-1 (as bytes: a bytes reply's)."""
    texts = map(str, range(below))
    return frozenset(map(str.encode, texts) if as_bytes else texts)


_OTHER_SPACE = "\t\r\x0b\x0c\x1c\x1d\x1e\x1f"  # what strip(), split() or splitlines() also cut at
_OTHER_SPACE_BYTES = tuple(bytes([ord(c)]) for c in _OTHER_SPACE)
_new = tuple.__new__


def _shape(text: str | bytes, wanted: Sequence[str]) -> list[str] | None:
    """The first line's keys, if the text can be read column-wise for `wanted`: ASCII,
    no whitespace but spaces and line breaks, a first line of distinct key=value tokens
    with every wanted key (one missing there may be a later line's first). A blank line
    is found by the caller: it matches nothing, so there are fewer matches than lines."""
    if not text or not text.isascii():
        return None
    if isinstance(text, bytes):
        if any(c in text for c in _OTHER_SPACE_BYTES):
            return None
        end = text.find(b"\n")
        line = text[: end if end >= 0 else len(text)].decode("ascii")
    else:
        if any(c in text for c in _OTHER_SPACE):
            return None
        end = text.find("\n")
        line = text[: end if end >= 0 else len(text)]
    first = line.split(" ")
    keys = [t.partition("=")[0] for t in first]
    if not all("=" in t for t in first) or len(set(keys)) != len(keys) or "" in keys:
        return None
    if not set(wanted) <= set(keys):
        return None
    return keys


def _pattern(keys: list[str], wanted: Sequence[str], port: bool) -> tuple[str, list[str], str]:
    """A regex reading one line per match: the first line's keys in order up to the last
    wanted one, each checked, capturing the wanted values (addr as its host part and, with
    `port`, its port). When the last wanted key stands far behind the others (cmd, 16
    keys on), the keys between are not walked: a greedy skip backs up to " cmd=", which is
    the line's only one when the text holds exactly one " cmd=" a line (the caller
    counts). Returns the pattern, the group names, and that key (or "")."""
    import re

    at = [i for i, key in enumerate(keys) if key in wanted]
    last = at[-1]
    bridged = keys[last] if len(at) > 1 and last - at[-2] > 2 else ""
    walked = keys[: (at[-2] if bridged else last) + 1]
    groups: list[str] = []

    def token(key: str, end: str) -> str:
        k = re.escape(key) + "="
        if key == "addr":
            groups.extend(["addr", "port"] if port else ["addr"])
            if port:  # a bracketed host ends at its first "]" (as split_addr reads it), so
                # it is taken only whole: "[" up to that "]", then ":port"
                return k + r"(\[[^ \]]*+\]|(?!\[)[^ ]*):([0-9]++)"
            return k + r"([^ ]*):[0-9]++"  # the host part (see read_client_table)
        if key in ("id", "age"):  # canonical decimal: compared as text (an id in the text)
            if key not in wanted:
                return k + "(?:0|[1-9][0-9]*+)"
            groups.append(key)
            return k + "(0|[1-9][0-9]*+)"
        if key in wanted:
            groups.append(key)
            return k + "(" + end + ")"
        return k + end

    parts = [
        token(key, "[^ \n]*+" if i == len(walked) - 1 else "[^ ]*+") for i, key in enumerate(walked)
    ]
    pattern = "^" + " ".join(parts)
    if bridged:  # the last value walked ends where its token does: at a space
        pattern += "(?= )[^\n]* " + token(bridged, "[^ \n]*+")
    return pattern + "(?: [^\n]*+)?$", groups, bridged


def _rows(
    text: str | bytes, wanted: Sequence[str], port: bool
) -> tuple[list[Any], list[str]] | None:
    """Every line's wanted values (one tuple a line, in line order) and the group names, or
    None when the text is not one uniform table: every line the first line's keys in the
    same order, each once, up to the last wanted key (what follows it is never read: a key
    there is a later occurrence), addr as <host>:<digits>, id and age in canonical decimal."""
    import re

    keys = _shape(text, wanted)
    if keys is None:
        return None
    pattern, groups, bridged = _pattern(keys, wanted, port)
    # ASCII (see _shape): bytes are read with the same pattern, as bytes
    found: list[Any]
    if isinstance(text, bytes):
        found = re.findall(pattern.encode(), text, re.MULTILINE)
        lines = text.count(b"\n") + (not text.endswith(b"\n"))
        cmds = text.count(f" {bridged}=".encode()) if bridged else len(found)
    else:
        found = re.findall(pattern, text, re.MULTILINE)
        lines = text.count("\n") + (not text.endswith("\n"))
        cmds = text.count(f" {bridged}=") if bridged else len(found)
    # a line that does not match is skipped by findall and a value that swallowed a line
    # break makes one match of two lines: either way there are fewer matches than lines
    if len(found) != lines or cmds != len(found):
        return None
    return found, groups


def _counted_rows(text: str | bytes) -> list[tuple[Any, ...]] | None:
    """The clients check's values of every line, as (host part, name, age, idle, flags,
    cmd)."""
    got = _rows(text, _COUNTED, port=False)
    if got is None:
        return None
    found, groups = got
    if groups != list(_COUNTED):  # another server's key order: put ours in place
        found = list(map(itemgetter(*map(groups.index, _COUNTED)), found))
    return found


def _by_columns(text: str) -> dict[str, list[Any]] | None:
    """The columns Client rows read (addr as host part and port), or None (see _rows)."""
    got = _rows(text, _NEEDED, port=True)
    if got is None:
        return None
    found, groups = got
    return dict(zip(groups, map(list, zip(*found, strict=True)), strict=True))


def _clients_of(cols: dict[str, list[Any]], lines: list[str]) -> list[Client]:
    hosts = {h: _host_part(h) for h in set(cols["addr"])}
    ports: list[int | None] = list(map(int, cols["port"]))
    host_column = list(map(hosts.__getitem__, cols["addr"]))
    if any(h.startswith(("/", "unix", "[")) or not h for h in hosts):  # the port too
        for i, h in enumerate(cols["addr"]):
            if h.startswith(("/", "unix", "[")) or not h:
                host_column[i], ports[i] = split_addr(h + ":" + cols["port"][i])
    return list(
        map(
            _new,
            repeat(Client),
            zip(
                _ints(cols["id"]),
                host_column,
                ports,
                cols["name"],
                _ints(cols["age"]),
                _ints(cols["idle"]),
                cols["flags"],
                cols["cmd"],
                lines,
                strict=True,
            ),
        )
    )


def _ints(values: Iterable[str]) -> list[int | None]:
    values = list(values)
    try:
        return list(map(int, values))
    except ValueError:
        return [_int(v) for v in values]


_NAME_TOKEN: Any = None  # compiled on first use (startup imports stay light)
_UUID: Any = None


def name_pattern(name: str) -> str:
    """A client name with its instance part generalised, so a host's workers count as one
    kind: `worker:n8:17` -> `worker:n8:*`, `celery@n8-4121` -> `celery@n8-*`,
    `rq:worker:2f8a9c01d4e5` -> `rq:worker:*`. A token (between `:` `-` `_` `.` `/` `@` `#`
    `|` `=` or space) that is a number, a long hex id or a UUID becomes `*`, and so do the
    trailing digits of the last token (`w12` -> `w*`); a token inside the name that mixes
    letters and digits (`n8`, `host12`) names a place and is kept. An empty name is
    `(no name)`."""
    return _name_pattern(name)


@lru_cache(maxsize=4096)
def _name_pattern(name: str) -> str:
    global _NAME_TOKEN, _UUID
    if not name:
        return "(no name)"
    if _NAME_TOKEN is None:
        import re

        _NAME_TOKEN = re.compile(r"([:\-_./@#|= ]+)")
        _UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
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
