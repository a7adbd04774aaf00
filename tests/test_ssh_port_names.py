"""A port named by a service (`Port http`) is read from the local services database, whose
C call answers in one shared buffer: hosts' configs resolved at once must each get their own
port."""

from __future__ import annotations

import socket
import threading

import pytest

from fleetcheck.transport.ssh_config_syntax import a2port


def test_service_ports_read_at_once_are_each_their_own() -> None:
    try:
        names = {n: socket.getservbyname(n, "tcp") for n in ("http", "ssh")}
    except OSError:
        pytest.skip("no services database on this machine")
    wrong: list[tuple[str, int]] = []

    def resolve(name: str) -> None:
        for _ in range(5000):
            got = a2port(name)
            if got != names[name]:
                wrong.append((name, got))

    threads = [threading.Thread(target=resolve, args=(n,)) for n in names for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
