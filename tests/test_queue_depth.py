"""queue_depth: the verdict table (pure), then LLEN/LINDEX on a real redis-server."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from fleetcheck.checks.queue_depth.check import CHECK, Head, QueueDepthConfig, QueueFacts, read_head

from fleetcheck.config import ConfigError, from_dict
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.errors import CheckError
from fleetcheck.core.model import Status
from tests.lab import Lab

NOW = datetime(2026, 11, 29, 6, 21, tzinfo=UTC)
T = NOW.timestamp()


def cfg(**kw: object) -> QueueDepthConfig:
    base: dict[str, object] = {"keys": ("q:pending", "q:inflight"), "cap": 100}
    base.update(kw)
    return QueueDepthConfig(**base)  # type: ignore[arg-type]


def facts(*samples: tuple[int, int], heads: dict[str, Head] | None = None) -> QueueFacts:
    return QueueFacts(tuple({"q:pending": a, "q:inflight": b} for a, b in samples), heads or {}, T)


@pytest.mark.parametrize(
    ("samples", "config", "status", "summary"),
    [
        (
            [(120, 47)],
            cfg(),
            Status.CRIT,
            "depth 167 > cap 100: the enqueue guard is not holding (q:pending 120, q:inflight 47)",
        ),
        ([(50, 50)], cfg(), Status.WARN, "depth 100 is 100% of cap 100"),
        ([(40, 40)], cfg(), Status.WARN, "depth 80 is 80% of cap 100 (warn at 80%"),
        ([(40, 39)], cfg(), Status.OK, "depth 79 of cap 100 (q:pending 40, q:inflight 39)"),
        ([(0, 0)], cfg(), Status.OK, "depth 0 of cap 100"),
        ([(40, 39)], cfg(warn_at=0.5), Status.WARN, "depth 79 is 79% of cap 100 (warn at 50%"),
        # judged on the max of all samples, every sample reported
        (
            [(60, 53), (100, 67), (100, 65)],
            cfg(),
            Status.CRIT,
            "depth 167 > cap 100: the enqueue guard is not holding (q:pending 100, "
            "q:inflight 67) (samples 113, 167, 165)",
        ),
        ([(10, 0), (101, 0), (10, 0)], cfg(), Status.CRIT, "depth 101 > cap 100"),
    ],
)
def test_depth_verdicts(
    samples: list[tuple[int, int]], config: QueueDepthConfig, status: Status, summary: str
) -> None:
    r = CHECK.evaluate(facts(*samples), config, None, NOW)
    assert r.status is status
    assert r.summary.startswith(summary)
    assert r.metrics["depth"] == max(a + b for a, b in samples)
    assert r.limits["cap"] == 100 and "cap" not in r.metrics
    assert r.evidence["samples"] == [a + b for a, b in samples]
    assert "oldest_wait_s" not in r.metrics


def test_lengths_are_those_of_the_peak_sample() -> None:
    r = CHECK.evaluate(facts((1, 2), (120, 47), (3, 4)), cfg(), None, NOW)
    assert r.metrics["lengths"] == {"q:pending": 120, "q:inflight": 47}


def test_head_of_line_age() -> None:
    heads = {"q:pending": Head(T - 6900, None), "q:inflight": Head(T - 5, None)}
    r = CHECK.evaluate(facts((3, 1), heads=heads), cfg(), None, NOW)
    assert r.status is Status.OK  # no max_wait: reported, not judged
    assert r.metrics["oldest_wait_s"] == 6900
    assert r.evidence["wait_by_key"] == {"q:pending": 6900, "q:inflight": 5}
    assert "oldest head job waited 1h55m (q:pending)" in r.summary
    r = CHECK.evaluate(facts((3, 1), heads=heads), cfg(max_wait=600.0), None, NOW)
    assert r.status is Status.WARN and r.summary.endswith("> max_wait 10m00s")
    r = CHECK.evaluate(facts((3, 1), heads=heads), cfg(max_wait=7200.0), None, NOW)
    assert r.status is Status.OK


def test_unreadable_head_is_unknown_only_when_asked_to_judge_it() -> None:
    heads = {"q:pending": Head(None, "no enqueued_at")}
    r = CHECK.evaluate(facts((3, 0), heads=heads), cfg(), None, NOW)
    assert r.status is Status.OK and r.evidence["head_unreadable"] == {
        "q:pending": "no enqueued_at"
    }
    r = CHECK.evaluate(facts((3, 0), heads=heads), cfg(max_wait=60.0), None, NOW)
    assert r.status is Status.UNKNOWN
    assert "head age unknown for q:pending (no enqueued_at)" in r.summary
    # a broken guard outranks a head we could not read
    r = CHECK.evaluate(facts((300, 0), heads=heads), cfg(max_wait=60.0), None, NOW)
    assert r.status is Status.CRIT


@pytest.mark.parametrize(
    ("raw", "head"),
    [
        (None, None),
        (json.dumps({"enqueued_at": T}).encode(), Head(T, None)),
        (json.dumps({"enqueued_at": "2026-11-29T06:21:00Z"}).encode(), Head(T, None)),
        (b"plain-job-id", Head(None, "not JSON")),
        (b"[1]", Head(None, "not a JSON object")),
        (b"{}", Head(None, "no enqueued_at")),
    ],
)
def test_read_head(raw: bytes | None, head: Head | None) -> None:
    assert read_head(raw, "enqueued_at") == head


def test_read_head_bad_time() -> None:
    got = read_head(b'{"enqueued_at": "later"}', "enqueued_at")
    assert got is not None and got.enqueued_at is None
    assert (got.problem or "").startswith("enqueued_at: not epoch seconds or ISO 8601")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"cap": 100}, "keys: missing"),
        ({"keys": ["a"]}, "cap: missing"),
        ({"keys": [], "cap": 1}, "keys: list at least one queue key"),
        ({"keys": ["a", "a"], "cap": 1}, "keys: a key is listed twice"),
        ({"keys": ["a"], "cap": 0}, "cap: must be 1 or more"),
        ({"keys": ["a"], "cap": "100"}, "cap: expected a whole number"),
        ({"keys": ["a"], "cap": 1, "warn_at": 1.5}, "warn_at: must be a share"),
        ({"keys": ["a"], "cap": 1, "samples": 0}, "samples: must be between 1 and 60"),
        ({"keys": ["a"], "cap": 1, "interval": "2m"}, "interval: must be at most 60s"),
        ({"keys": ["a"], "cap": 1, "max_wait": "0s"}, "max_wait: must be longer than 0s"),
        ({"keys": ["a"], "cap": 1, "push": "sadd"}, "push: expected one of"),
        ({"keys": "a", "cap": 1}, "keys: expected a list"),
    ],
)
def test_config_errors(table: dict[str, object], message: str) -> None:
    data = {"broker": {"url": "redis://127.0.0.1:1"}, "checks": {"queue_depth": table}}
    with pytest.raises(ConfigError, match=message):
        from_dict(
            data,
            "hosts.toml",
            lambda n: QueueDepthConfig if n == "queue_depth" else None,
            lambda names: {},
        )


# ---------------------------------------------------------------- lab
def probe(lab: Lab, checks: str) -> tuple[QueueFacts, object]:
    from fleetcheck.config import load
    from fleetcheck.core import registry

    fleet = load(
        lab.config(checks=checks, hosts=[]), registry.config_type, registry.host_config_types
    )
    ctx = PatrolContext(fleet)
    try:
        config = fleet.checks["queue_depth"]
        f = CHECK.probe(ctx, None, config)
        return f, CHECK.evaluate(f, config, None, ctx.clock())
    finally:
        ctx.close()


QUEUES = """[checks.queue_depth]
keys = ["q:pending", "q:inflight", "q:missing"]
cap = 100
samples = 2
interval = "10ms"
"""


@pytest.mark.lab
def test_real_lengths_missing_key_and_head_age(lab: Lab) -> None:
    r = lab.client()
    old = time.time() - 3600
    r.rpush("q:pending", *[json.dumps({"enqueued_at": old + i}) for i in range(120)])
    r.rpush("q:inflight", *[f"job{i}" for i in range(47)])
    f, result = probe(lab, QUEUES)
    assert f.samples == ({"q:pending": 120, "q:inflight": 47, "q:missing": 0},) * 2
    assert result.status is Status.CRIT  # type: ignore[attr-defined]
    assert result.metrics["depth"] == 167  # type: ignore[attr-defined]
    # the head of an RPUSH queue is index 0: the oldest job
    assert 3599 <= result.metrics["oldest_wait_s"] <= 3700  # type: ignore[attr-defined]
    assert f.heads["q:inflight"] == Head(None, "not JSON")
    assert r.llen("q:pending") == 120 and r.exists("q:missing") == 0  # nothing written


@pytest.mark.lab
def test_lpush_queue_head_is_the_right_end(lab: Lab) -> None:
    r = lab.client()
    now = time.time()
    for age in (900, 600, 5):  # LPUSH: the first pushed (oldest) ends up at the right
        r.lpush("q:pending", json.dumps({"enqueued_at": now - age}))
    f, result = probe(
        lab, '[checks.queue_depth]\nkeys = ["q:pending"]\ncap = 10\nsamples = 1\npush = "lpush"\n'
    )
    assert 899 <= result.metrics["oldest_wait_s"] <= 1000  # type: ignore[attr-defined]


@pytest.mark.lab
def test_wrong_type_is_unknown_with_reason(lab: Lab) -> None:
    lab.client().hset("q:inflight", "a", "b")
    with pytest.raises(CheckError, match=r"^q:inflight is a hash, not a list$"):
        probe(lab, QUEUES)
