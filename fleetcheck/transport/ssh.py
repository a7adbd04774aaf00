"""The SSH transport: one paramiko connection per host per patrol, strict about host keys.

What it guarantees (each point is tested against a real OpenSSH sshd in tests/):

- Every stage of connecting (name lookup, TCP connect, SSH banner and key exchange, host key
  check, authentication, opening the session) shares ONE budget, `[ssh] connect_timeout`. A
  watchdog closes the socket when the budget runs out, so a frozen sshd (the kernel accepts
  the TCP connection, nothing ever answers) costs exactly that long, never more.
- Each failure is one precise line: cannot resolve, connection refused, no route, TCP timeout,
  no SSH banner, host key unknown (UNKNOWN), host key CHANGED (CRIT, never connects), auth
  refused (with the keys tried).
- Host keys are checked against `known_hosts` strictly. `accept_new = true` appends an unknown
  host's key (like OpenSSH's StrictHostKeyChecking=accept-new); a changed key is never added.
- `~/.ssh/config` (or `[ssh] config_file`) is honoured through paramiko.SSHConfig: HostName,
  User, Port, IdentityFile, ProxyCommand and ProxyJump (each hop a direct-tcpip channel through
  the previous one, host keys checked at every hop).
- TCP_NODELAY is set on the socket (paramiko leaves Nagle on, which costs delayed ACKs), and
  on Linux TCP_QUICKACK is re-armed after every read: OpenSSH's sshd keeps Nagle on and sends
  two small packets after authentication (hostkeys-00 and the session's confirmation), so a
  delayed ACK from us would hold the second one back ~40 ms per host.
- Per patrol, the ssh config, known_hosts and private keys are parsed once (cached by path
  and the file's inode, size and mtime, so an accept_new append is seen at once), and a
  literal IP address never goes through the resolver thread.
- A command runs as `/bin/sh -s` with the script on stdin, so the remote login shell (bash,
  zsh, fish, csh) never parses it. Its deadline is hard: the channel is polled against a
  monotonic clock and closed at the deadline; stdout/stderr are kept up to a byte bound.

paramiko is imported inside functions: `fleetcheck --help` must not pay for it.
"""

from __future__ import annotations

import errno
import os
import select
import shlex
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetcheck.model import Status
from fleetcheck.transport.known_hosts import KnownHostsCache
from fleetcheck.transport.shell import ExecResult, TransportError

if TYPE_CHECKING:
    import paramiko

    from fleetcheck.config import HostConfig, SshConfig
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


def _lookup(ssh_config: Any, alias: str) -> Any:
    """ssh_config.lookup(alias), loading `invoke` late if the file uses `Match exec`."""
    try:
        return ssh_config.lookup(alias)
    except ImportError:
        import paramiko.config

        pconfig: Any = paramiko.config
        if pconfig.invoke is not None:
            raise
        try:
            import invoke
        except ImportError:
            raise TransportError(
                "ssh config uses `Match exec`, which needs the `invoke` package"
            ) from None
        pconfig.invoke = invoke
        return ssh_config.lookup(alias)


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


_ssh_configs = _FileCache()
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
    """Where and as whom to connect, after ~/.ssh/config and the fleet config are merged."""

    alias: str  # what the fleet config says (`ssh = ...`), for messages
    hostname: str
    port: int
    user: str
    identity_files: tuple[str, ...]
    proxy_command: str | None = None
    proxy_jump: tuple[str, ...] = ()  # hops, nearest first: "[user@]host[:port]"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    host_key_alias: str | None = None
    user_known_hosts: tuple[str, ...] = ()  # from ssh_config; empty: [ssh] known_hosts
    global_known_hosts: tuple[str, ...] = DEFAULT_GLOBAL_KNOWN_HOSTS
    accept_new: bool = False  # ssh_config StrictHostKeyChecking accept-new

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


