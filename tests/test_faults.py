"""Fault matrix, broker side: each fault gives its own verdict and reason, the exit code
follows, and the patrol ends within its deadline (a generous bound; timings live in bench/)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import fleetcheck
from tests.lab import Lab, run, wait_for

pytestmark = pytest.mark.lab

BROKER_CHECKS = """
[checks.clients]
[checks.live_hash]
key = "arena:live"
[checks.queue_depth]
keys = ["arena:queue"]
cap = 100
samples = 1
[checks.broker]
"""


def patrol(
    cfg: Path, *extra: str, env: dict[str, str] | None = None, hang: float = 120
) -> tuple[dict, int]:
    """A patrol's JSON report and exit code. `hang` is a hang guard (the subprocess's
    timeout), not a timing: the rows say which timeout or deadline ended each wait."""
    proc = fleetcheck(
        "run", "-c", str(cfg), "--format", "json", "--no-state", *extra, env=env, timeout=hang
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    assert report["exit_code"] == proc.returncode
    return report, proc.returncode


def rows(report: dict) -> dict:
    return {(r["check"], r["host"]): r for r in report["results"]}


def broker_is_the_failure(report: dict, words: str, strength: str) -> str:
    """A broker that is down: CRIT on the `broker` row, "could not look" on every other
    broker row, all under one cause that the broker row's summary states; exit 2."""
    by = rows(report)
    broker = by[("broker", None)]
    assert broker["status"] == "CRIT", broker
    assert words in broker["summary"].lower(), broker
    assert broker["evidence_strength"] == strength
    cause = broker["cause"]
    assert cause and cause == broker["summary"]
    others = [r for key, r in by.items() if key != ("broker", None)]
    assert others
    for r in others:
        assert r["status"] == "UNKNOWN", r
        assert r["summary"] == f"could not look: {cause}", r
        assert r["cause"] == cause and r["evidence_strength"] == "absence"
    assert report["exit_code"] == 2
    return cause


def test_broker_refused(lab: Lab) -> None:
    lab.add_host("n8", sshd=False)
    cfg = lab.config(checks=BROKER_CHECKS)
    lab.stop(lab.redis)
    report, code = patrol(cfg)
    assert code == 2
    broker_is_the_failure(report, "refused the connection", "proof")


def test_broker_hung_is_crit_on_the_broker_row(lab: Lab) -> None:
    """A broker that accepts connections (the kernel does it for a stopped process) but
    answers nothing: CRIT on the broker row within its timeouts, the other rows grouped
    under the same cause, exit 2 (issue 24); the table shows the cause once."""
    n8 = lab.add_host("n8", sshd=False)
    lab.start_workers(n8, 2)
    cfg = lab.config(checks=BROKER_CHECKS)
    text = cfg.read_text().replace(
        'connect_timeout = "2s"', 'connect_timeout = "2s"\nsocket_timeout = "1s"', 1
    )
    cfg.write_text(text)
    lab.freeze(lab.redis)
    try:
        report, code = patrol(cfg)
        table = fleetcheck("run", "-c", str(cfg), "--format", "plain", "--no-state")
    finally:
        lab.thaw(lab.redis)
    assert code == 2
    cause = broker_is_the_failure(report, "did not answer within socket_timeout 1s", "proof")
    assert table.returncode == 2
    assert " ".join(table.stdout.split()).count(cause) == 1, table.stdout  # told once
    assert "could not look" in table.stdout


def test_broker_link_down_no_route(lab: Lab) -> None:
    """The broker URL points into a lab namespace whose link is down: no route to host."""
    ghost = lab.add_host("ghost", sshd=False)
    lab.link_down(ghost)
    cfg = lab.config(checks=BROKER_CHECKS, hosts=[])
    cfg.write_text(cfg.read_text().replace(lab.broker_url, f"redis://{ghost.addr}:6379/0"))
    # the kernel says "no route" when its neighbour lookup gives up: by default 3 probes a
    # second apart, longer than connect_timeout 2s, so the verdict hung on whether the retry
    # started within that last second (a loaded CI run's did not). One probe of 0.3 s on the
    # lab's bridge: the answer under test comes well inside the timeout
    knobs = Path(f"/proc/sys/net/ipv4/neigh/{lab.bridge}")
    kept = {k: (knobs / k).read_text() for k in ("mcast_solicit", "retrans_time_ms")}
    (knobs / "mcast_solicit").write_text("1")
    (knobs / "retrans_time_ms").write_text("300")
    try:
        report, code = patrol(cfg)
    finally:
        for k, v in kept.items():
            (knobs / k).write_text(v)
    assert code == 2
    broker_is_the_failure(report, "no route", "inference")


