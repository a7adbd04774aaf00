"""The byte streams an SSH handshake runs over: TCP to the host (each of a name's addresses
given a fair share of the budget), a ProxyCommand's pipes, or a direct-tcpip tunnel through
a shared jump-host connection. Each is guarded by the connect budget, so the watchdog can
close it whatever it is waiting for."""

from __future__ import annotations

import errno
import socket
import threading
from typing import TYPE_CHECKING, Any

from fleetcheck.core.errors import TransportError, host_unreachable
from fleetcheck.transport.ssh.lazy import load_paramiko
from fleetcheck.transport.ssh.util import describe, quiet_close

if TYPE_CHECKING:
    from fleetcheck.transport.ssh.budget import Budget
    from fleetcheck.transport.ssh.target import Target

_TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)


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


def direct_tcpip(transport: Any, hop_next: tuple[str, int], budget: Budget, via: str) -> Any:
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
            f"jump host {via} could not reach {hop_next[0]}:{hop_next[1]}: {describe(e)}"
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


def proxy_command(target: Target, budget: Budget) -> Any:
    paramiko = load_paramiko()

    budget.stage = f"starting ProxyCommand {target.proxy_command!r}"
    try:
        proxy = paramiko.ProxyCommand(target.proxy_command or "")
    except Exception as e:
        raise TransportError(f"ProxyCommand {target.proxy_command!r} failed: {e}") from None
    budget.guard(proxy)
    return proxy


def tcp_connect(target: Target, budget: Budget) -> socket.socket:
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
            quiet_close(sock)
            timed_out.append(str(addr[0]))
            if i + 1 == len(infos) or budget.expired:
                raise _silent(budget) from None
            continue
        except OSError as e:
            quiet_close(sock)
            if budget.expired:
                raise _silent(budget) from None
            last = e
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    where = f"{target.hostname}:{target.port}"
    if last is None:
        raise _silent(budget)
    if last.errno == errno.ECONNREFUSED:
        # the host's kernel answered: the machine is up, only sshd is not (could not look)
        raise TransportError(f"connection refused by {where} (sshd not running?)")
    if last.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN):
        raise host_unreachable(
            TransportError(f"no route to {where} (host down or network unreachable)"), "no route"
        )
    raise TransportError(f"cannot connect to {where}: {last.strerror or last}")


def _silent(budget: Budget) -> TransportError:
    """No answer to the TCP connect within the budget: the host is down or cut off (or a
    firewall drops the port), as far as this machine can see."""
    return host_unreachable(budget.timeout_error(), "no answer to the TCP connect")