def load_ssh_config(path: str) -> Any:
    """paramiko.SSHConfig from `path` (a missing default file is an empty config); parsed
    once per process while the file is unchanged."""
    paramiko = _paramiko()

    p = Path(path).expanduser()
    if not p.exists():
        return paramiko.SSHConfig()
    try:
        return _ssh_configs.get(str(p), paramiko.SSHConfig.from_path)
    except OSError as e:
        raise TransportError(f"cannot read ssh config {p}: {e.strerror}") from None
    except Exception as e:  # a malformed file
        raise TransportError(f"cannot parse ssh config {p}: {e}") from None


def resolve_target(
    alias: str,
    cfg: SshConfig,
    ssh_config: Any,
    user: str | None = None,
    port: int | None = None,
) -> Target:
    """Merge, in this order of precedence: the host's own `user`/`port` keys, the ssh config
    file's entry for the alias, the fleet-wide `[ssh]` defaults, then OpenSSH's defaults."""
    import getpass

    # "user@host:port" written directly in `ssh = ...`
    if "@" in alias:
        inline_user, alias = alias.rsplit("@", 1)
        user = user or inline_user
    if alias.count(":") == 1 and not alias.startswith("["):
        host_part, _, port_part = alias.partition(":")
        if port_part.isdigit():
            alias, port = host_part, port or int(port_part)
    if alias.startswith("[") and "]:" in alias:
        host_part, _, port_part = alias[1:].partition("]:")
        if port_part.isdigit():
            alias, port = host_part, port or int(port_part)
    entry = _lookup(ssh_config, alias)
    hostname = entry.get("hostname", alias)
    final_user = user or entry.get("user") or cfg.user or getpass.getuser()
    try:
        final_port = port or int(entry.get("port", 0)) or cfg.port or 22
    except ValueError:
        raise TransportError(
            f"ssh config: Port {entry.get('port')!r} for {alias} is not a number"
        ) from None
    identity = [str(Path(p).expanduser()) for p in entry.get("identityfile", [])]
    if cfg.identity_file:
        identity.append(str(Path(cfg.identity_file).expanduser()))
    proxy_command = entry.get("proxycommand")
    if proxy_command and proxy_command.strip().lower() == "none":
        proxy_command = None
    jump_raw = entry.get("proxyjump")
    jumps: tuple[str, ...] = ()
    if jump_raw and jump_raw.strip().lower() != "none":
        jumps = tuple(j.strip() for j in jump_raw.split(",") if j.strip())
    return Target(
        alias=alias,
        hostname=hostname,
        port=final_port,
        user=final_user,
        identity_files=tuple(dict.fromkeys(identity)),
        proxy_command=proxy_command,
        proxy_jump=jumps,
    )


# ---------------------------------------------------------------- the budget


