"""How lab workers behave on their broker connections, for the tests of the `clients` check's
judgements over rounds: connections that command every second (a poller), that wait in
`BLPOP` (a blocking consumer), and a client that opens a new connection per request (churn).
Each is a real process holding real sockets from a lab host's address, speaking RESP to the
lab's redis-server; `lab.start_workers` gives connections that never speak (idle by design).

Functions over a `WorkersLab` rather than methods of it, so the lab's own modules stay as
they are; each returns the process (stop it with `lab.stop`, freeze it with `lab.freeze`)."""

from __future__ import annotations

import subprocess
import textwrap

from fleetcheck.lab.base import LabHost
from fleetcheck.lab.workers import WorkersLab

# connect() with retries (a link just up may refuse or be unreachable for a moment), then
# `cmd(s, *args)` sending one RESP command and `reply(s)` reading one simple reply line
_PRELUDE = """\
import socket, sys, time
def connect():
    deadline = time.monotonic() + 15
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


def _script(lab: WorkersLab, host: LabHost | None, body: str) -> str:
    target = "127.0.0.1" if host is None or not lab.netns else lab.gateway
    source = host.addr if host is not None and not lab.netns else None
    head = f"TARGET, PORT, SOURCE = {target!r}, {lab.redis_port}, {source!r}\n"
    return head + _PRELUDE + textwrap.dedent(body)


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
    return lab._spawn_ready(_script(lab, host, body), host, f"chatty-{name}", "chatty workers")


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
    return lab._spawn_ready(_script(lab, host, body), host, f"blocking-{name}", "consumers")


def start_churn(
    lab: WorkersLab,
    host: LabHost | None,
    per_second: float,
    seconds: float,
    name: str = "per-request",
) -> subprocess.Popen[bytes]:
    """A client that opens a new connection per request: `per_second` connections a second
    for `seconds`, each sending one PING and closing. Prints "ready" when it starts and
    exits when done (wait for it with `proc.wait()`)."""
    body = f"""\
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        start = time.monotonic()
        n = 0
        while n < int({per_second!r} * {seconds!r}):
            due = start + n / {per_second!r}
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            s = connect()
            cmd(s, "PING")
            reply(s)
            s.close()
            n += 1
        """
    return lab._spawn_ready(_script(lab, host, body), host, f"churn-{name}", "a churning client")
