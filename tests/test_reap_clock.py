"""Issue 22, items 2 and 6, on a real redis-server: reap-live and the live_hash check judge
time by evidence (the broker's TIME, the owner's live connections), and one value the JSON
parser cannot take is one unreadable entry, never a blind row or a failed reap.

Each test below failed on the code before the fix (checked by stashing it):
- item 2, clock ahead: the old reap-live aged on the local clock and deleted the 10 entries
  (exit 0, HLEN 30); the check counted them stale.
- item 2, worker clock behind and --force: the old reap-live deleted the connected owner's
  entries without a word (the kept-line assertion and HLEN failed).
- item 6: the check's row was UNKNOWN ("internal error"/RecursionError) and reap-live exited 3.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleetcheck.checks.live_hash import CHECK
from fleetcheck.checks.live_hash.evidence import BrokerClock, clock_refusal
from fleetcheck.checks.live_hash.reaper import reap_live_command

from fleetcheck.config import load
from fleetcheck.core import registry
from fleetcheck.core.context import TEST_CLOCK_ENV
from fleetcheck.core.model import Status
from fleetcheck.parse.live_entry import UNREADABLE, read_entry
from tests.lab import Lab

FLEETCHECK = str(Path(sys.executable).with_name("fleetcheck"))
KEY = "arena:live"
AHEAD = 360.0  # the incident: the patrol machine's clock six minutes ahead


def cli(
    cfg: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FLEETCHECK, "reap-live", "-c", str(cfg), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def incident(lab: Lab, owner: str = "n8", age: float = 570.0) -> None:
    """The issue's hash: 30 fresh matches and 10 of `age` (inside the 600 s match wall,
    counted on the broker's clock) owned by `owner`: 25 % of the hash, under the guard's
    share limit."""
    now = float(lab.client().time()[0])
    live = {f"fresh{i}": json.dumps({"started_at": now - 20 - i, "host": owner}) for i in range(30)}
    live |= {f"ten{i}": json.dumps({"started_at": now - age, "host": owner}) for i in range(10)}
    lab.client().hset(KEY, mapping=live)


def fleet_of(cfg: Path):  # type: ignore[no-untyped-def]
    return load(cfg, registry.config_type, registry.host_config_types)


# ---------------------------------------------------------------- item 2: pure parts
@pytest.mark.parametrize(
    ("offset", "error", "refused"),
    [
        (0.0, 0.001, False),
        (-59.0, 0.5, False),
        (59.0, 2.0, True),  # may be past the limit: the error counts against the clock
        (-AHEAD, 0.001, True),  # the patrol machine ahead
        (AHEAD, 0.001, True),  # behind
        (-86400 * 365.0, 0.001, True),
    ],
)
def test_item2_clock_refusal_bound(offset: float, error: float, refused: bool) -> None:
    why = clock_refusal(BrokerClock(offset, error), 60.0)
    assert (why is not None) is refused
    if why is not None:
        side = "ahead of" if offset < 0 else "behind"
        assert f" {side} the broker's" in why and "max_clock_skew 1m00s" in why


# ---------------------------------------------------------------- item 2: on the lab's broker
@pytest.mark.lab
def test_item2_patrol_clock_ahead_refuses_and_deletes_nothing(
    lab: Lab, capsys: pytest.CaptureFixture[str]
) -> None:
    incident(lab, owner="mini")  # an owner fleetcheck cannot place: the clock alone decides
    fleet = fleet_of(lab.config(checks="", hosts=[]))
    out = io.StringIO()
    code = reap_live_command(fleet, apply=True, out=out, now=time.time() + AHEAD)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3, out.getvalue()
    assert len(err) == 1 and err[0].startswith("fleetcheck: error: reap-live refuses: ")
    assert "the patrol machine's clock is 6m00s ahead of the broker's" in err[0]
    assert "nothing deleted" in err[0]
    assert lab.client().hlen(KEY) == 40
    # ages were the broker's: none of the ten is stale, so a dry run lists nothing
    assert out.getvalue().splitlines()[0] == (
        "arena:live: 40 entries scanned, 0 stale (0 older than 15m00s, 0 malformed)"
    )
    # the same through the command, the patrol clock moved the test-clock way, both signs
    cfg = lab.config(checks="", hosts=[])
    for shift in (AHEAD, -AHEAD, 7 * 86400.0):
        proc = cli(cfg, "--apply", env={TEST_CLOCK_ENV: repr(shift)})
        assert proc.returncode == 3, proc.stdout + proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert "reap-live refuses: the patrol machine's clock is " in line
        assert "guard: REFUSES: the patrol machine's clock is" in proc.stdout
        assert lab.client().hlen(KEY) == 40


@pytest.mark.lab
def test_item2_small_skew_ages_on_the_broker_clock(lab: Lab) -> None:
    """30 s ahead (inside the skew bound): entries 880 s old on the broker's clock look
    910 s old on ours, past max_age; judged on the broker's, they stay."""
    incident(lab, owner="mini", age=880.0)
    fleet = fleet_of(lab.config(checks="", hosts=[]))
    out = io.StringIO()
    assert reap_live_command(fleet, apply=True, out=out, now=time.time() + 30) == 0
    assert out.getvalue().splitlines()[-1] == "removed 0 of 0 stale entries from arena:live"
    assert lab.client().hlen(KEY) == 40


