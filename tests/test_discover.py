"""`fleetcheck config discover`: the guessing table-tested, then the whole command against a
lab whose broker sees a WSL2-style host with two addresses, a host whose clients carry no name
(found through ~/.ssh/config), and keys that are and are not the live hash and the queues."""

from __future__ import annotations

import json
import re
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
import redis

from fleetcheck import discover, discover_hosts
from fleetcheck.config import BrokerConfig
from fleetcheck.core import discovery
from fleetcheck.parse.clientlist import parse_line
from tests.cli import fleetcheck
from tests.lab import Lab, LabHost, incident_live_hash

# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    "names, expected",
    [
        ({"a": ["worker:n8:1", "worker:n8:2"]}, {"a": "n8"}),
        # an app prefix on every machine is not a machine's name
        (
            {"a": ["arena:n8:1"], "b": ["arena:laptop"], "c": ["arena:mini"]},
            {"a": "n8", "b": "laptop", "c": "mini"},
        ),
        # two addresses of one machine both get its name (they are joined later)
        ({"a": ["w:n8"], "b": ["w:n8"], "c": ["w:laptop"]}, {"a": "n8", "b": "n8", "c": "laptop"}),
        # a machine called worker-7 (issue 26: was read as an ordinal); a role word is none
        (
            {"a": ["rater", "worker-7"], "b": [], "c": ["rater"]},
            {"a": "worker-7", "b": None, "c": None},
        ),
        # most clients of the address carry the name; a stray tool does not win
        ({"a": ["w:n8", "w:n8", "redis-cli-tool:x1y"]}, {"a": "n8"}),
    ],
)
def test_guess_names(names: dict[str, list[str]], expected: dict[str, str | None]) -> None:
    assert discover_hosts.guess_names(names) == expected


def client(addr: str, name: str, flags: str = "N", idle: int = 0) -> object:
    c = parse_line(
        f"id=1 addr={addr}:5000 laddr=10.0.0.1:6379 name={name} idle={idle} flags={flags} cmd=x"
    )
    assert c is not None
    return c


def test_group_hosts_joins_by_name_and_uses_ssh_aliases() -> None:
    clients = [
        client("10.0.0.5", "worker:n8:1"),
        client("172.20.0.2", "worker:n8:2"),
        client("10.0.0.6", ""),
        client("10.0.0.6", ""),
        client("10.0.0.7", "worker"),
        client("10.0.0.9", "replica", flags="S"),
        client("/tmp/redis.sock", "local-tool"),
    ]
    hosts = discover_hosts.group_hosts(
        clients,  # type: ignore[arg-type]
        {"10.0.0.6": "mini-mac", "172.20.0.2": "n8-wsl"},
        {"10.0.0.7": "old"},
    )
    by_name = {h.name: h for h in hosts}
    assert set(by_name) == {"n8", "mini-mac", "old"}  # a claimed address: the config's name
    assert by_name["n8"].addrs == ("10.0.0.5", "172.20.0.2") and by_name["n8"].connections == 2
    assert by_name["n8"].ssh == "n8-wsl"
    assert by_name["mini-mac"].named_from == "ssh config" and by_name["mini-mac"].connections == 2
    assert by_name["old"].claimed == {"10.0.0.7": "old"}
    assert by_name["old"].named_from == "the current config"


# ---------------------------------------------------------------- issue 26: the name rule


@pytest.mark.parametrize(
    "name, expected",
    [
        ("worker:ip-10-0-3-17:1", ["ip-10-0-3-17"]),  # EC2's host names, whole
        ("rq:worker:web-04.prod", ["web-04.prod"]),  # dotted names, whole
        ("celery@host", ["host"]),
        ("celery@web-04.prod.example.com", ["web-04.prod.example.com"]),
        ("celery@worker-3:12345", ["worker-3"]),
        ("worker-17", ["worker-17"]),
        ("w1", ["w1"]),
        ("WEB-04", ["web-04"]),
        ("web-04.12345", ["web-04"]),  # hostname.pid
        ("arena:worker:n8:1", ["arena", "n8"]),
        ("arq:worker:ip-172-31-4-5.ec2.internal", ["ip-172-31-4-5.ec2.internal"]),
        ("dramatiq/gpu-box-2/worker", ["gpu-box-2"]),
        ("sidekiq", []),
        ("worker-12345", []),  # a pid
        ("rq:worker:9f8e7d6c5b4a", []),  # rq's default: a hex id
        ("rq:worker:1b4e28ba-2fa1-11d2-883f-0016d3cca427", []),  # a uuid
        ("pid1234", []),
        ("10.0.0.5", []),
        ("", []),
        ("worker", []),
    ],
)
def test_name_candidates(name: str, expected: list[str]) -> None:
    assert discover_hosts.name_candidates(name) == expected


