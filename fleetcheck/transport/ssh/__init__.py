"""The SSH transport: paramiko connections, strict about host keys, shared through jump hosts.

Invariants (each tested against a real OpenSSH sshd):
- Every stage of connecting shares ONE budget, enforced by a watchdog that closes the socket:
  a frozen sshd costs exactly that long. Each failure is one precise line; a CHANGED or
  REVOKED host key is CRIT and never connects.
- Host keys and ssh_config are read as OpenSSH reads them (known_hosts.py, ssh_config.py).
- One shared connection per jump host per patrol, at most JUMP_HANDSHAKES handshakes at once.
- A command runs as `/bin/sh -s` with the script on stdin (the login shell never parses it),
  under a hard monotonic deadline and a byte bound.
- TCP_NODELAY, and TCP_QUICKACK re-armed after reads: sshd's two small packets after auth
  would otherwise wait ~40 ms per host for our delayed ACK.
paramiko is imported inside functions: `fleetcheck --help` must not pay for it."""

from __future__ import annotations

import errno
import os
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetcheck.core.errors import TransportError
from fleetcheck.core.model import Status
from fleetcheck.transport.known_hosts import KnownHostsCache
from fleetcheck.transport.shell import ExecResult

if TYPE_CHECKING:
    import paramiko

    from fleetcheck.config import FleetConfig, HostConfig, SshConfig
    from fleetcheck.transport.known_hosts import Lookup

_known_hosts_lock = threading.Lock()
_CERT_ALGS = (
    "ssh-ed25519-cert-v01@openssh.com",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "rsa-sha2-512-cert-v01@openssh.com",
    "rsa-sha2-256-cert-v01@openssh.com",
)
MAX_JUMPS = 4
_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


# ---------------------------------------------------------------- importing and caching


_import_lock = threading.Lock()
_imported: list[Any] = []  # [paramiko] once its import has finished


def _paramiko() -> Any:
    """Import paramiko once, without `invoke`: paramiko.config imports it eagerly although
    only `Match exec` in an ssh config uses it, and it costs ~65 ms of CPU (a third of
    paramiko's import). `_lookup` loads it on the first `Match exec` it meets."""
    if _imported:  # not sys.modules: it holds paramiko while another lane is importing it
        return _imported[0]
    with _import_lock:
        if _imported:
            return _imported[0]
        blocked = "invoke" not in sys.modules
        if blocked:
            sys.modules["invoke"] = None  # type: ignore[assignment]  # makes `import` fail fast
        try:
            import paramiko
        finally:
            if blocked and "invoke" in sys.modules and sys.modules["invoke"] is None:
                del sys.modules["invoke"]
        _imported.append(paramiko)
        return paramiko


class _FileCache:
    """Parsed files by path, reparsed when the file's inode, size or mtime changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parsing = threading.Lock()  # a patrol's lanes all miss at once: parse once
        self._entries: dict[str, tuple[tuple[int, int, int], Any]] = {}

    def get(self, path: str, parse: Any) -> Any:
        """parse(path) or the cached result; OSError from stat propagates (missing file)."""
        st = os.stat(path)
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._entries.get(path)
        if hit is not None and hit[0] == sig:
            return hit[1]
        with self._parsing:
            with self._lock:
                hit = self._entries.get(path)
            if hit is not None and hit[0] == sig:
                return hit[1]
            value = parse(path)
            with self._lock:
                self._entries[path] = (sig, value)
        return value


_known_hosts_cache = KnownHostsCache()
_private_keys = _FileCache()


class _QuickAckSocket(socket.socket):
    """A TCP socket that re-arms TCP_QUICKACK after each read (Linux clears it again when we
    send): the server's next small packet is never held back by our delayed ACK."""

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        try:
            self.setsockopt(socket.IPPROTO_TCP, _TCP_QUICKACK or 0, 1)
        except OSError:
            pass
        return data


# ---------------------------------------------------------------- resolving the target

DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")


@dataclass(frozen=True)
class Target:
    """Where and as whom to connect, after hosts.toml, ssh_config and [ssh] are merged.

    `via` is the chain of jump hosts, nearest first, each a Target itself (so a jump host's
    own ProxyJump is part of its `via`); equal Targets share one jump connection per patrol.
    """

    alias: str  # what the fleet config says (`ssh = ...`), for messages
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    proxy_command: str | None = None
    via: tuple[Target, ...] = ()
    host_key_alias: str | None = None
    user_known_hosts: tuple[str, ...] = ()  # from ssh_config; empty: [ssh] known_hosts
    global_known_hosts: tuple[str, ...] = DEFAULT_GLOBAL_KNOWN_HOSTS
    accept_new: bool = False  # ssh_config StrictHostKeyChecking accept-new
    identities_only: bool = False
    connect_timeout: float | None = None  # ssh_config ConnectTimeout (beats [ssh])
    config_files: tuple[str, ...] = field(default=(), compare=False)

    @property
    def proxy_jump(self) -> tuple[str, ...]:
        return tuple(t.label for t in self.via)

    @property
    def known_hosts_host(self) -> str:
        """The name known_hosts and host certificates know this host by."""
        return self.host_key_alias or self.hostname

    @property
    def known_hosts_name(self) -> str:
        h = self.known_hosts_host
        return h if self.port == 22 else f"[{h}]:{self.port}"

    @property
    def label(self) -> str:
        return f"{self.user}@{self.hostname}:{self.port}"


