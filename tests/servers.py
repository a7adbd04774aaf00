"""Stand-alone broker processes for the broker tests: a server with options the lab's does not
have (TLS, ACL users, a low maxclients, persistence), replicas and Sentinel.

The binary is the server matrix's (`$FLEETCHECK_REDIS_SERVER`, else Debian's redis-server);
CI runs the broker tests once with each. Every process is killed at the end of its `with`,
also on failure. Only loopback addresses are used.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fleetcheck.lab.system import free_port, port_open, server_binary, wait_for


def server_name() -> str:
    """'valkey' or 'redis': what the matrix runs (from the binary's own --version)."""
    out = subprocess.run([server_binary(), "--version"], capture_output=True, text=True).stdout
    return "valkey" if out.lower().startswith("valkey") else "redis"


class Server:
    """One server process on 127.0.0.1 in its own directory. `args` are its options."""

    def __init__(
        self,
        args: Iterable[str] = (),
        binary: str | None = None,
        port: int | None = None,
        tls: bool = False,
        sentinel: bool = False,
        config: str | None = None,
    ) -> None:
        from tests.conftest import check_lab_marker

        check_lab_marker("a broker server")
        self.dir = Path(tempfile.mkdtemp(prefix="fleetcheck-server-"))
        self.port = port or free_port()
        self.binary = binary or server_binary()
        argv = [self.binary]
        if config is not None:
            conf = self.dir / "server.conf"
            conf.write_text(config)
            argv.append(str(conf))
            if sentinel:
                argv.append("--sentinel")
        plain_port = "0" if tls else str(self.port)
        argv += ["--port", plain_port, "--bind", "127.0.0.1", "--dir", str(self.dir)]
        if not sentinel:
            argv += ["--save", "", "--appendonly", "no"]
        if tls:
            argv += ["--tls-port", str(self.port)]
        argv += ["--protected-mode", "no", *args]
        self.log = self.dir / "server.log"
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=open(self.log, "wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.dir,
        )

        def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.log.read_text()[-2000:]}")
            return port_open("127.0.0.1", self.port)

        try:
            wait_for(up, 10, f"{self.binary} to listen on {self.port}")
        except BaseException:
            self.kill()
            raise

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **kw: Any) -> Any:
        """A client for the test itself: no retries (redis-py's default retries a refused
        or loading server for seconds)."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        kw.setdefault("retry", Retry(NoBackoff(), 0))
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def freeze(self) -> None:
        """SIGSTOP the server: the kernel still accepts connections into its backlog, nothing
        ever answers (a hung broker). Thawed by `thaw`; `kill` ends it frozen or not."""
        os.killpg(self.proc.pid, signal.SIGSTOP)
        wait_for(lambda: _state(self.proc.pid) in ("T", "t"), 5, "the server to stop")

    def thaw(self) -> None:
        os.killpg(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def _state(pid: int) -> str:
    """The process's state letter from /proc (T: stopped)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def fleet_toml(broker: str, checks: str = "[checks.broker]\n", extra: str = "") -> str:
    """A hosts.toml with no hosts: `broker` is the [broker] table's body."""
    return f'[broker]\n{broker}\n\n[patrol]\ndeadline = "20s"\n{extra}\n{checks}'
