"""ssh_config keywords that can make OpenSSH refuse a host key are never silently ignored
(issue 23 review): against a real sshd, the real ssh refuses a host whose key is in a
RevokedHostKeys file, and fleetcheck refuses the host too, with one line naming the keyword,
file and line. Verified to fail before the fix (fleetcheck connected: "OK")."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from fleetcheck.config import SshConfig
from tests.lab import Lab
from tests.test_ssh_hostkeys import ours


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
        proc = subprocess.run(
            [
                "ssh", "-F", str(cfg_file), "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={kh}",
                "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5",
                "-i", str(lab.client_key), f"root@{h.addr}", "true",
            ],
            capture_output=True,
            timeout=30,
        )  # fmt: skip
        assert proc.returncode != 0 and b"revoked" in proc.stderr.lower()
    cfg = SshConfig(
        user="root",
        known_hosts=str(kh),
        identity_file=str(lab.client_key),
        config_file=str(cfg_file),
        connect_timeout=3.0,
        command_timeout=5.0,
        use_agent=False,
    )
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
    cfg = SshConfig(
        user="root",
        known_hosts=str(kh),
        identity_file=str(lab.client_key),
        config_file=str(cfg_file),
        connect_timeout=3.0,
        command_timeout=5.0,
        use_agent=False,
    )
    assert ours(h, cfg) == "OK"
