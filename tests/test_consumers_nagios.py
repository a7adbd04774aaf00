"""The real Nagios 4 and Icinga 2 (Debian's nagios4-core and icinga2-bin) run fleetcheck on a
lab fleet with the shipped sample configs (contrib/nagios/fleetcheck.cfg,
contrib/icinga2/fleetcheck.conf): the daemon schedules the check itself, and its own status
shows CRITICAL with mini's reason, the long output and the perfdata as it parsed them.

Each daemon starts once per test session (a session fixture: its start-up is most of its
cost); a test writes the lab's config where the daemon's check reads it, then asks the daemon
for a check now (Nagios' external command file; Icinga's check interval is short)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.lab import Lab, wait_for

ROOT = Path(__file__).resolve().parent.parent
NAGIOS = "/usr/sbin/nagios4"
ICINGA = shutil.which("icinga2")
BIN = Path(sys.executable).parent  # where this venv's `fleetcheck` script is
NAGIOS_LIMIT = 8192  # Nagios 4's plugin output buffer (MAX_PLUGIN_OUTPUT_LENGTH)


@dataclass
class Daemon:
    dir: Path
    config: Path  # where the daemon's check reads the fleet's hosts.toml
    proc: subprocess.Popen[bytes]


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def sample(path: str, config: Path, state: Path, default_state: str) -> str:
    """A shipped sample with only its two site paths changed: the fleet's config and state."""
    text = (ROOT / path).read_text()
    assert "/etc/fleetcheck/hosts.toml" in text and default_state in text
    return text.replace("/etc/fleetcheck/hosts.toml", str(config)).replace(
        default_state, str(state)
    )


# ---------------------------------------------------------------- Nagios 4
@pytest.fixture(scope="session")
def nagios(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    if not os.path.exists(NAGIOS):
        pytest.skip("nagios4 is not installed (.ci/bootstrap installs nagios4-core)")
    d = tmp_path_factory.mktemp("nagios")
    (d / "checkresults").mkdir()
    config = d / "hosts.toml"
    objects = d / "fleetcheck.cfg"
    objects.write_text(
        sample(
            "contrib/nagios/fleetcheck.cfg",
            config,
            d / "state.json",
            "/var/lib/nagios4/fleetcheck-state.json",
        )
    )
    (d / "resource.cfg").write_text(f"$USER2$={BIN}\n")
    shipped = "/etc/nagios4/objects"
    lines = [
        f"log_file={d}/nagios.log",
        *(
            f"cfg_file={shipped}/{n}.cfg"
            for n in ("commands", "contacts", "timeperiods", "templates")
        ),
        f"cfg_file={objects}",
        f"resource_file={d}/resource.cfg",
        f"status_file={d}/status.dat",
        "status_update_interval=1",
        f"object_cache_file={d}/objects.cache",
        f"precached_object_file={d}/objects.precache",
        f"temp_file={d}/nagios.tmp",
        f"temp_path={d}",
        f"lock_file={d}/nagios.lock",
        f"check_result_path={d}/checkresults",
        f"command_file={d}/nagios.cmd",
        "check_external_commands=1",
        f"state_retention_file={d}/retention.dat",
        "retain_state_information=0",
        "nagios_user=root" if os.geteuid() == 0 else f"nagios_user={os.getlogin()}",
        "nagios_group=root" if os.geteuid() == 0 else "nagios_group=nogroup",
        # seconds, not minutes: the sample's 15 is 15 s here, and the first check comes
        # within a second of the start instead of being spread over half an hour
        "interval_length=1",
        "max_service_check_spread=1",
        "max_host_check_spread=1",
        "check_result_reaper_frequency=1",
        "enable_notifications=0",
        "use_syslog=0",
        "service_check_timeout=60",
        "enable_environment_macros=0",
        "illegal_macro_output_chars=`~$&|'\"<>",
    ]
    (d / "nagios.cfg").write_text("\n".join(lines) + "\n")
    check = subprocess.run([NAGIOS, "-v", str(d / "nagios.cfg")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    proc = subprocess.Popen(
        [NAGIOS, str(d / "nagios.cfg")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: (d / "nagios.cmd").exists(), 20, "nagios' command file")
        yield Daemon(d, config, proc)
    finally:
        stop(proc)


def status_blocks(path: Path, kind: str) -> list[dict[str, str]]:
    """The `kind {...}` blocks of a Nagios status.dat, as dicts."""
    blocks = []
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    for body in re.findall(rf"^{kind} \{{\n(.*?)^\t\}}", text, flags=re.M | re.S):
        block = {}
        for line in body.splitlines():
            key, _, value = line.strip().partition("=")
            block[key] = value
        blocks.append(block)
    return blocks


@pytest.mark.lab
def test_nagios_schedules_fleetcheck_and_shows_critical(lab: Lab, nagios: Daemon) -> None:
    lab.add_host("mini", sshd=False)  # no workers: clients CRIT
    n8 = lab.add_host("n8", sshd=False)
    lab.start_workers(n8, 1)
    shutil.copy(lab.config(), nagios.config)
    asked = int(time.time())
    with open(nagios.dir / "nagios.cmd", "w") as cmd:
        cmd.write(f"[{asked}] SCHEDULE_FORCED_SVC_CHECK;fleetcheck;fleet;{asked}\n")

    def service() -> dict[str, str] | None:
        for block in status_blocks(nagios.dir / "status.dat", "servicestatus"):
            if block.get("service_description") == "fleet" and int(block["last_check"]) >= asked:
                return block
        return None

    wait_for(lambda: service() is not None, 60, "nagios' check of the fleet")
    svc = service()
    assert svc is not None
    assert svc["current_state"] == "2", svc  # CRITICAL
    assert re.match(r"FLEETCHECK CRITICAL - 1 CRIT, \d+ OK", svc["plugin_output"]), svc
    assert "mini clients: no broker connections" in svc["plugin_output"]
    long_output = svc["long_plugin_output"].replace("\\n", "\n")
    assert re.search(r"^CRIT mini clients: no broker connections", long_output, re.M), long_output
    perf = svc["performance_data"]
    assert "'crit'=1;;0;0" in perf and re.search(r"'ok'=\d+;;;0", perf), perf
    assert re.search(r"'mini_clients_connections'=0(;|\s|$)", perf), perf
    assert re.search(r"'n8_clients_connections'=[1-9]", perf), perf
    size = len(svc["plugin_output"]) + len(long_output) + len(perf)
    assert size < NAGIOS_LIMIT


# ---------------------------------------------------------------- Icinga 2
