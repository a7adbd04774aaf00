"""The patrol's Redis client: names and features from INFO (pure), then behaviour against real
servers: RESP2 and a recognisable name, a broken connection dropped and replaced, bounded
timeouts against a silent server and an unreachable address, and passwords never printed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest
import redis

from fleetcheck.config import BrokerConfig
from fleetcheck.transport.redis import (
    connect,
    describe_error,
    parse_version,
    redact_url,
    scrub,
    server_identity,
    supports,
)
from tests.hang import returns_within
from tests.lab import Lab, wait_for
from tests.servers import Server


@pytest.mark.parametrize(
    ("url", "redacted", "address"),
    [
        ("redis://10.0.0.1:6379/0", "redis://10.0.0.1:6379/0", "10.0.0.1:6379"),
        ("redis://:pw@10.0.0.1/0", "redis://***@10.0.0.1/0", "10.0.0.1:6379"),
        ("rediss://u:pw@h:7000", "rediss://***@h:7000", "h:7000"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock", "/run/redis.sock"),
    ],
)
def test_redact_and_address(url: str, redacted: str, address: str) -> None:
    assert redact_url(url) == redacted
    assert BrokerConfig(url=url).address == address


def test_scrub() -> None:
    text = "AUTH failed for redis://me:hunter2@h:1 using hunter2"
    assert scrub(text, ["hunter2"]) == "AUTH failed for redis://***@h:1 using ***"
    assert scrub("redis://me:other@h", []) == "redis://***@h"
    # a percent-encoded password is scrubbed in both spellings
    assert scrub("pw Zq#9/x or Zq%239%2Fx", ["Zq#9/x"]) == "pw *** or ***"


@pytest.mark.parametrize(
    ("info", "identity"),
    [
        ({"redis_version": "7.0.15"}, ("redis", (7, 0, 15))),
        ({"redis_version": "7.4.0"}, ("redis", (7, 4, 0))),
        ({"redis_version": "7.2.4", "valkey_version": "8.1.1"}, ("valkey", (8, 1, 1))),
        ({"redis_version": "7.2.5", "server_name": "valkey"}, ("valkey", (7, 2, 5))),
        ({"redis_version": "255.255.255"}, ("redis", (255, 255, 255))),  # unstable builds
        ({}, ("redis", ())),
        ({"redis_version": "x"}, ("redis", ())),
    ],
)
def test_server_identity(info: dict, identity: tuple) -> None:
    assert server_identity(info) == identity


@pytest.mark.parametrize(
    ("info", "feature", "has"),
    [
        ({"redis_version": "7.0.15"}, "hexpire", False),
        ({"redis_version": "7.4.0"}, "hexpire", True),
        ({"redis_version": "8.0.2"}, "hexpire", True),
        ({"redis_version": "7.2.4", "valkey_version": "8.1.1"}, "hexpire", False),
        ({"redis_version": "7.2.4", "valkey_version": "9.0.0"}, "hexpire", True),
        ({"redis_version": "6.0.5"}, "lpos", False),
        ({"redis_version": "6.0.6"}, "lpos", True),
        ({"redis_version": "6.0.16"}, "lpos", True),
        ({"redis_version": "6.0.16"}, "client_list_id", False),
        ({"redis_version": "6.2.0"}, "client_list_id", True),
        ({}, "lpos", False),  # unknown version: take the older way
    ],
)
def test_supports(info: dict, feature: str, has: bool) -> None:
    assert supports(info, feature) is has


def test_parse_version() -> None:
    assert parse_version("7.0.15") == (7, 0, 15)
    assert parse_version("7.2.4-rc1") == (7, 2, 4)
    assert parse_version(None) == ()


# ---------------------------------------------------------------- real servers
def cfg(url: str, **kw: object) -> BrokerConfig:
    return BrokerConfig(url=url, **kw)  # type: ignore[arg-type]


def own_entry(lab: Lab, name: str = "fleetcheck") -> dict[str, str]:
    (entry,) = lab.client_named(name)
    return entry


@pytest.mark.lab
def test_resp2_and_client_name(lab: Lab) -> None:
    r = connect(cfg(lab.broker_url))
    try:
        assert r.ping()
        entry = own_entry(lab)
        assert entry["resp"] == "2"
    finally:
        r.close()
    r = connect(cfg(lab.broker_url, client_name="patrol-7", protocol=3))
    try:
        r.ping()
        assert own_entry(lab, "patrol-7")["resp"] == "3"
    finally:
        r.close()


@pytest.mark.lab
@pytest.mark.parametrize("retries", [0, 1])
def test_broken_connection_is_dropped_not_reused(lab: Lab, retries: int) -> None:
    r = connect(cfg(lab.broker_url, retries=retries))
    try:
        r.ping()
        first = own_entry(lab)["id"]
        lab.client().client_kill_filter(_id=int(first))
        wait_for(lambda: not lab.client_named("fleetcheck"), 5, "the connection to be killed")
        # the pool notices the dead socket on checkout and connects anew, whatever the budget
        assert r.ping()
        second = own_entry(lab)["id"]
        assert second != first
    finally:
        r.close()


@pytest.fixture
def frozen_server() -> Iterator[Server]:
    """A real redis-server stopped with SIGSTOP: connections land in the kernel's backlog and
    nothing answers (a hung broker). Killed at the end, frozen or not."""
    with Server() as server:
        server.freeze()
        yield server


def accept_queue(port: int) -> int:
    """Connections waiting in the kernel's accept queue of our listener on `port` (Recv-Q
    of a listening socket): each a connection attempt a frozen server never took."""
    out = subprocess.run(
        ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[1])


@pytest.mark.lab
def test_frozen_server_fails_within_the_retry_budget(frozen_server: Server) -> None:
    c = cfg(frozen_server.url, socket_timeout=0.3, retries=1)
    r = connect(c)
    before = accept_queue(frozen_server.port)
    with pytest.raises(redis.exceptions.TimeoutError) as info:
        # a hang guard, not a timing: redis-py's default would wait ~1 min per attempt
        returns_within(30, r.ping, "PING to a frozen server (socket_timeout 0.3s, 1 retry)")
    r.close()
    # a count, not a timing: the first attempt and the one retry, each a new connection
    assert accept_queue(frozen_server.port) - before == 2
    assert "Timeout" in describe_error(info.value, c)


@pytest.mark.lab
def test_unreachable_address_fails_within_connect_timeout(lab: Lab) -> None:
    gone = lab.add_host("gone", sshd=False)
    lab.link_down(gone)  # SYNs vanish: only the connect timeout ends the wait
    c = cfg(f"redis://{gone.addr}:6379/0", connect_timeout=0.3, retries=1)
    r = connect(c)
    with pytest.raises(redis.exceptions.TimeoutError) as info:
        # a hang guard: without connect_timeout the kernel gives up a SYN after ~2 min
        returns_within(30, r.ping, "PING to an unreachable address (connect_timeout 0.3s)")
    r.close()
    message = describe_error(info.value, c)
    assert "\n" not in message and "Timeout" in message, message


@pytest.mark.lab
def test_password_from_env_and_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import _require_lab

    _require_lab()
    secret = "s3cret-Pw-42"
    with Lab(redis_args=["--requirepass", secret]) as lab:
        monkeypatch.setenv("FC_TEST_PW", secret)
        r = connect(cfg(lab.broker_url, password_env="FC_TEST_PW"))
        assert r.ping()
        r.close()
        # wrong password in the URL: the error does not name it
        bad_url = f"redis://:{secret}x@{lab.gateway}:{lab.redis_port}/0"
        c = cfg(bad_url)
        r = connect(c)
        with pytest.raises(redis.exceptions.AuthenticationError) as info:
            r.ping()
        r.close()
        message = describe_error(info.value, c)
        assert secret not in message
        assert "username-password" in message  # still says what went wrong
        # the whole CLI: a failing patrol prints the reason without any password
        import json
        import subprocess
        import sys
        from pathlib import Path

        path = lab.dir / "pw.toml"
        path.write_text(f'[broker]\nurl = "{bad_url}"\n\n[checks.broker]\n')
        proc = subprocess.run(
            [
                str(Path(sys.executable).with_name("fleetcheck")),
                "run",
                "-c",
                str(path),
                "-f",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "FC_TEST_PW": "unused"},
        )
        assert secret not in proc.stdout + proc.stderr
        (row,) = json.loads(proc.stdout)["results"]
        assert row["status"] == "UNKNOWN" and "unreachable" in row["summary"]
