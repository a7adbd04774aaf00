"""CLI behaviour that needs no lab: usage errors, version, listing, lazy imports."""

from __future__ import annotations

import subprocess
import sys

import pytest


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args",
    [
        ["--bogus"],
        ["run", "--bogus"],
        ["run", "--format", "xml"],
        ["nosuchcommand"],
        ["run", "extra-argument"],
    ],
)
def test_usage_error_is_not_0_1_or_2(args: list[str]) -> None:
    proc = cli(*args)
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip()


def test_version() -> None:
    from fleetcheck import __version__

    proc = cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"fleetcheck {__version__}"


def test_checks_lists_clients() -> None:
    proc = cli("checks")
    assert proc.returncode == 0
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert "clients" in names


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["run", "--help"]])
def test_help_and_version_do_not_import_redis_or_paramiko(args: list[str]) -> None:
    code = (
        "import sys\n"
        "from fleetcheck.cli import main\n"
        f"sys.argv = ['fleetcheck', *{args!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('redis', 'paramiko'))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY []" in proc.stderr, proc.stderr
