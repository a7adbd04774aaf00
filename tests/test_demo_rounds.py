"""The demo fleet over 30 rounds: the judgements that read behaviour across rounds (silence,
reconnects, flapping, name patterns, churn, the probe's loop, peers) add no WARN to a fleet
whose only problems are the planted ones, through idling, pops, pollers and one deploy-style
restart. Every row keeps the status it had in the first round."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleetcheck.config import load
from fleetcheck.core import registry
from fleetcheck.core.model import Report, Status
from fleetcheck.core.runner import plan
from fleetcheck.lab.behaviours import start_chatty
from fleetcheck.lab.demo import build
from fleetcheck.rounds.patrol import Outputs, one_round
from tests.conftest import _require_lab
from tests.lab import wait_for

pytestmark = pytest.mark.lab


def test_demo_fleet_thirty_rounds_no_new_alarm(tmp_path: Path) -> None:
    _require_lab()
    demo = build(netns=True)
    try:
        lab = demo.lab
        laptop = lab.hosts["laptop"]
        # a second kind of worker on laptop (5 of its 9 connections), restarted once mid-way
        # like a deploy
        deployed = start_chatty(lab, laptop, 5, "deployed", every=1.0)
        fleet = load(demo.config, registry.config_type, registry.host_config_types)
        items = plan(fleet, registry.available())
        state = tmp_path / "state.json"
        first: dict[tuple[str, str | None], Status] = {}
        notes: list[str] = []
        last = 0.0
        for i in range(30):
            if i:
                gap = 2.5 if i == 15 else 1.0
                wait_for(lambda: time.monotonic() >= last + gap, gap + 5, "time to pass")  # noqa: B023
            if i == 15:
                lab.stop(deployed)
                deployed = start_chatty(lab, laptop, 5, "deployed", every=1.0)
            report: Report = one_round(fleet, items, Outputs(state=state))
            last = time.monotonic()
            rows = {(r.check, r.host): r for r in report.results}
            for r in rows.values():  # every row not OK says how strong its evidence is
                assert r.status is Status.OK or r.evidence_strength, r
            if not first:
                first = {k: r.status for k, r in rows.items()}
                # the planted incidents are there from the first round
                assert first[("clients", "mini")] is Status.CRIT
                assert first[("routes", "mini")] is Status.CRIT
                assert first[("rater_probe", None)] is Status.OK
                continue
            changed = {
                k: f"{first.get(k)} -> {r.status}: {r.summary}"
                for k, r in rows.items()
                if r.status is not first.get(k)
            }
            assert changed == {}, (i, changed)
            notes += [
                f"{i}:{r.host}"
                for r in rows.values()
                if r.check == "clients" and "reconnected at" in r.summary
            ]
        assert notes == ["15:laptop"], notes  # the restart was seen, once, as a note
    finally:
        demo.lab.close()
