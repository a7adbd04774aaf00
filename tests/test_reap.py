"""reap-live on a real redis-server: the dry run changes nothing, --apply leaves exactly the
fresh entries, and an id re-HSET between the scan and the delete survives."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleetcheck.checks.live_hash.reaper import reap_live_command
from fleetcheck.checks.live_hash.scan import Stale, find_stale, reap

from fleetcheck.config import load
from fleetcheck.core import registry
from tests.lab import Lab, incident_live_hash

pytestmark = pytest.mark.lab
FLEETCHECK = str(Path(sys.executable).with_name("fleetcheck"))
KEY = "arena:live"


def seed(lab: Lab) -> dict[bytes, bytes]:
    r = lab.client()
    r.hset(KEY, mapping=incident_live_hash(time.time()))
    return r.hgetall(KEY)


def cli(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FLEETCHECK, "reap-live", "-c", str(cfg), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_dry_run_lists_and_changes_nothing(lab: Lab) -> None:
    before = seed(lab)
    # mini is configured and not connected: its entries are dead (an owner related to no
    # connection at all would be kept, see test_reap_clock)
    mini = lab.add_host("mini", sshd=False)
    proc = cli(lab.config(checks="", hosts=[mini]), "--show", "3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == (
        "arena:live: 263 entries scanned, 219 stale (200 older than 15m00s, 19 malformed)"
    )
    assert lines[1].startswith("  match:old:199  age 4h")
    assert "owner mini  older than max_age" in lines[1]
    assert lines[4] == "  ... and 216 more (--show 0 lists all)"
    # what the guard saw: the incident itself is most of the hash, so --apply needs --force
    assert lines[5:8] == [
        "guard: 219 of 263 entries would be deleted (83%; the limit is 50%)",
        "guard: started_at present in 252 of 263 entries",
        "guard: max_age 900s against the match wall 600s",
    ]
    # issue 22, item 2: the clock the ages were judged on is one of the guard's reasons
    assert lines[8].startswith("guard: ages on the broker's clock: the patrol machine's clock ")
    assert lines[9] == "guard: REFUSES: it would delete 83% of the hash (more than 50%)"
    assert lines[-1] == (
        "dry run: nothing deleted (run with --apply to delete these 219) "
        "(add --force: the guard refuses)"
    )
    assert lab.client().hgetall(KEY) == before


def test_apply_leaves_exactly_the_fresh_entries(lab: Lab) -> None:
    before = seed(lab)
    mini = lab.add_host("mini", sshd=False)  # configured, not connected: see above
    proc = cli(lab.config(checks="", hosts=[mini]), "--apply", "--force", "--show", "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "removed 219 of 219 stale entries from arena:live"
    # header, entries, guard (with the broker clock's line, issue 22 item 2), result
    assert len(proc.stdout.splitlines()) == 1 + 219 + 5 + 1
    assert (
        "guard: REFUSES: it would delete 83% of the hash (more than 50%) (overridden by --force)"
        in proc.stdout
    )
    after = lab.client().hgetall(KEY)
    assert sorted(after) == sorted(f"match:fresh:{i}".encode() for i in range(44))
    assert all(after[k] == before[k] for k in after)  # untouched values


def test_entry_rewritten_between_scan_and_delete_survives(lab: Lab) -> None:
    seed(lab)
    r = lab.client()
    fleet = load(lab.config(checks="", hosts=[]), registry.config_type, registry.host_config_types)
    renewed = b'{"started_at": %d, "host": "mini"}' % int(time.time())

    def worker_restarts_match(stale: list[Stale]) -> None:
        assert any(s.field == b"match:old:5" for s in stale)
        r.hset(KEY, "match:old:5", renewed)  # same id, new value: a live match
        r.hdel(KEY, "match:bad:0")  # and one finished normally in between

    out = io.StringIO()
    code = reap_live_command(fleet, apply=True, force=True, out=out, between=worker_restarts_match)
    assert code == 0
    assert out.getvalue().splitlines()[-1] == (
        "removed 217 of 219 stale entries from arena:live (2 changed since the scan and were kept)"
    )
    assert r.hget(KEY, "match:old:5") == renewed
    assert r.hlen(KEY) == 44 + 1


def test_keep_malformed_and_max_age(lab: Lab) -> None:
    seed(lab)
    cfg = lab.config(checks="", hosts=[])
    proc = cli(cfg, "--keep-malformed", "--max-age", "7230s", "--apply", "--force")
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    # older than 7230 s: i >= 61 of the old ones (3600 + 60 i > 7230)
    assert first == (
        "arena:live: 263 entries scanned, 139 stale (139 older than 2h00m, 0 malformed, "
        "malformed kept)"
    )
    assert lab.client().hlen(KEY) == 263 - 139


def test_settings_from_the_live_hash_table(lab: Lab) -> None:
    r = lab.client()
    fresh = json.dumps({"t0": int(time.time() - 10)})
    r.hset("other:live", mapping={"a": '{"t0": 1, "node": "x"}', "b": fresh})
    checks = '[checks.live_hash]\nkey = "other:live"\nstarted_field = "t0"\nowner_field = "node"\n'
    node = lab.add_host("x", sshd=False)  # owner x: configured, not connected
    proc = cli(lab.config(checks=checks, hosts=[node]), "--apply")
    assert proc.returncode == 0, proc.stderr
    assert "  a  age " in proc.stdout and "owner x" in proc.stdout
    assert r.hkeys("other:live") == [b"b"]


def test_reap_batches_and_compare(lab: Lab) -> None:
    r = lab.client()
    r.hset(KEY, mapping={f"f{i}": f"v{i}" for i in range(10)})
    stale = [Stale(f"f{i}".encode(), f"v{i}".encode(), "old", 1.0, None) for i in range(10)]
    stale.append(Stale(b"gone", b"x", "old", 1.0, None))  # already deleted
    stale[3] = Stale(b"f3", b"not-the-value", "old", 1.0, None)  # changed
    assert reap(r, KEY, stale, batch=3) == 9
    assert r.hgetall(KEY) == {b"f3": b"v3"}
    r.delete(KEY)
    big = [Stale(b"f%d" % i, b"v" * 40, "old", 1.0, None) for i in range(3)]
    r.hset(KEY, mapping={s.field: s.value for s in big})
    r.config_resetstat()  # the script is loaded already: one EVALSHA per batch
    assert reap(r, KEY, big, batch_bytes=40) == 3 and not r.exists(KEY)
    assert r.info("commandstats")["cmdstat_evalsha"]["calls"] == 3  # 42 bytes a field: one a batch


def test_find_stale_reports_reasons(lab: Lab) -> None:
    seed(lab)
    total, stale = find_stale(lab.client(), KEY, time.time(), 900.0)
    assert total == 263 and len(stale) == 219
    reasons = {s.reason.split(":")[0].split(" (")[0] for s in stale}
    assert reasons == {"older than max_age", "malformed"}


def test_errors_exit_3_and_delete_nothing(lab: Lab, tmp_path: Path) -> None:
    lab.client().rpush(KEY, "x")
    proc = cli(lab.config(checks="", hosts=[]), "--apply")
    assert proc.returncode == 3
    assert (
        proc.stderr.strip()
        == "fleetcheck: error: arena:live is a list, not a hash: nothing deleted"
    )
    assert lab.client().llen(KEY) == 1
    proc = cli(lab.config(checks="", hosts=[]), "--max-age", "0s")
    assert proc.returncode == 3
    assert "--max-age: bad duration '0s': must be longer than 0s" in proc.stderr
    proc = cli(lab.config(checks="", hosts=[]), "--max-age", "later")
    assert proc.returncode == 3 and "--max-age: bad duration" in proc.stderr
    dead = tmp_path / "dead.toml"
    dead.write_text('[broker]\nurl = "redis://:hunter2@127.0.0.1:1/0"\nconnect_timeout = "300ms"\n')
    proc = cli(dead)
    assert proc.returncode == 3
    assert proc.stderr.startswith("fleetcheck: error: broker 127.0.0.1:1 unreachable")
    assert "hunter2" not in proc.stderr + proc.stdout


# ---------------------------------------------------------------- the guard: one test per refusal
def refused(proc: subprocess.CompletedProcess[str], why: str) -> None:
    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetcheck: error: reap-live refuses: ")
    assert why in lines[0] and "nothing deleted" in lines[0] and "--force" in lines[0]


def test_guard_refuses_more_than_half(lab: Lab) -> None:
    r = lab.client()
    now = time.time()
    r.hset(KEY, mapping={f"old{i}": json.dumps({"started_at": now - 7200}) for i in range(6)})
    r.hset(KEY, mapping={f"new{i}": json.dumps({"started_at": now}) for i in range(4)})
    proc = cli(lab.config(checks="", hosts=[]), "--apply")
    refused(proc, "it would delete 60% of the hash (more than 50%)")
    assert r.hlen(KEY) == 10
    proc = cli(lab.config(checks="", hosts=[]), "--apply", "--force")
    assert proc.returncode == 0 and r.hlen(KEY) == 4


def test_guard_refuses_a_started_field_no_entry_has(lab: Lab) -> None:
    r = lab.client()
    now = time.time()
    # the workers write "start"; the config says "started_at": every entry looks malformed
    r.hset(KEY, mapping={f"m{i}": json.dumps({"start": now}) for i in range(4)})
    r.hset(KEY, mapping={f"n{i}": json.dumps({"start": now}) for i in range(1)})
    proc = cli(lab.config(checks="", hosts=[]), "--apply")
    refused(proc, "started_at appears in no entry (is started_field right?)")
    assert "guard: started_at present in 0 of 5 entries" in proc.stdout
    assert r.hlen(KEY) == 5


def test_guard_refuses_max_age_below_the_match_wall(lab: Lab) -> None:
    r = lab.client()
    now = time.time()
    r.hset(KEY, mapping={f"m{i}": json.dumps({"started_at": now - 120}) for i in range(2)})
    r.hset(KEY, mapping={f"n{i}": json.dumps({"started_at": now}) for i in range(8)})
    proc = cli(lab.config(checks="", hosts=[]), "--apply", "--max-age", "15")  # meant minutes
    refused(proc, "max_age 15s is below the match wall 600s")
    assert r.hlen(KEY) == 10
    # the wall is the live_hash table's match_wall when set
    checks = '[checks.live_hash]\nmatch_wall = "60s"\n'
    proc = cli(lab.config(checks=checks, hosts=[]), "--apply", "--max-age", "90s")
    assert proc.returncode == 0, proc.stderr
    assert r.hlen(KEY) == 8


def test_guard_dry_run_never_refuses(lab: Lab) -> None:
    r = lab.client()
    r.hset(KEY, mapping={f"m{i}": json.dumps({"start": 1}) for i in range(3)})
    proc = cli(lab.config(checks="", hosts=[]), "--max-age", "1s")
    assert proc.returncode == 0, proc.stderr
    assert "guard: REFUSES: started_at appears in no entry" in proc.stdout
    assert "guard: REFUSES: max_age 1s is below the match wall 600s" in proc.stdout
    assert r.hlen(KEY) == 3


def test_absent_key(lab: Lab) -> None:
    proc = cli(lab.config(checks="", hosts=[]), "--apply")
    assert (proc.returncode, proc.stdout) == (0, "arena:live: absent, nothing to reap\n")