@pytest.mark.parametrize(
    "names, expected",
    [
        # an autoscaled pool: every machine its own host, never one called "ip" or "prod"
        (
            {f"10.0.3.{i}": [f"worker:ip-10-0-3-{i}:{j}" for j in range(3)] for i in (17, 18)},
            {"10.0.3.17": "ip-10-0-3-17", "10.0.3.18": "ip-10-0-3-18"},
        ),
        (
            {"a": ["rq:worker:web-04.prod"], "b": ["rq:worker:web-05.prod"]},
            {"a": "web-04.prod", "b": "web-05.prod"},
        ),
        ({"a": ["w1"], "b": ["w2"], "c": ["w3"]}, {"a": "w1", "b": "w2", "c": "w3"}),
        # ordinals of processes on one machine are not its name; a stem that is one is
        ({"a": [f"worker-{i}" for i in range(1, 13)]}, {"a": None}),
        ({"a": ["web-04-1", "web-04-2"]}, {"a": "web-04"}),
        # one process name on every machine names none of them
        (
            {"a": ["worker-1"], "b": ["worker-1"], "c": ["worker-1"]},
            {"a": None, "b": None, "c": None},
        ),
        # one machine from two addresses (WSL2 NAT) keeps its one name
        ({"a": ["celery@n8"], "b": ["celery@n8"]}, {"a": "n8", "b": "n8"}),
    ],
)
def test_guess_names_never_merges_machines(
    names: dict[str, list[str]], expected: dict[str, str | None]
) -> None:
    assert discover_hosts.guess_names(names) == expected


def test_half_open_hosts_are_drafted_commented_out() -> None:
    clients = [
        client("10.0.0.5", "celery@alive", idle=4000, flags="b"),  # blocked in BLPOP: alive
        client("10.0.0.6", "celery@gone", idle=4000),
        client("10.0.0.6", "celery@gone", idle=7000),
    ]
    hosts = discover_hosts.group_hosts(clients)  # type: ignore[arg-type]
    by_name = {h.name: h for h in hosts}
    assert not by_name["alive"].half_open and by_name["gone"].half_open
    sample = discovery.Sample(clients, {}, [], 0, True, None)  # type: ignore[arg-type]
    text = discover.draft(sample, BrokerConfig(url="redis://10.0.0.1"), hosts, None, "cfg")
    doc = tomllib.loads(text)
    assert [h["name"] for h in doc["hosts"]] == ["alive"]
    assert "# LOOKS HALF-OPEN: all 2 connections idle for over 10m" in text
    assert "1 clients wait in a blocking pop" in text


def test_queues_from_known_shapes_even_when_empty() -> None:
    names = ["rq:queues", "rq:worker:web-04", "queues", "_kombu.binding.emails",
             "bull:render:meta", "bull:render:id", "arena:queue"]  # fmt: skip
    reads = {
        "rq:queues": ["rq:queue:default"],
        "rq:worker:web-04": ["high", "default"],
        "queues": ["mailers"],
    }
    assert discover.queues_from_shapes(names, reads) == {
        "rq:queue:default": "rq:queues lists it",
        "rq:queue:high": "consumed by rq worker web-04",
        "queue:mailers": "Sidekiq's queues set lists it",
        "emails": "a Celery (kombu) binding names it",
        "bull:render:wait": "a BullMQ queue's keys name it",
    }
    sample = discovery.Sample(
        [], {}, [], 0, True, None, {"rq:queue:high": "consumed by rq worker w"}
    )
    text = discover.draft(sample, BrokerConfig(url="redis://10.0.0.1"), [], None, "cfg")
    assert tomllib.loads(text)["checks"]["queue_depth"]["keys"] == ["rq:queue:high"]
    assert "rq:queue:high: consumed by rq worker w (empty now)" in text