def split_destination(spec: str) -> tuple[str, str | None, int | None]:
    """'[user@]host[:port]', '[user@][v6addr]:port' or 'ssh://user@host:port' as
    (host, user, port); what ssh's command line would take from it."""
    s = spec.strip().removeprefix("ssh://")
    user = None
    if "@" in s:
        user, s = s.rsplit("@", 1)
    port = None
    if s.startswith("[") and "]" in s:
        inner, _, rest = s[1:].partition("]")
        if rest.startswith(":") and rest[1:].isdigit():
            port = int(rest[1:])
        s = inner
    elif s.count(":") == 1:
        host_part, _, port_part = s.partition(":")
        if port_part.isdigit():
            s, port = host_part, int(port_part)
    return s, user or None, port


def load_ssh_config(path: str) -> Any:
    """The ssh_config resolver for `path` (a missing file is an empty config)."""
    from fleetcheck.transport.ssh_config import resolver

    return resolver(path)


def resolve_target(
    alias: str,
    cfg: SshConfig,
    ssh_config: Any,
    user: str | None = None,
    port: int | None = None,
    _depth: int = 0,
) -> Target:
    """OpenSSH's precedence: what hosts.toml says for the host (`ssh = "user@host:port"`, its
    `user`, `port`) acts like ssh's command line and wins; then ssh_config (first value
    wins); then the fleet-wide `[ssh]` defaults; then OpenSSH's own defaults."""
    from fleetcheck.transport.ssh_config import SshConfigError

    if _depth > MAX_JUMPS:
        raise TransportError(f"ProxyJump chain of {alias} longer than {MAX_JUMPS} hops (a loop?)")
    host, inline_user, inline_port = split_destination(alias)
    user = user or inline_user
    port = port or inline_port
    try:
        r = ssh_config.resolve(host, user=user, port=port)
    except SshConfigError as e:
        raise TransportError(f"ssh config: {e}") from None
    final_user = r.user if r.user_set else (cfg.user or r.user)
    final_port = r.port if r.port_set else (cfg.port or r.port)
    identity: list[str] = []
    if r.identity_files_set:
        identity += r.identity_files
    if cfg.identity_file:
        identity.append(str(Path(cfg.identity_file).expanduser()))
    if not identity:  # OpenSSH's default keys, those that exist
        identity = [p for p in r.identity_files if os.path.exists(p)]
    via: tuple[Target, ...] = ()
    hops = r.jumps
    if hops:
        first = resolve_target(hops[0], cfg, ssh_config, _depth=_depth + 1)
        chain = [*first.via, first]
        for spec in hops[1:]:
            h, u, p = split_destination(spec)
            hop = resolve_target(h, cfg, ssh_config, u, p, _depth=_depth + 1)
            chain.append(replace(hop, via=tuple(chain), proxy_command=None))
        if len(chain) > MAX_JUMPS:
            raise TransportError(f"ProxyJump chain of {alias} longer than {MAX_JUMPS} hops")
        via = tuple(chain)
    proxy_command = r.proxy_command if not via else None
    if proxy_command:
        proxy_command = (
            proxy_command.replace("%%", "\0")
            .replace("%h", r.hostname)
            .replace("%p", str(final_port))
            .replace("%r", final_user)
            .replace("%n", host)
            .replace("\0", "%")
        )
    return Target(
        alias=alias,
        hostname=r.hostname,
        port=final_port,
        user=final_user,
        identity_files=tuple(dict.fromkeys(identity)),
        proxy_command=proxy_command,
        via=via,
        host_key_alias=r.host_key_alias,
        user_known_hosts=r.user_known_hosts if r.user_known_hosts_set else (),
        global_known_hosts=tuple(r.global_known_hosts),
        accept_new=r.strict_host_key_checking == "accept-new",
        identities_only=r.identities_only,
        connect_timeout=r.connect_timeout,
        config_files=r.sources,
    )


def describe_targets(fleet: FleetConfig) -> tuple[str, bool]:
    """`fleetcheck config check --ssh`: every SSH host's resolved target, one block each,
    and whether all resolved. Nothing is connected and no name is looked up."""
    conn = Connector(fleet.ssh)
    lines = [f"ssh targets (ssh_config {fleet.ssh.config_file}; nothing connected):"]
    ok = True
    for h in fleet.hosts:
        if h.ssh is None or h.is_local:
            lines.append(f"  {h.name}: {'local' if h.is_local else 'no ssh'}")
            continue
        try:
            t = conn.target(h)
        except TransportError as e:
            ok = False
            lines.append(f"  {h.name}: cannot resolve {h.ssh!r}: {e.reason}")
            continue
        lines.append(f"  {h.name}: {t.user}@{t.hostname} port {t.port}")
        if t.via:
            lines.append("      jump chain: " + " -> ".join(j.label for j in t.via) + " -> here")
        elif t.proxy_command:
            lines.append(f"      proxy command: {t.proxy_command}")
        keys = [k + ("" if os.path.exists(k) else " (missing)") for k in t.identity_files]
        agent = fleet.ssh.use_agent and not t.identities_only
        lines.append(
            "      key files: " + (", ".join(keys) or "none") + ("; agent" if agent else "")
        )
        files = _known_hosts_paths(fleet.ssh, t)
        shown = [f + ("" if os.path.exists(f) else " (missing)") for f in files]
        alias = f" (as {t.known_hosts_name})" if t.host_key_alias else ""
        lines.append(f"      known_hosts{alias}: " + ", ".join(shown))
        accept = fleet.ssh.accept_new or t.accept_new
        timeout = t.connect_timeout or fleet.ssh.connect_timeout
        lines.append(
            f"      connect timeout {timeout:g}s; unknown host keys "
            + ("added (accept-new)" if accept else "refused")
        )
    return "\n".join(lines), ok


# ---------------------------------------------------------------- the budget


