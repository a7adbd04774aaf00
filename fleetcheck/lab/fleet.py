"""The Lab itself: the parts (base, broker, hosts, workers) put together and started."""

from __future__ import annotations

import ipaddress
import os
import secrets
import tempfile
from collections.abc import Iterable
from pathlib import Path

from fleetcheck.lab.system import (
    claim_lab_id,
    free_port,
    missing_prerequisites,
    run,
    sweep_orphans,
)
from fleetcheck.lab.workers import WorkersLab


class Lab(WorkersLab):
    """A fleet of namespaces around one redis-server. Use as a context manager."""

    def __init__(
        self, redis_args: Iterable[str] = (), netns: bool = True, prefix: int = 24
    ) -> None:
        missing = missing_prerequisites(netns)
        if missing:
            raise RuntimeError("lab needs: " + ", ".join(missing))
        self.netns = netns
        if netns:
            sweep_orphans()
        # a namespace lab's names must be free on the machine; a loopback lab makes none
        self.id = claim_lab_id(os.getpid()) if netns else secrets.token_hex(2)
        self.dir = Path(tempfile.mkdtemp(prefix=f"fleetcheck-lab-{self.id}-"))
        self.bridge = f"fcbr{self.id}" if netns else ""
        self.prefix = prefix  # 22 for up to ~1,000 hosts (a bridge takes 1,024 ports)
        self.subnet = self._pick_subnet() if netns else ipaddress.IPv4Network("127.0.0.0/24")
        self.gateway = str(self.subnet.network_address + 1)
        self.hosts = {}
        self.procs = []
        self.namespaces = []
        self._next_ip = 10
        self._closed = False
        self._owner = os.getpid()
        self._save_registry()
        try:
            if netns:
                run("ip", "link", "add", self.bridge, "type", "bridge")
                self._save_registry()
                gateway = f"{self.gateway}/{self.subnet.prefixlen}"
                run("ip", "addr", "add", gateway, "dev", self.bridge)
                run("ip", "link", "set", self.bridge, "up")
                self._make_client_key()
            self.redis_port = free_port()
            self.redis = self._start_redis(list(redis_args))
        except BaseException:
            self.close()
            raise