def test_url_takes_the_configs_password_settings() -> None:
    from fleetcheck.config import FleetConfig, PatrolConfig, SshConfig

    fleet = FleetConfig(
        path="x",
        broker=BrokerConfig(url="redis://10.0.0.1", username="ops", password_env="FC_PW"),
        ssh=SshConfig(),
        patrol=PatrolConfig(),
        hosts=(),
    )
    b = discover.broker_for_url("redis://10.0.0.2:6380", fleet)
    assert (b.url, b.username, b.password_env) == ("redis://10.0.0.2:6380", "ops", "FC_PW")
    own = discover.broker_for_url("redis://u:pw@10.0.0.2", fleet)
    assert own.password_env is None and own.username is None
    assert discover.broker_for_url("redis://10.0.0.2", None).password_env is None


@pytest.mark.parametrize(
    "samples, expected",
    [
        ([json.dumps({"started_at": 1764500000, "host": "n8"})] * 3, ("started_at", "host")),
        ([json.dumps({"start": "2026-11-30T10:00:00+00:00", "owner": "x"})], ("start", "owner")),
        ([json.dumps({"started_at": 1764500000})], ("started_at", None)),
        ([json.dumps({"count": 3}), json.dumps({"count": 4})], None),
        (["plain text", "42"], None),
        ([json.dumps({"ts": "soon"})], None),
        ([], None),
    ],
)
def test_live_fields(samples: list[str], expected: tuple[str, str | None] | None) -> None:
    assert discovery.live_fields(samples) == expected


@pytest.mark.parametrize(
    "url, expected",
    [
        ("redis://:pw@10.0.0.1:6379/0", "redis://10.0.0.1:6379/0"),
        ("rediss://user:pw@broker:6380/1", "rediss://user@broker:6380/1"),
        ("redis://10.0.0.1:6379/0", "redis://10.0.0.1:6379/0"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock"),
    ],
)
def test_public_url(url: str, expected: str) -> None:
    assert discover.public_url(url) == expected


def test_draft_is_valid_toml_whatever_the_client_names_say() -> None:
    hostile = 'x"\n[broker]\nurl = "redis://evil"'
    sample = discovery.Sample(
        clients=[client("10.0.0.5", "w:n8")],  # type: ignore[list-item]
        info={"redis_version": "7.0.0"},
        keys=[discovery.KeyInfo(hostile, "list", 3, ('{"id": 1}',))],
        scanned=1,
        complete=True,
        db_keys=1,
    )
    host = discover_hosts.HostDraft("n8", ("10.0.0.5",), 1, (hostile,), None, "client names")
    broker = BrokerConfig(url="redis://:pw@10.0.0.1:6379/0")
    text = discover.draft(sample, broker, [host], None, "~/.ssh/config")
    doc = tomllib.loads(text)
    assert doc["broker"] == {"url": "redis://10.0.0.1:6379/0"}  # no password in a draft
    assert "pw@" not in text
    assert doc["checks"]["queue_depth"]["keys"] == [hostile]


def test_broker_table_keeps_how_the_broker_was_reached_without_secrets() -> None:
    broker = BrokerConfig(
        sentinels=("10.0.0.1:26379", "10.0.0.2:26379"),
        service="arena",
        username="ops",
        password_env="ARENA_PW",
        connect_timeout=1.5,
    )
    doc = tomllib.loads("\n".join(discover.broker_table(broker)))
    assert doc["broker"] == {
        "username": "ops",
        "password_env": "ARENA_PW",
        "connect_timeout": 1.5,
        "sentinels": ["10.0.0.1:26379", "10.0.0.2:26379"],
        "service": "arena",
    }


def test_write_draft_never_replaces_without_force(tmp_path: Path) -> None:
    target = tmp_path / "hosts.toml"
    discover.write_draft(target, "one\n", force=False)
    with pytest.raises(FileExistsError):
        discover.write_draft(target, "two\n", force=False)
    assert target.read_text() == "one\n"
    discover.write_draft(target, "three\n", force=True)
    assert target.read_text() == "three\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hosts.toml"]


