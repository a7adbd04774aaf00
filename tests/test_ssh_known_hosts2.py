"""OpenSSH's default UserKnownHostsFile is `~/.ssh/known_hosts ~/.ssh/known_hosts2`: with
`[ssh] known_hosts` at its default fleetcheck reads both, so a @revoked line in known_hosts2
is never missed; accept_new still writes to the first file only, as ssh does.

Verified to fail before the fix (hostkeys.known_hosts_paths read ~/.ssh/known_hosts only):
the revoked and known-only-in-known_hosts2 tests connected / said UNKNOWN."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fleetcheck.config import SshConfig
from tests.lab import Lab, LabHost
from tests.test_ssh_hostkeys import openssh, ours


def _cfg(lab: Lab, **kw: object) -> SshConfig:
    """Everything but known_hosts, which stays at its default."""
    base: dict[str, object] = dict(
        user="root",
        identity_file=str(lab.client_key),
        config_file="/dev/null",
        connect_timeout=3.0,
        command_timeout=5.0,
        use_agent=False,
    )
    base.update(kw)
    return SshConfig(**base)  # type: ignore[arg-type]


def _openssh(lab: Lab, h: LabHost, files: str) -> bool:
    """The real ssh client, strict, with `files` (one or more paths) as UserKnownHostsFile."""
    return openssh(lab, h, Path(files))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "home"
    (d / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(d))
    return d / ".ssh"


def test_openssh_default_user_known_hosts_names_known_hosts2() -> None:
    """The default this fix follows, from the real client (no network)."""
    out = subprocess.run(
        ["ssh", "-G", "-F", "/dev/null", "h"], capture_output=True, text=True, timeout=30
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("userknownhostsfile "))
    files = [Path(x) for x in line.split()[1:]]  # ssh -G prints them with ~ expanded
    assert [(f.parent.name, f.name) for f in files] == [
        (".ssh", "known_hosts"),
        (".ssh", "known_hosts2"),
    ]


@pytest.mark.lab
def test_revoked_in_known_hosts2_is_crit(lab: Lab, home: Path) -> None:
    h = lab.add_host("kh2")
    kh, kh2 = home / "known_hosts", home / "known_hosts2"
    kh.write_text(f"{h.addr} {h.host_key_pub}\n")
    kh2.write_text(f"@revoked * {h.host_key_pub}\n")
    assert not _openssh(lab, h, f"{kh} {kh2}")
    got = ours(h, _cfg(lab))
    assert got.startswith("CRIT: host key of") and "REVOKED" in got, got
    assert f"{kh2}:1" in got


@pytest.mark.lab
def test_known_only_in_known_hosts2_is_ok(lab: Lab, home: Path) -> None:
    h = lab.add_host("kh2")
    kh, kh2 = home / "known_hosts", home / "known_hosts2"
    kh2.write_text(f"{h.addr} {h.host_key_pub}\n")
    assert _openssh(lab, h, f"{kh} {kh2}")
    assert ours(h, _cfg(lab)) == "OK"


@pytest.mark.lab
def test_accept_new_writes_the_first_file_only(lab: Lab, home: Path) -> None:
    h = lab.add_host("kh2")
    kh, kh2 = home / "known_hosts", home / "known_hosts2"
    kh2.write_text("# nothing about this host\n")
    assert ours(h, _cfg(lab, accept_new=True)) == "OK"
    assert h.host_key_pub in kh.read_text()
    assert kh2.read_text() == "# nothing about this host\n"


@pytest.mark.lab
def test_an_explicit_known_hosts_reads_only_that_file(lab: Lab, home: Path, tmp_path: Path) -> None:
    """Set to another file, fleetcheck reads only it (as UserKnownHostsFile does)."""
    h = lab.add_host("kh2")
    mine = tmp_path / "mine"
    mine.write_text(f"{h.addr} {h.host_key_pub}\n")
    (home / "known_hosts2").write_text(f"@revoked * {h.host_key_pub}\n")
    assert ours(h, _cfg(lab, known_hosts=str(mine))) == "OK"
