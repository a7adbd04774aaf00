"""ssh_config on the real lab: an alias defined in an Included file is reached (HostName,
User, IdentityFile, ProxyJump all from the included file), precedence holds both ways, and
`fleetcheck config check --ssh` prints what each host resolves to."""

from __future__ import annotations

import json

import pytest

from tests.cli import fleetcheck
from tests.lab import Lab

pytestmark = pytest.mark.lab


def test_alias_from_an_included_file_is_reached(lab: Lab) -> None:
    web = lab.add_host("web")
    jump = lab.add_host("jump", sshd=False)
    lab.start_sshd(jump, log_level="INFO")  # logs each login: proves the jump was used
    d = lab.dir / "ssh"
    (d / "config.d").mkdir(parents=True)
    (d / "config").write_text(f"Include {d}/config.d/*.conf\nHost *\n  User nobody\n")
    (d / "config.d" / "web.conf").write_text(
        f"Host web-alias\n  HostName {web.addr}\n  User root\n  IdentityFile {lab.client_key}\n"
        f"  ProxyJump jump-alias\nHost jump-alias\n  HostName {jump.addr}\n  User root\n"
        f"  IdentityFile {lab.client_key}\n"
    )
    config = lab.config(checks="[checks.routes]\n", hosts=[web])
    text = config.read_text()
    text = text.replace('config_file = "/dev/null"', f'config_file = "{d}/config"')
    text = text.replace('user = "root"', 'user = "wrong-default"')  # [ssh] loses to ssh_config
    text = text.replace(f'identity_file = "{lab.client_key}"\n', "")
    text = text.replace(f'ssh = "{web.addr}"', 'ssh = "web-alias"')
    config.write_text(text)

    out = fleetcheck("run", "-c", str(config), "--format", "json", "--no-state")
    rows = json.loads(out.stdout)["results"]
    assert [r["status"] for r in rows] == ["OK"], rows
    assert (jump.dir / "sshd.log").read_text().count("Accepted publickey for root") == 1

    shown = fleetcheck("config", "check", "--ssh", "-c", str(config))
    assert shown.returncode == 0, shown.stderr
    assert f"web: root@{web.addr} port 22" in shown.stdout
    assert f"jump chain: root@{jump.addr}:22 -> here" in shown.stdout
    assert f"key files: {lab.client_key}" in shown.stdout
    assert f"known_hosts: {lab.known_hosts}" in shown.stdout


def test_hosts_toml_user_beats_ssh_config(lab: Lab) -> None:
    """The host's own `user` acts like ssh -l: ssh_config's User for the alias loses."""
    web = lab.add_host("web")
    conf = lab.dir / "ssh_config"
    conf.write_text(f"Host web-alias\n  HostName {web.addr}\n  User nobody-here\n")
    config = lab.config(checks="[checks.routes]\n", hosts=[web], host_extra={"web": ""})
    text = config.read_text().replace('config_file = "/dev/null"', f'config_file = "{conf}"')
    text = text.replace(f'ssh = "{web.addr}"', 'ssh = "web-alias"\nuser = "root"')
    config.write_text(text)
    out = fleetcheck("run", "-c", str(config), "--format", "json", "--no-state")
    assert [r["status"] for r in json.loads(out.stdout)["results"]] == ["OK"]
    # and without it, ssh_config's user is used (and refused by the lab's sshd)
    config.write_text(
        text.replace('user = "root"\n[[hosts', "[[hosts").replace(
            'ssh = "web-alias"\nuser = "root"', 'ssh = "web-alias"'
        )
    )
    out = fleetcheck("run", "-c", str(config), "--format", "json", "--no-state")
    row = json.loads(out.stdout)["results"][0]
    assert row["status"] == "UNKNOWN" and "for user nobody-here" in row["summary"], row


def test_config_check_ssh_names_an_unresolvable_host(lab: Lab) -> None:
    conf = lab.dir / "bad_ssh_config"
    # (Match final, the example here before, is honoured now as ssh's second pass; an
    # unknown keyword is what ssh itself refuses)
    conf.write_text("Junk x\n")
    h = lab.add_host("a", sshd=False)
    config = lab.config(checks="[checks.routes]\n", hosts=[h])
    config.write_text(
        config.read_text().replace('config_file = "/dev/null"', f'config_file = "{conf}"')
    )
    shown = fleetcheck("config", "check", "--ssh", "-c", str(config))
    assert shown.returncode == 3
    assert (
        "a: cannot resolve" in shown.stdout
        and "line 1: Bad configuration option: junk" in shown.stdout
    )


def test_accept_new_and_known_hosts_file_from_ssh_config(lab: Lab) -> None:
    """`StrictHostKeyChecking accept-new` with a `UserKnownHostsFile` (and a `HostKeyAlias`)
    from ssh_config: the first patrol adds the key under the alias to that file, the next
    one checks it there; [ssh] known_hosts is not used for this host."""
    from fleetcheck.config import HostConfig, SshConfig
    from fleetcheck.transport.ssh import open_shell

    h = lab.add_host("a")
    kh = lab.dir / "kh_from_ssh_config"
    conf = lab.dir / "ssh_config_accept_new"
    conf.write_text(
        f"Host box\n  HostName {h.addr}\n  UserKnownHostsFile {kh}\n"
        "  StrictHostKeyChecking accept-new\n  HostKeyAlias box-alias\n"
    )
    cfg = SshConfig(
        user="root",
        known_hosts=str(lab.known_hosts),
        identity_file=str(lab.client_key),
        config_file=str(conf),
        use_agent=False,
    )
    for _ in range(2):
        shell = open_shell(HostConfig(name="a", ssh="box"), cfg)
        try:
            assert shell.run("printf ok", 5, 100).stdout == b"ok"
        finally:
            shell.close()
    lines = kh.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("box-alias ssh-ed25519 "), lines
    assert "box-alias" not in lab.known_hosts.read_text()
