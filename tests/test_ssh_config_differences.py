"""One test per ssh_config difference issue 23 found between fleetcheck and OpenSSH 9.2.

Each was seen to FAIL on the reader before this change (ssh_config.py and ssh/target.py at
057231a swapped in: 18 of the 19 tests below failed there; the last one, /dev/null as the
config file, is a guard that the new permission check leaves it alone) and passes now; the
differential harness in tests/ssh_diff_config checks the same things against the real
`ssh -G`."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetcheck.transport.ssh_config import SshConfigError, resolver


def _conf(tmp_path: Path, text: str) -> str:
    p = tmp_path / "config"
    p.write_text(text)
    p.chmod(0o600)
    return str(p)


# ---------------------------------------------------------------- SECURITY


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_writable_included_file_is_refused_and_its_proxycommand_never_applied(
    tmp_path: Path, mode: int
) -> None:
    """An Included file others can write could make the patrol run a ProxyCommand: ssh stops
    with "Bad owner or permissions", and so must we, naming the Include line and the file."""
    inc = tmp_path / "inc"
    inc.write_text(f"ProxyCommand touch {tmp_path}/pwned\n")
    inc.chmod(mode)
    conf = _conf(tmp_path, f"Include {inc}\n")
    with pytest.raises(SshConfigError) as info:
        resolver(conf).resolve("h")
    message = str(info.value)
    assert "Bad owner or permissions" in message and str(inc) in message
    assert f"{conf} line 1" in message and "\n" not in message


def test_included_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    inc = tmp_path / "inc"
    inc.write_text("User evil\n")
    inc.chmod(0o600)
    import os

    os.chown(inc, 65534, -1)
    with pytest.raises(SshConfigError, match="Bad owner or permissions"):
        resolver(_conf(tmp_path, f"Include {inc}\n")).resolve("h")


# ---------------------------------------------------------------- values ssh refuses


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Junk x\n", "Bad configuration option: junk"),
        ("Host other\n  Junk x\n", "Bad configuration option: junk"),  # inactive too
        ("User alice bob\n", "extra arguments"),
        ("ConnectTimeout 1.5\n", "is not a time"),
        ("UserKnownHostsFile /x none\n", '"none" argument must appear alone'),
        ("Match exec 'test %h = h'\n  User x\n", "Bad Match condition"),
    ],
)
def test_what_ssh_refuses_is_refused(tmp_path: Path, text: str, reason: str) -> None:
    conf = _conf(tmp_path, text)
    with pytest.raises(SshConfigError) as info:
        resolver(conf).resolve("h")
    assert reason in str(info.value) and conf in str(info.value)


# ---------------------------------------------------------------- resolution


def test_percent_k_without_host_key_alias_is_the_host_argument(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "Host h\n  HostName real.example\n  IdentityFile /k/%k\n")
    assert resolver(conf).resolve("h").identity_files == ("/k/h",)


def test_dollar_variables_in_identity_and_known_hosts_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FC_KEYS", "/srv/keys")
    conf = _conf(tmp_path, "IdentityFile ${FC_KEYS}/id\nUserKnownHostsFile ${FC_KEYS}/kh\n")
    r = resolver(conf).resolve("h")
    assert (r.identity_files, r.user_known_hosts) == (("/srv/keys/id",), ("/srv/keys/kh",))
    monkeypatch.delenv("FC_KEYS")
    with pytest.raises(SshConfigError, match="FC_KEYS"):
        resolver(conf).resolve("h")


def test_match_exec_percent_k(tmp_path: Path) -> None:
    """%k in Match exec is the HostKeyAlias set so far (as written), else the host name."""
    conf = _conf(tmp_path, 'HostKeyAlias Al\nMatch exec "test %k = Al"\n  User matched\n')
    assert resolver(conf).resolve("h").user == "matched"


def test_canonicalize_hostname_re_parses_with_the_new_name(tmp_path: Path) -> None:
    conf = _conf(
        tmp_path,
        "CanonicalizeHostname yes\nHost a\n  HostName other\nHost other\n  User re-parsed\n",
    )
    assert resolver(conf).resolve("a").user == "re-parsed"


def test_port_service_name(tmp_path: Path) -> None:
    assert resolver(_conf(tmp_path, "Port ssh\n")).resolve("h").port == 22


def test_match_host_equals_syntax(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "Match host=b\n  User eq\n")
    assert resolver(conf).resolve("b").user == "eq"
    assert resolver(conf).resolve("c").user != "eq"


def test_host_key_alias_is_lower_cased(tmp_path: Path) -> None:
    conf = _conf(tmp_path, "HostKeyAlias Web-Prod\n")
    assert resolver(conf).resolve("h").host_key_alias == "web-prod"


def test_proxy_command_tokens_as_ssh_expands_them(tmp_path: Path) -> None:
    """sshconnect.c: %h %k %n %p %r and %% (the old reader knew no %k and left it as is)."""
    from fleetcheck.config.tables import SshConfig
    from fleetcheck.transport.ssh.target import resolve_target

    conf = _conf(tmp_path, "Host a\n  HostName 10.0.0.9\n  ProxyCommand nc %h %p %k %n %r %%\n")
    t = resolve_target("a", SshConfig(user="u"), resolver(conf))
    assert t.proxy_command == "nc 10.0.0.9 22 a a u %"


def test_dev_null_as_the_config_file_is_an_empty_config() -> None:
    """The lab and many users say `config_file = "/dev/null"`: a device, not a file anyone
    could write rules into; the permission check is for regular files."""
    r = resolver("/dev/null").resolve("h", user="u")
    assert (r.hostname, r.user, r.sources) == ("h", "u", ("/dev/null",))
