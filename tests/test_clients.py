"""clients: CLIENT LIST parsing and per-host verdicts (pure), then the real thing in the lab."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime

import pytest
from fleetcheck.checks.clients.check import CHECK, ClientsConfig, ClientsFacts, facts_of

from fleetcheck.config import HostConfig
from fleetcheck.core.hostfacts import ClientsHostConfig
from fleetcheck.core.model import Status
from fleetcheck.parse.clientlist import (
    parse_client_list,
    parse_line,
    read_client_table,
    split_addr,
)
from tests.lab import Lab

NOW = datetime(2026, 11, 29, 6, 21, tzinfo=UTC)

# Lines in the shapes of several server versions (field sets differ; order differs).
REDIS5 = (
    "id=3 addr=192.168.1.20:51234 fd=8 name=worker-1 age=100 idle=2 flags=N db=0 sub=0 psub=0 "
    "multi=-1 qbuf=0 qbuf-free=0 obl=0 oll=0 omem=0 events=r cmd=blpop"
)
REDIS7 = (
    "id=7 addr=192.168.1.21:40000 laddr=192.168.1.10:6379 fd=9 name= age=5 idle=5 flags=b "
    "db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=10 multi-mem=0 rbs=1024 "
    "rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 events=r cmd=blpop user=default redir=-1 resp=2 "
    "lib-name=redis-py lib-ver=8.1.0"
)
IPV6 = "id=9 addr=[::1]:6000 laddr=[::1]:6379 fd=10 name=cli age=1 idle=0 flags=N cmd=client|list"
UNIX = "id=10 addr=/run/redis/redis.sock:0 laddr=/run/redis/redis.sock fd=11 name= flags=U cmd=ping"


@pytest.mark.parametrize(
    ("addr", "host", "port"),
    [
        ("192.168.1.20:51234", "192.168.1.20", 51234),
        ("[::1]:6000", "::1", 6000),
        ("[::ffff:10.0.0.1]:5", "10.0.0.1", 5),
        ("::1:6000", "::1", 6000),
        ("/tmp/redis.sock:0", "unix", None),
        ("", "", None),
    ],
)
def test_split_addr(addr: str, host: str, port: int | None) -> None:
    assert split_addr(addr) == (host, port)


def test_parse_uses_addr_never_laddr() -> None:
    c = parse_line(REDIS7)
    assert c is not None
    assert (c.host, c.port, c.blocked, c.cmd, c.idle_s) == ("192.168.1.21", 40000, True, "blpop", 5)
    clients = parse_client_list("\n".join([REDIS5, REDIS7, IPV6, UNIX, "", "garbage line"]))
    assert [c.host for c in clients] == ["192.168.1.20", "192.168.1.21", "::1", "unix"]
    assert clients[0].name == "worker-1" and clients[1].name == ""


def test_parse_tolerates_missing_fields() -> None:
    c = parse_line("addr=1.2.3.4:5")
    assert c is not None and c.id is None and c.idle_s is None and c.flags == ""
    assert parse_line("id=1 name=x") is None


def host(name: str = "mini", addrs: tuple[str, ...] = ("192.168.1.30",), min_clients: int = 1):
    return HostConfig(name=name).with_settings(ClientsHostConfig(addrs, min_clients))


def facts(*lines: str, claimed: tuple[str, ...] = ()) -> ClientsFacts:
    """The broker row's facts from these lines (a host row's evaluate reads only the
    addresses it claims, so the same facts serve it)."""
    table = read_client_table("\n".join(lines))
    return facts_of(table, frozenset(claimed), None, ClientsConfig().ignore_names)


def line(addr: str, name: str = "w", idle: int = 1) -> str:
    return f"id=1 addr={addr}:1000 name={name} idle={idle} flags=N cmd=blpop"


@pytest.mark.parametrize(
    ("h", "lines", "status", "summary"),
    [
        (host(), [], Status.CRIT, "no broker connections from 192.168.1.30"),
        (
            host(min_clients=3),
            [line("192.168.1.30")] * 2,
            Status.WARN,
            "2 broker connections, fewer than min_clients 3 (192.168.1.30: 2)",
        ),
        (
            host("wsl", ("192.168.1.20", "172.20.0.5"), 3),
            [line("192.168.1.20")] * 2 + [line("172.20.0.5")],
            Status.OK,
            "3 broker connections (192.168.1.20: 2, 172.20.0.5: 1)",
        ),
        (host(min_clients=0), [], Status.OK, "no broker connections from 192.168.1.30"),
        (host(addrs=()), [], Status.UNKNOWN, "min_clients 1 but no addrs configured"),
    ],
)
def test_evaluate_host_rows(h: HostConfig, lines: list[str], status: Status, summary: str) -> None:
    result = CHECK.evaluate(facts(*lines), ClientsConfig(), h, NOW)
    assert result.status is status
    assert result.summary.startswith(summary)
    assert result.host == h.name


def test_evaluate_metrics_and_evidence() -> None:
    h = host("wsl", ("192.168.1.20", "172.20.0.5"), 1)
    r = CHECK.evaluate(
        facts(line("192.168.1.20", "w1", 3), line("192.168.1.20", "w2", 40)),
        ClientsConfig(),
        h,
        NOW,
    )
    assert r.metrics == {
        "connections": 2,
        "by_addr": {"192.168.1.20": 2, "172.20.0.5": 0},
        "quiet_s": 3,
        "waiting": 0,
    }
    assert r.limits == {"min_clients": 1, "silent_after_s": 30.0}
    assert r.evidence == {
        "names": ["w1", "w2"],
        "max_idle_s": 40,
        "commands": ["blpop"],
    }


@pytest.mark.parametrize(
    ("max_unknown", "status"), [(0, Status.WARN), (1, Status.WARN), (2, Status.OK)]
)
def test_unknown_clients_row(max_unknown: int, status: Status) -> None:
    f = facts(
        line("192.168.1.20"),
        line("10.9.9.9", "stray"),
        line("10.9.9.9", "stray"),
        line("10.9.9.8", "fleetcheck"),
        claimed=("192.168.1.20",),
    )
    r = CHECK.evaluate(f, ClientsConfig(max_unknown=max_unknown), None, NOW)
    assert r.status is status
    assert r.host is None
    assert r.metrics["unknown_clients"] == 2
    assert "10.9.9.9 (2)" in r.summary


# ---------------------------------------------------------------- lab


def fleetcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.lab
def test_lab_clients_verdicts(lab: Lab) -> None:
    n8 = lab.add_host("n8", sshd=False)
    mini = lab.add_host("mini", sshd=False)
    wsl = lab.add_host("wsl", sshd=False)
    second = lab.add_interface(wsl, "eth1", metric=None)
    lab.start_workers(n8, 12, "worker-n8")
    lab.start_workers(wsl, 3, "worker-wsl")
    lab.start_workers(wsl, 2, "worker-wsl-nat", source=second)
    lab.start_workers(None, 1, "stray")  # from 127.0.0.1, which no host claims
    cfg = lab.config(host_extra={"n8": "min_clients = 10", "wsl": "min_clients = 4"})

    proc = fleetcheck("run", "-c", str(cfg), "--format", "json")
    assert proc.stderr == ""
    report = json.loads(proc.stdout)
    rows = {r["host"]: r for r in report["results"]}
    assert rows["mini"]["status"] == "CRIT"
    assert rows["mini"]["summary"] == f"no broker connections from {mini.addr}"
    assert rows["n8"]["status"] == "OK" and rows["n8"]["metrics"]["connections"] == 12
    assert rows["wsl"]["status"] == "OK"
    assert rows["wsl"]["metrics"]["by_addr"] == {wsl.addr: 3, second: 2}
    assert rows["wsl"]["metrics"]["connections"] == 5
    assert rows[None]["status"] == "WARN"
    assert rows[None]["metrics"]["unknown_by_addr"] == {"127.0.0.1": 1}
    assert len(report["results"]) == 4  # one row per host plus the broker-wide one
    assert report["status"] == "CRIT" and report["exit_code"] == 2 == proc.returncode
    assert report["started_at"].endswith("Z")

    # The same patrol, plain (what cron mails): hosts not OK at a glance, no box drawing.
    plain = fleetcheck("run", "-c", str(cfg), "--no-state")
    assert plain.returncode == 2
    lines = plain.stdout.splitlines()
    assert lines[0].split() == ["STATUS", "HOST", "CHECK", "SUMMARY"]  # the rows first
    # after the table, one line per place not OK, naming its checks (the row has the text)
    assert "CRIT    mini: clients" in lines
    assert sum(f"no broker connections from {mini.addr}" in line for line in lines) == 1
    assert "│" not in plain.stdout and "\x1b[" not in plain.stdout


@pytest.mark.lab
def test_lab_min_clients_warn_and_host_filter(lab: Lab) -> None:
    n8 = lab.add_host("n8", sshd=False)
    lab.add_host("mini", sshd=False)
    lab.start_workers(n8, 2)
    cfg = lab.config(host_extra={"n8": "min_clients = 3"})
    proc = fleetcheck("run", "-c", str(cfg), "--format", "json", "--host", "n8")
    report = json.loads(proc.stdout)
    assert [(r["host"], r["status"]) for r in report["results"]] == [("n8", "WARN")]
    assert proc.returncode == 1


@pytest.mark.lab
def test_lab_broker_down_is_unknown_with_reason(lab: Lab) -> None:
    lab.add_host("n8", sshd=False)
    cfg = lab.config()
    lab.stop(lab.redis)
    proc = fleetcheck("run", "-c", str(cfg), "--format", "json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 3
    assert {r["status"] for r in report["results"]} == {"UNKNOWN"}
    reasons = {r["summary"] for r in report["results"]}
    assert len(reasons) == 1  # one cause, told by every row (no `broker` row to be CRIT)
    reason = reasons.pop()
    assert reason.startswith("could not look: ") and "refused the connection" in reason
    assert {r["cause"] for r in report["results"]} == {reason.removeprefix("could not look: ")}