class _Watchdog:
    """One process-wide thread for every deadline (connect budgets, command deadlines): a
    thread per host per deadline costs more CPU than the rest of the host's bookkeeping.
    A deadline that fires runs its action in a thread of its own (closing a paramiko
    Transport joins its thread), so one slow close never delays another deadline."""

    def __init__(self) -> None:
        import heapq

        self._heapq = heapq
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, list[Any]]] = []
        self._seq = 0
        self._thread: threading.Thread | None = None

    def schedule(self, at: float, action: Any) -> list[Any]:
        """Run `action()` at monotonic time `at` unless the returned handle is cancelled."""
        handle = [action]
        with self._cond:
            self._seq += 1
            self._heapq.heappush(self._heap, (at, self._seq, handle))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="fleetcheck-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return handle

    @staticmethod
    def cancel(handle: list[Any]) -> None:
        handle[0] = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    if self._heap and self._heap[0][2][0] is None:
                        self._heapq.heappop(self._heap)  # cancelled: drop it early
                        continue
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(wait)
                _, _, handle = self._heapq.heappop(self._heap)
            action = handle[0]
            if action is not None:
                threading.Thread(target=action, daemon=True).start()


_watchdog = _Watchdog()


class Budget:
    """One deadline for all stages of a connect; a watchdog closes what is open when it ends."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.stage = "starting"
        self.expired = False
        self._closers: list[Any] = []
        self._lock = threading.Lock()
        self._timer = _watchdog.schedule(self.deadline, self._expire)

    def left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)

    def guard(self, closable: Any) -> None:
        with self._lock:
            self._closers.append(closable)
            expired = self.expired
        if expired:
            _quiet_close(closable)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            closers = list(reversed(self._closers))  # newest (transport) before its socket
        for c in closers:
            _quiet_close(c)

    def done(self) -> None:
        _watchdog.cancel(self._timer)

    def timeout_error(self) -> TransportError:
        return TransportError(f"timed out after {self.seconds:g}s {self.stage}")


def _quiet_close(obj: Any) -> None:
    try:
        obj.close()
    except Exception:
        pass


# ---------------------------------------------------------------- connecting

JUMP_HANDSHAKES = 8  # per jump host at once: below stock sshd's MaxStartups 10
MAX_JUMP_LOGINS = 4  # a shared jump connection that dies is re-established at most 3 times
_THROTTLE_BACKOFF = (0.05, 0.1, 0.2, 0.4, 0.8)  # then 0.8 s (jittered) while the budget lasts


class _Jump:
    """One jump host's shared connection for the patrol (what ControlMaster gives)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.transport: Any = None
        self.error: TransportError | None = None
        self.logins = 0
        self.handshakes = threading.BoundedSemaphore(JUMP_HANDSHAKES)


