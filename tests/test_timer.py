"""`fleetcheck timer`: the units pass `systemd-analyze verify`, the schedules are what systemd
and cron understand, and the crontab line really runs a patrol (behind flock) from sh."""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from fleetcheck import timer
from tests.lab import free_port

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
FLEETCHECK = str(Path(sys.executable).parent / "fleetcheck")


def require(binary: str | None, package: str) -> str:
    if binary is None:
        message = f"{package} is not installed (apt-get install {package})"
        if os.environ.get("FLEETCHECK_REQUIRE_LAB") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return binary


def config(tmp_path: Path, patrol: str = 'every = "15m"\ndeadline = "60s"\n') -> Path:
    """A fleet whose broker is a closed loopback port: a patrol ends at once, UNKNOWN."""
    path = tmp_path / "hosts.toml"
    path.write_text(
        "[broker]\n"
        f'url = "redis://127.0.0.1:{free_port()}/0"\n'
        'connect_timeout = "1s"\n'
        "retries = 0\n\n"
        f"[patrol]\n{patrol}\n"
        "[[hosts]]\n"
        'name = "n8"\n'
        'addrs = ["127.0.0.1"]\n\n'
        "[checks.clients]\n"
    )
    return path


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def verify(directory: Path, *units: str) -> subprocess.CompletedProcess[str]:
    binary = require(SYSTEMD_ANALYZE, "systemd")
    env = {**os.environ, "SYSTEMD_LOG_LEVEL": "notice", "SYSTEMD_PAGER": "cat"}
    return subprocess.run(
        [binary, "verify", "--man=no", *(str(directory / u) for u in units)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=directory,
    )


def clean(proc: subprocess.CompletedProcess[str]) -> str:
    """verify's complaints: anything it printed (warnings such as an unknown key exit 0)."""
    return (proc.stdout + proc.stderr).strip()


# ------------------------------------------------------------------ schedules (pure + systemd)
@pytest.mark.parametrize(
    "every, calendar, cron",
    [
        (30, "*-*-* *:*:00/30", None),
        (60, "*-*-* *:00/1:00", "* * * * *"),
        (300, "*-*-* *:00/5:00", "*/5 * * * *"),
        (900, "*-*-* *:00/15:00", "*/15 * * * *"),
        (3600, "*-*-* 00/1:00:00", "0 * * * *"),
        (7200, "*-*-* 00/2:00:00", "0 */2 * * *"),
        (86400, "*-*-* 00:00:00", "0 0 * * *"),
        (420, None, None),  # 7m does not divide an hour
        (5400, None, None),  # 1h30m
        (90, None, None),
        (2.5, None, None),
    ],
)
def test_schedules(every: float, calendar: str | None, cron: str | None) -> None:
    assert timer.on_calendar(every) == calendar
    assert timer.cron_schedule(every) == cron


@pytest.mark.parametrize("every", [30, 60, 300, 900, 3600, 7200, 86400])
def test_systemd_reads_the_calendar_as_every(every: int) -> None:
    """systemd's own parser: successive elapses are `every` seconds apart."""
    binary = require(SYSTEMD_ANALYZE, "systemd")
    spec = timer.on_calendar(every)
    assert spec is not None
    proc = subprocess.run(
        [binary, "calendar", "--iterations=4", spec], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    stamps = re.findall(r"(?:Next elapse|Iter\. #\d+): \w+ (\S+ \S+)", proc.stdout)
    times = [datetime.fromisoformat(s) for s in stamps]
    assert len(times) == 4, proc.stdout
    assert {(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)} == {every}


# ------------------------------------------------------------------ units: systemd-analyze verify
@pytest.mark.parametrize("every", [900, 5400, 30, 86400])
def test_units_pass_systemd_analyze_verify(tmp_path: Path, every: float) -> None:
    units = timer.build(
        str(config(tmp_path)),
        every,
        60,
        name="fleetcheck",
        run_args=["--textfile", "/var/lib/node exporter/fleetcheck.prom"],
        command=[FLEETCHECK],
    )
    paths = timer.install(units, str(tmp_path))
    assert [p.name for p in paths] == ["fleetcheck.service", "fleetcheck.timer"]
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o640 for p in paths)
    proc = verify(tmp_path, "fleetcheck.service", "fleetcheck.timer")
    assert proc.returncode == 0 and clean(proc) == "", clean(proc)
    service, timer_unit = units.service, units.timer
    assert "Type=oneshot" in service
    assert "TimeoutStartSec=90s" in service  # the 60s deadline + margin
    assert f"ExecStart={FLEETCHECK} run -c {tmp_path / 'hosts.toml'} --textfile" in service
    assert "RandomizedDelaySec=" in timer_unit
    if timer.on_calendar(every):
        assert "Persistent=true" in timer_unit and "OnCalendar=" in timer_unit
    else:
        assert f"OnUnitActiveSec={int(every)}s" in timer_unit


def test_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    """The check above can fail: a unit whose ExecStart does not exist, and a bad calendar."""
    units = timer.build(str(config(tmp_path)), 900, 60, command=[str(tmp_path / "missing")])
    timer.install(units, str(tmp_path))
    proc = verify(tmp_path, "fleetcheck.service", "fleetcheck.timer")
    assert proc.returncode != 0 and "missing" in clean(proc)
    bad = units.timer.replace("Persistent=true", "Persistant=true")
    (tmp_path / "fleetcheck.timer").write_text(bad)
    units_ok = timer.build(str(config(tmp_path)), 900, 60, command=[FLEETCHECK])
    (tmp_path / "fleetcheck.service").write_text(units_ok.service)
    assert "Persistant" in clean(verify(tmp_path, "fleetcheck.service", "fleetcheck.timer"))


def test_execstart_quoting_is_read_by_systemd(tmp_path: Path) -> None:
    """A fleetcheck in a directory with a space and a %: systemd finds it (verify checks the
    executable it parsed out of ExecStart=), and the rest splits back into our argv."""
    odd = tmp_path / "odd dir %d"
    odd.mkdir()
    exe = odd / "fleetcheck"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    args = ["--textfile", '/x y/it\'s "q" $HOME %h.prom', "--heartbeat", "https://h/p?a=1%20"]
    units = timer.build(str(config(tmp_path)), 900, 60, run_args=args, command=[str(exe)])
    timer.install(units, str(tmp_path))
    proc = verify(tmp_path, "fleetcheck.service", "fleetcheck.timer")
    assert proc.returncode == 0 and clean(proc) == "", clean(proc)
    line = next(x for x in units.service.splitlines() if x.startswith("ExecStart="))
    unescaped = line.removeprefix("ExecStart=").replace("%%", "%").replace("$$", "$")
    assert shlex.split(unescaped) == [str(exe), "run", "-c", str(tmp_path / "hosts.toml"), *args]


# ------------------------------------------------------------------ the CLI
def test_print_shows_units_and_crontab(tmp_path: Path) -> None:
    proc = cli("timer", "-c", str(config(tmp_path)), "--every", "5m", "--print")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "# /etc/systemd/system/fleetcheck.service" in out and "[Service]" in out
    assert "# /etc/systemd/system/fleetcheck.timer" in out and "OnCalendar=*-*-* *:00/5:00" in out
    cron = [line for line in out.splitlines() if line.startswith("*/5 ")]
    assert len(cron) == 1 and " flock -n /run/lock/fleetcheck.lock " in cron[0]
    # the default: [patrol] every from the config
    proc = cli("timer", "-c", str(config(tmp_path, 'every = "2h"\n')))
    assert "OnCalendar=*-*-* 00/2:00:00" in proc.stdout and "0 */2 * * * flock" in proc.stdout


def test_install_writes_units_and_prints_the_systemctl_line(tmp_path: Path) -> None:
    target = tmp_path / "units"
    target.mkdir()
    proc = cli("timer", "-c", str(config(tmp_path)), "--install", "--dir", str(target))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in target.iterdir()) == ["fleetcheck.service", "fleetcheck.timer"]
    # not a directory systemd reads: no systemctl line that would not apply
    assert "systemctl" not in proc.stdout
    assert f"{target} is not a directory systemd reads units from" in proc.stdout
    proc = verify(target, "fleetcheck.service", "fleetcheck.timer")
    assert proc.returncode == 0 and clean(proc) == "", clean(proc)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--print", "--install"], "--print and --install: choose one"),
        (["--every", "soon"], "--every: bad duration 'soon'"),
        (["--every", "0s"], "--every: bad duration '0s': must be longer than 0s"),
        (["--every", "0.5s"], "--every 0.5s: must be at least 1s"),
        (["--name", "../evil"], "--name '../evil'"),
        (["--install", "--dir", "/nonexistent/dir"], "--install into /nonexistent/dir"),
    ],
)
def test_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    proc = cli("timer", "-c", str(config(tmp_path)), *args)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_missing_config_is_a_usage_error(tmp_path: Path) -> None:
    proc = cli("timer", "-c", str(tmp_path / "nope.toml"))
    assert proc.returncode == 3 and "nope.toml" in proc.stderr


