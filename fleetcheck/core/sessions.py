"""The patrol's side of the hosts: one shell per host (a connection kept from an earlier
round when one is, a new one otherwise), every check's fragments gathered in one exec, and
the connection released as soon as the host's facts are in. A host that ran out of time
while the patrol was saturated gets one more try when time is left for it."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from fleetcheck.core.errors import CheckError, TransportError
from fleetcheck.core.memo import Memo
from fleetcheck.transport.shell import ExecResult, Shell

if TYPE_CHECKING:
    from fleetcheck.config import FleetConfig, HostConfig
    from fleetcheck.parse.gathered import Fragment


class Named(Protocol):
    """A check, as far as the context needs one (`check.Check` imports this module)."""

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class HostFacts:
    """What one host's gathered exec yielded: each fragment's output, the host's clock
    against ours, and why some fragments may be missing."""

    fragments: dict[str, Fragment]
    remote_epoch: float | None  # the host's clock when the exec started
    local_epoch: float  # our clock halfway through the exec (round-trip corrected)
    problem: str | None  # why some fragments may be missing (deadline, byte bound)
    remote_resolution_s: float = 0.0  # 1.0 when the host's clock came in whole seconds
    clock_problem: str | None = None  # the host printed a clock that is no time (nan, inf...)
    host: str | None = None  # whose facts: names the cause its checks' rows share

    @property
    def cause(self) -> str | None:
        """The one cause every check of this host missing its output shares (the exec did
        not finish, the shell failed): its rows are one problem, not one per check."""
        if self.problem is None:
            return None
        return f"{self.host}: {self.problem}" if self.host else self.problem

    @property
    def clock_skew_s(self) -> float | None:
        """Host clock minus ours; positive when the host runs ahead. A clock read in whole
        seconds (BusyBox `date` has no %N) was anywhere in the second after the one it
        printed: the skew is the value nearest zero in that interval."""
        if self.remote_epoch is None:
            return None
        low = self.remote_epoch - self.local_epoch
        return min(max(0.0, low), low + self.remote_resolution_s)

    def get(self, key: str) -> Fragment:
        try:
            return self.fragments[key]
        except KeyError:
            raise CheckError(
                self.problem or f"no output for {key} from the host", cause=self.cause
            ) from None

    def of(self, check: str) -> HostFacts:
        """The same facts with only `check`'s fragments, under the keys it declared."""
        prefix = f"{check}."
        own = {k[len(prefix) :]: v for k, v in self.fragments.items() if k.startswith(prefix)}
        return replace(self, fragments=own)