def test_broker_blackholed_connect_timeout(lab: Lab) -> None:
    """Packets to the broker vanish (a lab neighbour entry to a MAC nobody has): the connect
    times out after connect_timeout instead of hanging."""
    ghost = lab.add_host("ghost", sshd=False)
    run(
        "ip",
        "neigh",
        "replace",
        ghost.addr,
        "lladdr",
        "02:00:00:00:00:01",
        "dev",
        lab.bridge,
        "nud",
        "permanent",
    )
    cfg = lab.config(checks=BROKER_CHECKS, hosts=[])
    cfg.write_text(cfg.read_text().replace(lab.broker_url, f"redis://{ghost.addr}:6379/0"))
    report, code = patrol(cfg)
    assert code == 2
    broker_is_the_failure(
        report, "did not accept a connection within connect_timeout 2s", "inference"
    )


def test_acl_user_without_client_list(lab: Lab) -> None:
    n8 = lab.add_host("n8", sshd=False)
    lab.start_workers(n8, 2)
    r = lab.client()
    r.execute_command(
        "ACL", "SETUSER", "limited", "on", ">pw", "~*", "+@all", "-client|list", "-client|kill"
    )
    r.close()
    cfg = lab.config(checks=BROKER_CHECKS)
    cfg.write_text(cfg.read_text().replace("redis://", "redis://limited:pw@", 1))
    report, code = patrol(cfg)
    by = rows(report)
    assert by[("clients", "n8")]["status"] == "UNKNOWN"
    assert (
        "NOPERM" in by[("clients", "n8")]["summary"]
        or "permission" in by[("clients", "n8")]["summary"].lower()
    )
    assert by[("queue_depth", None)]["status"] == "OK"
    assert by[("broker", None)]["status"] != "UNKNOWN"
    assert "pw@" not in json.dumps(report)


def test_broker_paused_within_deadline(lab: Lab) -> None:
    lab.add_host("n8", sshd=False)
    cfg = lab.config(checks=BROKER_CHECKS, patrol='deadline = "8s"\n')
    r = lab.client()
    # paused far longer than the hang guard: only the deadline can end this patrol (a 10 s
    # pause let a slowly starting patrol see the broker again before its deadline)
    r.execute_command("CLIENT", "PAUSE", "120000", "ALL")
    try:
        report, code = patrol(cfg, hang=90)
    finally:
        r.close()
        lab.stop(lab.redis)  # paused, it would hold CLIENT UNPAUSE too
    # the deadline (8s) comes before socket_timeout (5s) and its one retry have run out:
    # nothing could conclude, every row says so under the one cause, the deadline
    assert code == 3
    assert {x["status"] for x in report["results"]} == {"UNKNOWN"}
    assert {x["cause"] for x in report["results"]} == {
        "the patrol deadline (8s) came before these rows finished"
    }


def test_broker_killed_mid_patrol(lab: Lab) -> None:
    """The broker dies while the patrol is connected and sampling: UNKNOWN, exit 3, no hang.
    The kill waits for the patrol's own connection in CLIENT LIST (not a timer)."""
    n8 = lab.add_host("n8", sshd=False)
    lab.start_workers(n8, 1)
    checks = BROKER_CHECKS.replace("samples = 1", 'samples = 5\ninterval = "0.5s"')
    cfg = lab.config(checks=checks)
    r = lab.client()
    r.rpush("arena:queue", "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "fleetcheck", "run", "-c", str(cfg), "-f", "json", "--no-state"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the patrol is connected and its queue sampling (2 s of it) has begun
        wait_for(lambda: lab.client_named("fleetcheck"), 20, "the patrol's broker connection")
        assert proc.poll() is None, "the patrol ended before the broker could be killed"
        lab.stop(lab.redis)
        out, err = proc.communicate(timeout=60)  # a hang guard, not a timing
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in err, err
    report = json.loads(out)
    by = rows(report)
    assert by[("queue_depth", None)]["status"] == "UNKNOWN", by[("queue_depth", None)]
    # the broker row saw it healthy (OK) or gone (CRIT), whichever came first
    expected = 2 if by[("broker", None)]["status"] == "CRIT" else 3
    assert proc.returncode == report["exit_code"] == expected


def test_keys_of_wrong_type(lab: Lab) -> None:
    lab.start_workers(lab.add_host("n8", sshd=False), 1)
    cfg = lab.config(checks=BROKER_CHECKS)
    r = lab.client()
    r.set("arena:live", "a string, not a hash")
    r.hset("arena:queue", "f", "v")
    report, code = patrol(cfg)
    by = rows(report)
    assert by[("live_hash", None)]["status"] == "UNKNOWN"
    assert "string" in by[("live_hash", None)]["summary"]
    assert by[("queue_depth", None)]["status"] == "UNKNOWN"
    assert "hash" in by[("queue_depth", None)]["summary"]
    assert by[("broker", None)]["status"] == "OK"
    assert code == 3
