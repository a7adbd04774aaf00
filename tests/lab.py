"""The lab for the tests: the product's lab (fleetcheck.lab, which `fleetcheck demo` uses too)
and what only tests plant or read: host faults, frozen processes, churning clients, the live
hash's incident, journal files and resident shells."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import struct
import subprocess
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from fleetcheck import lab as product
from fleetcheck.lab import LabHost
from fleetcheck.lab.system import (  # noqa: F401
    REGISTRY,
    SSHD,
    free_port,
    missing_prerequisites,
    port_open,
    run,
    server_binary,
    sweep_orphans,
    wait_for,
)

JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"
_RESIDENT = b"/bin/sh\0-s\0"  # what transport.shell starts on a kept connection


def proc_state(pid: int) -> str:
    """A process's state letter from /proc (T: stopped), "?" when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "?"
    return stat.rsplit(")", 1)[1].split()[0]


def roomy_neighbour_table() -> None:
    """The root namespace's ARP table holds one entry per lab host of every lab on this
    machine; the kernel's default hard limit (gc_thresh3 = 1024) overflows with a 600-host
    lab next to others ("neighbor table overflow": SYNs dropped, "no route to host"). Raise
    the limits (never lower them) so the lab measures sshd, not the ARP cache."""
    base = Path("/proc/sys/net/ipv4/neigh/default")
    for name, want in (("gc_thresh1", 1024), ("gc_thresh2", 8192), ("gc_thresh3", 16384)):
        try:
            path = base / name
            if int(path.read_text()) < want:
                path.write_text(f"{want}\n")
        except (OSError, ValueError):
            pass


