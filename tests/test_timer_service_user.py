"""Issue 28 item 1: `timer` refuses, with the fix in one line, what the service user could
not run or read (a venv whose python lives under /root, a config in a private directory), and
writes the environment file the CLI reads into the unit."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcheck import timer
from tests.test_timer import config, fleet_of

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (files of other owners)")


@pytest.fixture
def area() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="fleetcheck-timer-user-", dir="/var/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def script_under(directory: Path, python: Path) -> Path:
    bindir = directory / "venv/bin"
    bindir.mkdir(parents=True)
    (bindir / "python").symlink_to(python)
    script = bindir / "fleetcheck"
    script.write_text(f"#!{bindir / 'python'}\nimport sys\n")
    script.chmod(0o755)
    return script


def test_interpreter_behind_a_private_directory_is_refused(area: Path) -> None:
    """The pyenv case: the venv is world-readable, its python a symlink into a 0700 home."""
    private = area / "root-home"
    (private / ".pyenv/bin").mkdir(parents=True)
    real = private / ".pyenv/bin/python3.11"
    real.write_text("")
    real.chmod(0o755)
    private.chmod(0o700)
    script = script_under(area / "opt", real)
    fleet = fleet_of(area, "")
    (area / "hosts.toml").chmod(0o644)
    got = timer.refusals(fleet, "nobody", [str(script)], [])
    assert got == [
        f"user nobody cannot run {script}: its interpreter: {private} (mode 0700) cannot be "
        "entered; install fleetcheck from a python every user can run (e.g. /usr/bin/python3 "
        "-m venv /opt/fleetcheck && /opt/fleetcheck/bin/pip install fleetcheck-*.whl), then "
        "run its timer"
    ]
    private.chmod(0o755)  # reachable: nothing to refuse
    assert timer.refusals(fleet, "nobody", [str(script)], []) == []
    assert timer.refusals(fleet, None, [str(script)], []) == []  # root reads everything


def test_unreadable_config_is_refused_with_its_fix(area: Path) -> None:
    conf_dir = area / "etc"
    conf_dir.mkdir()
    fleet = fleet_of(conf_dir, "")
    path = conf_dir / "hosts.toml"
    path.chmod(0o600)
    got = timer.refusals(fleet, "nobody", ["/usr/bin/true"], [])
    assert got == [
        f"user nobody cannot read the config {path}: {path} (mode 0600) cannot be read; as "
        f"root: chgrp nobody {path} && chmod 0640 {path} (and chmod o+x on each directory "
        "above it)"
    ]


def test_cli_refuses_in_one_line(area: Path) -> None:
    """Through the CLI: a config the service user cannot read is exit 3, one line."""
    from tests.cli import fleetcheck

    conf_dir = area / "private"
    conf_dir.mkdir(mode=0o700)
    path = config(conf_dir)
    proc = fleetcheck("timer", "-c", str(path), "--user", "nobody")
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetcheck: error: user nobody cannot "), lines


def test_unit_and_crontab_name_the_configured_environment_file(tmp_path: Path) -> None:
    fleet = fleet_of(tmp_path, "")
    units = timer.build(str(tmp_path / "hosts.toml"), 900, 60, command=["/x/fleetcheck"],
                        environment_file="/etc/fleetcheck/env")  # fmt: skip
    assert "EnvironmentFile=-/etc/fleetcheck/env\n" in units.service
    text = timer.units_text(units, "fleetcheck", "/etc/fleetcheck/env")
    assert (
        "# it reads /etc/fleetcheck/env itself, as the unit does (chgrp fleetcheck "
        "/etc/fleetcheck/env && chmod 0640 /etc/fleetcheck/env)"
    ) in text
    none = timer.build(str(tmp_path / "hosts.toml"), 900, 60, command=["/x/fleetcheck"],
                       environment_file="")  # fmt: skip
    assert "EnvironmentFile" not in none.service
    assert fleet is not None


def test_systemd_reads_only_its_directories(tmp_path: Path) -> None:
    assert timer.systemd_reads("/etc/systemd/system")
    assert timer.systemd_reads("/etc/systemd/system/")
    assert not timer.systemd_reads(str(tmp_path))


def test_nobody_exists() -> None:
    assert pwd.getpwnam("nobody")
