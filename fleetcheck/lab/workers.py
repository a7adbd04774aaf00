"""The lab's simulated workers (processes holding broker connections from a host's address),
the rater (a broker-side consumer) and the hosts.toml a test or the demo patrols the lab with."""

from __future__ import annotations

import secrets
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

from fleetcheck.lab.base import LabHost
from fleetcheck.lab.hosts import HostsLab

# connect() with retries until WITHIN seconds (a link just up may refuse or be unreachable for
# a moment; the last error reaches the log), `cmd(s, *args)` sending one RESP command, `reply(s)`
# reading one simple reply line and `named(name)`: a connection with its CLIENT SETNAME done
_PRELUDE = """\
import socket, sys, time
def connect():
    deadline = time.monotonic() + WITHIN
    while True:
        s = socket.socket()
        try:
            if SOURCE:
                s.bind((SOURCE, 0))
            s.connect((TARGET, PORT))
            return s
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
def cmd(s, *args):
    out = b"*%d\\r\\n" % len(args)
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out += b"$%d\\r\\n%s\\r\\n" % (len(a), a)
    s.sendall(out)
def reply(s):
    data = b""
    while not data.endswith(b"\\r\\n"):
        chunk = s.recv(4096)
        if not chunk:
            raise SystemExit("the broker closed the connection")
        data += chunk
    return data
def named(name):
    s = connect()
    cmd(s, "CLIENT", "SETNAME", name)
    reply(s)
    return s
"""


class WorkersLab(HostsLab):
    """Workers, the rater and the config."""

    # ------------------------------------------------------------ workers
    def worker_script(
        self,
        host: LabHost | None,
        body: str,
        source: str | None = None,
        connect_within: float = 15.0,
    ) -> str:
        """A worker's Python script: `body` after the RESP helpers of `_PRELUDE`, connecting
        to the broker from `host` (None: loopback), bound to `source` when given."""
        target = "127.0.0.1" if host is None or not self.netns else self.gateway
        if host is not None and not self.netns and source is None:
            source = host.addr
        head = f"TARGET, PORT, SOURCE = {target!r}, {self.redis_port}, {source!r}\n"
        head += f"WITHIN = {connect_within!r}\n"
        return head + _PRELUDE + textwrap.dedent(body)

    def start_workers(
        self,
        host: LabHost | None,
        count: int,
        name: str = "worker",
        source: str | None = None,
        connect_within: float = 15.0,
    ) -> subprocess.Popen[bytes]:
        """`count` idle broker connections named `name` from `host` (None: from loopback).

        `source` binds the connections to one of the host's addresses (a second interface).
        """
        body = f"""\
            socks = [named({name!r}) for _ in range({count})]
            sys.stdout.write("ready\\n"); sys.stdout.flush()
            while True:
                time.sleep(3600)
            """
        return self._spawn_ready(
            self.worker_script(host, body, source, connect_within),
            host,
            f"workers-{name}",
            f"workers on {host.name if host else 'loopback'}",
        )

    def _spawn_ready(
        self, script: str, host: LabHost | None, log_name: str, what: str
    ) -> subprocess.Popen[bytes]:
        """Run a lab Python script that prints "ready", once more if it dies first; if that
        one dies too, the error quotes the last stderr line of each (logged beside the host's
        files)."""
        log = (host.dir if host else self.dir) / f"{log_name}.log"
        reasons: list[str] = []
        while True:
            size = log.stat().st_size if log.exists() else 0
            with open(log, "ab") as err:
                proc = self.spawn(
                    [sys.executable, "-c", script],
                    ns=host.ns if host else None,
                    stdout=subprocess.PIPE,
                    stderr=err,
                )
            assert proc.stdout is not None
            if proc.stdout.readline().strip() == b"ready":
                return proc
            proc.wait()
            with open(log, "rb") as f:
                f.seek(size)
                lines = f.read().decode(errors="replace").strip().splitlines()
            reasons.append(lines[-1] if lines else f"exit code {proc.returncode}, no stderr")
            if len(reasons) == 2:
                first = f" (the first attempt: {reasons[0]})" if reasons[0] != reasons[1] else ""
                raise RuntimeError(f"{what} did not start: {reasons[1]}{first}")

    # ------------------------------------------------------------ config
    def config(
        self,
        checks: str = "[checks.clients]\n",
        hosts: Iterable[LabHost] | None = None,
        host_extra: dict[str, str] | None = None,
        extra: str = "",
        patrol: str = 'deadline = "30s"\n',
    ) -> Path:
        """Write a hosts.toml for this lab and return its path.

        `host_extra` adds TOML lines to a host's table by name; `extra` goes at the top level
        (before the hosts) for [ssh]/[broker] overrides.
        """
        host_extra = host_extra or {}
        parts = ["[broker]", f'url = "{self.broker_url}"', 'connect_timeout = "2s"', ""]
        if self.netns:
            parts += [
                "[ssh]",
                'user = "root"',
                f'known_hosts = "{self.known_hosts}"',
                f'identity_file = "{self.client_key}"',
                'connect_timeout = "3s"',
                'command_timeout = "5s"',
                "use_agent = false",
                'config_file = "/dev/null"',
                "",
            ]
        parts += [
            "[patrol]",
            patrol,
            extra,
        ]
        for h in self.hosts.values() if hosts is None else hosts:
            addrs = ", ".join(f'"{a}"' for a in [h.addr, *h.extra_addrs])
            parts += [
                "[[hosts]]",
                f'name = "{h.name}"',
                f'ssh = "{h.addr if self.netns else "local"}"',
                f"addrs = [{addrs}]",
                host_extra.get(h.name, ""),
                "",
            ]
        parts.append(checks)
        path = self.dir / f"hosts-{secrets.token_hex(3)}.toml"
        path.write_text("\n".join(parts) + "\n")
        return path

    # ------------------------------------------------------------ rater (broker-side checks)
    def start_rater(
        self,
        host: LabHost | None = None,
        inbox: str = "arena:rater:inbox",
        block_timeout: float = 1.0,
        name: str = "rater",
        log: Path | None = None,
        take: str | None = None,
        turn: str = "pass",
        each: str = "pass",
    ) -> subprocess.Popen[bytes]:
        """A simulated rater: one connection `r` named `name` (empty: unnamed) looping on BLPOP
        of `inbox` with `block_timeout` (0: wait for ever), appending "processed <id>" to `log`
        for each envelope it takes; prints "ready" once connected. The tests' variants
        (tests/lab.py) replace the BLPOP by `take` (a Python expression over `r`: None when
        nothing came) and add one line of Python run at each `turn` of the loop and for
        `each` envelope (`ident` its id) before it is logged."""
        target = "127.0.0.1" if host is None else self.gateway
        take = take or f"r.blpop([{inbox!r}], timeout={block_timeout!r})"
        script = textwrap.dedent(
            f"""\
            import json, os, sys, time
            import redis
            r = redis.Redis(host={target!r}, port={self.redis_port},
                            client_name={name!r} or None, protocol=2, socket_timeout=None)
            r.ping()
            sys.stdout.write("ready\\n"); sys.stdout.flush()
            log = {str(log) if log else None!r}
            while True:
                {turn}
                item = {take}
                if item is None:
                    continue
                raw = item if isinstance(item, bytes) else item[1]
                try:
                    ident = json.loads(raw).get("id", "")
                except Exception:
                    ident = ""
                {each}
                if log:
                    with open(log, "a") as f:
                        f.write("processed %s\\n" % ident)
            """
        )
        return self._spawn_ready(script, host, f"rater-{name or 'unnamed'}", "the lab rater")
