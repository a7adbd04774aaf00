"""Everything one patrol shares: the broker client, one shell per host, the clock, and facts
fetched once however many checks read them (CLIENT LIST, INFO, each host's gathered commands).

Checks never open connections themselves; they ask the context, which opens at most one of
each per patrol and closes them all at the end (also when the deadline cut the patrol short).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from fleetcheck.config import FleetConfig, HostConfig
from fleetcheck.core.errors import CheckError, TransportError
from fleetcheck.transport.shell import ExecResult, Shell

if TYPE_CHECKING:
    import redis

    from fleetcheck.parse.clientlist import Client, ClientTable

T = TypeVar("T")


class Named(Protocol):
    """A check, as far as the context needs one: its name (its fragments' keys). Not
    `check.Check`, which refers to this module: the two would import each other."""

    @property
    def name(self) -> str: ...


class BrokerRefused(CheckError):
    """The broker answered but refused to serve us (max clients, LOADING, BUSY, MISCONF, OOM):
    the failure itself, which the `broker` row reports as CRIT; every other broker row says it
    could not look because of it. `kind` is the cause's short name."""

    def __init__(self, cause: str, kind: str) -> None:
        super().__init__(f"could not look: {cause}")
        self.cause = cause
        self.kind = kind


TEST_CLOCK_ENV = "FLEETCHECK_TEST_CLOCK_OFFSET_S"


def utcnow() -> datetime:
    """The patrol's judging clock. The test suite shifts it (`$FLEETCHECK_TEST_CLOCK_OFFSET_S`
    seconds added to the wall clock) to run the zone-sensitive tests at a summer and a winter
    instant; clock-skew measurement keeps the real wall clock on both ends."""
    offset = os.environ.get(TEST_CLOCK_ENV)
    now = datetime.now(UTC)
    return now + timedelta(seconds=float(offset)) if offset else now


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
    problem: str | None  # why some fragments may be missing (deadline, byte bound)
    remote_resolution_s: float = 0.0  # 1.0 when the host's clock came in whole seconds

    @property
    def clock_skew_s(self) -> float | None:
        """Host clock minus ours; positive when the host runs ahead.

        A clock read in whole seconds (BusyBox `date` has no %N) was anywhere in the second
        after the one it printed: the skew is the value nearest zero in that interval, so a
        host whose clock agrees with ours within what it can tell is not made up to 1s off."""
        if self.remote_epoch is None:
            return None
        low = self.remote_epoch - self.local_epoch
        high = low + self.remote_resolution_s
        if low >= 0 or high < 0:
            return low if low >= 0 else high
        return 0.0

    def get(self, key: str) -> Fragment:
        try:
            return self.fragments[key]
        except KeyError:
            raise CheckError(self.problem or f"no output for {key} from the host") from None

    def of(self, check: str) -> HostFacts:
        """The same facts with only `check`'s fragments, under the keys it declared."""
        prefix = f"{check}."
        own = {k[len(prefix) :]: v for k, v in self.fragments.items() if k.startswith(prefix)}
        return replace(self, fragments=own)


class PatrolContext:
    def __init__(
        self,
        fleet: FleetConfig,
        fragments: Callable[[HostConfig], dict[str, str]] | None = None,
        clock: Callable[[], datetime] = utcnow,
        carried: Mapping[str, Any] | None = None,
        keeper: Any = None,
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
        self._pinned: set[str] = set()  # shells handed out by shell(): kept to the end
        self._ssh: Any = None  # the patrol's ssh Connector, made on first use
        # SSH connections kept between rounds (fleetcheck.transport.keep.Keeper), or None
        self._keeper = keeper
        self._from_keeper: set[str] = set()  # hosts whose shell this round came from it
        self._healthy: dict[str, bool] = {}  # host -> its exec finished in time
        self.closed = False
        self.deadline_at: float | None = None  # monotonic end of the patrol (runner sets it)

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
            why = describe_error(e, cfg)
            if cfg.password_env and not os.environ.get(cfg.password_env):
                why += f" (password_env {cfg.password_env} is not set)"
            raise CheckError(f"broker {where} unreachable: {why}") from None
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
        return self.client_table().clients()

    def client_table(self) -> ClientTable:
        """The same list as a table (counted and searched without an object per client),
        read once per patrol; our own connection and its rater-probe sibling left out."""

        def fetch() -> ClientTable:
            from fleetcheck.parse.clientlist import read_client_table

            r = self.broker()
            try:
                pipe = r.pipeline(transaction=False)
                pipe.client_id()
                pipe.execute_command("CLIENT", "LIST")
                own_id, raw = pipe.execute()
            except Exception as e:
                raise self.broker_error(e) from None
            return read_client_table(raw).without_own(own_id)

        return self.once("client_table", fetch)

    def info(self) -> dict[str, Any]:
        """INFO (all default sections), read once per patrol."""

        def fetch() -> dict[str, Any]:
            try:
                return dict(self.broker().info())
            except Exception as e:
                raise self.broker_error(e) from None

        return self.once("info", fetch)

    # ------------------------------------------------------------ hosts
    def ssh(self) -> Any:
        """The patrol's SSH connector (fleetcheck.transport.ssh.Connector): resolved targets,
        shared jump-host connections and the adaptive limit on hosts in flight."""
        with self._lock:
            if self._ssh is None:
                from fleetcheck.transport.ssh import Connector

                patrol = self.fleet.patrol
                self._ssh = Connector(self.fleet.ssh, patrol.concurrency, patrol.adaptive)
                if self.closed:
                    self._ssh.close()
            return self._ssh

    def notes(self) -> list[str]:
        """What the report should say about the patrol itself (it slowed down, ...)."""
        with self._lock:
            conn = self._ssh
        return conn.notes() if conn is not None else []

    def shell(self, host: HostConfig) -> Shell:
        """The host's shell for the rest of this patrol (connected on first use). Opened
        here first, it is a new connection, not one kept from an earlier round: its callers
        run without the gathered exec's replace-if-silent path, so a kept connection gone
        silent would cost them their whole timeout."""
        with self._lock:
            self._pinned.add(host.name)
        return self._open(host, kept_ok=False)

    def _open(self, host: HostConfig, kept_ok: bool = True) -> Shell:
        def open_shell() -> Shell:
            if self.closed:
                raise TransportError("patrol already over")
            shell: Shell
            if host.is_local:
                from fleetcheck.transport.local import LocalShell

                shell = LocalShell()
            else:
                kept = None
                if kept_ok and self._keeper is not None:
                    kept = self._keeper.take(host, partial(self.ssh().reusable, host))
                if kept is not None:
                    with self._lock:
                        self._from_keeper.add(host.name)
                shell = kept or self.ssh().open(host)
            with self._lock:
                self._shells[host.name] = shell
                late = self.closed
            if late:  # the patrol ended while we connected: close it now, not never
                shell.close()
                raise TransportError("patrol already over")
            return shell

        return self.once(("shell", host.name), open_shell)

    def _release(self, host: HostConfig) -> None:
        """Close the host's connection once its facts are in, unless a check holds it."""
        with self._lock:
            if host.name in self._pinned:
                return
            shell = self._shells.pop(host.name, None)
            self._memo.pop(("shell", host.name), None)
            healthy = self._healthy.pop(host.name, False)
            self._from_keeper.discard(host.name)
            keep = self._keeper is not None and not host.is_local and not self.closed
        if shell is not None and keep:
            self._keeper.give_back(host, shell, healthy)
        elif shell is not None:
            try:
                shell.close()
            except Exception:
                pass

    def host_facts(self, host: HostConfig, check: Named | None = None) -> HostFacts:
        """The fragments of `check` (under its own keys; all checks' when None) for `host`,
        gathered for every check in one exec, once per patrol."""
        facts = self.once(("host_facts", host.name), lambda: self._gather(host))
        return facts if check is None else facts.of(check.name)

    def _gather(self, host: HostConfig) -> HostFacts:
        if host.is_local:
            return self._gather_once(host)
        limiter = self.ssh().limiter
        attempts = 0
        while True:
            attempts += 1
            wait = 3600.0 if self.deadline_at is None else self.deadline_at - time.monotonic()
            if not limiter.acquire(max(wait, 0.0)):
                raise TransportError("no free slot before the patrol deadline")
            handshake: float | None = None
            timed_out = False
            try:
                facts = self._gather_once(host)
                handshake = getattr(self._shells.get(host.name), "connect_s", None)
                timed_out = facts.problem is not None and "did not finish" in facts.problem
            except TransportError as e:
                timed_out = e.reason.startswith("timed out")
                if not (timed_out and self._retry(attempts)):
                    raise
                continue
            finally:
                self._release(host)
                limiter.release(handshake, timed_out)
            if timed_out and self._retry(attempts):
                continue
            return facts

    def _retry(self, attempts: int) -> bool:
        """Another try for a host that ran out of time, when the patrol saw saturation (so
        the time-out may be the crowd's fault, not the host's) and time is left for it."""
        if attempts > 1 or self.closed or not self.ssh().limiter.congested:
            return False
        cfg = self.fleet.ssh
        need = cfg.connect_timeout + cfg.command_timeout
        return self.deadline_at is None or self.deadline_at - time.monotonic() > need

    def _gather_once(self, host: HostConfig) -> HostFacts:
        fragments = self._fragments(host)
        import secrets

        nonce = secrets.token_hex(8)
        script = build_gather_script(nonce, fragments)
        shell = self._open(host)
        before = time.time()
        replaced_at, result = self._run(host, shell, script)
        if replaced_at is not None:  # a kept connection was dead: the exec ran on a new one
            before = replaced_at
        after = time.time()
        with self._lock:
            self._healthy[host.name] = result.rc is not None
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
            problem=problem,
            # whole seconds: the script fell back to `date +%s` (no %N on this host)
            remote_resolution_s=1.0
            if remote_epoch is not None and remote_epoch.is_integer()
            else 0.0,
        )

    def _run(self, host: HostConfig, shell: Shell, script: str) -> tuple[float | None, ExecResult]:
        """The gathered exec on the host's shell. A connection kept from an earlier round
        gets connect_timeout to open its channel; if it cannot, it is replaced by a new
        connection (host key verified as for any other) and the exec runs on that; then
        the first value says when that exec started (for the clock-skew midpoint)."""
        cfg = self.fleet.ssh
        with self._lock:
            kept = host.name in self._from_keeper
        if not kept:
            return None, shell.run(script, cfg.command_timeout, cfg.max_output_bytes)
        from fleetcheck.transport.ssh import StaleConnection

        kept_shell: Any = shell  # an SshShell: only SSH connections are kept
        # ssh_config's ConnectTimeout for this host beats [ssh], as for a new connection
        open_timeout = kept_shell.target.connect_timeout or cfg.connect_timeout
        try:
            return None, kept_shell.run(
                script, cfg.command_timeout, cfg.max_output_bytes, open_timeout=open_timeout
            )
        except StaleConnection:
            with self._lock:
                self._from_keeper.discard(host.name)
                if self._shells.get(host.name) is shell:
                    del self._shells[host.name]
                self._memo.pop(("shell", host.name), None)
            self._keeper.discard(shell)
        shell = self._open(host)  # the keeper has none left for this host: a new connection
        started = time.time()
        return started, shell.run(script, cfg.command_timeout, cfg.max_output_bytes)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            shells = list(self._shells.values())
            clients = list(self._redis)
            conn = self._ssh
        for shell in shells:
            try:
                shell.close()
            except Exception:
                pass
        if conn is not None:
            conn.close()
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
    # BusyBox and BSD date print %N literally: then whole seconds
    lines = [
        "c=$(date +%s.%N 2>/dev/null); case \"$c\" in *[!0-9.]*|'') c=$(date +%s);; esac",
        f"printf '@@{nonce} clock %s\\n' \"$c\"",
    ]
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
    # One pass over the marker lines (linear in the output, also when a hostile fragment
    # prints thousands of begin markers): a fragment is the text between `begin KEY` and
    # the next `\n...end KEY RC` of the same key; a begin that never ends is ignored.
    fragments: dict[str, Fragment] = {}
    marker = re.compile(rb"@@" + n + rb" (begin|end) (\S+)(?: (\d+))?\n")
    pending: dict[bytes, int] = {}
    for m in marker.finditer(out):
        key = m.group(2)
        if m.group(1) == b"begin":
            if m.group(3) is None:
                pending.setdefault(key, m.end())
            continue
        start = pending.get(key)
        if start is None or m.group(3) is None:
            continue
        if m.start() - 1 < start or out[m.start() - 1 : m.start()] != b"\n":
            continue
        fragments[key.decode("utf-8", "replace")] = Fragment(
            rc=int(m.group(3)), output=out[start : m.start() - 1]
        )
        pending.clear()
    return fragments, remote_epoch
