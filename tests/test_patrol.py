"""Sharding and the history file (pure, plus a real file on disk)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleetcheck.config import HostConfig
from fleetcheck.core.model import BROKER_WIDE, Report, Result, Status
from fleetcheck.rounds import history
from fleetcheck.rounds.patrol import in_shard, parse_shard


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_shards_partition_hosts_deterministically(n: int) -> None:
    hosts = [HostConfig(name=f"host{i}") for i in range(200)]
    owners = [[i for i in range(1, n + 1) if in_shard(h, (i, n))] for h in hosts]
    assert all(len(o) == 1 for o in owners)  # every host in exactly one shard
    if n > 1:
        sizes = [sum(1 for o in owners if o == [i]) for i in range(1, n + 1)]
        assert min(sizes) > 200 / n / 2  # roughly even
    assert [in_shard(None, (i, n)) for i in range(1, n + 1)] == [True] + [False] * (n - 1)


@pytest.mark.parametrize("text", ["0/2", "3/2", "1/0", "a/b", "1", "1/2/3"])
def test_bad_shard(text: str) -> None:
    with pytest.raises(ValueError, match="--shard"):
        parse_shard(text)


def rep(minute: int, status: Status) -> Report:
    return Report(
        f"2026-11-29T10:{minute:02d}:00.000Z",
        0.2,
        (Result("clients", "mini", status, "s"), Result("broker", None, Status.OK, "ok")),
    )


def test_history_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history.append(rep(0, Status.OK), path)
    history.append(rep(1, Status.CRIT), path)
    rounds, bad = history.load(path)
    assert bad == 0
    assert [r.hosts["mini"] for r in rounds] == [Status.OK, Status.CRIT]
    lines = history.timeline(rounds)
    assert lines == [(BROKER_WIDE, [Status.OK, Status.OK]), ("mini", [Status.OK, Status.CRIT])]
    assert history.went_dark(rounds, "mini") == datetime(2026, 11, 29, 10, 1, tzinfo=UTC)
    since = datetime(2026, 11, 29, 10, 1, tzinfo=UTC)
    assert len(history.load(path, since)[0]) == 1
    assert rounds[0].rows[0] == {
        "check": "clients",
        "host": "mini",
        "status": "OK",
        "summary": "s",
        "metrics": {},  # the console charts these
    }
    only = history.load(path, host="mini")[0]
    assert [r.hosts for r in only] == [{"mini": Status.OK}, {"mini": Status.CRIT}]
    assert [r.hosts for r in history.load(path, host=BROKER_WIDE)[0]][0] == {BROKER_WIDE: Status.OK}
    # the newest round is also kept whole beside the history (what `serve` shows)
    latest = history.read_latest(history.latest_path(path))
    assert latest["schema"] == "fleetcheck.report/3" and latest["status"] == "CRIT"
    assert history.latest_path(path).stat().st_mode & 0o077 == 0  # evidence stays private
