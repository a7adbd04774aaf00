"""Everything one patrol shares: the broker client, one shell per host, the clock, and facts
fetched once however many checks read them (CLIENT LIST, INFO, each host's gathered commands).

Checks never open connections themselves; they ask the context, which opens at most one of
each per patrol and closes them all at the end (also when the deadline cut the patrol short).
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from fleetcheck.check import CheckError
from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.parse.clientlist import Client, parse_client_list
from fleetcheck.transport.shell import Shell, TransportError

if TYPE_CHECKING:
    import redis

T = TypeVar("T")


class BrokerRefused(CheckError):
    """The broker answered but refused to serve us (max clients, LOADING, BUSY, MISCONF, OOM):
    the failure itself, which the `broker` row reports as CRIT; every other broker row says it
    could not look because of it. `kind` is the cause's short name."""

    def __init__(self, cause: str, kind: str) -> None:
        super().__init__(f"could not look: {cause}")
        self.cause = cause
        self.kind = kind


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Fragment:
    """The output of one check's shell fragment from the host's gathered exec."""

    rc: int
    output: bytes

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")


@dataclass(frozen=True)
class HostFacts:
    fragments: dict[str, Fragment]
    remote_epoch: float | None  # the host's clock when the exec started
    local_epoch: float  # our clock halfway through the exec (round-trip corrected)
    exec_s: float
    problem: str | None  # why some fragments may be missing (deadline, byte bound)

    @property
    def clock_skew_s(self) -> float | None:
        """Host clock minus ours; positive when the host runs ahead."""
        if self.remote_epoch is None:
            return None
        return self.remote_epoch - self.local_epoch

    def get(self, key: str) -> Fragment:
        try:
            return self.fragments[key]
        except KeyError:
            raise CheckError(self.problem or f"no output for {key} from the host") from None


