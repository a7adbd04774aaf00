"""The groups check: a pool judged as a pool ([groups.NAME] min_hosts, min_group_clients).
evaluate table-tested; on the lab, a group of 10 with 8 connected hosts and min_hosts = 10."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fleetcheck.checks.groups.check import CHECK, GroupFacts, GroupsConfig

from fleetcheck.config import ConfigError, load
from fleetcheck.core import registry
from fleetcheck.core.model import Status
from tests.cli import fleetcheck
from tests.lab import Lab

NOW = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


def members(up: int, down: int, blind: int = 0) -> dict[str, int | None]:
    out: dict[str, int | None] = {f"w{i:02d}": 2 for i in range(1, up + 1)}
    out.update({f"w{i:02d}": 0 for i in range(up + 1, up + down + 1)})
    out.update({f"x{i}": None for i in range(1, blind + 1)})
    return out


@pytest.mark.parametrize(
    ("facts", "status", "summary"),
    [
        (
            [GroupFacts("workers", 10, 0, members(10, 0))],
            Status.OK,
            "10 of 10 workers connected to the broker",
        ),
        (
            [GroupFacts("workers", 10, 0, members(8, 2))],
            Status.WARN,
            "8 of 10 workers connected to the broker (min_hosts 10); missing: w09, w10",
        ),
        (
            [GroupFacts("workers", 10, 0, members(4, 6))],
            Status.CRIT,
            "4 of 10 workers connected to the broker (min_hosts 10); missing: w05, w06, w07, "
            "w08, w09, w10",
        ),
        (
            [GroupFacts("workers", 3, 0, members(2, 0, 1))],
            Status.UNKNOWN,
            "2 of 3 workers connected to the broker (min_hosts 3); 1 without addresses to "
            "count by: x1",
        ),
        (
            [GroupFacts("a", 1, 0, members(1, 0)), GroupFacts("b", 0, 10, members(2, 1))],
            Status.WARN,
            "2 of 3 b connected to the broker; 4 broker connections, fewer than "
            "min_group_clients 10",
        ),
        (
            [GroupFacts("big", 300, 0, members(288, 12))],
            Status.WARN,
            "288 of 300 big connected to the broker (min_hosts 300); missing: w289, w290, "
            "w291, w292, w293, w294, w295, w296, w297, w298 and 2 more",
        ),
    ],
)
def test_evaluate(facts: list[GroupFacts], status: Status, summary: str) -> None:
    row = CHECK.evaluate(facts, GroupsConfig(), None, NOW)
    assert (row.status, row.summary) == (status, summary)


def test_min_hosts_only_in_a_group_table(tmp_path: Path) -> None:
    path = tmp_path / "hosts.toml"
    path.write_text('[broker]\nurl = "redis://127.0.0.1:1"\n[[hosts]]\nname = "a"\nmin_hosts = 3\n')
    with pytest.raises(ConfigError, match=r"\[hosts\[0\] a\] min_hosts: a group's expectation"):
        load(path, registry.config_type, registry.host_config_types)


@pytest.mark.lab
def test_a_group_of_ten_with_eight_connected(tmp_path: Path) -> None:
    with Lab(netns=False) as lab:
        hosts = [lab.add_host(f"w{i:02d}") for i in range(1, 11)]
        for h in hosts[:8]:
            lab.start_workers(h, 1)
        config = lab.config(
            checks="[checks.clients]\n[checks.groups]\n",
            extra="[groups.workers]\nmin_hosts = 10\n",
            host_extra={h.name: 'groups = ["workers"]' for h in hosts},
        )
        out = fleetcheck("run", "-c", str(config), "--format", "json", "--no-state")
        rows = {(r["check"], r["host"]): r for r in json.loads(out.stdout)["results"]}
        row = rows[("groups", None)]
        assert row["status"] == "WARN", row
        assert row["summary"] == (
            "8 of 10 workers connected to the broker (min_hosts 10); missing: w09, w10"
        )
        assert rows[("clients", "w09")]["status"] == "CRIT"  # the per-host rows say which
