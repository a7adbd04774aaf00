"""CLIENT LIST, field by field.

Redis 5 to 8 and Valkey 7.2 to 8 add, drop and reorder fields, so unknown fields are kept
but ignored and missing ones get neutral defaults. The client's own address is `addr=`;
`laddr=` is the server's side of the socket and must never be counted as a client.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Client:
    id: int | None
    host: str  # normalised client address: an IP, or "unix" for a unix-socket client
    port: int | None
    name: str
    age_s: int | None
    idle_s: int | None
    flags: str
    cmd: str
    fields: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def blocked(self) -> bool:
        return "b" in self.flags


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
    port = int(port_text) if port_text.isdigit() else None
    return normalise_ip(host), port


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def parse_line(line: str) -> Client | None:
    """One CLIENT LIST line; None for a blank line or one without an `addr=` field."""
    fields: dict[str, str] = {}
    for token in line.strip().split(" "):
        key, sep, value = token.partition("=")
        if sep and key and key not in fields:
            fields[key] = value
    if "addr" not in fields:
        return None
    host, port = split_addr(fields["addr"])
    return Client(
        id=_int(fields.get("id")),
        host=host,
        port=port,
        name=fields.get("name", ""),
        age_s=_int(fields.get("age")),
        idle_s=_int(fields.get("idle")),
        flags=fields.get("flags", ""),
        cmd=fields.get("cmd", ""),
        fields=fields,
    )


def parse_client_list(text: str | bytes) -> list[Client]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        client = parse_line(line)
        if client is not None:
            out.append(client)
    return out
