"""The lab's broker: a real redis-server on the bridge address (or loopback), its URL and
clients of it."""

from __future__ import annotations

import subprocess
from typing import Any

from fleetcheck.lab.base import LabBase
from fleetcheck.lab.system import port_open, server_binary, wait_for


class BrokerLab(LabBase):
    """The broker."""

    # ------------------------------------------------------------ broker
    def _start_redis(self, extra: list[str]) -> subprocess.Popen[bytes]:
        rdir = self.dir / "redis"
        rdir.mkdir()
        proc = self.spawn(
            [
                server_binary(),
                "--port",
                str(self.redis_port),
                "--bind",
                f"127.0.0.1 {self.gateway}" if self.netns else "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(rdir),
                "--protected-mode",
                "no",
                "--maxclients",
                "20000",
                "--unixsocket",
                str(rdir / "redis.sock"),
                "--unixsocketperm",
                "700",
                *extra,
            ],
            stdout=open(rdir / "redis.log", "wb"),
            stderr=subprocess.STDOUT,
        )
        wait_for(lambda: port_open("127.0.0.1", self.redis_port), 10, "redis-server to listen")
        return proc

    @property
    def broker_url(self) -> str:
        return f"redis://{self.gateway}:{self.redis_port}/0"

    def client(self, **kw: Any) -> Any:
        """A redis-py client for the test itself (setting up state, asserting on it)."""
        import redis

        return redis.Redis(host="127.0.0.1", port=self.redis_port, **kw)
