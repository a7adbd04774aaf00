"""`config check` looks at the files the config names (keys, known_hosts, ssh_config, TLS and
password files) and echoes durations written as bare numbers with their unit; one test per
error class."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import fleetcheck

SSH_HOST = '[[hosts]]\nname = "a"\nssh = "10.0.0.1"\n'
LOCAL_HOST = '[[hosts]]\nname = "a"\nssh = "local"\n'


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A HOME with the default ~/.ssh/known_hosts present, so only what a test names is off."""
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / ".ssh" / "known_hosts").write_text("")
    return tmp_path / "home"


def check(tmp_path: Path, home: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    p = tmp_path / "hosts.toml"
    p.write_text(text)
    return fleetcheck("config", "check", "-c", str(p), *args, env={"HOME": str(home)})


def broker(extra: str = "", url: str = "redis://127.0.0.1:6379/0") -> str:
    return f'[broker]\nurl = "{url}"\n{extra}'


def test_a_missing_identity_file_is_an_error(tmp_path: Path, home: Path) -> None:
    key = tmp_path / "id_missing"
    proc = check(tmp_path, home, broker() + f'[ssh]\nidentity_file = "{key}"\n' + SSH_HOST)
    assert proc.returncode == 3
    assert proc.stderr == (
        f"fleetcheck: error: {tmp_path / 'hosts.toml'}: [ssh] identity_file: {key}: no such file\n"
    )
    assert proc.stdout == ""


def test_elsewhere_turns_a_missing_file_into_a_warning(tmp_path: Path, home: Path) -> None:
    key = tmp_path / "id_missing"
    proc = check(
        tmp_path,
        home,
        broker() + f'[ssh]\nidentity_file = "{key}"\n' + SSH_HOST,
        "--elsewhere",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("fleetcheck: warning: ")
    assert f"[ssh] identity_file: {key}: no such file (--elsewhere: " in proc.stderr
    assert ": valid" in proc.stdout


def test_a_directory_named_as_a_tls_file_is_an_error(tmp_path: Path, home: Path) -> None:
    proc = check(
        tmp_path, home, broker(f'ca_file = "{tmp_path}"\n', url="rediss://127.0.0.1:6380/0")
    )
    assert proc.returncode == 3
    assert f"[broker] ca_file: {tmp_path}: is a directory, not a file" in proc.stderr


def test_a_missing_password_file_is_an_error(tmp_path: Path, home: Path) -> None:
    pw = tmp_path / "broker.pw"
    proc = check(tmp_path, home, broker(f'password_file = "{pw}"\n'))
    assert proc.returncode == 3
    assert f"[broker] password_file: {pw}: no such file" in proc.stderr


def test_a_missing_ssh_config_file_is_an_error_when_named(tmp_path: Path, home: Path) -> None:
    conf = tmp_path / "ssh_config"
    proc = check(tmp_path, home, broker() + f'[ssh]\nconfig_file = "{conf}"\n' + SSH_HOST)
    assert proc.returncode == 3
    assert f"[ssh] config_file: {conf}: no such file" in proc.stderr


def test_a_missing_default_ssh_config_is_fine(tmp_path: Path, home: Path) -> None:
    proc = check(tmp_path, home, broker() + SSH_HOST)  # no ~/.ssh/config: as with ssh itself
    assert (proc.returncode, proc.stderr) == (0, "")


def test_a_missing_default_known_hosts_is_a_warning(tmp_path: Path, home: Path) -> None:
    (home / ".ssh" / "known_hosts").unlink()
    proc = check(tmp_path, home, broker() + SSH_HOST)
    assert proc.returncode == 0
    assert proc.stderr == (
        f"fleetcheck: warning: {tmp_path / 'hosts.toml'}: [ssh] known_hosts: "
        "~/.ssh/known_hosts: no such file (the default path; set the key if the file lives "
        "elsewhere)\n"
    )


def test_a_missing_known_hosts_with_accept_new_is_a_warning(tmp_path: Path, home: Path) -> None:
    kh = tmp_path / "kh"
    proc = check(
        tmp_path,
        home,
        broker() + f'[ssh]\nknown_hosts = ["{kh}"]\naccept_new = true\n' + SSH_HOST,
    )
    assert proc.returncode == 0
    assert f"[ssh] known_hosts[0]: {kh}: no such file (accept_new creates it" in proc.stderr


def test_ssh_files_are_warnings_when_no_host_uses_ssh(tmp_path: Path, home: Path) -> None:
    key = tmp_path / "id_missing"
    proc = check(tmp_path, home, broker() + f'[ssh]\nidentity_file = "{key}"\n' + LOCAL_HOST)
    assert proc.returncode == 0
    assert "no such file (no host is reached over ssh)" in proc.stderr


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can enter (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="fleetcheck-files-"))
    d.chmod(0o755)
    yield d
    for p in d.iterdir():
        p.unlink()
    d.rmdir()


def test_an_unreadable_file_is_an_error(shared_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to run the check as another user")
    secret = shared_dir / "client.key"
    secret.write_text("x")
    secret.chmod(0o600)  # root's, so nobody cannot read it
    cert = shared_dir / "client.pem"
    cert.write_text("x")
    cert.chmod(0o644)
    cfg = shared_dir / "hosts.toml"
    cfg.write_text(
        broker(f'cert_file = "{cert}"\nkey_file = "{secret}"\n', url="rediss://127.0.0.1:6380/0")
    )
    cfg.chmod(0o644)
    proc = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        + [sys.executable, "-m", "fleetcheck", "config", "check", "-c", str(cfg)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(shared_dir)},
        cwd=shared_dir,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr == (
        f"fleetcheck: error: {cfg}: [broker] key_file: {secret}: not readable by this user "
        "(permission denied)\n"
    )  # the default known_hosts, missing in this HOME, is not mentioned: no host uses ssh


def test_bare_numbers_for_durations_are_echoed_with_their_unit(tmp_path: Path, home: Path) -> None:
    text = (
        broker("connect_timeout = 2\n")
        + "[defaults]\nlogs = [{ path = '/l', max_age = 10 }]\ntz = 'UTC'\n"
        + LOCAL_HOST
        + '[[hosts]]\nname = "b"\nssh = "local"\n'
        + "[checks.live_hash]\nkey = 'k'\nmax_age = 1200\nmatch_wall = '10m'\n"
    )
    proc = check(tmp_path, home, text)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = lines.index("durations written as bare numbers:")
    assert lines[start + 1 : start + 4] == [
        "  [broker] connect_timeout 2s (a bare number means seconds)",
        "  [defaults.logs[0]] max_age 10s (a bare number means seconds)",
        "  [checks.live_hash] max_age 1200s (a bare number means seconds)",
    ]
    assert not lines[start + 4].startswith("  [")  # once, where it was written: not per host
