"""clients over rounds on the lab: real redis-server, real processes holding real connections
from namespace hosts, rounds run through the patrol's own round (state file between them).
Silence, waiting in BLPOP, reconnects and flapping, churn, and 30 healthy rounds."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetcheck.config import load
from fleetcheck.core import registry
from fleetcheck.core.model import Report, Result, Status
from fleetcheck.core.runner import plan
from fleetcheck.lab.behaviours import start_blocking, start_chatty
from fleetcheck.rounds.patrol import Outputs, one_round
from tests.lab import Lab, start_churn, wait_for


class Rounds:
    """Patrols of one config, one after another, remembering through one state file."""

    def __init__(self, cfg: Path, state: Path) -> None:
        self.fleet = load(cfg, registry.config_type, registry.host_config_types)
        self.items = plan(self.fleet, registry.available())
        self.state = state
        self.last = 0.0

    def __call__(self) -> dict[str | None, Result]:
        report: Report = one_round(self.fleet, self.items, Outputs(state=self.state))
        self.last = time.monotonic()
        rows = {r.host: r for r in report.results if r.check == "clients"}
        for r in rows.values():  # every row not OK says how strong its evidence is
            assert r.status is Status.OK or r.evidence_strength, r
        return rows

    def apart(self, seconds: float) -> None:
        """Wait until `seconds` have passed since the last round (rounds a little apart)."""
        wait_for(lambda: time.monotonic() >= self.last + seconds, seconds + 5, "time to pass")


def idle_of(lab: Lab, prefix: str) -> list[int]:
    with lab.client() as r:  # closed: the test's own connection is no stray client
        return [int(c["idle"]) for c in r.client_list() if c["name"].startswith(prefix)]


def received(lab: Lab) -> int:
    with lab.client() as r:
        return int(r.info("stats")["total_connections_received"])


@pytest.mark.lab
def test_lab_silent_host_warns_then_crit_while_jobs_wait(lab: Lab, tmp_path: Path) -> None:
    n8 = lab.add_host("n8", sshd=False)
    proc = start_chatty(lab, n8, 4, "poller", every=1.0)
    # the per-host override lets the test see ~5 s of silence instead of 45; the default
    # (30s) is proved by test_clients_behaviour.test_silence
    cfg = lab.config(
        checks='[checks.clients]\n[checks.queue_depth]\nkeys = ["lab:jobs"]\ncap = 100\n',
        host_extra={"n8": 'silent_after = "4s"'},
    )
    rounds = Rounds(cfg, tmp_path / "state.json")
    first = rounds()
    assert first["n8"].status is Status.OK, first["n8"].summary
    assert first["n8"].metrics["quiet_s"] <= 2
    lab.freeze(proc)  # alive, connections open, loop stopped
    wait_for(lambda: min(idle_of(lab, "poller")) >= 6, 20, "the pollers to be silent 6s")
    rows = rounds()
    assert rows["n8"].status is Status.WARN, rows["n8"].summary
    assert "silent: none of its 4 connections has sent a command for" in rows["n8"].summary
    assert rows["n8"].evidence_strength == "behaviour"
    with lab.client() as r:
        r.rpush("lab:jobs", "job-1", "job-2", "job-3")
    rows = rounds()
    assert rows["n8"].status is Status.CRIT, rows["n8"].summary
    assert "while 3 jobs wait in the queues" in rows["n8"].summary
    lab.thaw(proc)
    wait_for(lambda: min(idle_of(lab, "poller")) <= 1, 20, "the pollers to speak again")
    assert rounds()["n8"].status is Status.OK


@pytest.mark.lab
def test_lab_blocked_in_blpop_is_healthy_at_any_idle(lab: Lab, tmp_path: Path) -> None:
    n8 = lab.add_host("n8", sshd=False)
    start_blocking(lab, n8, 3, "consumer", key="lab:empty", timeout=0)
    cfg = lab.config(host_extra={"n8": 'silent_after = "2s"'})  # strict: idle passes it
    rounds = Rounds(cfg, tmp_path / "state.json")
    assert rounds()["n8"].status is Status.OK
    wait_for(lambda: min(idle_of(lab, "consumer")) >= 4, 20, "the consumers idle 4s in BLPOP")
    rows = rounds()
    assert rows["n8"].status is Status.OK, rows["n8"].summary
    assert rows["n8"].metrics["waiting"] == 3
    assert rows["n8"].metrics["quiet_s"] >= 4


@pytest.mark.lab
def test_lab_reconnects_note_then_flapping_warns(lab: Lab, tmp_path: Path) -> None:
    n8 = lab.add_host("n8", sshd=False)
    proc = start_chatty(lab, n8, 3, "poller")
    rounds = Rounds(lab.config(), tmp_path / "state.json")
    assert rounds()["n8"].status is Status.OK
    seen = []
    for i in range(3):
        rounds.apart(2.5)  # new connections must be younger than the gap by a second
        lab.stop(proc)
        made = datetime.now(UTC)  # the new connections are made between these two
        proc = start_chatty(lab, n8, 3, "poller")
        ready = datetime.now(UTC)
        rows = rounds()
        seen.append(rows["n8"])
        if i < 2:
            assert rows["n8"].status is Status.OK, rows["n8"].summary
        m = re.search(r"reconnected at (\d\d:\d\d:\d\d) UTC", rows["n8"].summary)
        assert m is not None, rows["n8"].summary
        stamp = datetime.combine(made.date(), datetime.strptime(m[1], "%H:%M:%S").time(), UTC)
        # an order, not a timing: the summary's time lies between the two readings, give or
        # take the whole seconds of CLIENT LIST's ages and of the summary
        second = timedelta(seconds=1)
        assert made.replace(microsecond=0) - second <= stamp <= ready + second, (made, stamp)
        assert "(3 of 3 connections new since the previous round" in rows["n8"].summary
        # the next round without a restart: nothing said
        rounds.apart(2.5)
        quiet = rounds()["n8"]
        assert "reconnected at" not in quiet.summary
        if i < 2:
            assert quiet.status is Status.OK
    assert seen[2].status is Status.WARN
    assert "flapping: reconnected 3 times within 1h" in seen[2].summary
    assert seen[2].evidence_strength == "behaviour"


@pytest.mark.lab
def test_lab_connection_churn_warns_with_the_rate(lab: Lab, tmp_path: Path) -> None:
    """A client opening a connection per request at 40 a second (a short burst: the rule is
    a rate; the 15 s case is in test_clients_behaviour) makes the broker-wide row WARN."""
    n8 = lab.add_host("n8", sshd=False)
    laptop = lab.add_host("laptop", sshd=False)
    start_chatty(lab, n8, 3, "poller")
    rounds = Rounds(lab.config(host_extra={"laptop": "min_clients = 0"}), tmp_path / "state.json")
    assert rounds()[None].status is Status.OK
    before = received(lab)
    churn = start_churn(lab, laptop, 40, 8)
    wait_for(lambda: received(lab) >= before + 120, 20, "120 short-lived connections")
    rows = rounds()
    broker = rows[None]
    assert broker.status is Status.WARN, broker.summary
    m = re.search(r"connection churn: ([\d.]+) new connections/s over the last", broker.summary)
    assert m is not None and float(m[1]) >= 15, broker.summary
    assert broker.evidence_strength == "behaviour"
    assert "youngest from" in broker.summary or broker.evidence["churn"]["youngest_by_addr"] == {}
    assert rows["n8"].status is Status.OK and rows["laptop"].status is Status.OK
    churn.wait(timeout=30)


@pytest.mark.lab
def test_lab_thirty_healthy_rounds_no_false_alarm(lab: Lab, tmp_path: Path) -> None:
    """Workers blocking in pops (forever and with a timeout), idling, commanding every
    second, and one deploy-style restart, over 30 rounds about a second apart: no WARN."""
    n8 = lab.add_host("n8", sshd=False)
    laptop = lab.add_host("laptop", sshd=False)
    mini = lab.add_host("mini", sshd=False)
    start_blocking(lab, n8, 4, "consumer", key="lab:empty", timeout=0)
    start_blocking(lab, n8, 4, "short-pop", key="lab:empty2", timeout=1)
    pollers = start_chatty(lab, laptop, 4, "poller")
    start_chatty(lab, mini, 1, "mini-poller", every=1.0)
    lab.start_workers(mini, 3, "idle-pool")
    lab.start_workers(n8, 2, "idle")
    rounds = Rounds(lab.config(), tmp_path / "state.json")
    notes: list[str] = []
    for i in range(30):
        if i:
            rounds.apart(1.0 if i != 15 else 2.5)
        if i == 15:  # a deploy: every poller on laptop killed and started again
            lab.stop(pollers)
            pollers = start_chatty(lab, laptop, 4, "poller")
        rows = rounds()
        bad = {h: r.summary for h, r in rows.items() if r.status is not Status.OK}
        assert bad == {}, (i, bad)
        notes += [f"{i}:{h}" for h, r in rows.items() if "reconnected at" in r.summary]
    assert notes == ["15:laptop"]  # the restart was seen, once, as a note
