"""Our own rater-probe connection is never counted as a stranger.

The probe opens a second broker connection named CLIENT_NAME-probe. Until the broker has
answered its CLIENT SETNAME, CLIENT LIST shows it with no name, so a clients check reading the
list in that instant (it runs in another lane of the same patrol) counted it as "1 broker
clients from addresses no host claims". A real redis-server behind a small TCP relay that holds
the probe connection's first bytes makes that instant last as long as the test needs.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from fleetcheck.config import from_dict
from fleetcheck.core import registry
from fleetcheck.core.context import PatrolContext
from fleetcheck.parse.clientlist import ClientTable
from tests.lab import Lab, wait_for

pytestmark = pytest.mark.lab


class HoldingRelay:
    """Relays TCP to the broker; the connection numbered `hold` (0-based) reaches the broker at
    once but its client's bytes wait until `release` is set."""

    def __init__(self, upstream: int, hold: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.upstream, self.hold = upstream, hold
        self.release = threading.Event()
        self.connected = 0  # upstream connections made
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        n = 0
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            self.socks += [client, server]
            self.connected += 1
            held = n == self.hold
            n += 1
            threading.Thread(target=self._pipe, args=(client, server, held), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, held: bool) -> None:
        if held:
            self.release.wait(30)
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.release.set()
        self.listener.close()
        for s in self.socks:
            s.close()


@contextmanager
def relay(upstream: int, hold: int) -> Iterator[HoldingRelay]:
    r = HoldingRelay(upstream, hold)
    try:
        yield r
    finally:
        r.close()


def test_a_probe_connection_not_yet_named_is_not_in_the_client_table() -> None:
    with Lab(netns=False) as lab, relay(lab.redis_port, hold=1) as proxy:
        data = {
            "broker": {"url": f"redis://127.0.0.1:{proxy.port}/0"},
            "checks": {"clients": {}, "rater_probe": {"inbox": "q"}},
        }
        fleet = from_dict(data, "hosts.toml", registry.config_type, registry.host_config_types)
        observer = lab.client(client_name="observer")

        def nameless() -> list[dict[str, str]]:
            return [c for c in observer.client_list() if c.get("name") == ""]

        ctx = PatrolContext(fleet)
        try:
            ctx.broker()  # connection 0: ours, named
            assert nameless() == []
            probe = threading.Thread(target=ctx.probe_broker, daemon=True)
            probe.start()  # connection 1: reaches the broker, its SETNAME held back
            wait_for(lambda: proxy.connected == 2, 10, "the probe's connection to be made")
            wait_for(lambda: len(nameless()) == 1, 10, "the broker to list it without a name")
            tables: list[ClientTable] = []
            reader = threading.Thread(target=lambda: tables.append(ctx.client_table()))
            reader.start()
            reader.join(2.0)  # the list must not be read while the probe has no name
            proxy.release.set()
            probe.join(10)
            reader.join(10)
            assert not probe.is_alive() and not reader.is_alive()
            (table,) = tables
            assert [c for c in table.clients() if not c.name] == []
            assert {c.name for c in table.clients()} == {"observer"}  # ours and the probe left out
        finally:
            ctx.close()
            observer.close()