class Budget:
    """One deadline for all stages of a connect; a watchdog closes what is open when it ends."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.stage = "starting"
        self.expired = False
        self._closers: list[Any] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

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
        self._timer.cancel()

    def timeout_error(self) -> TransportError:
        return TransportError(f"timed out after {self.seconds:g}s {self.stage}")


def _quiet_close(obj: Any) -> None:
    try:
        obj.close()
    except Exception:
        pass


# ---------------------------------------------------------------- connecting


def open_shell(host: HostConfig, cfg: SshConfig) -> SshShell:
    """Connect to `host` (its `ssh` value: address, alias or user@host:port) and return the
    patrol's shell for it. Raises TransportError with one precise line on any failure."""
    if host.ssh is None:
        raise TransportError(f"{host.name}: no ssh configured")
    import logging

    _paramiko()  # fail early and clearly if it is missing

    # paramiko logs a traceback for errors we already turn into one line; never let it reach
    # the operator's terminal through logging's last-resort handler
    plog = logging.getLogger("paramiko")
    if not plog.handlers:
        plog.addHandler(logging.NullHandler())

    ssh_config = load_ssh_config(cfg.config_file)
    target = resolve_target(host.ssh, cfg, ssh_config, host.user, host.port)
    budget = Budget(cfg.connect_timeout)
    transports: list[Any] = []
    try:
        sock: Any = None
        if target.proxy_jump:
            if len(target.proxy_jump) > MAX_JUMPS:
                raise TransportError(f"ProxyJump chain longer than {MAX_JUMPS} hops")
            for i, hop in enumerate(target.proxy_jump):
                # a hop's own ProxyJump/ProxyCommand is not followed: the chain is explicit
                hop_target = resolve_target(hop, cfg, ssh_config)
                t = _connect_one(hop_target, cfg, budget, sock, role=f"jump host {hop}")
                transports.append(t)
                sock = _direct_tcpip(t, _next_hop(target, ssh_config, cfg, i), budget, via=hop)
        elif target.proxy_command:
            sock = _proxy_command(target, budget)
        t = _connect_one(target, cfg, budget, sock, role=None)
        transports.append(t)
        budget.stage = "opening a session"
        if budget.expired:
            raise budget.timeout_error()
    except TransportError:
        budget.done()
        for t in reversed(transports):
            _quiet_close(t)
        raise
    except Exception as e:
        budget.done()
        for t in reversed(transports):
            _quiet_close(t)
        if budget.expired:
            raise budget.timeout_error() from None
        raise TransportError(f"ssh to {target.label} failed: {_describe(e)}") from None
    budget.done()
    return SshShell(target, transports)


def _next_hop(target: Target, ssh_config: Any, cfg: SshConfig, i: int) -> tuple[str, int]:
    """The (host, port) the i-th jump host must open a channel to."""
    if i + 1 < len(target.proxy_jump):
        nxt = resolve_target(target.proxy_jump[i + 1], cfg, ssh_config)
        return nxt.hostname, nxt.port
    return target.hostname, target.port


def _direct_tcpip(transport: Any, hop_next: tuple[str, int], budget: Budget, via: str) -> Any:
    budget.stage = f"opening a tunnel through jump host {via} to {hop_next[0]}:{hop_next[1]}"
    try:
        chan = transport.open_channel(
            "direct-tcpip", hop_next, ("127.0.0.1", 0), timeout=budget.left()
        )
    except Exception as e:
        if budget.expired:
            raise budget.timeout_error() from None
        raise TransportError(
            f"jump host {via} could not reach {hop_next[0]}:{hop_next[1]}: {_describe(e)}"
        ) from None
    budget.guard(chan)
    return chan


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
    for family, kind, proto, _, addr in infos:
        budget.stage = f"connecting to {addr[0]}:{addr[1]} (host down or port filtered?)"
        tcp = family in (socket.AF_INET, socket.AF_INET6) and _TCP_QUICKACK is not None
        sock = (_QuickAckSocket if tcp else socket.socket)(family, kind, proto)
        budget.guard(sock)
        sock.settimeout(budget.left())
        try:
            sock.connect(addr)
        except TimeoutError:
            _quiet_close(sock)
            raise budget.timeout_error() from None
        except OSError as e:
            _quiet_close(sock)
            if budget.expired:
                raise budget.timeout_error() from None
            last = e
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    assert last is not None
    where = f"{target.hostname}:{target.port}"
    if last.errno == errno.ECONNREFUSED:
        raise TransportError(f"connection refused by {where} (sshd not running?)")
    if last.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        raise TransportError(f"no route to {where} (host down or network unreachable)")
    raise TransportError(f"cannot connect to {where}: {last.strerror or last}")


def _connect_one(
    target: Target,
    cfg: SshConfig,
    budget: Budget,
    sock: Any,
    role: str | None,
) -> Any:
    """TCP (unless `sock` is given), SSH handshake, host key check, authentication."""
    paramiko = _paramiko()

    who = role or target.hostname
    if sock is None:
        sock = _tcp_connect(target, budget)
    budget.stage = f"waiting for the SSH banner from {who} (sshd hung or overloaded?)"
    transport = paramiko.Transport(sock)
    budget.guard(transport)
    transport.banner_timeout = budget.left()
    transport.auth_timeout = budget.left()
    known = _known_keys(cfg, target)
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
        return None, f"{path}: unreadable key ({_describe(e)})"