class PatrolContext:
    def __init__(
        self,
        fleet: FleetConfig,
        fragments: Callable[[HostConfig], dict[str, str]] | None = None,
        clock: Callable[[], datetime] = utcnow,
        carried: Mapping[str, Any] | None = None,
    ) -> None:
        self.fleet = fleet
        self._carried = carried or {}
        self.master: tuple[str, int] | None = None  # the master the sentinels named
        self.clock = clock
        self.started = clock()
        self._fragments = fragments or (lambda host: {})
        self._lock = threading.Lock()
        self._memo: dict[Any, tuple[bool, Any]] = {}
        self._memo_locks: dict[Any, threading.Lock] = {}
        self._shells: dict[str, Shell] = {}
        self._redis: list[redis.Redis] = []
        self.closed = False

    # ------------------------------------------------------------ shared facts
    def once(self, key: Any, fetch: Callable[[], T]) -> T:
        """`fetch()` at most once per patrol; later callers get its value or its error."""
        with self._lock:
            known = self._memo.get(key)
            lock = self._memo_locks.setdefault(key, threading.Lock())
        if known is None:
            with lock:  # one fetch per key; other callers wait for it, not for each other
                with self._lock:
                    known = self._memo.get(key)
                if known is None:
                    known = self._fetch(key, fetch)
        ok, value = known
        if ok:
            return value
        raise value

    def _fetch(self, key: Any, fetch: Callable[[], Any]) -> tuple[bool, Any]:
        try:
            outcome: tuple[bool, Any] = (True, fetch())
        except Exception as e:
            outcome = (False, e)
        with self._lock:
            self._memo[key] = outcome
        return outcome

    # ------------------------------------------------------------ memory
    def carried(self, check: str, host: HostConfig | None) -> dict[str, Any] | None:
        """What this row's previous round left for this one (counters, last seen limits), from
        the state file; None without state or on the first round."""
        value = self._carried.get(f"{check}|{host.name if host else ''}")
        return dict(value) if isinstance(value, dict) else None

    # ------------------------------------------------------------ broker
    def broker(self) -> redis.Redis:
        """The patrol's broker client over its one connection, known to answer PING. An
        unreachable or refusing broker raises the same CheckError for every caller, so every
        broker-side row gives one reason (BrokerRefused when the broker refuses to serve)."""
        return self.once("broker", self._connect_redis)

    def probe_broker(self) -> redis.Redis:
        """A second connection, for the rater probe alone (named CLIENT_NAME-probe): its
        latency is measured on it, so it must not queue behind another check's HSCAN pass on
        the shared one. Opened only when the probe runs."""
        self.broker()  # the shared connection answers (or its error is everyone's)
        return self.once("probe_broker", lambda: self._connect_redis(probe=True))

    def _connect_redis(self, probe: bool = False) -> redis.Redis:
        from fleetcheck.transport.redis import (
            BrokerSetupError,
            connect,
            describe_error,
            discover_master,
            refusal,
        )

        cfg = self.fleet.broker
        where = cfg.address
        try:
            if cfg.sentinels and self.master is None:
                self.master = discover_master(cfg)
        except Exception as e:
            raise CheckError(
                f"broker {where}: no master from the sentinels: {describe_error(e, cfg)}"
            ) from None
        if self.master is not None:
            where = f"{self.master[0]}:{self.master[1]} (master of {cfg.service})"
        try:
            client = connect(
                cfg,
                pool_timeout=self.fleet.patrol.deadline,
                client_name=f"{cfg.client_name}-probe" if probe else None,
                master=self.master,
            )
        except BrokerSetupError as e:
            raise CheckError(f"broker {where}: {e}") from None
        with self._lock:
            self._redis.append(client)
        try:
            client.ping()
        except Exception as e:
            client.close()
            refused = refusal(e)
            if refused is not None:
                raise BrokerRefused(f"broker {where} {refused[1]}", refused[0]) from None
            raise CheckError(f"broker {where} unreachable: {describe_error(e, cfg)}") from None
        return client

    def broker_error(self, e: Exception) -> CheckError:
        """A redis-py error as a one-line, secret-free CheckError (BrokerRefused when the
        broker refuses to serve: busy, loading, MISCONF, out of memory)."""
        from fleetcheck.transport.redis import describe_error, refusal

        refused = refusal(e)
        if refused is not None:
            return BrokerRefused(f"broker {self.fleet.broker.address} {refused[1]}", refused[0])
        return CheckError(describe_error(e, self.fleet.broker))

    def client_list(self) -> list[Client]:
        """CLIENT LIST, parsed, read once per patrol; our own connection left out."""

        def fetch() -> list[Client]:
            r = self.broker()
            try:
                pipe = r.pipeline(transaction=False)
                pipe.client_id()
                pipe.execute_command("CLIENT", "LIST")
                own_id, raw = pipe.execute()
            except Exception as e:
                raise self.broker_error(e) from None
            return [c for c in parse_client_list(raw) if c.id != own_id]

        return self.once("client_list", fetch)

    def info(self) -> dict[str, Any]:
        """INFO (all default sections), read once per patrol."""

        def fetch() -> dict[str, Any]:
            try:
                return dict(self.broker().info())
            except Exception as e:
                raise self.broker_error(e) from None

        return self.once("info", fetch)

    # ------------------------------------------------------------ hosts
    def shell(self, host: HostConfig) -> Shell:
        """The host's one shell for this patrol (connected on first use)."""

        def open_shell() -> Shell:
            if self.closed:
                raise TransportError("patrol already over")
            shell: Shell
            if host.is_local:
                from fleetcheck.transport.local import LocalShell

                shell = LocalShell()
            else:
                from fleetcheck.transport.ssh import open_shell as open_ssh

                shell = open_ssh(host, self.fleet.ssh)
            with self._lock:
                self._shells[host.name] = shell
            return shell

        return self.once(("shell", host.name), open_shell)

    def host_facts(self, host: HostConfig) -> HostFacts:
        """Every check's fragments for `host`, gathered in one exec, once per patrol."""
        return self.once(("host_facts", host.name), lambda: self._gather(host))

    def _gather(self, host: HostConfig) -> HostFacts:
        fragments = self._fragments(host)
        nonce = secrets.token_hex(8)
        script = build_gather_script(nonce, fragments)
        shell = self.shell(host)
        before = time.time()
        result = shell.run(script, self.fleet.ssh.command_timeout, self.fleet.ssh.max_output_bytes)
        after = time.time()
        parsed, remote_epoch = parse_gathered(nonce, result.stdout)
        problem = None
        if result.rc is None:
            problem = (
                f"host commands did not finish within command_timeout "
                f"{self.fleet.ssh.command_timeout:g}s"
            )
        elif result.truncated:
            problem = f"host output exceeded {self.fleet.ssh.max_output_bytes} bytes"
        elif len(parsed) < len(fragments):
            err = result.stderr.decode("utf-8", "replace").strip().splitlines()
            problem = "host shell failed" + (f": {err[-1][:200]}" if err else f" (rc {result.rc})")
        return HostFacts(
            fragments=parsed,
            remote_epoch=remote_epoch,
            local_epoch=(before + after) / 2,
            exec_s=result.duration_s,
            problem=problem,
        )

    def close(self) -> None:
        with self._lock:
            self.closed = True
            shells = list(self._shells.values())
            clients = list(self._redis)
        for shell in shells:
            try:
                shell.close()
            except Exception:
                pass
        for client in clients:
            try:
                client.close()
            except Exception:
                pass


def build_gather_script(nonce: str, fragments: dict[str, str]) -> str:
    """One POSIX sh script that runs each fragment in a subshell between markers.

    The random nonce keeps a log line that happens to look like a marker from confusing the
    parser; fragments cannot see or break each other (subshell, stdin from /dev/null).
    """
    lines = [f"printf '@@{nonce} clock %s\\n' \"$(date +%s.%N 2>/dev/null || date +%s)\""]
    for key, body in fragments.items():
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", key):
            raise ValueError(f"bad fragment key {key!r}")
        lines.append(f"printf '@@{nonce} begin {key}\\n'")
        lines.append(f"( {body}\n) </dev/null")
        lines.append(f"printf '\\n@@{nonce} end {key} %d\\n' $?")
    return "\n".join(lines) + "\n"


def parse_gathered(nonce: str, out: bytes) -> tuple[dict[str, Fragment], float | None]:
    n = re.escape(nonce.encode())
    remote_epoch = None
    m = re.search(rb"@@" + n + rb" clock (\S+)", out)
    if m:
        try:
            remote_epoch = float(m.group(1).decode().rstrip("N").rstrip("."))
        except ValueError:
            remote_epoch = None
    fragments: dict[str, Fragment] = {}
    pattern = rb"@@" + n + rb" begin (\S+)\n(.*?)\n@@" + n + rb" end \1 (\d+)\n"
    for m in re.finditer(pattern, out, re.S):
        fragments[m.group(1).decode()] = Fragment(rc=int(m.group(3)), output=m.group(2))
    return fragments, remote_epoch