class Connector:
    """A patrol's SSH side: targets resolved once, one shared connection per jump host, the
    adaptive limit on hosts in flight, and what the operator should hear about (slow-downs,
    throttled handshakes). Close it at the end of the patrol (closes the jump connections).

    The public surface: `target(host)`, `open(host)`, `limiter`, `notes()`, `close()`.
    """

    def __init__(self, cfg: SshConfig, concurrency: int = 1024, adaptive: bool = True) -> None:
        from fleetcheck.transport.limiter import AdaptiveLimiter

        self.cfg = cfg
        self._lock = threading.Lock()
        self._jumps: dict[Target, _Jump] = {}
        self._resolver: Any = None
        self._targets: dict[tuple[str, str | None, int | None], Target | TransportError] = {}
        self.throttled = 0  # handshakes retried after the server dropped them
        self.closed = False
        self.limiter = AdaptiveLimiter(max_limit=min(concurrency, fd_bound()), adaptive=adaptive)

    # ------------------------------------------------------------ resolving
    def target(self, host: HostConfig) -> Target:
        if host.ssh is None:
            raise TransportError(f"{host.name}: no ssh configured")
        key = (host.ssh, host.user, host.port)
        with self._lock:
            hit = self._targets.get(key)
        if hit is None:
            try:
                if self._resolver is None:
                    self._resolver = load_ssh_config(self.cfg.config_file)
                hit = resolve_target(host.ssh, self.cfg, self._resolver, host.user, host.port)
            except TransportError as e:
                hit = e
            with self._lock:
                self._targets[key] = hit
        if isinstance(hit, TransportError):
            raise TransportError(hit.reason, hit.status)
        return hit

    def reusable(self, host: HostConfig, shell: SshShell) -> bool:
        """Whether a connection kept from an earlier round may serve `host` in this one: the
        host still resolves to the same target (ssh_config, read anew each patrol, may have
        moved it: another HostName, port, user, jump, identity or known_hosts file), and the
        key that server showed still passes known_hosts as the files are now (a key revoked
        or replaced there since must not ride on an old connection). False: close it and
        connect anew, which says precisely what is wrong, if anything."""
        try:
            target = self.target(host)
            if target != shell.target:
                return False
            key = shell.transport.get_remote_server_key()
            _verify_host_key(target, self.cfg, _known_keys(self.cfg, target), key, target.label)
        except Exception:
            return False
        return True

    # ------------------------------------------------------------ connecting
    def open(self, host: HostConfig) -> SshShell:
        """Connect to `host` and return its shell; one precise TransportError otherwise."""
        _paramiko()  # fail early and clearly if it is missing
        _quiet_paramiko_logging()
        target = self.target(host)
        start = time.monotonic()
        budget = Budget(target.connect_timeout or self.cfg.connect_timeout)
        try:
            t = self._connect(target, budget)
        finally:
            budget.done()
        if self.closed:  # the patrol ended while we connected: never leak it
            _quiet_close(t)
            raise TransportError("patrol already over")
        shell = SshShell(target, [t])
        shell.connect_s = time.monotonic() - start
        return shell

    def _connect(self, target: Target, budget: Budget) -> Any:
        try:
            if target.via:
                jump = target.via[-1]
                entry = self._jump_entry(jump)
                jt = self._jump_transport(jump, budget)
                if not entry.handshakes.acquire(timeout=budget.left()):
                    raise budget.timeout_error()
                try:
                    chan = _direct_tcpip(jt, (target.hostname, target.port), budget, jump.alias)
                    return _connect_one(target, self.cfg, budget, chan, role=None, conn=self)
                finally:
                    entry.handshakes.release()
            sock = _proxy_command(target, budget) if target.proxy_command else None
            return _connect_one(target, self.cfg, budget, sock, role=None, conn=self)
        except TransportError:
            raise
        except Exception as e:
            if budget.expired:
                raise budget.timeout_error() from None
            raise TransportError(f"ssh to {target.label} failed: {_describe(e)}") from None

    def _jump_entry(self, jump: Target) -> _Jump:
        with self._lock:
            entry = self._jumps.get(jump)
            if entry is None:
                entry = self._jumps[jump] = _Jump()
            return entry

    def _jump_transport(self, jump: Target, budget: Budget) -> Any:
        """The shared, authenticated connection to `jump` (connected by the first caller;
        the others wait for it within their own budget)."""
        entry = self._jump_entry(jump)
        if not entry.lock.acquire(timeout=budget.left()):
            raise budget.timeout_error()
        try:
            t = entry.transport
            if t is not None and t.is_active():
                return t
            if entry.error is not None:
                raise TransportError(entry.error.reason, entry.error.status)
            if entry.logins >= MAX_JUMP_LOGINS:
                raise TransportError(f"jump host {jump.alias}: connection lost too often")
            if self.closed:
                raise TransportError("patrol already over")
            role = f"jump host {jump.alias}"
            own = Budget(jump.connect_timeout or self.cfg.connect_timeout)
            try:
                if jump.via:
                    parent = self._jump_transport(jump.via[-1], own)
                    sock = _direct_tcpip(
                        parent, (jump.hostname, jump.port), own, jump.via[-1].alias
                    )
                else:
                    sock = _proxy_command(jump, own) if jump.proxy_command else None
                entry.logins += 1
                t = _connect_one(jump, self.cfg, own, sock, role=role, conn=self)
            except TransportError as e:
                if not own.expired:
                    entry.error = e  # a refusal is the same for every host behind it
                raise
            except Exception as e:
                if own.expired:
                    raise own.timeout_error() from None
                raise TransportError(f"{role} failed: {_describe(e)}") from None
            finally:
                own.done()
            entry.transport = t
            return t
        finally:
            entry.lock.release()

    # ------------------------------------------------------------ reporting and closing
    def notes(self) -> list[str]:
        out = self.limiter.notes()
        if self.throttled:
            out.append(
                f"{self.throttled} SSH handshake(s) dropped by a busy sshd (MaxStartups?) "
                "were retried"
            )
        return out

    def close(self) -> None:
        with self._lock:
            self.closed = True
            jumps = list(self._jumps.values())
        for entry in reversed(jumps):
            if entry.transport is not None:
                _quiet_close(entry.transport)


def fd_bound(per_host: int = 4, reserve: int = 48) -> int:
    """How many hosts may be in flight under RLIMIT_NOFILE: each holds a socket, and a
    channel's poll pipe (two fds); jump connections and the broker need a few more."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1024
    return max(1, (soft - min(reserve, soft // 2)) // per_host)


def _quiet_paramiko_logging() -> None:
    import logging

    # paramiko logs a traceback for errors we already turn into one line; never let it reach
    # the operator's terminal through logging's last-resort handler
    plog = logging.getLogger("paramiko")
    if not plog.handlers:
        plog.addHandler(logging.NullHandler())


def open_shell(host: HostConfig, cfg: SshConfig, connector: Connector | None = None) -> SshShell:
    """Connect to `host` (its `ssh` value: address, alias or user@host:port) and return its
    shell. Without a patrol's `connector`, a private one is closed with the shell."""
    own = connector is None
    conn = connector or Connector(cfg)
    try:
        shell = conn.open(host)
    except BaseException:
        if own:
            conn.close()
        raise
    if own:
        shell._owned = conn
    return shell


def _direct_tcpip(transport: Any, hop_next: tuple[str, int], budget: Budget, via: str) -> Any:
    budget.stage = f"opening a tunnel through jump host {via} to {hop_next[0]}:{hop_next[1]}"
    try:
        chan = transport.open_channel(
            "direct-tcpip",
            hop_next,
            ("127.0.0.1", 0),
            timeout=budget.left(),
            window_size=_TUNNEL_WINDOW,
        )
    except Exception as e:
        if budget.expired:
            raise budget.timeout_error() from None
        raise TransportError(
            f"jump host {via} could not reach {hop_next[0]}:{hop_next[1]}: {_describe(e)}"
        ) from None
    tunnel = _Tunnel(chan)
    budget.guard(tunnel)
    return tunnel


# A tunnel's receive window, large enough that a host's traffic (bounded by
# max_output_bytes) never needs a WINDOW_ADJUST: paramiko sends those outside the channel's
# lock, so one could follow our CLOSE, and OpenSSH drops the whole shared connection (every
# host behind the jump host) for a packet on a channel it has freed.
_TUNNEL_WINDOW = 2**31 - 1


