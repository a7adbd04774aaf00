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
ICINGA_USER, ICINGA_PASSWORD = "fleetcheck-test", "icinga-test-pw"


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="session")
def icinga(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, str]]:
    """A private Icinga 2 (its own dirs, its API on a loopback port with a throwaway CA made
    by openssl: icinga2 pki's 4096-bit keys take 20 s), the shipped sample included."""
    from tests.lab import free_port

    if ICINGA is None:
        pytest.skip("icinga2 is not installed (.ci/bootstrap installs icinga2-bin)")
    d = tmp_path_factory.mktemp("icinga")
    for sub in ("lib/certs", "log", "cache", "spool", "run"):
        (d / sub).mkdir(parents=True)
    certs = d / "lib/certs"
    node = "fleetcheck-test"
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        str(d / "ca.key"),
        "-out",
        str(certs / "ca.crt"),
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        f"/CN={node}",
        "-keyout",
        str(certs / f"{node}.key"),
        "-out",
        str(d / "node.csr"),
    )
    openssl(
        "x509",
        "-req",
        "-in",
        str(d / "node.csr"),
        "-CA",
        str(certs / "ca.crt"),
        "-CAkey",
        str(d / "ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        str(certs / f"{node}.crt"),
    )
    config = d / "hosts.toml"
    (d / "fleetcheck.conf").write_text(
        sample(
            "contrib/icinga2/fleetcheck.conf",
            config,
            d / "state.json",
            "/var/lib/icinga2/fleetcheck-state.json",
        )
    )
    port = free_port()
    (d / "icinga2.conf").write_text(
        f"""include <itl>
const PluginContribDir = "{BIN}"
const NodeName = "{node}"
const ZoneName = "{node}"
object Endpoint NodeName {{ }}
object Zone ZoneName {{ endpoints = [ NodeName ] }}
object ApiListener "api" {{ bind_host = "127.0.0.1"; bind_port = {port} }}
object ApiUser "{ICINGA_USER}" {{
  password = "{ICINGA_PASSWORD}"
  permissions = [ "objects/query/*", "actions/*" ]
}}
object CheckerComponent "checker" {{ }}
include "{d}/fleetcheck.conf"
"""
    )
    user = "root" if os.geteuid() == 0 else os.environ.get("USER", "nobody")
    defines = [
        f"-DRunAsUser={user}",
        f"-DRunAsGroup={user if user != 'root' else 'root'}",
        f"-DDataDir={d}/lib",
        f"-DLogDir={d}/log",
        f"-DCacheDir={d}/cache",
        f"-DSpoolDir={d}/spool",
        f"-DInitRunDir={d}/run",
        f"-DConfigDir={d}",
    ]
    command = [ICINGA, "daemon", "-c", str(d / "icinga2.conf"), *defines]
    check = subprocess.run([*command, "-C"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    log = open(d / "daemon.log", "wb")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"https://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: icinga_api(url, "GET", "/v1/objects/services") is not None, 60, "icinga's API"
        )
        yield Daemon(d, config, proc), url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def icinga_api(url: str, method: str, path: str, body: dict | None = None) -> dict | None:
    """One API call (None when the API does not answer yet)."""
    import base64
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context()
    context.check_hostname = False  # the throwaway CA's certificate names the node, not 127.0.0.1
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={"Accept": "application/json", "Content-Type": "application/json"},
    )
    token = base64.b64encode(f"{ICINGA_USER}:{ICINGA_PASSWORD}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return json.loads(response.read())
    except (OSError, urllib.error.URLError):
        return None


@pytest.mark.lab
def test_icinga_schedules_fleetcheck_and_shows_critical(
    lab: Lab, icinga: tuple[Daemon, str]
) -> None:
    daemon, url = icinga
    lab.add_host("mini", sshd=False)  # no workers: clients CRIT
    n8 = lab.add_host("n8", sshd=False)
    lab.start_workers(n8, 1)
    shutil.copy(lab.config(), daemon.config)
    asked = time.time()
    answer = icinga_api(
        url,
        "POST",
        "/v1/actions/reschedule-check",
        {"type": "Service", "filter": 'service.name == "fleet"', "force": True},
    )
    assert answer is not None and answer["results"][0]["code"] == 200, answer

    def result() -> dict | None:
        got = icinga_api(url, "GET", "/v1/objects/services?attrs=last_check_result&attrs=state")
        for svc in (got or {}).get("results", []):
            cr = svc["attrs"]["last_check_result"]
            if svc["name"] == "fleetcheck!fleet" and cr and cr["execution_start"] >= asked:
                return svc["attrs"]
        return None

    wait_for(lambda: result() is not None, 60, "icinga's check of the fleet")
    attrs = result()
    assert attrs is not None
    cr = attrs["last_check_result"]
    assert attrs["state"] == 2 and cr["state"] == 2, cr  # CRITICAL
    assert cr["exit_status"] == 2
    first, *long_output = cr["output"].splitlines()
    assert re.match(r"FLEETCHECK CRITICAL - 1 CRIT, \d+ OK", first), cr["output"]
    assert "mini clients: no broker connections" in first
    assert any(line.startswith("CRIT mini clients: no broker connections") for line in long_output)
    perf = cr["performance_data"]  # Icinga's own split of the perfdata, one item each
    assert "crit=1;;0;0" in perf, perf
    assert any(re.fullmatch(r"'?mini_clients_connections'?=0(;.*)?", p) for p in perf), perf
    assert any(re.fullmatch(r"'?n8_clients_connections'?=[1-9]\d*(;.*)?", p) for p in perf), perf
    assert "|" not in cr["output"]  # every perfdata part was taken out of the text