# ---------------------------------------------------------------- against the lab


def _setup(lab: Lab) -> dict[str, LabHost]:
    hosts = {name: lab.add_host(name, sshd=False) for name in ("n8", "laptop", "mini", "broker")}
    wsl = lab.add_interface(hosts["n8"], "eth1", metric=None)  # a second address (WSL2 NAT)
    lab.start_workers(hosts["n8"], 3, "arena:worker:n8:1")
    lab.start_workers(hosts["n8"], 2, "arena:worker:n8:2", source=wsl)
    lab.start_workers(hosts["laptop"], 4, "arena-celery@laptop")
    lab.start_workers(hosts["mini"], 2, "")  # nameless clients
    lab.start_workers(hosts["broker"], 2, "arena:worker:broker")
    lab.start_workers(hosts["broker"], 1, "rater")  # idle: no traffic in the command stats
    r = unix_client(lab)
    r.hset("arena:live", mapping=incident_live_hash(time.time()))
    r.rpush("arena:queue", *[json.dumps({"id": i, "enqueued_at": time.time()}) for i in range(30)])
    r.rpush("arena:queue:processing", json.dumps({"id": 99}))
    r.hset("session:abc", mapping={"user": "ann", "cart": "3 items"})  # not a live hash
    r.hset("stats:daily", mapping={"d1": json.dumps({"count": 3}), "d2": json.dumps({"n": 1})})
    r.rpush("recent:lines", "plain", "text")  # a list that is not a queue
    r.set("arena:config", "x")
    r.zadd("arena:scores", {"a": 1})
    r.close()
    return hosts


def _ssh_config(lab: Lab, hosts: dict[str, LabHost]) -> Path:
    """mini's entry sits in an included file (as in ~/.ssh/config.d/)."""
    (lab.dir / "ssh.d").mkdir()
    (lab.dir / "ssh.d" / "mini.conf").write_text(
        f"Host mini-mac\n  HostName {hosts['mini'].addr}\n  User admin\n"
    )
    path = lab.dir / "ssh_config"
    path.write_text(
        f"Include {lab.dir}/ssh.d/*.conf\n"
        f"Host n8-wsl n8-alt\n  HostName {hosts['n8'].addr}\n"
        "Host *\n  ServerAliveInterval 10\n"
    )
    return path


def unix_client(lab: Lab) -> redis.Redis:
    """The test's own connection, over the unix socket: never mistaken for a fleet host."""
    return redis.Redis(unix_socket_path=lab.unix_socket)


def _keys(lab: Lab) -> dict[bytes, object]:
    r = unix_client(lab)
    out: dict[bytes, object] = {}
    read = {
        b"hash": r.hgetall,
        b"list": lambda k: r.lrange(k, 0, -1),
        b"string": r.get,
        b"zset": lambda k: r.zrange(k, 0, -1, withscores=True),
    }
    for k in r.scan_iter(count=1000):
        out[k] = read[r.type(k)](k)  # contents, not DUMP (a hash's order may change)
    r.close()
    return out


