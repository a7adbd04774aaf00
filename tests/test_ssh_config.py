"""ssh_config resolution checked against the real OpenSSH client: for every config in the
corpus and every host argument, what we resolve equals what `ssh -G` prints."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcheck.transport.ssh_config import (
    Resolved,
    SshConfigError,
    percent_expand,
    resolver,
)
from fleetcheck.transport.ssh_config_syntax import argv_split

HOME = pwd.getpwuid(os.getuid()).pw_dir
SSH = shutil.which("ssh")

# Each case: files (name -> text; "{d}" is the case's directory, "{rel}" its path relative to
# ~/.ssh), the main file's name, and host arguments (optionally with -l/-p as in ssh).
CORPUS: list[tuple[str, dict[str, str], list[list[str]]]] = [
    (
        "first value wins",
        {"config": "Host web\n  User a\n  Port 2201\nHost *\n  User b\n  Port 2202\n"},
        [["web"], ["other"], ["-l", "cli", "web"], ["-p", "2300", "web"]],
    ),
    (
        "hostname token and lower case",
        {"config": "Host web*\n  HostName %h.Example.COM\nHost db\n  HostName 10.0.0.5\n"},
        [["web1"], ["db"], ["WEB1"], ["x"]],
    ),
    (
        "negation in Host",
        {"config": "Host * !bastion\n  ProxyJump bastion\nHost bastion\n  HostName 10.0.0.1\n"},
        [["app1"], ["bastion"]],
    ),
    (
        "negation only never matches",
        {"config": "Host !web\n  User neg\nHost web\n  User pos\n"},
        [["web"], ["other"]],
    ),
    (
        "wildcards ? and *",
        {"config": "Host db?\n  User one\nHost db*\n  User many\n"},
        [["db1"], ["db12"], ["db"]],
    ),
    (
        "include absolute glob",
        {
            "config": "Include {d}/config.d/*.conf\nHost *\n  User fallback\n",
            "config.d/10-web.conf": "Host web\n  HostName 10.0.1.1\n  User deploy\n",
            "config.d/20-db.conf": "Host db\n  HostName 10.0.1.2\n  Port 5022\n",
            "config.d/ignored.txt": "Host web\n  User wrong\n",
        },
        [["web"], ["db"], ["x"]],
    ),
    (
        "include relative to ~/.ssh",
        {
            "config": "Include {rel}/inc/*\n",
            "inc/a": "Host rel\n  HostName 10.0.2.1\n  IdentityFile ~/.ssh/rel_key\n",
        },
        [["rel"], ["nope"]],
    ),
    (
        "include nested",
        {
            "config": "Include {d}/one\n",
            "one": "Include {d}/two\nHost n1\n  User one\n",
            "two": "Host n1 n2\n  User two\n  HostName 10.0.3.%h\n",
        },
        [["n1"], ["n2"]],
    ),
    (
        "include inside Host",
        {
            "config": "Host web\n  Include {d}/inc\nHost other\n  Include {d}/inc2\n",
            "inc": "User from-inc\nHost *\n  Port 2022\n",
            "inc2": "User wrong\n",
        },
        [["web"], ["db"]],
    ),
    (
        "match in include does not leak",
        {
            "config": "Host a\n  Include {d}/inc\n  User after-include\nHost *\n  Port 2\n",
            "inc": "Match host zzz\n  HostName never\n",
        },
        [["a"], ["b"]],
    ),
    (
        "match host uses hostname",
        {
            "config": "Host short\n  HostName long.example.org\n"
            "Match host *.example.org\n  User by-hostname\n"
            "Match originalhost short\n  Port 2200\n",
        },
        [["short"], ["long.example.org"], ["x.example.org"]],
    ),
    (
        "match user and localuser",
        {
            "config": "Match user ops\n  Port 2201\n"
            "Match localuser {localuser}\n  IdentityFile ~/.ssh/local_%u\n"
            "Match !localuser {localuser}\n  IdentityFile ~/.ssh/never\n"
            "Host *\n  User default\n",
        },
        [["h"], ["-l", "ops", "h"], ["ops@h"]],
    ),
    (
        "match exec",
        {
            "config": 'Match exec "test %h = yes"\n  User exec-yes\n'
            "Match host x exec false\n  User never\n"
            "Match !exec false\n  Port 2222\n",
        },
        [["yes"], ["no"], ["x"]],
    ),
    (
        "match all",
        {"config": "Host a\n  User a\nMatch all\n  User all\n  Port 2000\n"},
        [["a"], ["b"]],
    ),
    (
        "match negated host list",
        {"config": 'Match host "*.corp,!gw.corp"\n  ProxyJump gw.corp\n'},
        [["a.corp"], ["gw.corp"], ["a.home"]],
    ),
    (
        "identity files accumulate with tokens",
        {
            "config": "Host web\n  HostName web.example\n  User deploy\n"
            "  IdentityFile ~/.ssh/%h_%r_%p\n  IdentityFile %d/.ssh/%n_%u\nHost *\n"
            "  IdentityFile ~/.ssh/common\n  IdentitiesOnly yes\n",
        },
        [["web"], ["other"]],
    ),
    (
        "proxyjump chain",
        {
            "config": "Host target\n  ProxyJump j1,alice@j2:2222\n"
            "Host j1\n  HostName 10.0.4.1\n  ProxyJump j0\n",
        },
        [["target"], ["j1"]],
    ),
    (
        "proxyjump vs proxycommand",
        {
            "config": "Host a\n  ProxyJump none\n  ProxyCommand nc %h %p\n"
            "Host b\n  ProxyCommand none\n  ProxyJump x\n"
            "Host c\n  ProxyJump j\n  ProxyCommand nc %h %p\n"
            "Host d\n  ProxyCommand ssh -W %h:%p gw\n  ProxyJump j\n",
        },
        [["a"], ["b"], ["c"], ["d"]],
    ),
    (
        "known hosts files and strictness",
        {
            "config": "Host a\n  UserKnownHostsFile ~/kh_%h %d/.ssh/kh_%r\n"
            "  GlobalKnownHostsFile /etc/kh_global\n  StrictHostKeyChecking accept-new\n"
            "Host *\n  UserKnownHostsFile /never\n  StrictHostKeyChecking no\n",
        },
        [["a"], ["b"]],
    ),
    (
        "host key alias and connect timeout",
        {
            "config": "Host a\n  HostKeyAlias alias-a\n  ConnectTimeout 7\n"
            "Host *\n  ConnectTimeout 3\n",
        },
        [["a"], ["b"]],
    ),
    (
        "equals signs, quotes, comments, case of keywords",
        {
            "config": "# comment\nHOST=web\n  hostname = 10.0.5.1 # trailing\n"
            '  USER "quoted user"\n  port=2023\n  IdentityFile "~/.ssh/with space"\n',
        },
        [["web"]],
    ),
    (
        "include several arguments and missing files",
        {
            "config": "Include {d}/missing {d}/a {d}/b*\nHost *\n  User z\n",
            "a": "Host x\n  User from-a\n",
            "b1": "Host y\n  User from-b1\n",
        },
        [["x"], ["y"], ["w"]],
    ),
    (
        "command line user and port win over the file",
        {"config": "Host a\n  User file\n  Port 2000\n"},
        [["-l", "cli", "-p", "3000", "a"], ["ssh://u@a:4000"]],
    ),
    (
        "match host after a HostName with %h",
        {
            "config": "Host *.lan\n  HostName %h.example.net\n"
            "Match host *.lan.example.net\n  User lan\n",
        },
        [["box.lan"], ["box"]],
    ),
]

FIELDS = (
    "host", "hostname", "user", "port", "identityfile", "identitiesonly", "proxyjump",
    "proxycommand", "connecttimeout", "hostkeyalias", "userknownhostsfile",
    "globalknownhostsfile", "stricthostkeychecking",
)  # fmt: skip


def oracle(config: Path, argv: list[str]) -> dict[str, object]:
    assert SSH is not None
    out = subprocess.run(
        [SSH, "-G", "-F", str(config), *argv],
        capture_output=True,
        timeout=30,
        check=True,
        stdin=subprocess.DEVNULL,
    ).stdout.decode()
    got: dict[str, object] = {"identityfile": []}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        if key == "identityfile":
            got["identityfile"].append(value)  # type: ignore[union-attr]
        elif key in FIELDS:
            got[key] = value
    return {k: got.get(k) for k in FIELDS}


def ours(config: Path, argv: list[str]) -> dict[str, object]:
    user = port = None
    args = list(argv)
    while args and args[0] in ("-l", "-p"):
        flag, value = args.pop(0), args.pop(0)
        if flag == "-l":
            user = value
        else:
            port = int(value)
    host = args[0]
    if host.startswith("ssh://"):
        host = host.removeprefix("ssh://")
        host, _, p = host.rpartition(":")
        port = port or int(p)
    if "@" in host:
        u, host = host.rsplit("@", 1)
        user = user or u
    r: Resolved = resolver(str(config)).resolve(host, user=user, port=port)
    strict = r.strict_host_key_checking
    return {
        "host": r.host,
        "hostname": r.hostname,
        "user": r.user,
        "port": str(r.port),
        "identityfile": list(r.identity_files_raw),
        "identitiesonly": "yes" if r.identities_only else "no",
        "proxyjump": r.proxy_jump,
        "proxycommand": r.proxy_command,
        "connecttimeout": "none" if r.connect_timeout is None else f"{r.connect_timeout:g}",
        "hostkeyalias": r.host_key_alias,
        "userknownhostsfile": " ".join(r.user_known_hosts),
        "globalknownhostsfile": " ".join(r.global_known_hosts),
        "stricthostkeychecking": strict,
    }


@pytest.fixture
def case_dir() -> Iterator[Path]:
    """A directory under ~/.ssh (relative Includes are read from there), removed after."""
    d = Path(HOME) / ".ssh" / f"fleetcheck-test-{secrets.token_hex(4)}"
    d.mkdir(parents=True)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.skipif(SSH is None, reason="needs the OpenSSH client as the oracle")
@pytest.mark.parametrize(("name", "files", "hosts"), CORPUS, ids=[c[0] for c in CORPUS])
def test_resolution_equals_ssh_G(
    case_dir: Path, name: str, files: dict[str, str], hosts: list[list[str]]
) -> None:
    rel = case_dir.relative_to(Path(HOME) / ".ssh")
    localuser = pwd.getpwuid(os.getuid()).pw_name
    for fname, text in files.items():
        p = case_dir / fname
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text.format(d=case_dir, rel=rel, localuser=localuser))
        p.chmod(0o600)
    config = case_dir / "config"
    for argv in hosts:
        assert ours(config, argv) == oracle(config, argv), (name, argv)


def test_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 20


# ---------------------------------------------------------------- refusals, one per class


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # Match final and canonical are implemented now (ssh's second pass): see
        # tests/ssh_diff_config; `Port http` is port 80 as in ssh (a services name)
        ("Junk x\n", "Bad configuration option: junk"),
        ("Host *\n  Port 0\n", "Port '0' is not a port number"),
        ("Match localnetwork 10.0.0.0/8\n  User x\n", "Match localnetwork is not supported"),
        ("Match host\n", "Match host needs an argument"),
        ("Match\n", "Match without criteria"),
        ("Host *\n  Port no-such-service\n", "Port 'no-such-service' is not a port number"),
        ("Host *\n  ConnectTimeout soon\n", "ConnectTimeout 'soon' is not a time"),
        ("Host *\n  IdentitiesOnly maybe\n", "expected yes or no"),
        ("Host *\n  StrictHostKeyChecking sometimes\n", "StrictHostKeyChecking"),
        ("Host *\n  HostName %z\n", "unknown token %z"),
        ('Host *\n  User "open\n', "unterminated quote"),
        ("Include\n", "Include without a file"),
    ],
)
def test_refusals_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    conf = tmp_path / "config"
    conf.write_text(text)
    with pytest.raises(SshConfigError) as info:
        resolver(str(conf)).resolve("h")
    assert message in str(info.value)
    assert str(conf) in str(info.value)


def test_include_loop_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "config"
    conf.write_text(f"Include {conf}\n")
    with pytest.raises(SshConfigError, match="too many nested Includes"):
        resolver(str(conf)).resolve("h")


def test_missing_config_file_is_an_empty_config(tmp_path: Path) -> None:
    r = resolver(str(tmp_path / "nope")).resolve("h", user="u", port=2)
    assert (r.hostname, r.user, r.port, r.sources) == ("h", "u", 2, ())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a b  c", ["a", "b", "c"]),
        ('"a b" c', ["a b", "c"]),
        ("'a b' c", ["a b", "c"]),
        ("a\\ b", ["a b"]),
        ("a # comment", ["a"]),
        ('"#x"', ["#x"]),
        ("", []),
    ],
)
def test_split_args(text: str, expected: list[str]) -> None:
    assert argv_split(text) == expected


def test_percent_expand() -> None:
    assert percent_expand("%h:%p %%", {"h": "a", "p": "22"}, "x") == "a:22 %"
    with pytest.raises(SshConfigError, match="trailing"):
        percent_expand("50%", {}, "x")
