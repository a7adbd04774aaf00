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
        reply_key: str | None = None,
        pop: str = "blpop",
        stall_file: Path | None = None,
        stall_s: float = 6.0,
        work_s: float = 0.0,
    ) -> subprocess.Popen[bytes]:
        """A simulated rater: one connection named `name` (empty: unnamed) looping on `pop` of
        `inbox` with `block_timeout` (0: wait for ever). `pop` is "blpop", "brpop", "blmove"
        (into `inbox`:done) or "lpop" (a polling consumer: LPOP, and 20 ms of sleep when the
        inbox is empty; never blocked in the broker) or "pipeline" (BLPOP with an INCR of
        `inbox`:turns sent behind it in one pipeline: the INCR waits in the server's query
        buffer while the pop blocks). For each envelope it takes it appends
        "processed <id>" to `log` and, with `reply_key`, RPUSHes the id there. With
        `stall_file`, each turn of the loop that finds that file removes it and then blocks
        for `stall_s` in a synchronous sleep (a slow call on the loop), outside
        any broker command. `work_s`: how long each envelope takes to process (a busy but
        healthy loop). Prints "ready" once connected."""
        target = "127.0.0.1" if host is None else self.gateway
        if pop not in ("blpop", "brpop", "blmove", "lpop", "pipeline"):
            raise ValueError(f"pop {pop!r}: blpop, brpop, blmove, lpop or pipeline")
        take = {
            "blpop": f"r.blpop([{inbox!r}], timeout={block_timeout!r})",
            "brpop": f"r.brpop([{inbox!r}], timeout={block_timeout!r})",
            "blmove": f"r.blmove({inbox!r}, {inbox + ':done'!r}, {block_timeout!r}, "
            "'LEFT', 'LEFT')",
            "lpop": f"r.lpop({inbox!r})",
            "pipeline": f"r.pipeline(transaction=False).blpop([{inbox!r}], "
            f"timeout={block_timeout!r}).incr({inbox + ':turns'!r}).execute()[0]",
        }[pop]
        script = textwrap.dedent(
            f"""\
            import json, os, sys, time
            import redis
            r = redis.Redis(host={target!r}, port={self.redis_port},
                            client_name={name!r} or None, protocol=2, socket_timeout=None)
            r.ping()
            sys.stdout.write("ready\\n"); sys.stdout.flush()
            log = {str(log) if log else None!r}
            stall_file = {str(stall_file) if stall_file else None!r}
            while True:
                if stall_file and os.path.exists(stall_file):
                    os.unlink(stall_file)
                    time.sleep({stall_s!r})
                item = {take}
                if item is None:
                    if {pop == "lpop"!r}:
                        time.sleep(0.02)
                    continue
                raw = item if isinstance(item, bytes) else item[1]
                if {work_s!r}:
                    time.sleep({work_s!r})
                try:
                    ident = json.loads(raw).get("id", "")
                except Exception:
                    ident = ""
                if log:
                    with open(log, "a") as f:
                        f.write("processed %s\\n" % ident)
                if {reply_key!r} and ident:
                    r.rpush({reply_key!r}, ident)
            """
        )
        return self._spawn_ready(script, host, f"rater-{name or 'unnamed'}", "the lab rater")