# ------------------------------------------------------------------ the crontab line, run by sh
CRON_FIELD = r"(\*|\d+)(/\d+)?"


def cron_command(line: str) -> str:
    """What cron hands to /bin/sh: the line after five fields, `\\%` -> `%` (a bare % would
    end the command and feed the rest as stdin, so there must be none)."""
    fields = line.split(" ", 5)
    assert len(fields) == 6
    for field in fields[:5]:
        assert re.fullmatch(CRON_FIELD, field), field
    command = fields[5]
    assert not re.search(r"(?<!\\)%", command), "unescaped % in a crontab command"
    return command.replace("\\%", "%")


@pytest.fixture
def lock_name() -> Iterator[str]:
    name = f"fleetcheck-test-{secrets.token_hex(3)}"
    yield name
    Path(f"/run/lock/{name}.lock").unlink(missing_ok=True)


def test_crontab_line_runs_a_patrol_and_flock_prevents_overlap(
    tmp_path: Path, lock_name: str
) -> None:
    require(shutil.which("flock"), "util-linux")
    out_dir = tmp_path / "out dir"
    out_dir.mkdir()
    textfile = out_dir / "fleet 100%.prom"
    units = timer.build(
        str(config(tmp_path)),
        900,
        60,
        name=lock_name,
        run_args=["--textfile", str(textfile), "--no-state"],
        command=[FLEETCHECK],
    )
    command = cron_command(units.crontab)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)}
    # with the lock held (a previous round still running), the new round does not start
    lock_path = f"/run/lock/{lock_name}.lock"
    with open(lock_path, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        proc = subprocess.run(["/bin/sh", "-c", command], env=env, timeout=60)
        assert proc.returncode == 1
        assert not textfile.exists()
    # lock free: one patrol runs (broker unreachable: UNKNOWN, exit 3) and writes its metrics
    proc = subprocess.run(["/bin/sh", "-c", command], env=env, timeout=60, capture_output=True)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == b""  # stdout is dropped: no cron mail every round
    assert "fleetcheck_check_severity" in textfile.read_text()


def test_cron_cannot_do_every_interval(tmp_path: Path) -> None:
    units = timer.build(str(config(tmp_path)), 5400, 60, command=[FLEETCHECK])
    assert units.crontab == "# cron cannot run every 1h30m; use the systemd timer"


# ------------------------------------------------------------------ User= and the sandbox
GOOD_LABELS = ("PERFECT", "SAFE", "OK")


def security(directory: Path, unit: str) -> tuple[float, str]:
    """`systemd-analyze security --offline=true` on a unit file: (exposure, label)."""
    binary = require(SYSTEMD_ANALYZE, "systemd")
    env = {**os.environ, "SYSTEMD_LOG_LEVEL": "notice", "SYSTEMD_PAGER": "cat"}
    proc = subprocess.run(
        [binary, "security", "--offline=true", "--no-pager", str(directory / unit)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=directory,
    )
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d) (\w+)", proc.stdout)
    assert m, proc.stdout + proc.stderr
    return float(m.group(1)), m.group(2)


def hardened(tmp_path: Path, **kwargs: object) -> timer.Units:
    units = timer.build(str(config(tmp_path)), 900, 60, command=[FLEETCHECK], **kwargs)  # type: ignore[arg-type]
    timer.install(units, str(tmp_path))
    return units


def test_service_runs_as_a_dedicated_user_in_a_sandbox_rated_ok(tmp_path: Path) -> None:
    units = hardened(tmp_path, writable=["/var/lib/prometheus/node-exporter"])
    proc = verify(tmp_path, "fleetcheck.service", "fleetcheck.timer")
    assert proc.returncode == 0 and clean(proc) == "", clean(proc)
    lines = units.service.splitlines()
    for line in (
        "User=fleetcheck",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "NoNewPrivileges=yes",
        "StateDirectory=fleetcheck",
        "ReadWritePaths=/var/lib/prometheus/node-exporter",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK",
    ):
        assert line in lines, line
    exposure, label = security(tmp_path, "fleetcheck.service")
    assert label in GOOD_LABELS, (exposure, label)
    assert exposure <= 2.0  # docs/operations.md quotes 1.3


def test_the_security_rating_can_fail(tmp_path: Path) -> None:
    """The same service without the sandbox lines: systemd rates it far worse than OK."""
    units = hardened(tmp_path, user=None)
    keep = units.service.split("User=")[0] if "User=" in units.service else units.service
    bare = keep.split("# the whole file system")[0]
    (tmp_path / "bare.service").write_text(bare)
    exposure, label = security(tmp_path, "bare.service")
    assert label not in GOOD_LABELS and exposure > 5.0, (exposure, label)


def test_root_and_home_directories(tmp_path: Path) -> None:
    units = hardened(tmp_path, user=None, home_read=True)
    assert "User=" not in units.service and "ProtectHome=read-only" in units.service
    proc = verify(tmp_path, "fleetcheck.service", "fleetcheck.timer")
    assert proc.returncode == 0 and clean(proc) == "", clean(proc)


def fleet_of(tmp_path: Path, extra: str) -> object:
    from fleetcheck.config import load
    from fleetcheck.core import registry

    path = config(tmp_path)
    path.write_text(path.read_text() + extra)
    return load(path, registry.config_type, registry.host_config_types)


@pytest.mark.parametrize(
    "extra, params, writable, home_read",
    [
        ('[ssh]\nknown_hosts = "/etc/fleetcheck/known_hosts"\n', {}, [], False),
        (
            '[ssh]\nknown_hosts = "/etc/fleetcheck/kh"\naccept_new = true\n',
            {"textfile": "/var/lib/ne/fc.prom"},
            ["/var/lib/ne", "/etc/fleetcheck"],
            False,
        ),
        ('[ssh]\nknown_hosts = "/etc/fk"\nidentity_file = "/home/ops/.ssh/id"\n', {}, [], True),
        ('[ssh]\nknown_hosts = "/etc/fk"\n', {"state": "/root/st.json"}, ["/root"], True),
        (
            '[outputs]\ntextfile = "/srv/ne/fc.prom"\n[ssh]\nknown_hosts = "/k"\n',
            {},
            ["/srv/ne"],
            False,
        ),
    ],
)
def test_confinement_follows_the_config(
    tmp_path: Path, extra: str, params: dict[str, str], writable: list[str], home_read: bool
) -> None:
    fleet = fleet_of(tmp_path, extra)
    got = timer.confinement(fleet, params, "fleetcheck-nobody-such")
    # the config file itself lives in tmp_path (not under a home directory here)
    assert got == (writable, home_read)


def test_tilde_is_the_service_users_home(tmp_path: Path) -> None:
    """`~/.ssh/known_hosts` (the default) is root's home for a root service, not for a system
    user whose home is its state directory."""
    fleet = fleet_of(tmp_path, "")
    assert timer.confinement(fleet, {}, "fleetcheck-nobody-such") == ([], False)
    assert timer.confinement(fleet, {}, None) == ([], True)


def test_cli_user_option(tmp_path: Path) -> None:
    path = str(config(tmp_path))
    proc = cli("timer", "-c", path, "--print")
    assert proc.returncode == 0 and "User=fleetcheck" in proc.stdout
    assert "crontab -u fleetcheck -e" in proc.stdout
    proc = cli("timer", "-c", path, "--user", "patrol")
    assert "User=patrol" in proc.stdout and "Group=" not in proc.stdout
    proc = cli("timer", "-c", path, "--user", "root")
    assert proc.returncode == 0 and "User=" not in proc.stdout
    proc = cli("timer", "-c", path, "--user", "a b")
    assert proc.returncode == 3 and "--user 'a b': not a user name" in proc.stderr


def test_execstart_is_the_entry_point_it_was_started_as(tmp_path: Path) -> None:
    """Started through a symlink on PATH (as /usr/local/bin/fleetcheck -> a venv's script),
    the unit names the resolved script, never a name PATH would have to find."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "fleetcheck").symlink_to(FLEETCHECK)
    env = {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin"}
    proc = subprocess.run(
        ["fleetcheck", "timer", "-c", str(config(tmp_path))],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"ExecStart={Path(FLEETCHECK).resolve()} run -c " in proc.stdout
