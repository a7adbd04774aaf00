"""The lab's common ground: a host of the lab (LabHost) and the base every part of the Lab
builds on (its directories, processes, namespaces and their teardown)."""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from fleetcheck.lab.system import REGISTRY, kill_namespace, run, used_networks
from fleetcheck.transport.local import kill_group

LAB_SPACE = ipaddress.IPv4Network("198.18.0.0/15")  # RFC 2544 benchmarking: the lab's own


def pick_subnet(prefix: int, ns: str | None = None) -> ipaddress.IPv4Network:
    """A random aligned /`prefix` anywhere in 198.18.0.0/15 (never the first one, 198.18.0.x)
    that overlaps no prefix already on the machine (or in namespace `ns`), by address math: a
    /16 on another bridge covers every /24 in it, so the lab moves to the other /16."""
    used = [n for n in used_networks(ns) if n.overlaps(LAB_SPACE)]
    # chosen at random among the free ones so two labs starting at once rarely pick the same
    free = [
        net
        for net in list(LAB_SPACE.subnets(new_prefix=prefix))[1:]
        if not any(net.overlaps(u) for u in used)
    ]
    if free:
        return secrets.choice(free)
    raise RuntimeError(f"no free /{prefix} subnet in {LAB_SPACE} for the lab")


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


class LabBase:
    """What every part of the lab reads: where it lives, its processes and namespaces, and
    the bookkeeping that tears them down (also from a stop script when the lab is kept)."""

    netns: bool
    id: str
    dir: Path
    bridge: str
    prefix: int
    subnet: ipaddress.IPv4Network
    gateway: str
    hosts: dict[str, LabHost]
    procs: list[subprocess.Popen[bytes]]
    namespaces: list[str]
    redis_port: int
    redis: subprocess.Popen[bytes]
    client_key: Path
    authorized_keys: Path
    known_hosts: Path
    _next_ip: int
    _closed: bool
    _owner: int

    # ------------------------------------------------------------ bookkeeping
    def _pick_subnet(self) -> ipaddress.IPv4Network:
        return pick_subnet(self.prefix)

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

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        kill_group(proc)

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
        # a veth goes with its namespace, unless something still holds the namespace:
        # delete the root-side ends by name so the lab's names are free again either way
        veths = [veth for host in self.hosts.values() for veth in host.veths]
        if veths:
            batch = "".join(f"link del {veth}\n" for veth in veths).encode()
            run("ip", "-force", "-batch", "-", check=False, input=batch)
        if self.bridge:
            run("ip", "link", "del", self.bridge, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.netns:  # a loopback lab's id is not claimed: another lab may hold it
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