class Lab(product.Lab):
    """The product's lab with the faults and probes only tests use."""

    def __init__(
        self, redis_args: Iterable[str] = (), netns: bool = True, prefix: int = 24
    ) -> None:
        if netns and prefix < 24:  # a lab of up to ~1,000 hosts (the benchmarks')
            roomy_neighbour_table()
        super().__init__(redis_args, netns, prefix)

    @property
    def unix_socket(self) -> str:
        return str(self.dir / "redis" / "redis.sock")

    def client_named(self, name: str) -> list[dict[str, str]]:
        """The broker's CLIENT LIST entries with this client name, as field dicts."""
        return [c for c in self.client().client_list() if c.get("name") == name]

    def freeze(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGSTOP a lab process and wait until the kernel reports it stopped."""
        os.killpg(proc.pid, signal.SIGSTOP)
        wait_for(lambda: proc_state(proc.pid) in ("T", "t"), 5, f"process {proc.pid} to stop")

    def thaw(self, proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGCONT)

    def start_rater(  # type: ignore[override]
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
        """The product's rater (fleetcheck.lab.workers) taking with `pop`: "blpop", "brpop",
        "blmove" (into `inbox`:done), "lpop" (a polling consumer: LPOP, and 20 ms of sleep when
        the inbox is empty; never blocked in the broker) or "pipeline" (BLPOP with an INCR of
        `inbox`:turns sent behind it in one pipeline: the INCR waits in the server's query
        buffer while the pop blocks). With `reply_key` it RPUSHes each envelope's id there.
        With `stall_file`, each turn of the loop that finds that file removes it and then
        blocks for `stall_s` in a synchronous sleep (a slow call on the loop), outside any
        broker command. `work_s`: how long each envelope takes to process (a busy but healthy
        loop)."""
        takes = {
            "blpop": f"r.blpop([{inbox!r}], timeout={block_timeout!r})",
            "brpop": f"r.brpop([{inbox!r}], timeout={block_timeout!r})",
            "blmove": f"r.blmove({inbox!r}, {inbox + ':done'!r}, {block_timeout!r}, "
            "'LEFT', 'LEFT')",
            "lpop": f"r.lpop({inbox!r}) or time.sleep(0.02)",
            "pipeline": f"r.pipeline(transaction=False).blpop([{inbox!r}], "
            f"timeout={block_timeout!r}).incr({inbox + ':turns'!r}).execute()[0]",
        }
        if pop not in takes:
            raise ValueError(f"pop {pop!r}: blpop, brpop, blmove, lpop or pipeline")
        turn = "pass"
        if stall_file is not None:
            stall = str(stall_file)
            turn = f"if os.path.exists({stall!r}): os.unlink({stall!r}); time.sleep({stall_s!r})"
        each = [f"time.sleep({work_s!r})"] if work_s else []
        if reply_key:
            each.append(f"ident and r.rpush({reply_key!r}, ident)")
        return super().start_rater(
            host, inbox, block_timeout, name, log, takes[pop], turn, "; ".join(each) or "pass"
        )

    # ------------------------------------------------------------ hosts and their faults
    def add_busybox_host(self, name: str) -> LabHost:
        """A host like an Alpine worker: its shell is BusyBox ash and its PATH holds only the
        BusyBox applets (Debian's `busybox`, linked one per applet by `busybox --install -s`).
        sshd's ForceCommand stands in for /bin/sh being BusyBox: the client's `/bin/sh -s`
        becomes `busybox sh -s`, reading the same script from stdin."""
        busybox = shutil.which("busybox")
        if busybox is None:
            raise RuntimeError("lab needs: busybox (Debian package busybox)")
        applets = self.dir / f"{name}-busybox-bin"
        applets.mkdir()
        run(busybox, "--install", "-s", str(applets))
        return self.add_host(
            name, sshd_options=f"SetEnv PATH={applets}\nForceCommand {busybox} sh -s\n"
        )

    def add_unprivileged_host(self, name: str, uid: int = 65534) -> LabHost:
        """A host whose SSH sessions run as an unprivileged user (uid/gid `uid`, no
        supplementary groups: not in systemd-journal or adm), via setpriv in ForceCommand."""
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise RuntimeError("lab needs: setpriv (util-linux)")
        force = f"{setpriv} --reuid={uid} --regid={uid} --clear-groups /bin/sh -s"
        return self.add_host(name, sshd_options=f"ForceCommand {force}\n")

    def stop_sshd(self, host: LabHost) -> None:
        if host.sshd is not None:
            self.stop(host.sshd)
            host.sshd = None

    def freeze_sshd(self, host: LabHost) -> None:
        assert host.sshd is not None
        self.freeze(host.sshd)

    def thaw_sshd(self, host: LabHost) -> None:
        assert host.sshd is not None
        self.thaw(host.sshd)

    def change_host_key(self, host: LabHost) -> None:
        """A new host key that known_hosts does not know (the MITM case)."""
        self.stop_sshd(host)
        self._write_host_key(host)
        self.start_sshd(host)

    def link_down(self, host: LabHost, state: str = "down") -> None:
        for veth in host.veths:
            run("ip", "link", "set", veth, state)

    def link_up(self, host: LabHost) -> None:
        self.link_down(host, "up")


def start_churn(
    lab: product.Lab,
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
    script = lab.worker_script(host, body)
    return lab._spawn_ready(script, host, f"churn-{name}", "a churning client")


def resident_shells(pids: Iterable[int]) -> list[int]:
    """Of these processes, the resident shells waiting for rounds (`/bin/sh -s` whose parent
    is not one: not a subshell of a round, whose watchdog ends within a second of it)."""
    out = []
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() != _RESIDENT:
                continue
            ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
            if Path(f"/proc/{ppid}/cmdline").read_bytes() != _RESIDENT:
                out.append(pid)
        except FileNotFoundError:  # ended while we looked
            pass
    return out


def incident_live_hash(
    now: float, owner_old: str = "mini", owner_fresh: str = "big"
) -> dict[str, str]:
    """incident 1 as data: 263 entries of `arena:live`, 44 fresh (minutes old), 200 old
    (hours old, left by SIGKILLed workers of `owner_old`) and 19 malformed (not JSON, no
    started_at, unreadable or zone-less started_at). Starts mix epoch seconds and ISO 8601."""

    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).isoformat()

    out: dict[str, str] = {}
    for i in range(44):
        start = now - 30 - 10 * i  # up to ~8 minutes old
        value = start if i % 2 else iso(start)
        out[f"match:fresh:{i}"] = json.dumps({"started_at": value, "host": owner_fresh})
    for i in range(200):
        start = now - 3600 - 60 * i  # 1 to ~4.3 hours old
        value = start if i % 3 else iso(start)
        out[f"match:old:{i}"] = json.dumps({"started_at": value, "host": owner_old})
    malformed = (
        ["not json at all", "{truncated", "", "[1, 2, 3]", '"a string"']
        + [json.dumps({"host": owner_old, "pid": i}) for i in range(6)]
        + [json.dumps({"started_at": v, "host": owner_old}) for v in ("soon", None, True, "")]
        + [json.dumps({"started_at": "2026-11-29T06:21:00"})] * 2  # no zone: means nothing
        + [json.dumps({"started_at": now + 86400})]  # a day in the future
        + [json.dumps({"started_at": {"t": now}})]
    )
    assert len(malformed) == 19
    for i, value in enumerate(malformed):
        out[f"match:bad:{i}"] = value
    return out


def journal_export(entries: Iterable[dict[str, str | bytes | int]]) -> bytes:
    """systemd's journal export format for `entries` (field -> value): `KEY=VALUE` lines,
    values with a newline in the binary form (KEY, newline, 64-bit LE length, bytes), a
    blank line after each entry. `__REALTIME_TIMESTAMP` (µs since the epoch) sets the entry's
    time; a boot id and monotonic time are added when missing."""
    out = bytearray()
    for i, entry in enumerate(entries):
        fields: dict[str, str | bytes | int] = {
            "__MONOTONIC_TIMESTAMP": i + 1,
            "_BOOT_ID": "0123456789abcdef0123456789abcdef",
            **entry,
        }
        for key, value in fields.items():
            raw = value if isinstance(value, bytes) else str(value).encode()
            if b"\n" in raw:
                out += key.encode() + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"
            else:
                out += key.encode() + b"=" + raw + b"\n"
        out += b"\n"
    return bytes(out)


def write_journal(directory: Path, entries: Iterable[dict[str, str | bytes | int]]) -> Path:
    """A real journal file in `directory`, written by systemd-journal-remote from export
    format, for the real journalctl to read (`journalctl --directory`)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"lab-{secrets.token_hex(3)}.journal"
    proc = subprocess.run(
        [JOURNAL_REMOTE, f"--output={target}", "-"],
        input=journal_export(entries),
        capture_output=True,
    )
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"systemd-journal-remote failed ({proc.returncode}): {err}")
    return target
