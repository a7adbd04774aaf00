"""CLIENT LIST parsing against a real server's output: IPv4, IPv6 and unix-socket clients in
one list (the lab's redis-server, bound to 127.0.0.1, ::1 and a socket), plus the shapes of
line we cannot produce here (other versions' field sets), table-driven."""

from __future__ import annotations

import subprocess

import pytest
import redis

from fleetcheck.parse.clientlist import normalise_ip, parse_client_list, parse_line
from tests.lab import Lab, free_port, port_open, wait_for


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("::ffff:10.1.2.3", "10.1.2.3"),
        ("fe80::1%eth0", "fe80::1"),
        ("2001:DB8:0:0::1", "2001:db8::1"),
        ("[::1]", "::1"),
        ("mini.local", "mini.local"),
    ],
)
def test_normalise_ip(text: str, expected: str) -> None:
    assert normalise_ip(text) == expected


@pytest.mark.parametrize(
    ("line", "host", "port", "name"),
    [
        # Valkey 8 adds fields (lib-name, io-thread, ...) and may order them differently
        (
            "id=4 addr=10.0.0.9:6000 laddr=10.0.0.1:6379 fd=9 name=w io-thread=0 flags=N "
            "lib-name=redis-py lib-ver=6.0.0 cmd=blmove tot-net-in=10",
            "10.0.0.9",
            6000,
            "w",
        ),
        # laddr first: must still take addr
        ("laddr=10.0.0.1:6379 name=x addr=10.0.0.7:1 cmd=ping", "10.0.0.7", 1, "x"),
        # an IPv6 client with a zone index
        ("id=1 addr=[fe80::2%eth0]:4000 name= cmd=ping", "fe80::2", 4000, ""),
        # a duplicated field: the first one wins
        ("id=1 addr=10.0.0.2:1 addr=10.0.0.3:2 cmd=ping", "10.0.0.2", 1, ""),
        # a name with '=' inside survives
        ("id=1 addr=10.0.0.2:1 name=a=b cmd=ping", "10.0.0.2", 1, "a=b"),
    ],
)
def test_other_shapes(line: str, host: str, port: int, name: str) -> None:
    c = parse_line(line)
    assert c is not None
    assert (c.host, c.port, c.name) == (host, port, name)


def dual_stack_server(lab: Lab, socket_name: str) -> tuple[int, str]:
    """A second redis-server of the lab's, on 127.0.0.1, ::1 and a unix socket: (port, path)."""
    port = free_port()
    sock_path = str(lab.dir / socket_name)
    lab.spawn(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1 ::1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--unixsocket",
            sock_path,
            "--unixsocketperm",
            "700",
            "--dir",
            str(lab.dir),
        ],
        stdout=subprocess.DEVNULL,
    )
    wait_for(lambda: port_open("127.0.0.1", port), 10, "the second redis-server")
    return port, sock_path


@pytest.mark.lab
def test_real_ipv4_ipv6_and_unix_clients(lab: Lab) -> None:
    port, sock_path = dual_stack_server(lab, "v6.sock")
    v4 = redis.Redis(host="127.0.0.1", port=port, client_name="via-v4", protocol=2)
    v6 = redis.Redis(host="::1", port=port, client_name="via-v6", protocol=2)
    ux = redis.Redis(unix_socket_path=sock_path, client_name="via-unix", protocol=2)
    try:
        for r in (v4, v6, ux):
            r.ping()
        raw = v4.execute_command("CLIENT", "LIST")
        clients = {c.name: c for c in parse_client_list(raw)}
        assert clients["via-v4"].host == "127.0.0.1"
        assert clients["via-v6"].host == "::1"
        assert clients["via-unix"].host == "unix"
        # the v6 client's port is the socket's own (never the server's laddr port)
        s6 = v6.connection_pool.get_connection()
        try:
            local_port = s6._sock.getsockname()[1] if s6._sock else None  # type: ignore[attr-defined]
        finally:
            v6.connection_pool.release(s6)
        assert clients["via-v6"].port == local_port and local_port != port
    finally:
        for r in (v4, v6, ux):
            r.close()
