"""Fleet membership across rounds (pure): who joined and who left, noted once; and the
inventory row's verdict for each state of its sources."""

from __future__ import annotations

import pytest

from fleetcheck.config import BrokerConfig, FleetConfig, PatrolConfig, SshConfig
from fleetcheck.config.inventory import Found, InventorySpec, SourceStatus
from fleetcheck.core.model import Status
from fleetcheck.rounds.membership import changes, judge_sources, members_path

NOW = "2026-01-05T10:00:00Z"


def test_first_round_notes_nothing() -> None:
    notes, memory = changes(None, {"a": "", "b": "cmdb"}, NOW)
    assert notes == [] and set(memory["hosts"]) == {"a", "b"}


def test_joined_and_left_noted_once() -> None:
    _, mem = changes(None, {"a": "", "b": ""}, NOW)
    notes, mem = changes(mem, {"a": "", "c": "ansible inv"}, "2026-01-05T10:15:00Z")
    assert notes == [
        "c joined the fleet (from ansible inv)",
        "b left the fleet at 2026-01-05T10:15:00Z (its history is kept)",
    ]
    assert mem["left"] == {"b": "2026-01-05T10:15:00Z"}
    again, mem = changes(mem, {"a": "", "c": "ansible inv"}, "2026-01-05T10:30:00Z")
    assert again == []
    back, mem = changes(mem, {"a": "", "b": "", "c": ""}, "2026-01-05T10:45:00Z")
    assert back == ["b joined the fleet"] and mem["left"] == {}


def test_members_file_sits_beside_the_state_file(tmp_path) -> None:
    assert members_path(tmp_path / "state-abc.json") == tmp_path / "members-abc.json"


def _fleet(*statuses: SourceStatus) -> FleetConfig:
    return FleetConfig(
        path="x.toml",
        broker=BrokerConfig(url="redis://127.0.0.1:1"),
        ssh=SshConfig(),
        patrol=PatrolConfig(),
        hosts=(),
        inventory=statuses,
    )


SPEC = InventorySpec(source="command", name="cmdb", run=("x",), max_age=3600.0)
TWO = [Found("a"), Found("b")]


@pytest.mark.parametrize(
    ("status", "verdict", "summary"),
    [
        (SourceStatus(SPEC, TWO), Status.OK, "2 hosts from 1 inventory source(s)"),
        (
            SourceStatus(SPEC, TWO, error="x: exited 1: boom", cached_at=NOW, age_s=600.0),
            Status.WARN,
            "cmdb: x: exited 1: boom; patrolling its last good list (2 hosts, 10m00s old)",
        ),
        (
            SourceStatus(SPEC, TWO, error="x: exited 1: boom", cached_at=NOW, age_s=7200.0),
            Status.UNKNOWN,
            "cmdb: x: exited 1: boom; patrolling its last good list (2 hosts, 2h00m old, "
            "past max_age 1h00m)",
        ),
        (
            SourceStatus(SPEC, [], error="returned no hosts"),
            Status.UNKNOWN,
            "cmdb: returned no hosts; no earlier list: its hosts are not known",
        ),
        (
            SourceStatus(SPEC, TWO, problems=["cmdb: host c: bad; left out", "y"]),
            Status.WARN,
            "cmdb: host c: bad; left out (and 1 more)",
        ),
    ],
)
def test_inventory_row(status: SourceStatus, verdict: Status, summary: str) -> None:
    row = judge_sources(_fleet(status))
    assert row is not None
    assert (row.status, row.summary) == (verdict, summary)
    assert row.host is None and row.check == "inventory"
    if verdict is not Status.OK:
        assert row.evidence_strength is not None


def test_no_inventory_no_row() -> None:
    assert judge_sources(_fleet()) is None