class HostSessions:
    """One patrol's shells and gathered facts, by host; everything closes with the patrol."""

    def __init__(
        self,
        fleet: FleetConfig,
        memo: Memo,
        fragments: Callable[[HostConfig], dict[str, str]] | None = None,
        keeper: Any = None,
    ) -> None:
        self.fleet = fleet
        self._memo = memo
        self._lock = memo.lock  # a host's shell and its memo entry change together
        self._fragments = fragments or (lambda host: {})
        self._shells: dict[str, Shell] = {}
        self._pinned: set[str] = set()  # shells handed out by shell(): kept to the end
        self._ssh: Any = None  # the patrol's ssh Connector, made on first use
        # SSH connections kept between rounds (fleetcheck.transport.keep.Keeper), or None
        self._keeper = keeper
        self._from_keeper: set[str] = set()  # hosts whose shell this round came from it
        self._healthy: dict[str, bool] = {}  # host -> its exec finished in time
        self.closed = False
        self.deadline_at: float | None = None  # monotonic end of the patrol (runner sets it)

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
        """The host's shell for the rest of this patrol (connected on first use): a new
        connection, not a kept one (its callers have no replace-if-silent path)."""
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

        return self._memo.once(("shell", host.name), open_shell)

    def _release(self, host: HostConfig) -> None:
        """Close the host's connection once its facts are in, unless a check holds it."""
        with self._lock:
            if host.name in self._pinned:
                return
            shell = self._shells.pop(host.name, None)
            self._memo.forget(("shell", host.name))
            healthy = self._healthy.pop(host.name, False)
            self._from_keeper.discard(host.name)
            keep = self._keeper is not None and not host.is_local and not self.closed
        if shell is not None and keep:
            self._keeper.give_back(host, shell, healthy)
        elif shell is not None:
            with suppress(Exception):
                shell.close()

    def host_facts(self, host: HostConfig, check: Named | None = None) -> HostFacts:
        """The fragments of `check` (under its own keys; all checks' when None) for `host`,
        gathered for every check in one exec, once per patrol."""
        facts = self._memo.once(("host_facts", host.name), lambda: self._gather_caused(host))
        return facts if check is None else facts.of(check.name)

    def _gather_caused(self, host: HostConfig) -> HostFacts:
        """_gather, a failure to reach the host named as the cause all its rows share, unless
        the transport named a wider one (a jump host)."""
        try:
            return self._gather(host)
        except TransportError as e:
            if e.cause is None:
                e.cause = f"{host.name}: {e.reason}"
            raise

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
        import secrets

        # imported here: a broker-only patrol never builds or reads a gathered exec
        from fleetcheck.parse.gathered import parse_clock, parse_gathered
        from fleetcheck.transport.gather import build_gather_script

        fragments = self._fragments(host)
        nonce = secrets.token_hex(8)
        # the host kills the exec at command_timeout itself: closing our channel signals
        # nothing there, and a command hung on the host would outlive the patrol
        script = build_gather_script(nonce, fragments, timeout=self.fleet.ssh.command_timeout)
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
            if not host.is_local:  # name the login shell when it is the cause
                from fleetcheck.transport.startup import startup_note

                left = 30.0 if self.deadline_at is None else self.deadline_at - time.monotonic()
                note = startup_note(shell, min(30.0, left - 1.0))
                problem += f": {note}" if note else ""
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
            clock_problem=parse_clock(nonce, result.stdout)[1],
            host=host.name,
        )

    def _run(self, host: HostConfig, shell: Shell, script: str) -> tuple[float | None, ExecResult]:
        """The gathered exec on the host's shell. A kept connection that cannot open its
        channel within connect_timeout is replaced by a new one; then the first value says
        when that exec started (for the clock-skew midpoint)."""
        cfg = self.fleet.ssh
        with self._lock:
            kept = host.name in self._from_keeper
        if not kept:
            return None, self._exec(shell, script)
        from fleetcheck.transport.ssh import StaleConnection

        kept_shell: Any = shell  # an SshShell: only SSH connections are kept
        # ssh_config's ConnectTimeout for this host beats [ssh], as for a new connection
        open_timeout = kept_shell.target.connect_timeout or cfg.connect_timeout
        try:
            return None, self._exec(kept_shell, script, open_timeout)
        except StaleConnection:
            with self._lock:
                self._from_keeper.discard(host.name)
                if self._shells.get(host.name) is shell:
                    del self._shells[host.name]
                self._memo.forget(("shell", host.name))
            self._keeper.discard(shell)
        shell = self._open(host)  # the keeper has none left for this host: a new connection
        started = time.time()
        return started, self._exec(shell, script)

    def _exec(self, shell: Shell, script: str, open_timeout: float | None = None) -> ExecResult:
        """The gathered exec; in a long-running process (a keeper) through the connection's
        resident shell (fleetcheck.transport.keep.Keeper.run)."""
        cfg = self.fleet.ssh
        if self._keeper is not None:
            return self._keeper.run(
                shell, script, cfg.command_timeout, cfg.max_output_bytes, open_timeout
            )
        return shell.run(script, cfg.command_timeout, cfg.max_output_bytes)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            shells = list(self._shells.values())
            conn = self._ssh
        for shell in shells:
            with suppress(Exception):
                shell.close()
        if conn is not None:
            conn.close()