@pytest.mark.lab
def test_discover_proposes_the_lab_fleet_and_its_draft_passes_config_check(lab: Lab) -> None:
    hosts = _setup(lab)
    ssh_cfg = _ssh_config(lab, hosts)
    before = _keys(lab)
    r = unix_client(lab)
    r.config_resetstat()
    proc = fleetcheck("config", "discover", "--url", lab.broker_url, "--ssh-config", str(ssh_cfg))
    assert proc.returncode == 0, proc.stderr
    draft = proc.stdout
    doc = tomllib.loads(draft)  # a valid TOML document even before the TODOs are filled

    # read-only: no command it sent may write, and every key is as it was
    stats = r.info("commandstats")
    used = [k.removeprefix("cmdstat_") for k in stats]
    for name in used:
        info = r.execute_command("COMMAND", "INFO", name)[name]
        assert "write" not in info["flags"], f"discover sent {name}"
    assert {"scan", "type", "client|list", "info"} <= set(used)
    r.close()
    assert _keys(lab) == before

    got = {h["name"]: h for h in doc["hosts"]}
    n8, laptop, mini, broker = (hosts[n] for n in ("n8", "laptop", "mini", "broker"))
    assert set(got) == {"n8", "laptop", "mini-mac", "broker"}
    assert got["n8"]["addrs"] == [n8.addr, *n8.extra_addrs]  # two addresses, one host
    assert got["n8"]["ssh"] == "n8-wsl" and got["n8"]["min_clients"] == 5
    assert got["laptop"]["addrs"] == [laptop.addr] and got["laptop"]["min_clients"] == 4
    assert got["laptop"]["ssh"] == laptop.addr  # no Host entry: its address
    assert got["mini-mac"]["addrs"] == [mini.addr] and got["mini-mac"]["ssh"] == "mini-mac"
    assert got["broker"]["addrs"] == [broker.addr] and got["broker"]["min_clients"] == 3
    # the real ssh client agrees on what the alias we proposed points at
    resolved = subprocess.run(
        ["ssh", "-G", "-F", str(ssh_cfg), "mini-mac"], capture_output=True, text=True, timeout=30
    )
    assert f"\nhostname {mini.addr}\n" in resolved.stdout
    assert doc["checks"]["live_hash"]["key"] == "arena:live"
    assert doc["checks"]["queue_depth"]["keys"] == ["arena:queue", "arena:queue:processing"]
    assert doc["checks"]["queue_depth"]["cap"] == "TODO"
    assert "recent:lines  size 2  (not proposed)" in draft

    # the TODOs fail config check ...
    target = lab.dir / "draft.toml"
    target.write_text(draft)
    unfilled = fleetcheck("config", "check", "-c", str(target))
    assert unfilled.returncode == 3 and "unknown time zone 'TODO'" in unfilled.stderr
    # ... and once filled in, the draft is a valid config
    log = n8.dir / "worker.log"
    filled = draft.replace('tz = "TODO"', 'tz = "UTC"').replace('cap = "TODO"', "cap = 100")
    filled = filled.replace(
        '# logs = [{ path = "TODO", max_age = "10m" }]',
        f'logs = [{{ path = "{log}", max_age = "10m" }}]',
    )
    target.write_text(filled)
    check = fleetcheck("config", "check", "-c", str(target))
    assert check.returncode == 0, check.stderr
    assert f"n8: ssh=n8-wsl addrs={n8.addr},{n8.extra_addrs[0]} min_clients=5" in check.stdout
    assert "hosts (4):" in check.stdout


@pytest.mark.lab
def test_discover_marks_addresses_the_config_claims(lab: Lab) -> None:
    hosts = _setup(lab)
    config = lab.config(hosts=[hosts["n8"]])  # claims both of n8's addresses
    proc = fleetcheck("config", "discover", "-c", str(config), "--ssh-config", "/dev/null")
    assert proc.returncode == 0, proc.stderr
    assert re.search(rf"# CLAIMED: {re.escape(hosts['n8'].addr)} \(host 'n8'\)", proc.stdout)
    assert re.search(r'^# name = "n8"', proc.stdout, re.M)
    doc = tomllib.loads(proc.stdout)
    assert {h["name"] for h in doc["hosts"]} == {"laptop", "broker", "host-" + hosts[
        "mini"
    ].addr.replace(".", "-")}  # fmt: skip


@pytest.mark.lab
def test_discover_write_and_force(lab: Lab) -> None:
    _setup(lab)
    target = lab.dir / "new.toml"
    args = ["config", "discover", "--url", lab.broker_url, "--ssh-config", "/dev/null"]
    first = fleetcheck(*args, "--write", str(target))
    assert first.returncode == 0 and f"wrote {target}" in first.stdout
    text = target.read_text()
    assert "[[hosts]]" in text
    target.write_text("# mine\n")
    again = fleetcheck(*args, "--write", str(target))
    assert again.returncode == 3 and "exists (add --force" in again.stderr
    assert target.read_text() == "# mine\n"
    forced = fleetcheck(*args, "--write", str(target), "--force")
    assert forced.returncode == 0 and target.read_text() == text


