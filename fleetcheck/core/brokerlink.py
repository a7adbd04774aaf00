"""The patrol's side of the broker: one connection (two when the rater probe runs), found
through the sentinels when configured, and the facts several checks read from it (CLIENT
LIST, INFO), each fetched once per patrol.

A broker that is down (BrokerDown) or refuses to serve (BrokerRefused) is the failure itself:
the `broker` row reports it as CRIT, every other broker row could not look, all with the same
`cause`. fleetcheck's own trouble (a wrong password, a certificate it will not trust, a name
it cannot resolve) stays "could not look" everywhere."""

from __future__ import annotations

import errno
import os
import socket
import threading
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from fleetcheck.core.errors import CheckError
from fleetcheck.core.memo import Memo
from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:
    import redis

    from fleetcheck.config import BrokerConfig, FleetConfig
    from fleetcheck.parse.clientlist import ClientTable


class BrokerFailed(CheckError):
    """The broker itself failed: the `broker` row reports `cause` as CRIT with
    `failure_strength`; every other broker row is UNKNOWN "could not look: CAUSE" (what it
    raises as it is). `kind` is the cause's short name."""

    cause: str  # always set: the failure is the cause every broker row shares

    def __init__(self, cause: str, kind: str, failure_strength: str = "proof") -> None:
        super().__init__(f"could not look: {cause}", cause=cause)
        self.kind = kind
        self.failure_strength = failure_strength


class BrokerRefused(BrokerFailed):
    """The broker answered but refused to serve us (max clients, LOADING, BUSY, MISCONF, OOM)."""


class BrokerDown(BrokerFailed):
    """The broker does not serve at all: the connection refused (nothing listens), no route
    to it, no connection accepted within connect_timeout, or a connection accepted and then
    no answer within socket_timeout (a hung or stopped server: what the workers meet too)."""


# errno values of a connect that says the broker is not there (from where we stand)
_REFUSED = {errno.ECONNREFUSED}
_NO_ROUTE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN}


def down(e: BaseException, cfg: BrokerConfig, where: str) -> BrokerDown | None:
    """`e` (a redis-py error) as the broker being down, or None when it is ours to fix
    (authentication, TLS, a name that does not resolve, a reply we did not expect).
    A refused connection and a read timeout on an accepted one are proof; no route and a
    connect that timed out are seen only from here (the path may be cut): inference."""
    import redis

    if isinstance(e, redis.AuthenticationError):
        return None
    inner, said = e.__context__ or e.__cause__, str(e).lower()
    if isinstance(e, redis.TimeoutError) and ("reading" in said or "writing" in said):
        return BrokerDown(
            f"broker {where} accepted the connection but did not answer within socket_timeout "
            f"{format_duration(cfg.socket_timeout)} (hung, stopped or overloaded)",
            "hung",
        )
    if isinstance(e, redis.TimeoutError) or (
        isinstance(e, redis.ConnectionError) and isinstance(inner, TimeoutError | socket.timeout)
    ):
        return BrokerDown(
            f"broker {where} did not accept a connection within connect_timeout "
            f"{format_duration(cfg.connect_timeout)} (down, or the network to it)",
            "connect-timeout",
            "inference",
        )
    if not isinstance(e, redis.ConnectionError):
        return None
    code = getattr(inner, "errno", None)
    if code in _REFUSED:
        return BrokerDown(
            f"broker {where} refused the connection (nothing listens there: not running?)",
            "refused",
        )
    if code in _NO_ROUTE:
        return BrokerDown(
            f"broker {where} unreachable: no route to it (host down or network unreachable)",
            "no-route",
            "inference",
        )
    return None