def _authenticate(transport: Any, target: Target, cfg: SshConfig, budget: Budget, who: str) -> None:
    paramiko = _paramiko()

    tried: list[str] = []
    problems: list[str] = []
    allowed: list[str] | None = None
    candidates: list[tuple[str, Any]] = []
    for path in target.identity_files:
        key, problem = _load_key(path)
        if key is None:
            problems.append(problem)
        else:
            candidates.append((f"{path} ({key.get_name()} {key.fingerprint})", key))
    if cfg.use_agent:
        try:
            agent_keys = paramiko.Agent().get_keys()
        except Exception:
            agent_keys = ()
        for key in agent_keys:
            candidates.append((f"agent key {key.get_name()} {key.fingerprint}", key))
        if not agent_keys:
            problems.append("agent: no keys" if os.environ.get("SSH_AUTH_SOCK") else "no agent")
    if not target.identity_files and not cfg.use_agent:
        problems.append("no identity_file and use_agent = false")
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


class SshShell:
    """The patrol's connection to one host."""

    def __init__(self, target: Target, transports: list[Any]) -> None:
        self.target = target
        self._transports = transports  # jump hosts first, the host itself last

    @property
    def transport(self) -> paramiko.Transport:
        return self._transports[-1]

    def run(self, command: str, timeout: float, max_bytes: int) -> ExecResult:
        start = time.monotonic()
        deadline = start + timeout
        t = self.transport
        if not t.is_active():
            raise TransportError(f"connection to {self.target.label} is closed")
        try:
            chan = t.open_session(timeout=max(deadline - time.monotonic(), 0.001))
        except Exception as e:
            raise TransportError(
                f"{self.target.hostname} refused to open a session: {_describe(e)}"
            ) from None
        # exec_command waits for the server's reply without a timeout: a watchdog closes the
        # channel (and, one second later, the whole connection) if the host stops answering.
        cut = threading.Event()
        fired = threading.Event()

        def watchdog() -> None:
            if cut.wait(max(deadline - time.monotonic(), 0)):
                return
            fired.set()
            _quiet_close(chan)
            if not cut.wait(1.0):
                _quiet_close(t)

        dog = threading.Thread(target=watchdog, daemon=True)
        dog.start()
        out, err = bytearray(), bytearray()
        truncated = False
        timed_out = False
        rc: int | None = None
        try:
            try:
                chan.exec_command("/bin/sh -s")
                chan.settimeout(max(deadline - time.monotonic(), 0.001))
                chan.sendall(command.encode())
                chan.shutdown_write()
            except (TimeoutError, OSError, EOFError) as e:
                if time.monotonic() >= deadline:
                    timed_out = True
                else:
                    raise TransportError(
                        f"{self.target.hostname}: cannot run the command: {_describe(e)}"
                    ) from None
            except Exception as e:
                if time.monotonic() >= deadline:
                    timed_out = True
                else:
                    raise TransportError(
                        f"{self.target.hostname}: cannot run the command: {_describe(e)}"
                    ) from None
            if not timed_out:
                chan.settimeout(0.0)
                fd = chan.fileno()
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
                            raise TransportError(
                                f"{self.target.hostname}: connection lost while running commands"
                            )
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        timed_out = True
                        break
                    if chan.eof_received:
                        chan.status_event.wait(min(left, 0.25))
                    else:
                        select.select([fd], [], [], min(left, 0.25))
        finally:
            cut.set()
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

    def close(self) -> None:
        for t in reversed(self._transports):
            _quiet_close(t)


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


def quote(value: str) -> str:
    """POSIX-sh quoting for any config value embedded in a remote command."""
    return shlex.quote(value)