class _Tunnel:
    """A direct-tcpip channel as the socket of the target's Transport. Sends and close are
    serialised: paramiko's Channel builds a DATA packet under its lock but sends it after
    releasing it, so the target's transport thread (answering the target's CHANNEL_CLOSE)
    could put DATA on the wire after our CLOSE, and OpenSSH drops the shared connection for
    "data packet referred to nonexistent channel"."""

    def __init__(self, chan: Any) -> None:
        self._chan = chan
        self._lock = threading.Lock()
        self._closed = False

    def send(self, data: bytes) -> int:
        with self._lock:
            if self._closed:
                raise OSError(errno.EBADF, "tunnel closed")
            return int(self._chan.send(data))

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = self.send(bytes(view))
            view = view[n:]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._chan.close()

    def __getattr__(self, name: str) -> Any:  # recv, settimeout, fileno, ...
        return getattr(self._chan, name)


def _proxy_command(target: Target, budget: Budget) -> Any:
    paramiko = _paramiko()

    budget.stage = f"starting ProxyCommand {target.proxy_command!r}"
    try:
        proxy = paramiko.ProxyCommand(target.proxy_command or "")
    except Exception as e:
        raise TransportError(f"ProxyCommand {target.proxy_command!r} failed: {e}") from None
    budget.guard(proxy)
    return proxy


def _tcp_connect(target: Target, budget: Budget) -> socket.socket:
    """TCP to the target; a name's addresses are tried in turn, each given a fair share of
    what is left of the budget (the last one all of it), so a dead first address (IPv6
    without a route, say) never eats the whole budget."""
    budget.stage = f"resolving {target.hostname}"
    infos: list[Any] = []
    error: list[BaseException] = []

    def lookup() -> None:
        try:
            infos.extend(socket.getaddrinfo(target.hostname, target.port, 0, socket.SOCK_STREAM))
        except BaseException as e:  # noqa: BLE001 (handed to the caller)
            error.append(e)

    try:  # a literal address needs no resolver (and no thread to bound it)
        infos = socket.getaddrinfo(
            target.hostname, target.port, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST
        )
    except (socket.gaierror, UnicodeError):
        th = threading.Thread(target=lookup, daemon=True)
        th.start()
        th.join(budget.left())
        if th.is_alive():
            raise budget.timeout_error() from None
    if error:
        e = error[0]
        msg = e.args[1] if isinstance(e, socket.gaierror) and len(e.args) > 1 else str(e)
        raise TransportError(f"cannot resolve {target.hostname}: {msg}")
    last: OSError | None = None
    timed_out: list[str] = []
    for i, (family, kind, proto, _, addr) in enumerate(infos):
        budget.stage = f"connecting to {addr[0]}:{addr[1]} (host down or port filtered?)"
        tcp = family in (socket.AF_INET, socket.AF_INET6) and _TCP_QUICKACK is not None
        sock = (_QuickAckSocket if tcp else socket.socket)(family, kind, proto)
        budget.guard(sock)
        share = budget.left() / (len(infos) - i)
        sock.settimeout(share)
        try:
            sock.connect(addr)
        except TimeoutError:
            _quiet_close(sock)
            timed_out.append(str(addr[0]))
            if i + 1 == len(infos) or budget.expired:
                raise budget.timeout_error() from None
            continue
        except OSError as e:
            _quiet_close(sock)
            if budget.expired:
                raise budget.timeout_error() from None
            last = e
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    where = f"{target.hostname}:{target.port}"
    if last is None:
        raise budget.timeout_error()
    if last.errno == errno.ECONNREFUSED:
        raise TransportError(f"connection refused by {where} (sshd not running?)")
    if last.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        raise TransportError(f"no route to {where} (host down or network unreachable)")
    raise TransportError(f"cannot connect to {where}: {last.strerror or last}")


def _throttled(transport: Any, e: BaseException) -> bool:
    """The server dropped the connection before its banner: what sshd does to a connection
    over MaxStartups (and a busy server's accept queue), worth another try."""
    if getattr(transport, "remote_version", ""):
        return False
    text = str(e).lower()
    return isinstance(e, EOFError | ConnectionError) or any(
        s in text for s in ("reset by peer", "error reading ssh protocol banner", "eof")
    )


def _connect_one(
    target: Target,
    cfg: SshConfig,
    budget: Budget,
    sock: Any,
    role: str | None,
    conn: Connector | None = None,
) -> Any:
    """TCP (unless `sock` is given), SSH handshake, host key check, authentication. A
    handshake the server throttled is retried with backoff while the budget lasts (over a
    fresh TCP connection, or a fresh channel through the jump host)."""
    import random

    who = role or target.hostname
    attempt = 0
    while True:
        own_sock = sock is None
        s = _tcp_connect(target, budget) if own_sock else sock
        try:
            return _handshake(target, cfg, budget, s, who)
        except _Throttled as e:
            pause = _THROTTLE_BACKOFF[min(attempt, len(_THROTTLE_BACKOFF) - 1)]
            pause *= 0.5 + random.random()
            attempt += 1
            if not own_sock or budget.left() < pause + 0.2:
                raise TransportError(
                    f"SSH handshake with {who} failed: {e.reason} (the server dropped the "
                    "connection before its banner: MaxStartups or overloaded?)"
                ) from None
            if conn is not None:
                with conn._lock:
                    conn.throttled += 1
            time.sleep(pause)  # backoff, not synchronisation


