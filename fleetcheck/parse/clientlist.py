"""CLIENT LIST, field by field.

Redis 5 to 8 and Valkey 7.2 to 8 add, drop and reorder fields, so unknown fields are kept
but ignored and missing ones get neutral defaults. The client's own address is `addr=`;
`laddr=` is the server's side of the socket and must never be counted as a client.

Speed (10,000 clients, ~2.7 MB): one server's lines all have the same fields in the same
order, so the list is read column-wise: one regular-expression pass over the whole text
checks every line against the first line's keys up to the last key we read and captures
only the values we use; a column stays text and each distinct value (an address, an idle
time) is converted once. Anything else (tabs, blank lines, non-ASCII, lines of different
shapes, a repeated key before the last one read, an id not in canonical decimal) goes line
by line (`parse_line`); tests prove both give the same clients and fields. The clients check
asks a ClientTable for counts per (host, name, cmd, idle) and never builds a Client; Client
rows (tuples that keep their line: `fields` is read from it when asked) are made for the
checks that want them. The pass itself (~11 ms for 10,000 lines here) is the floor of this
reading in the standard library: without checking the keys between the ones read it is ~8.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import compress, count, islice, repeat
from operator import itemgetter
from typing import Any


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


def normalise_ip(text: str) -> str:
    """Canonical form of an address: '::ffff:1.2.3.4' -> '1.2.3.4', IPv6 compressed.
    Anything that is not an IP is returned unchanged (a host name or socket label)."""
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


Key = tuple[str, str, str, "int | None"]  # (host, name, cmd, idle_s)


class ClientTable:
    """One CLIENT LIST as read, for callers that want answers about 10,000 clients without
    10,000 objects: `tally()` counts them by (host, name, cmd, idle_s), `select()` gives the
    first few that match; `clients()` makes the Client rows when someone wants them.

    Read column-wise (see the module docstring) the table holds the text's columns as
    strings and converts a value only once per distinct value; read line by line it holds
    the Clients."""

    def __init__(
        self,
        clients: list[Client] | None = None,
        columns: dict[str, list[Any]] | None = None,
        text: str = "",
    ) -> None:
        self._rows = clients
        self._columns = columns  # a "row" column, when present: each row's line in `text`
        self._text = text
        self._tally: Counter[Key] | None = None
        self._raw: Counter[tuple[str, str, str, str | None]] | None = None
        self._hosts: dict[str, str] | None = None

    def __len__(self) -> int:
        if self._columns is not None:
            return len(self._columns["addr"])
        return len(self._rows or ())

    def clients(self) -> list[Client]:
        if self._rows is None:
            cols = self._columns or {}
            lines = self._text.split("\n")  # every line is a row, in order, on this path
            if "row" in cols:
                lines = list(map(lines.__getitem__, cols["row"]))
            self._rows = _clients_of(cols, self._host_of(), lines[: len(self)])
        return self._rows

    def _host_of(self) -> dict[str, str]:
        """Each distinct host part of an `addr` (the text before its last colon) -> the
        client's host, as split_addr reads it (the host never depends on the port)."""
        if self._hosts is None:
            known = {}
            for h in set((self._columns or {}).get("addr", ())):
                if h.startswith(("/", "unix", "[")) or not h:
                    known[h] = split_addr(h + ":0")[0]
                else:
                    known[h] = normalise_ip(h)
            self._hosts = known
        return self._hosts

    def tally(self) -> Counter[Key]:
        """How many clients have each (host, name, cmd, idle_s), in order of first appearance."""
        if self._tally is None:
            if self._columns is None:
                self._tally = Counter((c.host, c.name, c.cmd, c.idle_s) for c in self.clients())
            else:
                hosts = self._host_of()
                out: Counter[Key] = Counter()
                for (h, name, cmd, idle), n in self._raw_tally().items():
                    out[hosts[h], name, cmd, _int(idle)] += n
                self._tally = out
        return self._tally

    def _raw_tally(self) -> Counter[tuple[str, str, str, str | None]]:
        """The same count over the text's values (host part, name, cmd, idle as written)."""
        if self._raw is None:
            cols = self._columns or {}
            values = (cols[k] for k in ("addr", "name", "cmd", "idle"))
            self._raw = Counter(zip(*values, strict=True))
        return self._raw

    def select(self, keep: Callable[[str, str], bool], limit: int) -> list[tuple[str, str, str]]:
        """(addr, name, cmd) of the first `limit` clients for which keep(host, name) holds;
        addr as the line wrote it (the host if the line had none)."""
        cols = self._columns
        if cols is None:
            picked = (c for c in self.clients() if keep(c.host, c.name))
            return [(c.fields.get("addr", c.host), c.name, c.cmd) for c in islice(picked, limit)]
        hosts = self._host_of()
        wanted = {(h, name) for h, name, _, _ in self._raw_tally() if keep(hosts[h], name)}
        out: list[tuple[str, str, str]] = []
        if not wanted or limit <= 0:
            return out
        addrs, names, cmds = cols["addr"], cols["name"], cols["cmd"]
        near = {h for h, _ in wanted}  # only their rows are looked at one by one
        for i in compress(count(), map(near.__contains__, addrs)):
            if (addrs[i], names[i]) in wanted:
                out.append((addrs[i] + ":" + cols["port"][i], names[i], cmds[i]))
                if len(out) == limit:
                    break
        return out

    def without_own(self, own_id: int) -> ClientTable:
        """The table without the client `own_id` (the connection that asked) and its sibling
        the rater probe's (named NAME-probe), from the same host: left in, they read as "an
        address no host claims"."""
        cols = self._columns
        if cols is None:
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
        # ids are canonical decimal on this path: equal as text when equal as numbers
        drop = _positions(cols["id"], str(own_id))
        if not drop:
            return self
        names = cols["name"]
        hosts = self._host_of()
        own_name, own_host = names[drop[0]], hosts[cols["addr"][drop[0]]]
        if own_name:
            for name in {own_name, f"{own_name}-probe"}:
                drop += [i for i in _positions(names, name) if hosts[cols["addr"][i]] == own_host]
        gone = sorted(set(drop), reverse=True)
        kept = {}
        if "row" not in cols:
            cols = {**cols, "row": list(range(len(self)))}
        if len(gone) > 8:  # many of our name: one pass per column, not one move per row
            mask = [True] * len(self)
            for i in gone:
                mask[i] = False
        for key, column in cols.items():
            if len(gone) > 8:
                kept[key] = list(compress(column, mask))
                continue
            column = list(column)
            for i in gone:
                del column[i]
            kept[key] = column
        table = ClientTable(columns=kept, text=self._text)
        table._hosts = self._hosts
        return table


