"""The lab: a real fleet on this machine, for the tests, the benchmarks and `fleetcheck demo`.

Network namespaces play the fleet's machines, joined by veth pairs to a bridge in the root
namespace; each has an address in 198.18.0.0/15 (reserved for benchmarking; no other
non-loopback address is ever used), its own OpenSSH sshd (keys generated per lab, known_hosts
written for the test) and, on request, simulated workers holding broker connections from its
address. The broker is a real redis-server listening on the bridge address.

Everything a lab starts is torn down by `close()`, also on failure; labs whose owning process
died (a killed test run) are swept when the next lab starts. Needs root, iproute2,
redis-server and sshd; `Lab(netns=False)` needs only redis-server and makes `ssh = "local"`
hosts whose workers connect from 127.0.0.x addresses (the demo's fallback).
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REGISTRY = Path("/run/fleetcheck-lab")
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def server_binary() -> str:
    """The broker the lab runs: $FLEETCHECK_REDIS_SERVER (a path or name: CI's server matrix
    sets it to Valkey's valkey-server), else Debian's redis-server."""
    return os.environ.get("FLEETCHECK_REDIS_SERVER") or "redis-server"


def missing_prerequisites(netns: bool = True) -> list[str]:
    """What this machine lacks for a lab (with namespaces and sshd, or loopback-only)."""
    missing = []
    if shutil.which(server_binary()) is None:
        missing.append(server_binary())
    if not netns:
        return missing
    if os.geteuid() != 0:
        missing.append("root")
    for tool in ("ip", "ssh-keygen"):
        if shutil.which(tool) is None:
            missing.append(tool)
    if not os.path.exists(SSHD):
        missing.append("sshd")
    if not missing and run("ip", "netns", "list", check=False).returncode != 0:
        missing.append("network namespaces")
    return missing


def wait_for(
    condition: Callable[[], Any],
    timeout: float = 10.0,
    what: str = "condition",
    every: float = 0.02,
) -> Any:
    """Poll `condition` until it returns something truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as e:  # keep polling; report the last error on timeout
            last_error = e
        if time.monotonic() > deadline:
            extra = f" (last error: {last_error})" if last_error else ""
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}{extra}")
        time.sleep(every)


