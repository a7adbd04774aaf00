"""ssh_config keywords that can make OpenSSH refuse a host key are never silently ignored
(issue 23 review): against a real sshd, the real ssh refuses a host whose key is in a
RevokedHostKeys file, and fleetcheck refuses the host too, with one line naming the keyword,
file and line. Verified to fail before the fix (fleetcheck connected: "OK")."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.config import SshConfig
from tests.lab import Lab
from tests.test_ssh_hostkeys import ours


def real_ssh(lab: Lab, h: Any, kh: Path, config: str) -> subprocess.CompletedProcess[bytes]:
    """The oracle: the real ssh client, batch mode, strict, only `kh` as known_hosts."""
    return subprocess.run(
        [
            "ssh", "-F", config, "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={kh}",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5",
            "-i", str(lab.client_key), f"root@{h.addr}", "true",
        ],
        capture_output=True,
        timeout=30,
    )  # fmt: skip


def ssh_settings(lab: Lab, kh: Path, config: str) -> SshConfig:
    """fleetcheck's [ssh] for the same case: the same key, known_hosts and config file."""
    return SshConfig(
        user="root",
        known_hosts=str(kh),
        identity_file=str(lab.client_key),
        config_file=config,
        connect_timeout=3.0,
        command_timeout=5.0,
        use_agent=False,
    )


@pytest.mark.lab
@pytest.mark.parametrize(
    "line",
    ["RevokedHostKeys {revoked}", "HostKeyAlgorithms +ssh-rsa", "CheckHostIP yes"],
)
def test_a_keyword_that_can_refuse_refuses_the_host(lab: Lab, tmp_path: Path, line: str) -> None:
    h = lab.add_host("strict")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{h.addr} {h.host_key_pub}\n")
    revoked = tmp_path / "revoked"
    revoked.write_text(f"{h.host_key_pub}\n")
    cfg_file = tmp_path / "config"
    option = line.format(revoked=revoked)
    cfg_file.write_text(f"Host {h.addr}\n  {option}\n")
    if option.startswith("RevokedHostKeys"):  # the oracle: ssh refuses this one outright
        proc = real_ssh(lab, h, kh, str(cfg_file))
        assert proc.returncode != 0 and b"revoked" in proc.stderr.lower()
    cfg = ssh_settings(lab, kh, str(cfg_file))
    got = ours(h, cfg)
    assert got != "OK"
    assert "\n" not in got and f"{cfg_file} line 2" in got, got
    assert option.split()[0] in got, got


@pytest.mark.lab
def test_a_keyword_set_so_it_cannot_refuse_connects(lab: Lab, tmp_path: Path) -> None:
    h = lab.add_host("strict")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{h.addr} {h.host_key_pub}\n")
    cfg_file = tmp_path / "config"
    cfg_file.write_text(
        f"Host {h.addr}\n  RevokedHostKeys none\n  CheckHostIP no\n  Ciphers +aes128-cbc\n"
    )
    cfg = ssh_settings(lab, kh, str(cfg_file))
    assert ours(h, cfg) == "OK"


@pytest.mark.lab
def test_a_server_speaking_only_crypto_ssh_no_longer_offers_is_refused(
    lab: Lab, tmp_path: Path
) -> None:
    """An sshd that offers only CBC ciphers: OpenSSH 9.2's client refuses it ("no matching
    cipher"); fleetcheck, which offered paramiko's lists (CBC and 3DES included), connected.
    Now it offers OpenSSH's default lists and refuses too."""
    h = lab.add_host("cbconly", sshd_options="Ciphers aes128-cbc,aes256-cbc\n")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{h.addr} {h.host_key_pub}\n")
    proc = real_ssh(lab, h, kh, "/dev/null")
    assert proc.returncode != 0 and b"no matching cipher" in proc.stderr.lower(), proc.stderr
    cfg = ssh_settings(lab, kh, "/dev/null")
    got = ours(h, cfg)
    assert got != "OK" and "\n" not in got, got


@pytest.mark.lab
@pytest.mark.parametrize(
    "line,connects",
    [
        ("Ciphers aes256-ctr", True),  # a hardened list paramiko speaks: obeyed, connects
        ("Ciphers aes128-ctr", False),  # the server offers only aes256-ctr: ssh refuses
        ("Ciphers -aes256*", False),  # removed: nothing left the server speaks
        ("MACs hmac-sha2-512", False),  # the server's MAC is hmac-sha2-256 only
        ("KexAlgorithms curve25519-sha256,ecdh-sha2-nistp256", True),
    ],
)
def test_ciphers_macs_and_kex_lines_are_obeyed_as_ssh_obeys_them(
    lab: Lab, tmp_path: Path, line: str, connects: bool
) -> None:
    """A hardened Host * (Ciphers / MACs / KexAlgorithms) against a server that speaks one
    cipher and one MAC: the real ssh is the oracle; fleetcheck connects exactly when it
    does (before, it ignored the lines and connected on paramiko's lists)."""
    h = lab.add_host("hardened", sshd_options="Ciphers aes256-ctr\nMACs hmac-sha2-256\n")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{h.addr} {h.host_key_pub}\n")
    cfg_file = tmp_path / "config"
    cfg_file.write_text(f"Host *\n  {line}\n")
    cfg_file.chmod(0o600)
    proc = real_ssh(lab, h, kh, str(cfg_file))
    assert (proc.returncode == 0) is connects, proc.stderr
    cfg = ssh_settings(lab, kh, str(cfg_file))
    got = ours(h, cfg)
    assert (got == "OK") is connects, got
    assert "\n" not in got


def test_a_crypto_line_fleetcheck_cannot_speak_refuses_in_one_line() -> None:
    from fleetcheck.core.errors import TransportError
    from fleetcheck.transport.ssh import crypto

    paramiko_ciphers = ("aes128-ctr", "aes256-ctr", "aes128-cbc")
    assert crypto.offered("ciphers", paramiko_ciphers, None) == ("aes128-ctr", "aes256-ctr")
    assert crypto.offered("ciphers", paramiko_ciphers, ("f line 2", "+aes128-cbc")) == (
        "aes128-ctr",
        "aes256-ctr",
        "aes128-cbc",
    )
    assert crypto.offered("ciphers", paramiko_ciphers, ("f line 2", "^aes256-ctr")) == (
        "aes256-ctr",
        "aes128-ctr",
    )
    with pytest.raises(TransportError, match=r"f line 2: Ciphers chacha20-poly1305@openssh.com"):
        crypto.offered("ciphers", paramiko_ciphers, ("f line 2", "chacha20-poly1305@openssh.com"))
