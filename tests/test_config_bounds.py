"""Issue 22 item 15: `config check` refuses absurd values with one line naming file, table and
key. One test per error class; each was accepted (exit 0, "valid") by the code before the fix.

The bounds (docs/configuration.md): any duration at most 366d; broker and ssh connect and
socket timeouts at most 10m, ssh command_timeout 1h, keep_alive_for 1d, patrol deadline 1d,
patrol every 7d; host names at most 253 characters; `ssh` without spaces, controls or a
leading '-', at most 1024 characters; `addrs` single IP addresses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BASE = """\
[broker]
url = "redis://127.0.0.1:6379/0"
{broker}
{top}
[[hosts]]
name = "{name}"
ssh = {ssh}
addrs = {addrs}

[checks.clients]
"""


def config_check(tmp_path: Path, **values: str) -> subprocess.CompletedProcess[str]:
    fields = {
        "broker": "",
        "top": "",
        "name": "n8",
        "ssh": '"local"',
        "addrs": '["127.0.0.1"]',
        **values,
    }
    path = tmp_path / "hosts.toml"
    path.write_text(BASE.format(**fields), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", "config", "check", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def refused(proc: subprocess.CompletedProcess[str], tmp_path: Path, where: str) -> str:
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(tmp_path / "hosts.toml") in err and where in err, err
    assert len(err) < 400, err  # never the whole hostile value
    assert not any(ord(c) < 32 or c == "\x7f" for c in err), err
    return err


def test_the_base_config_is_valid(tmp_path: Path) -> None:
    proc = config_check(tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("top", "where", "why"),
    [
        ('[patrol]\ndeadline = "99999999999h"\n', "[patrol] deadline:", "longer than 366d"),
        ("[ssh]\ncommand_timeout = 1e300\n", "[ssh] command_timeout:", "longer than 366d"),
        ('[ssh]\ncommand_timeout = "2h"\n', "[ssh] command_timeout:", "at most 1h"),
        ('[ssh]\nconnect_timeout = "1h"\n', "[ssh] connect_timeout:", "at most 10m"),
        ('[broker]\nsocket_timeout = "1h"\n', "[broker] socket_timeout:", "at most 10m"),
        ('[patrol]\ndeadline = "2d"\n', "[patrol] deadline:", "at most 1d"),
        ('[patrol]\nevery = "30d"\n', "[patrol] every:", "at most 7d"),
    ],
)
def test_item15_absurd_durations(tmp_path: Path, top: str, where: str, why: str) -> None:
    if top.startswith("[broker]\n"):  # keys of the [broker] table the base config opens
        proc = config_check(tmp_path, broker=top.removeprefix("[broker]\n"))
    else:
        proc = config_check(tmp_path, top=top)
    assert why in refused(proc, tmp_path, where)


def test_item15_host_name_over_a_sane_length(tmp_path: Path) -> None:
    proc = config_check(tmp_path, name="a" * 100_000)
    err = refused(proc, tmp_path, "[hosts[0]] name:")
    assert "100000 characters long (at most 253)" in err
    assert config_check(tmp_path, name="a" * 253).returncode == 0


@pytest.mark.parametrize(
    ("ssh", "why"),
    [
        ('"worker 1"', "space, control character or line break"),
        ('"worker\\n1"', "space, control character or line break"),
        ('"\\u001b]0;PWNED\\u0007w1"', "space, control character or line break"),
        ('"-oProxyCommand=touch /tmp/x"', "space"),
        ('"-oProxyCommand=id"', "starts with '-'"),
        ('""', "must not be empty"),
        (f'"{"w" * 2000}"', "2000 characters long"),
    ],
)
def test_item15_ssh_values_with_spaces_newlines_or_controls(
    tmp_path: Path, ssh: str, why: str
) -> None:
    err = refused(config_check(tmp_path, ssh=ssh), tmp_path, "[hosts[0] n8] ssh:")
    assert why in err


@pytest.mark.parametrize(
    ("addrs", "why"),
    [
        ('["not-an-ip"]', "'not-an-ip' is not an IP address"),
        ('["1.2.3.4/33"]', "'1.2.3.4/33' is neither an IP address nor a valid network"),
        ('["127.0.0.1", "10.0.0.0/24"]', "'10.0.0.0/24' is a network"),
        ('["300.1.1.1"]', "is not an IP address"),
    ],
)
def test_item15_addrs_that_are_not_ip_addresses(tmp_path: Path, addrs: str, why: str) -> None:
    err = refused(config_check(tmp_path, addrs=addrs), tmp_path, "[hosts[0] n8] addrs[")
    assert why in err
    ok = config_check(tmp_path, addrs='["127.0.0.1", "::ffff:10.0.0.1", "[::1]", "fd00::20"]')
    assert ok.returncode == 0, ok.stderr
