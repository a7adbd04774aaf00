"""Guarantees an operator relies on, each proven on the real lab:
read-only (every broker key byte-identical after a full patrol) and no secret in any output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetcheck.core import registry
from tests.lab import Lab

pytestmark = pytest.mark.lab

# Every registered check, each with its declared example table (what hosts.example.toml
# shows), but for these, kept short so a patrol takes seconds
QUICKER = {
    "queue_depth": 'keys = ["arena:queue", "arena:queue:processing"]\ncap = 100\nsamples = 2\n'
    'interval = "0.1s"',
    "rater_probe": 'inbox = "arena:rater:inbox"\ntimeout = "2s"',
}


def all_checks() -> str:
    tables = []
    for name, check in registry.available().items():
        quicker = QUICKER.get(name)
        tables.append(f"[checks.{name}]\n{quicker}" if quicker else check.example)
    return "\n".join(tables) + "\n"


def fc(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def dump_all(lab: Lab, **kw: object) -> dict[bytes, bytes]:
    r = lab.client(**kw)
    out = {key: r.dump(key) for key in r.scan_iter(count=1000)}
    r.close()
    return out


def seed(lab: Lab, **kw: object) -> None:
    r = lab.client(**kw)
    now = time.time()
    r.hset(
        "arena:live",
        mapping={
            "fresh": json.dumps({"started_at": now, "host": "n8"}),
            "old": json.dumps({"started_at": now - 5000, "host": "mini"}),
            "bad": "garbage",
        },
    )
    r.rpush("arena:queue", *[json.dumps({"enqueued_at": now - i}) for i in range(120)])
    r.rpush("arena:queue:processing", "x", "y")
    r.rpush("arena:rater:inbox", "older-envelope-1", "older-envelope-2")
    r.set("unrelated:string", "keep me")
    r.zadd("unrelated:zset", {"a": 1.0})
    r.close()


def fleet(lab: Lab) -> Path:
    n8 = lab.add_host("n8")
    mini = lab.add_host("mini")
    lab.add_interface(mini, "eth1", metric=300)
    now = time.time()
    for h in (n8, mini):
        log = h.log_path("worker.log")
        log.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ INFO tick\n", time.gmtime(now)))
    lab.start_workers(n8, 3)
    # every check's declared per-host keys on both hosts (the test writes logs and the lab
    # addrs itself), so every check has rows
    own = "".join(
        "\n" + c.host_example
        for name, c in registry.available().items()
        if name not in ("clients", "logs")
    )
    extra = {
        h.name: f'tz = "UTC"\nlogs = [{{ path = "{h.log_path("worker.log")}" }}]' + own
        for h in (n8, mini)
    }
    return lab.config(checks=all_checks(), host_extra=extra)


@pytest.mark.parametrize("rater", ["running", "absent"])
def test_full_patrol_is_read_only(lab: Lab, rater: str) -> None:
    cfg = fleet(lab)
    seed(lab)
    if rater == "running":
        # The rater takes the two older envelopes too: drain them first, so "before" is the
        # state the probe sees and only our own envelope can pass through.
        lab.start_rater(inbox="arena:rater:inbox")
        r = lab.client()
        from tests.lab import wait_for

        wait_for(lambda: r.llen("arena:rater:inbox") == 0, 10, "rater to drain the inbox")
        r.close()
    before = dump_all(lab)
    proc = fc("run", "-c", str(cfg), "--format", "json", "--no-state")
    report = json.loads(proc.stdout)
    checks = {r["check"] for r in report["results"]}
    assert checks == set(registry.available())  # every check ran (the list: the registry)
    probe = [r for r in report["results"] if r["check"] == "rater_probe"][0]
    assert probe["evidence"]["consumed"] is (rater == "running")
    assert dump_all(lab) == before


SECRET = "s3cret-Pa55word"


@pytest.fixture
def secured_lab() -> Lab:
    from tests.conftest import _require_lab

    _require_lab()
    with Lab(redis_args=["--requirepass", SECRET]) as the_lab:
        yield the_lab


@pytest.mark.parametrize("where", ["env", "url"])
def test_no_secret_in_any_output(secured_lab: Lab, where: str, tmp_path: Path) -> None:
    lab = secured_lab
    cfg = fleet(lab)
    seed(lab, password=SECRET)
    text = cfg.read_text()
    if where == "env":
        text = text.replace("[broker]\n", '[broker]\npassword_env = "FC_TEST_PW"\n', 1)
    else:
        text = text.replace("redis://", f"redis://:{SECRET}@", 1)
    cfg.write_text(text)
    env = {"FC_TEST_PW": SECRET}
    outputs = []
    for fmt in ("json", "plain", "table", "nagios", "prometheus"):
        proc = fc("--debug", "run", "-c", str(cfg), "--format", fmt, "--no-state", env=env)
        outputs.append(proc.stdout + proc.stderr)
    report = json.loads(fc("run", "-c", str(cfg), "--format", "json", "--no-state", env=env).stdout)
    assert {r["check"] for r in report["results"] if r["status"] == "UNKNOWN"} == set()
    outputs.append(fc("config", "check", "-c", str(cfg), env=env).stdout)
    # Wrong password: the error names the problem, not the password.
    wrong = cfg.read_text().replace(SECRET, SECRET + "-wrong")
    bad_cfg = tmp_path / "bad.toml"
    bad_cfg.write_text(wrong)
    proc = fc(
        "--debug",
        "run",
        "-c",
        str(bad_cfg),
        "--format",
        "json",
        "--no-state",
        env={"FC_TEST_PW": SECRET + "-wrong"},
    )
    outputs.append(proc.stdout + proc.stderr)
    bad = json.loads(proc.stdout)
    broker_rows = [r for r in bad["results"] if r["check"] in ("broker", "live_hash", "clients")]
    assert broker_rows and all(r["status"] == "UNKNOWN" for r in broker_rows)
    assert all(
        "WRONGPASS" in r["summary"]
        or "invalid" in r["summary"].lower()
        or "auth" in r["summary"].lower()
        for r in broker_rows
    )
    for out in outputs:
        assert SECRET not in out
