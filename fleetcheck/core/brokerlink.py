"""The patrol's side of the broker: one connection (two when the rater probe runs), found
through the sentinels when configured, and the facts several checks read from it (CLIENT
LIST, INFO), each fetched once per patrol.

Every failure becomes one secret-free line that every broker-side row repeats: the broker
unreachable, or answering but refusing to serve (BrokerRefused, which the `broker` row
alone reports as CRIT)."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from fleetcheck.core.errors import CheckError
from fleetcheck.core.memo import Memo

if TYPE_CHECKING:
    import redis

    from fleetcheck.config import FleetConfig
    from fleetcheck.parse.clientlist import Client, ClientTable


class BrokerRefused(CheckError):
    """The broker answered but refused to serve us (max clients, LOADING, BUSY, MISCONF, OOM):
    the failure itself, which the `broker` row reports as CRIT; every other broker row says it
    could not look because of it. `kind` is the cause's short name."""

    cause: str  # always set: the refusal is the cause every broker row shares

    def __init__(self, cause: str, kind: str) -> None:
        super().__init__(f"could not look: {cause}", cause=cause)
        self.kind = kind


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
        return self._memo.once("broker", self._connect_redis)

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
        cluster = None if probe else cluster_refusal(client)  # issue 28: refused in one line
        if cluster is not None:
            client.close()
            raise CheckError(f"broker {where} {cluster}", cause=f"broker {where} {cluster}")
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
                with self._opening:  # never while our probe connection has no name yet
                    own_id, raw = pipe.execute()
            except Exception as e:
                raise self.broker_error(e) from None
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
            try:
                client.close()
            except Exception:
                pass