class _Throttled(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _handshake(target: Target, cfg: SshConfig, budget: Budget, sock: Any, who: str) -> Any:
    paramiko = _paramiko()

    budget.stage = f"waiting for the SSH banner from {who} (sshd hung or overloaded?)"
    try:
        known = _known_keys(cfg, target)
    except TransportError:
        _quiet_close(sock)
        raise
    transport = paramiko.Transport(sock)
    budget.guard(transport)
    transport.banner_timeout = budget.left()
    transport.auth_timeout = budget.left()
    opts = transport.get_security_options()
    opts.ciphers = _first(opts.ciphers, PREFERRED_CIPHERS)
    opts.digests = _first(opts.digests, PREFERRED_MACS)
    # ask for the key types known_hosts holds for this host first, as OpenSSH does; the
    # certificate types only when a CA vouches for it (paramiko offers none by default)
    algs = tuple(opts.key_types)
    if known.cas:
        algs = algs + tuple(a for a in _CERT_ALGS if a not in algs)
    opts.key_types = known.host_key_algorithms(algs)
    try:
        transport.start_client(timeout=budget.left())
    except Exception as e:
        _quiet_close(transport)
        if budget.expired:
            banner = getattr(transport, "remote_version", "") or ""
            if banner:  # the banner came; the key exchange is what stalled
                budget.stage = (
                    f"in the key exchange with {who} after its banner {banner[:40]!r} "
                    "(sshd stalled mid-handshake?)"
                )
            raise budget.timeout_error() from None
        if _throttled(transport, e):
            raise _Throttled(_describe(e)) from None
        raise TransportError(f"SSH handshake with {who} failed: {_describe(e)}") from None
    budget.stage = f"checking the host key of {who}"
    server_key = transport.get_remote_server_key()
    try:
        _verify_host_key(target, cfg, known, server_key, who)
    except TransportError:
        _quiet_close(transport)
        raise
    budget.stage = f"authenticating to {who} as {target.user}"
    try:
        _authenticate(transport, target, cfg, budget, who)
    except TransportError:
        _quiet_close(transport)
        raise
    except Exception as e:
        _quiet_close(transport)
        if budget.expired:
            raise budget.timeout_error() from None
        raise TransportError(f"authentication to {who} failed: {_describe(e)}") from None
    return transport


# AES-GCM first (an AEAD: one pass instead of AES-CTR plus a separate HMAC; measured ~40 %
# less client CPU per byte with paramiko 5.1), then paramiko's own order; MACs (used with
# the non-AEAD ciphers only) encrypt-then-MAC first. Nothing is added that paramiko does not
# already offer, and nothing is removed, so every server that worked before still works.
PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
PREFERRED_MACS = ("hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com")


def _first(offered: tuple[str, ...], preferred: tuple[str, ...]) -> tuple[str, ...]:
    """`offered` with those of `preferred` that it contains moved to the front, in order."""
    front = tuple(p for p in preferred if p in offered)
    return front + tuple(o for o in offered if o not in front)


def _known_hosts_paths(cfg: SshConfig, target: Target) -> list[str]:
    """The files to read, user files first (the first one is where accept_new writes)."""
    user = target.user_known_hosts or cfg.known_hosts_files
    files = [*user, *target.global_known_hosts]
    return list(dict.fromkeys(str(Path(p).expanduser()) for p in files if p.lower() != "none"))


def _known_keys(cfg: SshConfig, target: Target) -> Lookup:
    """What known_hosts says about the target (each file parsed once while unchanged)."""
    from fleetcheck.transport import known_hosts

    paths = _known_hosts_paths(cfg, target)
    try:
        return known_hosts.lookup(_known_hosts_cache, paths, [target.known_hosts_name])
    except OSError as e:
        raise TransportError(f"cannot read known_hosts {e.filename}: {e.strerror}") from None


def _verify_host_key(
    target: Target, cfg: SshConfig, found: Lookup, server_key: Any, who: str
) -> None:
    """OpenSSH's check_host_key: revoked keys refused, certificates checked against the
    listed CAs, plain keys compared; unknown is UNKNOWN, changed is CRIT, neither is added
    unless accept_new (unknown only)."""
    from fleetcheck.transport import known_hosts

    paths = _known_hosts_paths(cfg, target)
    where = ", ".join(p for i, p in enumerate(paths) if i == 0 or os.path.exists(p))
    blob = server_key.asbytes()
    offered = f"{server_key.get_name()} {server_key.fingerprint}"
    revoked = found.revoked_entry(blob)
    if revoked is not None:
        raise TransportError(
            f"host key of {who} is REVOKED ({offered} is marked @revoked in {revoked.where}): "
            "not connecting",
            status=Status.CRIT,
        )
    cert = getattr(server_key, "public_blob", None)
    cert_problem: str | None = None
    if cert is not None and cert.key_type.endswith(known_hosts.CERT_SUFFIX):
        name = target.known_hosts_host
        try:
            known_hosts.check_host_cert(cert.key_blob, name, found)
            return
        except known_hosts.CertProblem as e:
            if e.mitm:
                raise TransportError(
                    f"host certificate of {who} refused: {e.reason}: not connecting",
                    status=Status.CRIT,
                ) from None
            cert_problem = e.reason
    same_type = [k for k in found.keys if k.keytype == server_key.get_name()]
    if any(k.blob == blob for k in same_type):
        return
    if found.keys:
        expected = "; ".join(f"{k.fingerprint()} ({k.where})" for k in found.keys)
        raise TransportError(
            f"host key changed for {who}: possible man-in-the-middle; not connecting "
            f"(server offered {offered}, known_hosts has {expected})",
            status=Status.CRIT,
        )
    if cert_problem is not None:
        raise TransportError(
            f"host certificate of {who} refused: {cert_problem}; its plain key {offered} is "
            f"not in {where} either: not connecting"
        )
    if not (cfg.accept_new or target.accept_new):
        ca_note = (
            " (a CA is listed for it, but the server presented no certificate)"
            if (found.cas)
            else ""
        )
        raise TransportError(
            f"host key of {who} ({target.known_hosts_name}) is not in {where}{ca_note}: not "
            f"connecting (server offered {offered}; verify it and add it, or set "
            "accept_new = true)"
        )
    if not paths:
        raise TransportError(f"accept_new: no known_hosts file to add the host key of {who} to")
    path = Path(paths[0])
    line = f"{target.known_hosts_name} {server_key.get_name()} {server_key.get_base64()}\n"
    with _known_hosts_lock:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a") as f:
                f.write(line)
        except OSError as e:
            raise TransportError(
                f"accept_new: cannot add the host key of {who} to {path}: {e.strerror}"
            ) from None


def _load_key(path: str) -> tuple[Any | None, str]:
    """The private key at `path` (parsed once while the file is unchanged: an RSA key costs
    milliseconds to load) or None and the reason."""
    paramiko = _paramiko()

    try:
        return _private_keys.get(path, paramiko.PKey.from_path), ""
    except FileNotFoundError:
        return None, f"{path}: no such file"
    except PermissionError:
        return None, f"{path}: permission denied"
    except paramiko.PasswordRequiredException:
        return None, f"{path}: encrypted (load it into the agent)"
    except Exception as e:
        # paramiko leaves most encrypted keys to cryptography, whose TypeError says so only
        # in prose: the file itself tells
        if _encrypted_key_file(path):
            return None, f"{path}: encrypted (load it into the agent)"
        return None, f"{path}: unreadable key ({_describe(e)})"


def _encrypted_key_file(path: str) -> bool:
    """Whether the private key file at `path` is passphrase-protected: an OpenSSH-format key
    whose cipher is not `none`, or a PEM key marked ENCRYPTED (PKCS#8 or the old Proc-Type)."""
    import base64

    try:
        with open(path, "rb") as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    if b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in text or b"Proc-Type: 4,ENCRYPTED" in text:
        return True
    begin, end = b"-----BEGIN OPENSSH PRIVATE KEY-----", b"-----END OPENSSH PRIVATE KEY-----"
    if begin not in text or end not in text:
        return False
    body = text.split(begin, 1)[1].split(end, 1)[0]
    try:
        blob = base64.b64decode(b"".join(body.split()), validate=True)
    except ValueError:
        return False
    magic = b"openssh-key-v1\0"
    if not blob.startswith(magic) or len(blob) < len(magic) + 4:
        return False
    size = int.from_bytes(blob[len(magic) : len(magic) + 4], "big")
    cipher = blob[len(magic) + 4 : len(magic) + 4 + size]
    return cipher != b"none"


def _authenticate(transport: Any, target: Target, cfg: SshConfig, budget: Budget, who: str) -> None:
    _paramiko()

    tried: list[str] = []
    problems: list[str] = []
    candidates: list[tuple[str, Any]] = []
    for path in target.identity_files:
        key, problem = _load_key(path)
        if key is None:
            problems.append(problem)
        else:
            candidates.append((f"{path} ({key.get_name()} {key.fingerprint})", key))
    agent: Any = None
    use_agent = cfg.use_agent and not target.identities_only
    if use_agent:
        budget.stage = f"asking the ssh agent for keys for {who}"
        agent_keys: tuple[Any, ...] = ()
        try:
            agent, agent_keys = _agent_keys(budget)
        except Exception as e:
            if budget.expired or budget.deadline - time.monotonic() < 0.05:
                raise budget.timeout_error() from None
            problems.append(f"agent: {_describe(e)}")
        else:
            if not agent_keys:
                sock_set = os.environ.get("SSH_AUTH_SOCK")
                problems.append("agent: no keys" if sock_set else "no agent")
        for key in agent_keys:
            candidates.append((f"agent key {key.get_name()} {key.fingerprint}", key))
        budget.stage = f"authenticating to {who} as {target.user}"
    if not target.identity_files and not use_agent:
        problems.append("no identity_file and use_agent = false")
    try:
        _try_keys(transport, target, budget, who, candidates, tried, problems)
    finally:
        if agent is not None:
            _quiet_close(agent._conn)  # its socket is ours: never left open for the patrol


def _agent_keys(budget: Budget) -> tuple[Any, tuple[Any, ...]]:
    """The agent (paramiko's AgentSSH over OUR socket) and its keys. paramiko.Agent()
    connects and reads without any timeout (a hung agent hung the patrol); here the socket
    has the budget's timeout and the watchdog closes it when the budget runs out."""
    from paramiko.agent import AgentSSH

    path = os.environ.get("SSH_AUTH_SOCK")
    if not path:
        return None, ()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    budget.guard(sock)
    sock.settimeout(budget.left() + 0.5)  # the watchdog closes it first, naming the stage
    try:
        sock.connect(path)
        agent: Any = AgentSSH()
        agent._connect(sock)
    except BaseException:
        _quiet_close(sock)
        raise
    return agent, tuple(agent.get_keys())


def _try_keys(
    transport: Any,
    target: Target,
    budget: Budget,
    who: str,
    candidates: list[tuple[str, Any]],
    tried: list[str],
    problems: list[str],
) -> None:
    paramiko = _paramiko()
    allowed: list[str] | None = None
    for label, key in candidates:
        if budget.expired:
            raise budget.timeout_error()
        try:
            transport.auth_publickey(target.user, key)
        except paramiko.BadAuthenticationType as e:
            allowed = list(e.allowed_types)
            break
        except paramiko.AuthenticationException:
            tried.append(label)
            continue
        except paramiko.SSHException as e:
            if budget.expired:
                raise budget.timeout_error() from None
            raise TransportError(f"authentication to {who} failed: {_describe(e)}") from None
        if transport.is_authenticated():
            return
    if budget.expired:
        raise budget.timeout_error()
    parts = []
    if tried:
        parts.append("tried " + "; ".join(tried))
    parts.extend(problems)
    if allowed is not None:
        parts.append(f"server allows only {', '.join(allowed) or 'nothing'}")
    raise TransportError(
        f"authentication refused by {who} for user {target.user}"
        + (f" ({'; '.join(parts)})" if parts else "")
    )


def _describe(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    msg = text[0] if text else ""
    if isinstance(e, EOFError) or not msg:
        return f"connection closed by the remote side ({type(e).__name__})"
    return msg[:200]


# ---------------------------------------------------------------- the shell


class StaleConnection(TransportError):
    """The connection could not open a channel (closed, or silent past `open_timeout`):
    for a connection kept from an earlier round, the sign to replace it."""


class SshShell:
    """The patrol's connection to one host."""

    def __init__(self, target: Target, transports: list[Any]) -> None:
        self.target = target
        self._transports = transports  # this host's own connection (jump hosts are shared)
        self._owned: Connector | None = None  # closed with the shell when not a patrol's
        self.connect_s: float | None = None  # TCP + handshake + auth, for the limiter

    @property
    def transport(self) -> paramiko.Transport:
        return self._transports[-1]

    def run(
        self, command: str, timeout: float, max_bytes: int, open_timeout: float | None = None
    ) -> ExecResult:
        start = time.monotonic()
        deadline = start + timeout
        t = self.transport
        if not t.is_active():
            raise StaleConnection(f"connection to {self.target.label} is closed")
        opened_by = deadline if open_timeout is None else min(deadline, start + open_timeout)
        try:
            chan = t.open_session(timeout=max(opened_by - time.monotonic(), 0.001))
        except Exception as e:
            raise StaleConnection(
                f"{self.target.hostname} refused to open a session: {_describe(e)}"
            ) from None
        # exec_command waits for the server's reply without a timeout: a watchdog closes the
        # channel (and, one second later, the whole connection) if the host stops answering.
        cut = threading.Event()
        fired = threading.Event()

        def hard_stop() -> None:
            if cut.is_set():
                return
            fired.set()
            _quiet_close(chan)
            if not cut.wait(1.0):
                _quiet_close(t)

        dog = _watchdog.schedule(deadline, hard_stop)
        out, err = bytearray(), bytearray()
        truncated = False
        timed_out = False
        rc: int | None = None
        early: BaseException | None = None  # the remote side stopped taking our script
        try:
            try:
                chan.exec_command("/bin/sh -s")
                chan.settimeout(max(deadline - time.monotonic(), 0.001))
                chan.sendall(command.encode())
                chan.shutdown_write()
            except Exception as e:
                if time.monotonic() >= deadline:
                    timed_out = True
                else:
                    # a login refused by the account's shell (nologin, a ForceCommand) exits
                    # before reading its stdin: what it printed and its exit status are the
                    # precise reason, so read them rather than report "Socket is closed"
                    early = e
            if not timed_out:
                chan.settimeout(0.0)
                poller = select.poll()  # not select(): fds past 1023 are normal in a patrol
                poller.register(chan.fileno(), select.POLLIN)
                while True:
                    truncated |= _drain(chan, out, err, max_bytes)
                    if chan.exit_status_ready() and (chan.eof_received or chan.closed):
                        truncated |= _drain(chan, out, err, max_bytes)
                        if not (chan.recv_ready() or chan.recv_stderr_ready()):
                            rc = chan.recv_exit_status()
                            break
                    if chan.closed and not chan.exit_status_ready():
                        timed_out = time.monotonic() >= deadline
                        if not timed_out:
                            raise TransportError(self._lost(t, early, out, err))
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        timed_out = True
                        break
                    if chan.eof_received:
                        chan.status_event.wait(min(left, 0.25))
                    else:
                        poller.poll(min(left, 0.25) * 1000)
        finally:
            cut.set()
            _watchdog.cancel(dog)
            _quiet_close(chan)
        if fired.is_set():
            timed_out = True  # the watchdog closed the channel: whatever rc we saw is not real
        return ExecResult(
            rc=None if timed_out else rc,
            stdout=bytes(out),
            stderr=bytes(err),
            truncated=truncated,
            duration_s=time.monotonic() - start,
        )

    def _lost(self, t: Any, early: BaseException | None, out: bytearray, err: bytearray) -> str:
        """Why the session ended without an exit status, as precisely as we can tell."""
        said = (bytes(err) or bytes(out)).decode("utf-8", "replace").strip().splitlines()
        if said:
            return f"{self.target.hostname}: the session ended at once: {said[-1][:200]}"
        why = t.get_exception() if hasattr(t, "get_exception") else None
        if not t.is_active():
            reason = f": {_describe(why)}" if why is not None else ""
            return f"{self.target.hostname}: the server closed the connection after login{reason}"
        if early is not None:
            return (
                f"{self.target.hostname}: the server closed the session before taking the "
                f"command ({_describe(early)}): login refused by the account or a ForceCommand?"
            )
        return f"{self.target.hostname}: connection lost while running commands"

    def close(self) -> None:
        for t in reversed(self._transports):
            _quiet_close(t)
        if self._owned is not None:
            self._owned.close()


def _drain(chan: Any, out: bytearray, err: bytearray, max_bytes: int) -> bool:
    truncated = False
    for ready, recv, buf in (
        (chan.recv_ready, chan.recv, out),
        (chan.recv_stderr_ready, chan.recv_stderr, err),
    ):
        while ready():
            try:
                chunk = recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            room = max_bytes - len(buf)
            if len(chunk) > room:
                truncated = True
                chunk = chunk[: max(room, 0)]
            buf.extend(chunk)
    return truncated
