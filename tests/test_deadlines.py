"""Issue 22, item 11 and "every network wait has an overall deadline": `reap-live`,
`config discover` and `probe-rater` against brokers of ours on loopback that drip their
replies, stall mid-reply, stall after AUTH or never answer (tests/drip.py). Each finishes
within its deadline with one line saying why, and deletes nothing.

On the code before the fix, the subprocess tests (no --deadline: the config's [patrol]
deadline of 2s is the default) hung past their 60 s timeout against the dripping broker
(checked by stashing the fix), and the in-process ones had no deadline to pass.

No test times the wait (the machine is shared; timings belong in bench/): each says which
deadline ended it, and a hang guard (a subprocess timeout, tests/hang.py) far above the
deadline catches a wait that never ends.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from fleetcheck.checks.live_hash.reaper import reap_live_command

from fleetcheck import discover
from fleetcheck.config import BrokerConfig, load
from fleetcheck.core import registry
from fleetcheck.transport.deadline import DeadlineExpired, run_within
from tests.drip import DripServer
from tests.hang import returns_within

FLEETCHECK = str(Path(sys.executable).with_name("fleetcheck"))
HANG = 60.0  # a hang guard, 30x+ the deadlines below: a wait that did not end, not a timing
# every way a broker can hold a client while each single read stays inside its timeout
HOSTILE = [
    pytest.param({"mode": "drip", "interval": 1.0}, id="drip-1s"),
    pytest.param({"mode": "drip", "interval": 2.5}, id="drip-2.5s"),
    pytest.param({"mode": "silent"}, id="never-answers"),
    pytest.param({"mode": "stall_mid_reply", "fast": 0}, id="stall-first-reply"),
    pytest.param({"mode": "stall_mid_reply", "fast": 4}, id="stall-after-handshake"),
    pytest.param({"mode": "stall_after_auth"}, id="stall-after-auth"),
]


def write_config(tmp_path: Path, server: DripServer, extra: str = "") -> Path:
    path = tmp_path / "hosts.toml"
    path.write_text(
        f'[broker]\nurl = "redis://:pw@127.0.0.1:{server.port}/0"\nconnect_timeout = "2s"\n'
        f'[patrol]\ndeadline = "2s"\n{extra}'
    )
    return path


def test_run_within_passes_values_errors_and_abandons() -> None:
    assert run_within(5, lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        run_within(5, lambda: 1 // 0)
    import threading

    release = threading.Event()
    abandoned: list[bool] = []

    def stuck() -> None:
        release.wait(30)

    def abandon() -> None:
        abandoned.append(True)
        release.set()

    with pytest.raises(DeadlineExpired):
        run_within(0.2, stuck, abandon)
    assert abandoned == [True]


# ---------------------------------------------------------------- reap-live
@pytest.mark.parametrize("hostile", HOSTILE)
def test_item11_reap_live_ends_at_its_deadline(
    hostile: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with DripServer(**hostile) as server:  # type: ignore[arg-type]
        fleet = load(
            write_config(tmp_path, server), registry.config_type, registry.host_config_types
        )
        code = returns_within(
            HANG,
            lambda: reap_live_command(
                fleet, apply=True, force=True, deadline=1.5, out=io.StringIO()
            ),
            "reap-live against a hostile broker",
        )
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert line.startswith(f"fleetcheck: error: broker 127.0.0.1:{server.port}: ")
    assert line.endswith(
        "did not finish within the deadline (1.5s; --deadline sets it): nothing deleted"
    )
    assert not any(c[:1] in ([b"EVALSHA"], [b"EVAL"], [b"HDEL"]) for c in server.commands)


def test_item11_reap_live_command_uses_the_patrol_deadline(tmp_path: Path) -> None:
    with DripServer("drip", interval=1.0) as server:
        cfg = write_config(tmp_path, server)
        proc = subprocess.run(
            [FLEETCHECK, "reap-live", "-c", str(cfg), "--apply"],
            capture_output=True,
            text=True,
            timeout=HANG,
        )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "did not finish within the deadline (2s; --deadline sets it): nothing deleted" in line


# ---------------------------------------------------------------- config discover
@pytest.mark.parametrize("hostile", HOSTILE)
def test_item11_discover_sample_ends_at_its_deadline(hostile: dict[str, object]) -> None:
    with DripServer(**hostile) as server:  # type: ignore[arg-type]
        broker = BrokerConfig(url=f"redis://:pw@127.0.0.1:{server.port}/0")
        with pytest.raises(DeadlineExpired):
            returns_within(HANG, lambda: discover.sample_within(broker, 1.5), "a discover sample")


def test_item11_config_discover_command_ends_with_one_line(tmp_path: Path) -> None:
    with DripServer("drip", interval=1.0) as server:
        cfg = write_config(tmp_path, server)
        proc = subprocess.run(
            [FLEETCHECK, "config", "discover", "-c", str(cfg)],
            capture_output=True,
            text=True,
            timeout=HANG,
        )
        # --deadline overrides the patrol's
        proc2 = subprocess.run(
            [FLEETCHECK, "config", "discover", "-c", str(cfg), "--deadline", "1s"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (
        f"fleetcheck: error: broker 127.0.0.1:{server.port}: no complete answer within the "
        "deadline (2s; --deadline sets it)"
    )
    assert proc2.returncode == 3 and "within the deadline (1s;" in proc2.stderr


def _sleepers(marker: str) -> list[int]:
    """Pids of processes whose command line holds `marker` (our Match exec commands)."""
    import os

    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(pid))
    return found


@pytest.mark.lab
def test_config_discover_ends_at_its_deadline_also_in_the_ssh_alias_step(tmp_path: Path) -> None:
    """A real redis-server that answers at once, and an ssh_config whose aliases each run a
    `Match exec "sleep 30"` (a local command): the whole command ends within --deadline plus
    a small margin, says the aliases were not resolved, and leaves no sleep behind. Before
    the fix the alias step ran outside the deadline, 10 s per exec (seen failing so: 20 s+)."""
    from tests.lab import wait_for
    from tests.servers import Server

    marker = "30.0417"  # a sleep of ours, findable in /proc
    ssh = tmp_path / "ssh_config"
    ssh.write_text(
        "".join(f"Host a{i}\n  HostName 127.0.0.{i + 2}\n" for i in range(3))
        + f'Match exec "sleep {marker}"\n  User nobody\n'
    )
    with Server() as server:
        cfg = tmp_path / "hosts.toml"
        cfg.write_text(f'[broker]\nurl = "{server.url}"\n[patrol]\ndeadline = "20s"\n')
        proc = subprocess.run(
            [FLEETCHECK, "config", "discover", "-c", str(cfg), "--ssh-config", str(ssh),
             "--deadline", "2s"],
            capture_output=True, text=True, timeout=HANG,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ssh alias(es) not resolved within the deadline (2s; --deadline sets it)" in (
        proc.stderr
    ), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    wait_for(lambda: not _sleepers(marker), 5, what="the Match exec sleeps to be gone")


# ---------------------------------------------------------------- probe-rater
def test_probe_rater_ends_at_its_patrol_deadline(tmp_path: Path) -> None:
    """probe-rater runs as a patrol of one check, so the runner's deadline (probe_deadline:
    twice the probe's timeout plus the broker's whole retry budget plus 10 s) bounds it. This
    held before the fix too; the test keeps it so against a broker that drips every reply."""
    from fleetcheck.checks.rater_probe.check import RaterProbeConfig, probe_deadline

    extra = '[checks.rater_probe]\ninbox = "q"\ntimeout = "1s"\n'
    with DripServer("drip", interval=0.9, kind="list") as server:
        cfg = write_config(tmp_path, server, extra)
        text = cfg.read_text().replace(
            'connect_timeout = "2s"', 'connect_timeout = "1s"\nsocket_timeout = "1s"\nretries = 0'
        )
        cfg.write_text(text)
        fleet = load(cfg, registry.config_type, registry.host_config_types)
        limit = probe_deadline(RaterProbeConfig(inbox="q", timeout=1.0), fleet.broker)
        proc = subprocess.run(
            [FLEETCHECK, "probe-rater", "-c", str(cfg), "--format", "plain"],
            capture_output=True,
            text=True,
            timeout=limit + HANG,
        )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "did not finish within the patrol deadline" in proc.stdout
