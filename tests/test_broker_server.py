"""The broker as operators run it, against real servers (the server matrix's: Redis 7.0 or
Valkey): a broker that refuses to serve is the failure itself (max clients, LOADING, BUSY,
MISCONF, out of memory), counters judged by their increase across rounds, one connection
per patrol, a password with reserved characters in no output, the documented least-privilege
ACL user, and Sentinel failover."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.cli import fleetcheck
from tests.conftest import _require_lab
from tests.lab import wait_for
from tests.servers import Server, fleet_toml, server_name

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parent.parent
BROKER_CHECKS = """
[checks.broker]

[checks.live_hash]

[checks.queue_depth]
keys = ["q:pending"]
cap = 100
samples = 2
interval = "10ms"
"""


@pytest.fixture(autouse=True)
def _needs_a_server() -> None:
    _require_lab()


def patrol(cfg: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    proc = fleetcheck("run", "-c", str(cfg), "--format", "json", *args, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["check"]: r for r in report["results"]}


def write(tmp_path: Path, text: str, name: str = "hosts.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def assert_others_could_not_look(found: dict[str, dict[str, Any]], cause: str) -> None:
    for check, row in found.items():
        if check != "broker":
            assert row["status"] == "UNKNOWN", row
            assert row["summary"].startswith("could not look: broker 127.0.0.1:"), row
            assert cause in row["summary"], row


# ---------------------------------------------------------------- refusals are verdicts
def test_maxclients_is_crit_and_rejections_judged_by_their_increase(tmp_path: Path) -> None:
    with Server(["--maxclients", "12"]) as server:
        cfg = write(tmp_path, fleet_toml(f'url = "{server.url}"', BROKER_CHECKS))
        state = ["--state", str(tmp_path / "state.json")]
        code, report = patrol(cfg, *state)
        assert rows(report)["broker"]["status"] == "OK", report  # the baseline round
        held: list[redis.Redis] = []
        try:
            while True:  # take every slot there is, as the third fleet's workers did
                c = server.client()
                try:
                    c.ping()
                except redis.ConnectionError as e:
                    assert "max number of clients reached" in str(e)
                    c.close()
                    break
                held.append(c)
            code, report = patrol(cfg, *state)
            found = rows(report)
            broker = found["broker"]
            assert (code, broker["status"]) == (2, "CRIT"), broker
            assert broker["summary"] == (
                f"broker 127.0.0.1:{server.port} refuses new connections: max number of "
                "clients reached (maxclients 12 reached, as of the previous round)"
            )
            assert_others_could_not_look(found, "max number of clients reached")
        finally:
            for c in held:
                c.close()
        # the rejections of the last round (ours, the test's) show once as an increase ...
        wait_for(lambda: server.client().info("clients")["connected_clients"] == 1, 10)
        code, report = patrol(cfg, *state)
        broker = rows(report)["broker"]
        assert broker["status"] == "WARN", broker
        grown = broker["metrics"]["rejected_connections_increase"]
        assert grown >= 2 and f"{grown} connections rejected" in broker["summary"]
        total = broker["evidence"]["since_start"]["rejected_connections"]
        assert f"({total} since start)" in broker["summary"]
        # ... and stop warning once they stop growing, though the total stays
        code, report = patrol(cfg, *state)
        broker = rows(report)["broker"]
        assert (code, broker["status"]) == (0, "OK"), broker
        assert broker["metrics"]["rejected_connections_increase"] == 0
        assert broker["evidence"]["since_start"]["rejected_connections"] == total


def test_loading_is_crit(tmp_path: Path) -> None:
    with Server() as server:
        r = server.client()
        pipe = r.pipeline(transaction=False)
        for i in range(2000):  # big values: the server answers between two keys it loads
            pipe.set(f"k{i}", os.urandom(8192))
        pipe.execute()
        r.save()
        r.close()
        assert (server.dir / "dump.rdb").exists()
        server.kill()
        # the same data again, loaded slowly: 2000 keys at 10 ms each is ~20 s of LOADING
        slow_args = ["--dir", str(server.dir), "--dbfilename", "dump.rdb"]
        slow_args += [
            "--key-load-delay",
            "10000",
            "--loading-process-events-interval-bytes",
            "1024",
        ]
        with Server(slow_args) as slow:

            def is_loading() -> bool:
                try:
                    slow.client().ping()
                except redis.BusyLoadingError:
                    return True
                return False

            wait_for(is_loading, 10, "the server to be loading")
            cfg = write(tmp_path, fleet_toml(f'url = "{slow.url}"', BROKER_CHECKS))
            code, report = patrol(cfg)
            found = rows(report)
            assert (code, found["broker"]["status"]) == (2, "CRIT"), found["broker"]
            assert "is loading its dataset into memory (LOADING)" in found["broker"]["summary"]
            assert_others_could_not_look(found, "LOADING")
            assert is_loading()  # the verdict was given while it still loaded


def test_busy_script_is_crit(tmp_path: Path) -> None:
    with Server(["--busy-reply-threshold", "50"]) as server:
        looping = server.client()

        def spin() -> None:
            try:
                looping.eval("while true do end", 0)
            except redis.RedisError:
                pass  # killed by SCRIPT KILL below

        thread = threading.Thread(target=spin, daemon=True)
        thread.start()

        def busy() -> bool:
            try:
                server.client().ping()
            except redis.ResponseError as e:
                return str(e).startswith("BUSY")
            return False

        try:
            wait_for(busy, 10, "the script to make the server BUSY")
            cfg = write(tmp_path, fleet_toml(f'url = "{server.url}"', BROKER_CHECKS))
            code, report = patrol(cfg)
            found = rows(report)
            assert (code, found["broker"]["status"]) == (2, "CRIT"), found["broker"]
            assert "is busy running a script or function (BUSY)" in found["broker"]["summary"]
            assert_others_could_not_look(found, "BUSY")
        finally:
            server.client().script_kill()
            thread.join(10)


def test_misconf_is_crit(tmp_path: Path) -> None:
    with Server(["--save", "3600 1"]) as server:
        r = server.client()
        r.set("k", "v")
        shutil.rmtree(server.dir)  # the next snapshot has nowhere to go
        r.bgsave()
        wait_for(
            lambda: r.info("persistence")["rdb_last_bgsave_status"] == "err",
            20,
            "the snapshot to fail",
        )
        cfg = write(tmp_path, fleet_toml(f'url = "{server.url}"', BROKER_CHECKS))
        code, report = patrol(cfg)
        found = rows(report)
        assert (code, found["broker"]["status"]) == (2, "CRIT"), found["broker"]
        assert "refuses writes and PING (MISCONF)" in found["broker"]["summary"]
        assert_others_could_not_look(found, "MISCONF")


def test_out_of_memory_is_crit_and_the_probe_pushes_nothing(tmp_path: Path) -> None:
    with Server() as server:
        r = server.client()
        r.set("ballast", "x" * 2_000_000)
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("maxmemory", "1mb")
        with pytest.raises(redis.OutOfMemoryError):
            r.rpush("arena:rater:inbox", "x")
        checks = '[checks.broker]\n\n[checks.rater_probe]\ntimeout = "1s"\n'
        cfg = write(tmp_path, fleet_toml(f'url = "{server.url}"', checks))
        code, report = patrol(cfg)
        found = rows(report)
        broker = found["broker"]
        assert (code, broker["status"]) == (2, "CRIT"), broker
        assert "writes are refused (OOM)" in broker["summary"]
        probe = found["rater_probe"]
        assert probe["status"] == "UNKNOWN"
        assert probe["summary"] == (
            f"could not look: broker 127.0.0.1:{server.port} refuses writes: out of memory "
            "(used_memory over maxmemory, OOM)"
        )
        assert r.llen("arena:rater:inbox") == 0


# ---------------------------------------------------------------- one connection per patrol
def test_a_patrol_holds_one_broker_connection(tmp_path: Path) -> None:
    """CLIENT LIST watched during a whole patrol: the shared connection is one, the rater
    probe's own is one more, and no check opens another (before: up to 4 at once). No rater
    takes the envelope, so the probe's connection lives for its whole timeout."""
    from fleetcheck.lab import Lab

    with Lab(netns=False) as lab:
        r = lab.client()
        pipe = r.pipeline(transaction=False)
        for i in range(200):  # a live hash the live_hash check needs many HSCANs for
            pipe.hset("arena:live", mapping={f"m{i}-{j}": '{"started_at": 1}' for j in range(100)})
        pipe.execute()
        r.rpush("q:pending", *range(10))
        n8 = lab.add_host("n8")
        lab.start_workers(n8, 2)
        checks = BROKER_CHECKS + '\n[checks.clients]\n\n[checks.rater_probe]\ntimeout = "1s"\n'
        cfg = lab.config(checks=checks)
        import subprocess
        import sys

        proc = subprocess.Popen(
            [sys.executable, "-m", "fleetcheck", "run", "-c", str(cfg), "-f", "json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        most: dict[str, int] = {"fleetcheck": 0, "fleetcheck-probe": 0}
        ids: dict[str, set[str]] = {"fleetcheck": set(), "fleetcheck-probe": set()}
        looks = 0
        while proc.poll() is None:
            seen = [c for c in r.client_list() if c.get("name") in most]
            looks += 1
            for name in most:
                mine = [c for c in seen if c["name"] == name]
                most[name] = max(most[name], len(mine))
                ids[name].update(c["id"] for c in mine)
        out, err = proc.communicate()
    report = json.loads(out)
    probe = {x["check"]: x for x in report["results"]}["rater_probe"]
    assert probe["status"] == "CRIT" and "removed again" in probe["summary"], probe
    assert looks > 10
    assert most == {"fleetcheck": 1, "fleetcheck-probe": 1}, most
    assert len(ids["fleetcheck"]) == 1 and len(ids["fleetcheck-probe"]) == 1, ids


# ---------------------------------------------------------------- passwords
PASSWORD = "Zq#9xK2pLw/x"
ENCODED = "Zq%239xK2pLw%2Fx"
FRAGMENTS = (PASSWORD, ENCODED, "Zq#9", "Zq%23", "pLw/x", "pLw%2Fx")


def no_password(text: str) -> None:
    for fragment in FRAGMENTS:
        assert fragment not in text, text


@pytest.mark.parametrize("right", [True, False], ids=["right password", "wrong password"])
def test_reserved_character_password_in_no_output(tmp_path: Path, right: bool) -> None:
    with Server(["--requirepass", PASSWORD]) as server:
        given = ENCODED if right else ENCODED.replace("x", "y")
        url = f"redis://:{given}@127.0.0.1:{server.port}/0"
        cfg = write(tmp_path, fleet_toml(f'url = "{url}"', BROKER_CHECKS))
        # a wrong password is where redis-py's own message could quote it: every format then
        formats = ("json",) if right else ("json", "plain", "nagios", "prometheus", "table")
        for fmt in formats:
            proc = fleetcheck("run", "-c", str(cfg), "--format", fmt, "--no-state")
            no_password(proc.stdout + proc.stderr)
            assert proc.returncode == (0 if right else 3), proc.stdout + proc.stderr
            if fmt == "json":
                broker = rows(json.loads(proc.stdout))["broker"]
                if not right:
                    assert broker["summary"].startswith(
                        f"broker 127.0.0.1:{server.port} unreachable: "
                    )
        proc = fleetcheck("config", "check", "-c", str(cfg))
        assert proc.returncode == 0
        assert f"broker: redis://***@127.0.0.1:{server.port}/0" in proc.stdout
        no_password(proc.stdout + proc.stderr)
        if not right:
            return
        # unencoded: a config error naming the key, never the password
        bad = write(tmp_path, fleet_toml(f'url = "{url.replace(given, PASSWORD)}"'), "bad.toml")
        for command in (["run"], ["config", "check"]):
            proc = fleetcheck(*command, "-c", str(bad))
            assert proc.returncode == 3 and "[broker] url: " in proc.stderr
            no_password(proc.stdout + proc.stderr)


def test_password_env_and_password_file(tmp_path: Path) -> None:
    with Server(["--requirepass", PASSWORD]) as server:
        secret = tmp_path / "broker.pw"
        secret.write_text(PASSWORD + "\n")
        secret.chmod(0o600)
        by_file = f'url = "{server.url}"\npassword_file = "{secret}"'
        code, report = patrol(write(tmp_path, fleet_toml(by_file), "file.toml"))
        assert rows(report)["broker"]["status"] == "OK", report
        by_env = f'url = "{server.url}"\npassword_env = "FC_PW"'
        cfg = write(tmp_path, fleet_toml(by_env), "env.toml")
        code, report = patrol(cfg, env={"FC_PW": PASSWORD})
        assert rows(report)["broker"]["status"] == "OK", report
        code, report = patrol(cfg, env={"FC_PW": ""})
        summary = rows(report)["broker"]["summary"]
        assert summary.startswith(f"broker 127.0.0.1:{server.port} unreachable: ")
        assert summary.endswith(" (password_env FC_PW is not set)")
        secret.unlink()
        code, report = patrol(write(tmp_path, fleet_toml(by_file), "file.toml"))
        assert rows(report)["broker"]["summary"] == (
            f"broker 127.0.0.1:{server.port}: password_file {secret}: cannot read: "
            "No such file or directory"
        )


# ---------------------------------------------------------------- the least-privilege user
def readme_acl(marker: str) -> list[str]:
    """The ACL rules docs/brokers.md documents after `marker` (one line in a code block)."""
    text = (ROOT / "docs" / "brokers.md").read_text()
    block = text.split(marker, 1)[1]
    line = re.search(r"^ACL SETUSER (\S+) (.+)$", block, re.M)
    assert line is not None, f"docs/brokers.md: no ACL SETUSER line after {marker!r}"
    return line.group(2).split()


def test_patrol_as_the_documented_acl_user(tmp_path: Path) -> None:
    from fleetcheck.lab import Lab

    rules = readme_acl("<!-- acl:patrol -->")
    with Lab(netns=False) as lab:
        admin = lab.client()
        admin.execute_command("ACL", "SETUSER", "fleetcheck", "reset", *rules, ">Pw-for-acl")
        admin.hset("arena:live", mapping={"m1": '{"started_at": 1, "host": "n8"}'})
        admin.rpush("q:pending", "job")
        rater = lab.start_rater()
        n8 = lab.add_host("n8")
        lab.start_workers(n8, 1)
        checks = BROKER_CHECKS + "\n[checks.clients]\n\n[checks.rater_probe]\n"
        cfg = lab.config(checks=checks)
        url = f"redis://fleetcheck:Pw-for-acl@127.0.0.1:{lab.redis_port}/0"
        text = cfg.read_text().replace(f'url = "{lab.broker_url}"', f'url = "{url}"')
        cfg.write_text(text)
        code, report = patrol(cfg)
        found = {(r["check"], r["host"]): r for r in report["results"]}
        for row in found.values():
            assert row["status"] != "UNKNOWN" and "NOPERM" not in row["summary"], row
        assert found[("rater_probe", None)]["status"] == "OK"
        assert found[("live_hash", None)]["metrics"]["stale"] == 1  # it really looked
        # and it can write nothing but the probe's inbox
        as_user = redis.Redis(
            host="127.0.0.1", port=lab.redis_port, username="fleetcheck", password="Pw-for-acl"
        )
        for write_it in (
            lambda: as_user.set("x", "1"),
            lambda: as_user.rpush("q:pending", "x"),
            lambda: as_user.hdel("arena:live", "m1"),
            lambda: as_user.flushall(),
            lambda: as_user.config_set("maxclients", "1"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                write_it()
        # reap-live --apply needs the documented addition, and works with it
        proc = fleetcheck("reap-live", "-c", str(cfg), "--apply", "--force")
        assert proc.returncode == 3, proc.stdout + proc.stderr
        extra = readme_acl("<!-- acl:reap -->")
        # the refusal names a command, one of those the documented addition grants
        refused = re.search(r"no permissions to run the '([a-z|]+)' command", proc.stderr)
        assert refused is not None and f"+{refused[1]}" in extra, proc.stderr
        assert admin.hlen("arena:live") == 1
        admin.execute_command("ACL", "SETUSER", "fleetcheck", *extra)
        proc = fleetcheck("reap-live", "-c", str(cfg), "--apply", "--force")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert admin.hlen("arena:live") == 0
        as_user.close()
        lab.stop(rater)


# ---------------------------------------------------------------- Sentinel
def sentinel_server(master_port: int) -> Server:
    conf = (
        f"sentinel monitor mymaster 127.0.0.1 {master_port} 1\n"
        "sentinel down-after-milliseconds mymaster 1000\n"
        "sentinel failover-timeout mymaster 10000\n"
        "sentinel resolve-hostnames no\n"
    )
    binary = None
    if server_name() == "redis" and shutil.which("redis-sentinel"):
        binary = "redis-sentinel"  # Debian's redis-sentinel package
    return Server(binary=binary, sentinel=True, config=conf)


def test_sentinel_names_the_master_and_follows_a_failover(tmp_path: Path) -> None:
    with Server() as master, Server(["--replica-announce-ip", "127.0.0.1"]) as replica:
        replica.client().replicaof("127.0.0.1", master.port)
        wait_for(
            lambda: replica.client().info("replication").get("master_link_status") == "up",
            20,
            "the replica to sync",
        )
        master.client().set("k", "v")
        with sentinel_server(master.port) as sentinel:
            s = sentinel.client()
            wait_for(
                lambda: len(s.execute_command("SENTINEL", "REPLICAS", "mymaster")) == 1,
                20,
                "the sentinel to find the replica",
            )
            broker = f'sentinels = ["127.0.0.1:{sentinel.port}"]\nservice = "mymaster"'
            cfg = write(
                tmp_path,
                fleet_toml(
                    broker,
                    '[checks.broker]\n[checks.queue_depth]\nkeys = ["q"]\ncap = 5\nsamples = 1\n',
                ),
            )
            code, report = patrol(cfg)
            row = rows(report)["broker"]
            assert row["status"] == "OK", row
            assert f"master 127.0.0.1:{master.port} (via sentinel mymaster)" in row["summary"]
            assert f"replica 127.0.0.1:{replica.port} online" in row["summary"]
            assert row["metrics"]["replicas"] == 1
            assert rows(report)["queue_depth"]["status"] == "OK"

            master.kill()  # the sentinel promotes the replica

            def promoted() -> bool:
                addr = s.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")
                return int(addr[1]) == replica.port

            wait_for(promoted, 60, "the sentinel to promote the replica")
            wait_for(lambda: replica.client().info("replication")["role"] == "master", 30)
            code, report = patrol(cfg)
            row = rows(report)["broker"]
            assert f"master 127.0.0.1:{replica.port} (via sentinel mymaster)" in row["summary"]
            assert row["evidence"]["role"] == "master"
            # no reachable sentinel: one reason on every broker row
        dead = write(tmp_path, fleet_toml(broker, "[checks.broker]\n"), "dead.toml")
        code, report = patrol(dead)
        row = rows(report)["broker"]
        assert (code, row["status"]) == (3, "UNKNOWN")
        assert row["summary"].startswith("broker mymaster (via sentinels 127.0.0.1:")
        assert "no master from the sentinels" in row["summary"]


# ---------------------------------------------------------------- the probe pushes at most once
class ReplyDropper:
    """A loopback TCP proxy in front of the broker that, once, forwards a push to the server
    and then cuts the client's connection instead of passing on the reply: the push landed,
    the client cannot know. Every other byte (and every later connection) passes through."""

    def __init__(self, upstream_port: int, command: bytes = b"RPUSH") -> None:
        import socket

        self.upstream_port = upstream_port
        self.command = command
        self.armed = True
        self.cut = threading.Event()
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.sockets: list[Any] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.sockets += [client, server]
            drop = threading.Event()
            threading.Thread(target=self._up, args=(client, server, drop), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, drop), daemon=True).start()

    def _up(self, client: Any, server: Any, drop: threading.Event) -> None:
        while True:
            try:
                data = client.recv(65536)
            except OSError:
                return
            if not data:
                return
            if self.armed and self.command in data:
                self.armed = False
                drop.set()
            try:
                server.sendall(data)
            except OSError:
                return

    def _down(self, server: Any, client: Any, drop: threading.Event) -> None:
        import socket

        while True:
            try:
                data = server.recv(65536)
            except OSError:
                return
            if not data:
                return
            if drop.is_set():  # the push's reply: swallowed, and the client cut off
                for s in (client, server):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    s.close()
                self.cut.set()
                return
            try:
                client.sendall(data)
            except OSError:
                return

    def close(self) -> None:
        self.listener.close()
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass


def test_an_uncertain_push_is_sent_once_and_cleaned_up(tmp_path: Path) -> None:
    with Server() as server:
        proxy = ReplyDropper(server.port)
        try:
            url = f"redis://127.0.0.1:{proxy.port}/0"
            checks = '[checks.rater_probe]\ntimeout = "1s"\n'
            # retries = 5: the client would retry a dropped command; the push must not be
            cfg = write(tmp_path, fleet_toml(f'url = "{url}"\nretries = 5', checks))
            r = server.client()
            r.rpush("arena:rater:inbox", "older-job")
            code, report = patrol(cfg)
            assert proxy.cut.is_set()  # the push reached the server; its reply did not come back
            row = rows(report)["rater_probe"]
            assert (code, row["status"]) == (3, "UNKNOWN"), row
            assert row["summary"].startswith("arena:rater:inbox: push uncertain (")
            assert row["summary"].endswith("; removed again (1 copy)")
            # exactly what was there before: no second copy, no orphan envelope
            assert r.lrange("arena:rater:inbox", 0, -1) == [b"older-job"]
            assert r.info("stats")["total_commands_processed"] > 0
        finally:
            proxy.close()


def test_a_refusal_lost_to_a_reset_is_read_again_from_what_the_broker_says_on_accept(
    tmp_path: Path,
) -> None:
    """A broker at maxclients writes its refusal as it accepts and closes; when redis-py's
    handshake meets the close first, the error says "Broken pipe" (CI saw the broker row
    UNKNOWN "unreachable: ... Broken pipe" instead of CRIT). `refusal_on_accept` opens a
    plain connection once more and reads what the broker says, writing nothing: over TCP
    and a unix socket; nothing for a healthy broker, another error, or TLS."""
    from fleetcheck.transport.redis import REFUSED_CONNECTIONS, refusal_on_accept

    reset = redis.ConnectionError("Error 32 while writing to socket. Broken pipe.")
    sock = tmp_path / "redis.sock"
    with Server(["--maxclients", "3", "--unixsocket", str(sock)]) as server:
        by_tcp = server.client()
        by_unix = redis.Redis(unix_socket_path=str(sock))
        watcher = server.client()
        bytes_in = lambda: int(watcher.info("stats")["total_net_input_bytes"])  # noqa: E731
        before = bytes_in()
        assert refusal_on_accept(reset, by_tcp) is None  # a healthy broker says nothing
        after = bytes_in()
        assert after - before == bytes_in() - after  # and was sent nothing but our INFO
        held: list[redis.Redis] = []
        try:
            while True:  # every slot taken
                c = server.client()
                try:
                    c.ping()
                except redis.ConnectionError:
                    c.close()
                    break
                held.append(c)
            for client in (by_tcp, by_unix):
                for e in (reset, redis.ConnectionError("Connection reset by peer")):
                    got = refusal_on_accept(e, client)
                    assert got is not None and got[0] == REFUSED_CONNECTIONS, (client, e)
                # not a dropped connection: not asked again
                assert (
                    refusal_on_accept(redis.ConnectionError("Connection refused"), client) is None
                )
                assert refusal_on_accept(redis.TimeoutError("Broken pipe"), client) is None
        finally:
            for c in held:
                c.close()
    tls = redis.Redis(host="127.0.0.1", port=9, ssl=True)
    assert refusal_on_accept(reset, tls) is None  # its refusal comes after a handshake