class BrokerLink:
    """What one patrol asks of the broker; the connections close with the patrol."""

    def __init__(self, fleet: FleetConfig, memo: Memo) -> None:
        self.fleet = fleet
        self._memo = memo
        self._lock = threading.Lock()
        # Held while the probe's connection is being opened: until its CLIENT SETNAME is
        # answered the broker lists it with no name, and a CLIENT LIST read in that instant
        # (the clients check, in another lane) would count our own probe as an unclaimed client
        self._opening = threading.Lock()
        self._redis: list[redis.Redis] = []
        self.master: tuple[str, int] | None = None  # the master the sentinels named

    def broker(self) -> redis.Redis:
        """The patrol's broker client over its one connection, known to answer PING. An
        unreachable or refusing broker raises the same CheckError for every caller, so every
        broker-side row gives one reason (BrokerRefused when the broker refuses to serve)."""
        return self._memo.once("broker_client", self._connect_redis)

    def probe_broker(self) -> redis.Redis:
        """A second connection, for the rater probe alone (named CLIENT_NAME-probe): its
        latency is measured on it, so it must not queue behind another check's HSCAN pass on
        the shared one. Opened only when the probe runs."""
        self.broker()  # the shared connection answers (or its error is everyone's)
        return self._memo.once("probe_broker", self._connect_probe)

    def _connect_probe(self) -> redis.Redis:
        with self._opening:  # connected, named and answering PING before CLIENT LIST may run
            return self._connect_redis(probe=True)

    def _connect_redis(self, probe: bool = False) -> redis.Redis:
        from fleetcheck.transport.redis import (
            BrokerSetupError,
            cluster_refusal,
            connect,
            describe_error,
            discover_master,
        )

        cfg = self.fleet.broker
        try:
            if cfg.sentinels and self.master is None:
                self.master = discover_master(cfg)
        except Exception as e:
            raise CheckError(
                f"broker {cfg.address}: no master from the sentinels: {describe_error(e, cfg)}"
            ) from None
        where = self.where
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
            raise self.broker_error(e, client) from None
        cluster = None if probe else cluster_refusal(client)  # refused in one line
        if cluster is not None:
            client.close()
            raise CheckError(f"broker {where} {cluster}", cause=f"broker {where} {cluster}")
        return client

    @property
    def where(self) -> str:
        """The broker as messages name it: its address, or the master the sentinels named."""
        if self.master is None:
            return self.fleet.broker.address
        return f"{self.master[0]}:{self.master[1]} (master of {self.fleet.broker.service})"

    def broker_error(self, e: Exception, connecting: redis.Redis | None = None) -> CheckError:
        """A redis-py error as a one-line, secret-free CheckError (BrokerRefused when the
        broker refuses to serve: busy, loading, MISCONF, out of memory; BrokerDown when it
        is down or went away). `connecting`: the client whose first PING failed."""
        from fleetcheck.transport.redis import describe_error, refusal, refusal_on_accept

        cfg, where = self.fleet.broker, self.where
        refused = refusal(e) or (None if connecting is None else refusal_on_accept(e, connecting))
        if refused is not None:
            return BrokerRefused(f"broker {where} {refused[1]}", refused[0])
        gone = down(e, cfg, where)
        if gone is not None:
            return gone
        why = describe_error(e, cfg)
        if connecting is None:
            return CheckError(why)
        if cfg.password_env and not os.environ.get(cfg.password_env):
            why += f" (password_env {cfg.password_env} is not set)"
        return CheckError(f"broker {where} unreachable: {why}")

    def client_table(self) -> ClientTable:
        """CLIENT LIST as a table (counted and searched without an object per client),
        read once per patrol; our own connection and its rater-probe sibling left out."""

        def fetch() -> ClientTable:
            from fleetcheck.parse.clientlist import read_client_table

            r = self.broker()
            try:
                pipe = r.pipeline(transaction=False)
                pipe.client_id()
                pipe.execute_command("CLIENT", "LIST")
                # INFO in the same round trip: the clients check's broker row (the churn
                # counter) and the broker check read it in every patrol that reads the list
                pipe.info()
                with self._opening:  # never while our probe connection has no name yet
                    own_id, raw, info = pipe.execute(raise_on_error=False)
            except Exception as e:
                raise self.broker_error(e) from None
            for reply in (own_id, raw):
                if isinstance(reply, Exception):
                    raise self.broker_error(reply)
            if not isinstance(info, Exception):  # else INFO's own fetch gives its error
                self._memo.once("info", lambda: dict(info))
            # not under collector.paused(): its one deferred collection walks every row
            return read_client_table(raw).without_own(own_id)

        return self._memo.once("client_table", fetch)

    def info(self) -> dict[str, Any]:
        """INFO (all default sections), read once per patrol."""

        def fetch() -> dict[str, Any]:
            try:
                return dict(self.broker().info())
            except Exception as e:
                raise self.broker_error(e) from None

        return self._memo.once("info", fetch)

    def close(self) -> None:
        with self._lock:
            clients = list(self._redis)
        for client in clients:
            with suppress(Exception):
                client.close()