def _positions(column: Sequence[Any], value: str) -> list[int]:
    out = []
    i = -1
    try:
        while True:
            i = column.index(value, i + 1)
            out.append(i)
    except ValueError:
        return out


def read_client_table(text: str | bytes) -> ClientTable:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    columns = _by_columns(text)
    if columns is not None:
        return ClientTable(columns=columns, text=text)
    out = []
    for line in text.splitlines():
        client = parse_line(line)
        if client is not None:
            out.append(client)
    return ClientTable(out)


# a value: anything but the space (the text has no other whitespace on this path: a value
# that swallowed a line break makes one match of two lines, and the count of rows differs)
_NEEDED = ("id", "addr", "name", "age", "idle", "flags", "cmd")
_VALUE = "[^ ]*+"  # possessive: nothing after a value can be part of it
_OTHER_SPACE = "\t\r\x0b\x0c\x1c\x1d\x1e\x1f"  # what strip(), split() or splitlines() also cut at
_new = tuple.__new__


def _by_columns(text: str) -> dict[str, list[Any]] | None:
    """The needed columns of the list (and each line), or None when the text is not one
    uniform table: every line the first line's keys in the same order, each once, up to
    the last key we read (what follows it is never read: a key there is a later
    occurrence), addr as <host>:<digits> (a bracketed host exactly "[...]"), id in canonical
    decimal."""
    import re

    if not text or not text.isascii() or any(c in text for c in _OTHER_SPACE):
        return None
    first = text.partition("\n")[0].split(" ")
    keys = [t.partition("=")[0] for t in first]
    if not all("=" in t for t in first) or len(set(keys)) != len(keys) or "" in keys:
        return None
    if not set(_NEEDED) <= set(keys):  # one missing here may be a later line's first one
        return None
    last = max(i for i, key in enumerate(keys) if key in _NEEDED)
    parts = []
    groups = []  # the findall tuples: the needed values in line order
    for i, key in enumerate(keys[: last + 1]):
        k = re.escape(key) + "="
        end = "[^ \n]*+" if i == last else _VALUE
        if key == "addr":
            groups += ["addr", "port"]  # the host part (up to the last colon), the port
            # a bracketed host ends at its first "]" (as split_addr reads it), so it is taken
            # here only whole: "[" up to that "]", then ":port"; anything else goes line by line
            parts.append(k + r"(\[[^ \]]*+\]|(?!\[)[^ ]*):([0-9]++)")
        elif key == "id":
            groups.append(key)
            parts.append(k + "(0|[1-9][0-9]*+)")
        elif key in _NEEDED:
            groups.append(key)
            parts.append(k + "(" + end + ")")
        else:
            parts.append(k + end)
    pattern = "^" + " ".join(parts) + "(?: [^\n]*+)?$"
    found = re.findall(pattern, text, re.MULTILINE)
    if len(found) != text.count("\n") + (text[-1] != "\n"):
        return None
    return dict(zip(groups, map(list, zip(*found, strict=True)), strict=True))


def _clients_of(
    cols: dict[str, list[Any]], hosts: dict[str, str], lines: list[str]
) -> list[Client]:
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