def run(
    *args: str, check: bool = True, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run(args, capture_output=True, input=input)
    if check and proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {err}")
    return proc


def port_open(addr: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def kill_namespace(ns: str) -> None:
    """Kill every process still inside `ns`, then delete it. sshd's per-session children
    call setsid(), so killing the listener's process group does not reach them; left alone
    they would keep a deleted namespace (and its sockets) alive."""
    pids = run("ip", "netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    run("ip", "netns", "del", ns, check=False)


def sweep_orphans() -> None:
    """Remove labs whose owning process is gone (a test run that was killed)."""
    if not REGISTRY.is_dir():
        return
    for entry in REGISTRY.iterdir():
        try:
            info = json.loads(entry.read_text())
        except (OSError, ValueError):
            continue
        if _pid_alive(int(info.get("owner", 0))):
            continue
        for pid in info.get("pids", []):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for ns in info.get("namespaces", []):
            kill_namespace(ns)
        if info.get("bridge"):
            run("ip", "link", "del", info["bridge"], check=False)
        shutil.rmtree(info.get("dir", "/nonexistent"), ignore_errors=True)
        entry.unlink(missing_ok=True)


def _roomy_neighbour_table() -> None:
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


@dataclass
class LabHost:
    name: str
    ns: str
    addr: str
    dir: Path
    veths: list[str] = field(default_factory=list)  # root-side ends
    sshd: subprocess.Popen[bytes] | None = None
    host_key_pub: str = ""
    extra_addrs: list[str] = field(default_factory=list)

    def log_path(self, name: str) -> Path:
        return self.dir / name


class Lab:
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
        self.id = secrets.token_hex(2)
        self.dir = Path(tempfile.mkdtemp(prefix=f"fleetcheck-lab-{self.id}-"))
        self.bridge = f"fcbr{self.id}" if netns else ""
        self.prefix = prefix  # 22 for up to ~1,000 hosts (a bridge takes 1,024 ports)
        self.subnet = self._pick_subnet() if netns else ipaddress.IPv4Network("127.0.0.0/24")
        self.gateway = str(self.subnet.network_address + 1)
        self.hosts: dict[str, LabHost] = {}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.namespaces: list[str] = []
        self._next_ip = 10
        self._closed = False
        self._owner = os.getpid()
        self._save_registry()
        try:
            if netns:
                if self.subnet.num_addresses > 256:
                    _roomy_neighbour_table()
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

    # ------------------------------------------------------------ bookkeeping
    def _pick_subnet(self) -> ipaddress.IPv4Network:
        used = run("ip", "-4", "-o", "addr", "show").stdout.decode()
        span = 2 ** (24 - self.prefix)
        for _ in range(200):
            if span == 1:
                third = secrets.randbelow(254) + 1
            else:  # aligned to the prefix, never 198.18.0.x
                third = (secrets.randbelow(256 // span - 1) + 1) * span
            net = ipaddress.IPv4Network(f"198.18.{third}.0/{self.prefix}")
            if all(f" 198.18.{t}." not in used for t in range(third, third + span)):
                return net
        raise RuntimeError(f"no free 198.18.x.0/{self.prefix} subnet for the lab")

    def _save_registry(self) -> None:
        REGISTRY.mkdir(parents=True, exist_ok=True)
        if not self.netns:
            return  # nothing outlives a loopback lab's processes
        info = {
            "owner": self._owner,
            "pids": [p.pid for p in self.procs],
            "namespaces": self.namespaces,
            "bridge": self.bridge,
            "dir": str(self.dir),
        }
        (REGISTRY / self.id).write_text(json.dumps(info))

    def spawn(self, args: list[str], ns: str | None = None, **kw: Any) -> subprocess.Popen[bytes]:
        """Start a lab process in its own process group (so teardown kills all of it)."""
        if ns:
            args = ["ip", "netns", "exec", ns, *args]
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("stdout", subprocess.DEVNULL)
        kw.setdefault("stderr", subprocess.DEVNULL)
        proc = subprocess.Popen(args, start_new_session=True, **kw)
        self.procs.append(proc)
        self._save_registry()
        return proc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGCONT)
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for ns in self.namespaces:
            kill_namespace(ns)
        if self.bridge:
            run("ip", "link", "del", self.bridge, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        (REGISTRY / self.id).unlink(missing_ok=True)

    def keep(self) -> Path:
        """Leave the lab running after this process ends (`fleetcheck demo --keep`): its
        owner becomes redis-server, and a stop script undoes everything."""
        self._owner = self.redis.pid
        self._save_registry()
        lines = ["#!/bin/sh", "# stops the fleetcheck lab " + self.id]
        lines += [f"kill -9 -{p.pid} 2>/dev/null" for p in self.procs]  # dash: no "--"
        for ns in self.namespaces:
            lines.append(f"ip netns pids {ns} 2>/dev/null | xargs -r kill -9 2>/dev/null")
            lines.append(f"ip netns del {ns} 2>/dev/null")
        if self.bridge:
            lines.append(f"ip link del {self.bridge} 2>/dev/null")
        lines.append(f"rm -f {REGISTRY / self.id}")
        lines.append(f"rm -rf {self.dir}")
        stop = self.dir / "stop.sh"
        stop.write_text("\n".join(lines) + "\n")
        self._closed = True  # close() is now the stop script's job
        return stop

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    @property
    def unix_socket(self) -> str:
        return str(self.dir / "redis" / "redis.sock")

    def client(self, **kw: Any) -> Any:
        """A redis-py client for the test itself (setting up state, asserting on it)."""
        import redis

        return redis.Redis(host="127.0.0.1", port=self.redis_port, **kw)

    # ------------------------------------------------------------ hosts
    def _make_client_key(self) -> None:
        self.client_key = self.dir / "id_ed25519"
        run(
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "fleetcheck-lab",
            "-f",
            str(self.client_key),
        )
        self.authorized_keys = self.dir / "authorized_keys"
        shutil.copy(str(self.client_key) + ".pub", self.authorized_keys)
        self.known_hosts = self.dir / "known_hosts"
        self.known_hosts.write_text("")
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory

    def _alloc_ip(self) -> str:
        addr = str(self.subnet.network_address + self._next_ip)
        self._next_ip += 1
        if self._next_ip > self.subnet.num_addresses - 2:
            raise RuntimeError("lab subnet full")
        return addr

    def _veth(self, host: LabHost, inner: str) -> str:
        outer = f"fv{self.id}{self.namespaces.index(host.ns):02d}{len(host.veths)}"
        run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", host.ns)
        run("ip", "link", "set", outer, "master", self.bridge, "up")
        host.veths.append(outer)
        return outer

    def add_host(
        self, name: str, *, sshd: bool = True, tz: str | None = None, sshd_options: str = ""
    ) -> LabHost:
        if not self.netns:  # a loopback lab: the host is this machine, seen from 127.0.0.x
            hdir = self.dir / name
            hdir.mkdir()
            host = LabHost(name=name, ns="", addr=self._alloc_ip(), dir=hdir)
            self.hosts[name] = host
            return host
        ns = f"fc{self.id}-{name}"[:30]
        # registered before it exists: a Ctrl-C while `ip netns add` runs must not leak it
        self.namespaces.append(ns)
        self._save_registry()
        run("ip", "netns", "add", ns)
        hdir = self.dir / name
        hdir.mkdir()
        host = LabHost(name=name, ns=ns, addr=self._alloc_ip(), dir=hdir)
        self.hosts[name] = host
        self._veth(host, "eth0")
        self.nsrun(host, "ip", "link", "set", "lo", "up")
        self.nsrun(host, "ip", "addr", "add", f"{host.addr}/{self.subnet.prefixlen}", "dev", "eth0")
        self.nsrun(host, "ip", "link", "set", "eth0", "up")
        self.nsrun(host, "ip", "route", "add", "default", "via", self.gateway, "dev", "eth0")
        if sshd:
            self.start_sshd(host, tz=tz, options=sshd_options)
        return host

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

    def nsrun(
        self, host: LabHost, *args: str, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        return run("ip", "netns", "exec", host.ns, *args, check=check)

    def _write_host_key(self, host: LabHost) -> None:
        key = host.dir / "ssh_host_ed25519_key"
        for p in (key, Path(str(key) + ".pub")):
            p.unlink(missing_ok=True)
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
        host.host_key_pub = " ".join(Path(str(key) + ".pub").read_text().split()[:2])

    def start_sshd(
        self,
        host: LabHost,
        tz: str | None = None,
        options: str = "",
        max_startups: str | None = "500",
        log_level: str = "ERROR",
    ) -> None:
        """Start the host's sshd. sshd takes the FIRST value of most keywords, so
        `max_startups` (None: OpenSSH's default 10:30:100) and `log_level` (INFO logs every
        login) are parameters rather than `options` lines."""
        if not (host.dir / "ssh_host_ed25519_key").exists():
            self._write_host_key(host)
            self.trust(host)
        # sshd honours only the FIRST SetEnv line: merge ours with any in `options` into one.
        # SHLVL=1 stops a Debian bash (root's login shell here) from sourcing ~/.bashrc for
        # every ssh command (bash does that when SSH_CLIENT is set and SHLVL < 2): this
        # machine's root .bashrc runs `pyenv init`, ~100 ms of CPU per session that no real
        # worker would pay and that would otherwise dominate every SSH benchmark and test.
        env = ["SHLVL=1"] + ([f"TZ={tz}"] if tz else [])
        kept = []
        for line in options.splitlines():
            words = line.split()
            if words and words[0].lower() == "setenv":
                env += words[1:]
            else:
                kept.append(line)
        options = "".join(line + "\n" for line in kept)
        env_line = "SetEnv " + " ".join(env) + "\n"
        cfg = host.dir / "sshd_config"
        cfg.write_text(
            textwrap.dedent(
                f"""\
                Port 22
                ListenAddress {host.addr}
                HostKey {host.dir}/ssh_host_ed25519_key
                PidFile {host.dir}/sshd.pid
                AuthorizedKeysFile {self.authorized_keys}
                PermitRootLogin prohibit-password
                PasswordAuthentication no
                KbdInteractiveAuthentication no
                UsePAM no
                StrictModes no
                PrintMotd no
                PrintLastLog no
                MaxSessions 100
                UseDNS no
                """
            )
            + (f"MaxStartups {max_startups}\n" if max_startups else "")
            + f"LogLevel {log_level}\n"
            + env_line
            + options
        )
        host.sshd = self.spawn(
            [SSHD, "-D", "-e", "-f", str(cfg)],
            ns=host.ns,
            stderr=open(host.dir / "sshd.log", "ab"),
        )
        wait_for(lambda: port_open(host.addr, 22), 10, f"sshd on {host.name} to listen")

    def trust(self, host: LabHost) -> None:
        """Write the host's current key into the lab's known_hosts (replacing older lines)."""
        lines = [
            line
            for line in self.known_hosts.read_text().splitlines()
            if not line.startswith(host.addr + " ")
        ]
        lines.append(f"{host.addr} {host.host_key_pub}")
        self.known_hosts.write_text("\n".join(lines) + "\n")

    # ------------------------------------------------------------ faults
    def stop_sshd(self, host: LabHost) -> None:
        if host.sshd is not None:
            os.killpg(host.sshd.pid, signal.SIGKILL)
            host.sshd.wait()
            host.sshd = None

    def freeze_sshd(self, host: LabHost) -> None:
        assert host.sshd is not None
        os.killpg(host.sshd.pid, signal.SIGSTOP)

    def thaw_sshd(self, host: LabHost) -> None:
        assert host.sshd is not None
        os.killpg(host.sshd.pid, signal.SIGCONT)

    def change_host_key(self, host: LabHost) -> None:
        """A new host key that known_hosts does not know (the MITM case)."""
        self.stop_sshd(host)
        self._write_host_key(host)
        self.start_sshd(host)

    def link_down(self, host: LabHost) -> None:
        for veth in host.veths:
            run("ip", "link", "set", veth, "down")

    def link_up(self, host: LabHost) -> None:
        for veth in host.veths:
            run("ip", "link", "set", veth, "up")

    def add_interface(self, host: LabHost, inner: str, metric: int | None = 200) -> str:
        """A second interface on the same subnet with its own default route (incident 5)."""
        addr = self._alloc_ip()
        self._veth(host, inner)
        self.nsrun(host, "ip", "addr", "add", f"{addr}/{self.subnet.prefixlen}", "dev", inner)
        self.nsrun(host, "ip", "link", "set", inner, "up")
        if metric is not None:
            self.nsrun(
                host,
                "ip",
                "route",
                "add",
                "default",
                "via",
                self.gateway,
                "dev",
                inner,
                "metric",
                str(metric),
            )
        host.extra_addrs.append(addr)
        return addr

    # ------------------------------------------------------------ workers
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
        target = "127.0.0.1" if host is None or not self.netns else self.gateway
        if host is not None and not self.netns and source is None:
            source = host.addr
        # A connection refused or unreachable right after the host's link came up is retried
        # until a deadline; whatever still fails is written to a log the error below quotes.
        script = textwrap.dedent(
            f"""\
            import socket, sys, time
            def connect():
                deadline = time.monotonic() + {connect_within!r}
                while True:
                    s = socket.socket()
                    try:
                        if {source!r}:
                            s.bind(({source!r}, 0))
                        s.connect(({target!r}, {self.redis_port}))
                        return s
                    except OSError:
                        s.close()
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.05)
            socks = []
            for i in range({count}):
                s = connect()
                n = {name!r}.encode()
                s.sendall(b"*3\\r\\n$6\\r\\nCLIENT\\r\\n$7\\r\\nSETNAME\\r\\n"
                          b"$%d\\r\\n%s\\r\\n" % (len(n), n))
                socks.append(s)
            for s in socks:
                s.recv(16)
            sys.stdout.write("ready\\n"); sys.stdout.flush()
            while True:
                time.sleep(3600)
            """
        )
        return self._spawn_ready(
            script, host, f"workers-{name}", f"workers on {host.name if host else 'loopback'}"
        )

    def _spawn_ready(
        self, script: str, host: LabHost | None, log_name: str, what: str
    ) -> subprocess.Popen[bytes]:
        """Run a lab Python script that prints "ready". One that dies first is started once
        more (a CI run once lost a demo to a worker that died for a reason nobody saw); if
        that one dies too, the error quotes the last line of each one's stderr (kept in a
        log beside the host's files)."""
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

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

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
    ) -> subprocess.Popen[bytes]:
        """A simulated rater: one connection named `name` looping on `pop` (BLPOP/BRPOP) of
        `inbox` with `block_timeout`. For each envelope it takes it appends "processed <id>"
        to `log` and, with `reply_key`, RPUSHes the id there. Prints "ready" once connected."""
        target = "127.0.0.1" if host is None else self.gateway
        script = textwrap.dedent(
            f"""\
            import json, sys
            import redis
            r = redis.Redis(host={target!r}, port={self.redis_port}, client_name={name!r},
                            protocol=2, socket_timeout=None)
            r.ping()
            sys.stdout.write("ready\\n"); sys.stdout.flush()
            log = {str(log) if log else None!r}
            while True:
                item = r.{pop}([{inbox!r}], timeout={block_timeout!r})
                if item is None:
                    continue
                raw = item[1]
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
        return self._spawn_ready(script, host, f"rater-{name}", "the lab rater")

    def freeze(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGSTOP a lab process and wait until the kernel reports it stopped."""
        os.killpg(proc.pid, signal.SIGSTOP)
        wait_for(lambda: _proc_state(proc.pid) in ("T", "t"), 5, f"process {proc.pid} to stop")

    def thaw(self, proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGCONT)

    def client_named(self, name: str) -> list[dict[str, str]]:
        """The broker's CLIENT LIST entries with this client name, as field dicts."""
        out = []
        for c in self.client().client_list():
            if c.get("name") == name:
                out.append(c)
        return out


JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"


def journal_export(entries: Iterable[dict[str, str | bytes | int]]) -> bytes:
    """systemd's journal export format for `entries` (field -> value): `KEY=VALUE` lines,
    values with a newline in the binary form (KEY, newline, 64-bit LE length, bytes), a
    blank line after each entry. `__REALTIME_TIMESTAMP` (µs since the epoch) sets the entry's
    time; a boot id and monotonic time are added when missing."""
    import struct

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


def _proc_state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "?"
    return stat.rsplit(")", 1)[1].split()[0]


def incident_live_hash(
    now: float, owner_old: str = "mini", owner_fresh: str = "big"
) -> dict[str, str]:
    """incident 1 as data: 263 entries of `arena:live`, 44 fresh (minutes old), 200 old
    (hours old, left by SIGKILLed workers of `owner_old`) and 19 malformed (not JSON, no
    started_at, unreadable or zone-less started_at). Starts mix epoch seconds and ISO 8601."""
    from datetime import UTC, datetime

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
