"""The machine under the lab: its prerequisites, running commands and waiting on conditions,
free ports, and sweeping what a dead lab left behind (its namespaces and processes, recorded
in REGISTRY)."""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
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


def used_networks(ns: str | None = None) -> list[ipaddress.IPv4Network]:
    """Every IPv4 prefix already on the machine (or in namespace `ns`): each address with its
    prefix length (`ip -j addr`) and each route's destination in every table (`ip -j route
    show table all`), the default route left out. A lab subnet must overlap none of them."""
    where = ["-n", ns] if ns else []
    nets: set[ipaddress.IPv4Network] = set()
    for link in json.loads(run("ip", *where, "-j", "-4", "addr", "show").stdout or b"[]"):
        for info in link.get("addr_info", []):
            try:
                nets.add(ipaddress.IPv4Interface(f"{info['local']}/{info['prefixlen']}").network)
            except (KeyError, ValueError):
                continue
    routes = run("ip", *where, "-j", "-4", "route", "show", "table", "all").stdout
    for route in json.loads(routes or b"[]"):
        dst = route.get("dst")
        if not isinstance(dst, str) or dst == "default":
            continue
        try:
            nets.add(ipaddress.IPv4Network(dst, strict=False))
        except ValueError:
            continue
    return sorted(nets)


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


def claim_lab_id(owner: int) -> str:
    """A lab id no other lab on this machine holds: every name of a lab (bridge `fcbr<id>`,
    veths `fv<id>…`, namespaces `fc<id>-…`, registry entry) comes from it. Taken by creating
    its registry entry exclusively; skipped while any link or namespace uses it."""
    REGISTRY.mkdir(parents=True, exist_ok=True)
    links = [
        line.split(":", 2)[1].strip().split("@")[0]
        for line in run("ip", "-o", "link", "show", check=False).stdout.decode().splitlines()
        if line.count(":") >= 2
    ]
    spaces = run("ip", "netns", "list", check=False).stdout.decode().split()
    for _ in range(1000):
        lab_id = secrets.token_hex(2)
        if any(n == f"fcbr{lab_id}" or n.startswith(f"fv{lab_id}") for n in links):
            continue
        if any(s.startswith(f"fc{lab_id}-") for s in spaces):
            continue
        try:
            with open(REGISTRY / lab_id, "x") as entry:
                entry.write(json.dumps({"owner": owner}))
        except FileExistsError:
            continue
        return lab_id
    raise RuntimeError(f"no free lab id: {REGISTRY} holds {len(list(REGISTRY.iterdir()))} labs")


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