@pytest.mark.lab
def test_item2_check_judges_ages_on_the_broker_clock(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fleetcheck.core.runner import plan, run_patrol

    incident(lab, owner="mini")
    monkeypatch.setenv(TEST_CLOCK_ENV, repr(AHEAD))  # the patrol's clock, as the suite moves it
    fleet = fleet_of(lab.config(checks="[checks.live_hash]\n", hosts=[]))
    (row,) = run_patrol(fleet, plan(fleet, {"live_hash": CHECK})).results
    assert row.status is Status.OK, row.summary
    assert row.metrics["stale"] == 0 and row.metrics["entries"] == 40
    assert row.evidence["clock"].startswith("ages on the broker's clock, 6m00s behind")


@pytest.mark.lab
def test_item2_worker_clock_behind_connected_owner_is_kept(lab: Lab) -> None:
    """n8's clock is 6 minutes behind: its ten running matches look 930 s old by any clock.
    n8 holds 12 broker connections right now, so they are named and kept; mini's three
    zombies (mini is not connected) go."""
    n8 = lab.add_host("n8", sshd=False)
    mini = lab.add_host("mini", sshd=False)
    workers = lab.start_workers(n8, 12)
    try:
        incident(lab, owner="n8", age=570.0 + AHEAD)
        now = float(lab.client().time()[0])
        zombies = {
            f"z{i}": json.dumps({"started_at": now - 7200, "host": "mini"}) for i in range(3)
        }
        lab.client().hset(KEY, mapping=zombies)
        cfg = lab.config(checks="", hosts=[n8, mini])
        proc = cli(cfg, "--apply")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (
            "guard: keeps 10 stale entries whose owner is connected to the broker now: n8 (10) "
            "(their matches may be running; --force deletes them)"
        ) in proc.stdout.splitlines()
        assert "guard: 3 of 43 entries would be deleted (7%; the limit is 50%)" in proc.stdout
        assert proc.stdout.splitlines()[-1] == "removed 3 of 3 stale entries from arena:live"
        r = lab.client()
        assert r.hlen(KEY) == 40 and not r.hexists(KEY, "z0") and r.hexists(KEY, "ten0")
        # --force: the connected owner's stale entries go too, and the guard says so
        proc = cli(cfg, "--apply", "--force")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (
            "guard: 10 stale entries whose owner is connected to the broker now: n8 (10) "
            "(deleted anyway: --force)"
        ) in proc.stdout.splitlines()
        assert proc.stdout.splitlines()[-1] == "removed 10 of 10 stale entries from arena:live"
        assert r.hlen(KEY) == 30
    finally:
        lab.stop(workers)


@pytest.mark.lab
def test_review_owner_related_by_client_name_or_to_nothing_is_kept(lab: Lab) -> None:
    """worker-17 is not in hosts.toml and not an IP; its clock is 6 minutes behind, so its
    ten running matches look old. A broker connection named `worker:worker-17:3` relates
    it: kept as connected. ghost-9 and worker-1 (a part of no connection's name, though a
    prefix of one) can be related to nothing: named and kept, not taken for dead. mini is
    configured and not connected: its zombies go. --force deletes all. Before the fix
    reap-live deleted worker-17's, ghost-9's and worker-1's entries without a word (seen
    failing so: the kept-lines were missing and 20 entries were removed)."""
    mini = lab.add_host("mini", sshd=False)
    named = lab.client(client_name="worker:worker-17:3")
    try:
        assert named.ping()
        incident(lab, owner="worker-17", age=570.0 + AHEAD)
        now = float(lab.client().time()[0])
        old = {f"z{i}": json.dumps({"started_at": now - 7200, "host": "mini"}) for i in range(3)}
        old |= {
            f"g{i}": json.dumps({"started_at": now - 7200, "host": "ghost-9"}) for i in range(5)
        }
        old |= {
            f"w{i}": json.dumps({"started_at": now - 7200, "host": "worker-1"}) for i in range(2)
        }
        lab.client().hset(KEY, mapping=old)
        cfg = lab.config(checks="", hosts=[mini])
        proc = cli(cfg, "--apply")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        lines = proc.stdout.splitlines()
        assert (
            "guard: keeps 10 stale entries whose owner is connected to the broker now: "
            "worker-17 (10) (their matches may be running; --force deletes them)"
        ) in lines, proc.stdout
        assert (
            "guard: keeps 7 entries whose owner cannot be related to any broker connection "
            "(owners: ghost-9 (5), worker-1 (2)) (not seen is not proof of absence; "
            "--force deletes them)"
        ) in lines, proc.stdout
        assert lines[-1] == "removed 3 of 3 stale entries from arena:live"
        r = lab.client()
        assert r.hlen(KEY) == 47 and not r.hexists(KEY, "z0")
        assert r.hexists(KEY, "ten0") and r.hexists(KEY, "g0") and r.hexists(KEY, "w0")
        proc = cli(cfg, "--apply", "--force")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (
            "guard: 7 entries whose owner cannot be related to any broker connection "
            "(owners: ghost-9 (5), worker-1 (2)) (deleted anyway: --force)"
        ) in proc.stdout.splitlines(), proc.stdout
        assert proc.stdout.splitlines()[-1] == "removed 17 of 17 stale entries from arena:live"
        assert r.hlen(KEY) == 30
    finally:
        named.close()


# ---------------------------------------------------------------- item 6: unreadable values
def deep(depth: int, opener: str = "[", closer: str = "]", middle: str = "") -> str:
    """Valid JSON nested `depth` deep (the parser gives up long before the middle)."""
    return opener * depth + middle + closer * depth


@pytest.mark.parametrize(
    "value",
    [
        deep(1000),
        deep(100_000),
        deep(5000, '{"a":', "}", "1"),
        '{"started_at": ' + deep(3000) + ', "host": "n8"}',
        '{"host": "n8", "x": ' + deep(3000, '{"k": ', "}", "1") + "}",
    ],
)
def test_item6_deep_value_is_one_unreadable_entry(value: str) -> None:
    expected = (None, UNREADABLE, None)
    assert read_entry(value) == expected
    assert read_entry(value.encode()) == expected


@pytest.mark.lab
def test_item6_check_row_and_reap_live_survive_a_deep_value(lab: Lab) -> None:
    from fleetcheck.core.runner import plan, run_patrol

    now = float(lab.client().time()[0])
    r = lab.client()
    r.hset(
        KEY, mapping={f"m{i}": json.dumps({"started_at": now - 5, "host": "n8"}) for i in range(9)}
    )
    r.hset(KEY, "evil", deep(100_000))
    fleet = fleet_of(lab.config(checks="[checks.live_hash]\n", hosts=[]))
    (row,) = run_patrol(fleet, plan(fleet, {"live_hash": CHECK})).results
    assert row.status is Status.WARN, row.summary
    assert row.metrics["malformed"] == 1 and row.metrics["entries"] == 10
    assert {"id": "evil", "malformed": UNREADABLE} in row.evidence["stale_examples"]
    cfg = lab.config(checks="", hosts=[])
    proc = cli(cfg, "--apply")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"  evil  age -  malformed: {UNREADABLE}" in proc.stdout.splitlines()
    assert proc.stdout.splitlines()[-1] == "removed 1 of 1 stale entries from arena:live"
    assert r.hlen(KEY) == 9


def test_item6_discover_skips_a_value_the_parser_cannot_take() -> None:
    """The same rule in `config discover`'s guessing: a deep sample is skipped, not a
    traceback (it raised RecursionError before)."""
    from fleetcheck.core import discovery

    good = [json.dumps({"started_at": 1_700_000_000 + i, "host": "n8"}) for i in range(3)]
    assert discovery.live_fields([deep(100_000), *good]) == ("started_at", "host")
    queue = discovery.KeyInfo("work", "list", 3, (deep(100_000),))
    assert discovery.queue_guesses([queue]) == [queue]  # by its name; the head is unreadable