def test_discover_unreachable_broker(tmp_path: Path) -> None:
    from tests.lab import free_port

    proc = fleetcheck(
        "config", "discover", "--url", f"redis://127.0.0.1:{free_port()}/0", timeout=60
    )
    assert proc.returncode == 3
    assert proc.stderr.startswith("fleetcheck: error: broker: Error 111 connecting")
    assert len(proc.stderr.splitlines()) == 1


@pytest.mark.lab
def test_discover_as_a_read_only_acl_user_and_password_kept_out_of_the_draft(lab: Lab) -> None:
    """A user that may run no write command at all is enough for discover; without CLIENT
    LIST it fails with one line; the draft never carries the URL's password."""
    _setup(lab)
    r = unix_client(lab)
    r.acl_setuser("reader", enabled=True, passwords=["+s3cret-pw"], keys=["*"],
                  commands=["+@read", "+@connection", "-@write", "+client|list", "+client|id",
                            "+info", "+type"])  # fmt: skip
    r.acl_setuser("blind", enabled=True, passwords=["+s3cret-pw"], keys=["*"],
                  commands=["+@read", "+@connection", "-client|list"])  # fmt: skip
    r.close()
    url = lab.broker_url.replace("redis://", "redis://reader:s3cret-pw@")
    proc = fleetcheck("config", "discover", "--url", url, "--ssh-config", "/dev/null")
    assert proc.returncode == 0, proc.stderr
    assert "s3cret-pw" not in proc.stdout
    doc = tomllib.loads(proc.stdout)
    assert doc["broker"]["url"] == lab.broker_url.replace("redis://", "redis://reader@")
    assert '# password_env = "TODO"' in proc.stdout
    assert doc["checks"]["live_hash"]["key"] == "arena:live"
    blind = lab.broker_url.replace("redis://", "redis://blind:s3cret-pw@")
    proc = fleetcheck("config", "discover", "--url", blind, "--ssh-config", "/dev/null")
    assert proc.returncode == 3 and "permissions to run the 'client|list'" in proc.stderr
    assert "s3cret" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_discover_bad_url() -> None:
    proc = fleetcheck("config", "discover", "--url", "http://x")
    assert proc.returncode == 3 and "--url: " in proc.stderr


def test_discover_without_config_or_url(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*fleetcheck_cmd(), "config", "discover"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 3 and "no config file found" in proc.stderr


def fleetcheck_cmd() -> list[str]:
    import sys

    return [sys.executable, "-m", "fleetcheck"]


@pytest.mark.lab
def test_discover_with_url_warns_about_a_broken_config_nearby(lab: Lab, tmp_path: Path) -> None:
    import sys

    (tmp_path / "hosts.toml").write_text("[broker\n")
    proc = subprocess.run(
        [sys.executable, "-m", "fleetcheck", "config", "discover", "--url", lab.broker_url,
         "--ssh-config", "/dev/null"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warning: hosts.toml: invalid TOML" in proc.stderr
    assert "not marked" in proc.stderr
    assert tomllib.loads(proc.stdout)["broker"]["url"] == lab.broker_url


@pytest.mark.lab
def test_discover_scan_is_bounded(lab: Lab) -> None:
    _setup(lab)
    r = unix_client(lab)
    r.mset({f"filler:{i}": "x" for i in range(2000)})
    r.config_resetstat()
    proc = fleetcheck(
        "config", "discover", "--url", lab.broker_url, "--ssh-config", "/dev/null",
        "--scan-limit", "100",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"# (\d+) keys scanned \(limit reached\) of (\d+);", proc.stdout)
    assert m and int(m.group(1)) == 100 and int(m.group(2)) > 2000, proc.stdout[-800:]
    stats = r.info("commandstats")
    assert stats["cmdstat_type"]["calls"] <= 100  # TYPE only for the keys it looked at
    r.close()
