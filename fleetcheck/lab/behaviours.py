"""How lab workers behave on their broker connections (the demo's and the `clients` tests'):
connections that command every second (a poller) or wait in `BLPOP` (a blocking consumer).
Each is a real process holding real sockets from a lab host's address, speaking RESP to the
lab's redis-server; `lab.start_workers` gives connections that never speak."""

from __future__ import annotations

import subprocess

from fleetcheck.lab.base import LabHost
from fleetcheck.lab.workers import WorkersLab


def start_chatty(
    lab: WorkersLab, host: LabHost | None, count: int, name: str = "poller", every: float = 1.0
) -> subprocess.Popen[bytes]:
    """`count` connections named `name-I` that each send a real command (GET of a key no
    one writes) every `every` seconds and read its answer: a poller at work."""
    body = f"""\
        socks = [named({name!r} + "-%d" % i) for i in range({count})]
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        while True:
            for s in socks:
                cmd(s, "GET", "lab:poll:nothing")
                reply(s)
            time.sleep({every!r})
        """
    return lab._spawn_ready(lab.worker_script(host, body), host, f"chatty-{name}", "chatty workers")


def start_blocking(
    lab: WorkersLab,
    host: LabHost | None,
    count: int,
    name: str = "consumer",
    key: str = "lab:jobs",
    timeout: int = 0,
) -> subprocess.Popen[bytes]:
    """`count` connections named `name-I`, each in `BLPOP key timeout` (0: forever) on a
    list, again after each answer: consumers waiting for work. Prints "ready" once every
    connection is named and its BLPOP sent."""
    body = f"""\
        socks = [named({name!r} + "-%d" % i) for i in range({count})]
        for s in socks:
            cmd(s, "BLPOP", {key!r}, {str(timeout)!r})
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        import selectors
        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        while True:
            for k, _ in sel.select():
                s = k.fileobj
                data = s.recv(65536)
                if not data:
                    raise SystemExit("the broker closed the connection")
                cmd(s, "BLPOP", {key!r}, {str(timeout)!r})
        """
    return lab._spawn_ready(lab.worker_script(host, body), host, f"blocking-{name}", "consumers")
