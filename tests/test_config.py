"""Config loading: the example file, and one test per error class through the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fleetcheck.config import ConfigError, HostConfig, find_config, load
from fleetcheck.core import registry
from fleetcheck.core.hostfacts import ClientsHostConfig, LogsHostConfig

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
[broker]
url = "redis://127.0.0.1:6379/0"

[[hosts]]
name = "n8"
ssh = "local"
addrs = ["127.0.0.1"]
tz = "America/New_York"
logs = [{ path = "/var/log/x.log", max_age = "10m" }]

[checks.clients]
"""


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
    )


def test_example_loads_through_real_validator() -> None:
    fleet = load(ROOT / "hosts.example.toml", registry.config_type, registry.host_config_types)
    assert fleet.hosts[0].name == "n8"
    assert fleet.hosts[0].settings(LogsHostConfig).logs[0].max_age == 600
    assert fleet.patrol.every == 900
    assert set(fleet.checks) <= set(registry.available())


def test_every_check_is_documented_in_example() -> None:
    fleet = load(ROOT / "hosts.example.toml", registry.config_type, registry.host_config_types)
    assert set(fleet.checks) == set(registry.available())


def test_good_config_values(tmp_path: Path) -> None:
    p = tmp_path / "hosts.toml"
    p.write_text(GOOD)
    fleet = load(p, registry.config_type, registry.host_config_types)
    assert fleet.broker.connect_timeout == 3.0
    assert fleet.hosts == (HostConfig(name="n8", ssh="local"),)
    n8 = fleet.hosts[0]
    assert n8.settings(ClientsHostConfig) == ClientsHostConfig(addrs=("127.0.0.1",))
    assert n8.settings(LogsHostConfig).tz == "America/New_York"


# (description, config text, expected fragment of the one-line message)
ERRORS = [
    (
        "unknown key",
        GOOD.replace("[broker]\n", '[broker]\nurll = "x"\n'),
        "[broker] urll: unknown key",
    ),
    (
        "unknown key in a check table",
        GOOD + "max_unknwn = 3\n",
        "[checks.clients] max_unknwn: unknown key",
    ),
    (
        "bad duration",
        GOOD.replace('max_age = "10m"', 'max_age = "10 minutes"'),
        "[hosts[0] n8.logs[0]] max_age: bad duration '10 minutes'",
    ),
    (
        "bad zone name",
        GOOD.replace("America/New_York", "America/Nowhere"),
        "[hosts[0] n8] tz: unknown time zone 'America/Nowhere'",
    ),
    (
        "missing broker url",
        GOOD.replace('url = "redis://127.0.0.1:6379/0"\n', ""),
        "[broker] url: missing (required)",
    ),
    (
        "missing broker table",
        GOOD.replace('[broker]\nurl = "redis://127.0.0.1:6379/0"\n', ""),
        "[broker] url: missing (required)",
    ),
    (
        "duplicate host name",
        GOOD + '\n[[hosts]]\nname = "n8"\n',
        "name: duplicate host name 'n8'",
    ),
    ("invalid TOML", GOOD + "[broker\n", "invalid TOML"),
    (
        "wrong type",
        GOOD.replace('addrs = ["127.0.0.1"]', 'addrs = "127.0.0.1"'),
        "[hosts[0] n8] addrs: expected a list",
    ),
    (
        "logs without tz",
        GOOD.replace('tz = "America/New_York"\n', ""),
        "[hosts[0] n8] tz: a host with logs needs tz",
    ),
    (
        "unknown check",
        GOOD + "[checks.nosuch]\n",
        "[checks.nosuch]: unknown check",
    ),
    (
        "bad url scheme",
        GOOD.replace("redis://127.0.0.1", "http://:Sekr3tPW@127.0.0.1"),
        "[broker] url: unsupported scheme http://",
    ),
    (
        "unencoded reserved character in the password",
        GOOD.replace("redis://127.0.0.1", "redis://:Zq#9xK2pLw/x@127.0.0.1"),
        "[broker] url: the user name or password holds a character that must be percent-encoded",
    ),
    (
        "stray percent in the password",
        GOOD.replace("redis://127.0.0.1", "redis://:Sekr3t%zz@127.0.0.1"),
        "[broker] url: the user name or password has a '%' not followed by two hex digits",
    ),
    (
        "url port out of range",
        GOOD.replace("127.0.0.1:6379", "127.0.0.1:99999"),
        "[broker] url: the port is not a number between 1 and 65535",
    ),
    (
        "url port zero",
        GOOD.replace("127.0.0.1:6379", "127.0.0.1:0"),
        "[broker] url: port 0 is out of range (1-65535)",
    ),
    (
        "ssh port out of range",
        GOOD.replace("[[hosts]]", "[ssh]\nport = 99999\n\n[[hosts]]"),
        "[ssh] port: port 99999 is out of range (1-65535)",
    ),
    (
        "host port out of range",
        GOOD.replace('ssh = "local"', 'ssh = "local"\nport = 0'),
        "[hosts[0] n8] port: port 0 is out of range (1-65535)",
    ),
    (
        "host name with a pipe",
        GOOD.replace('name = "n8"', 'name = "n8|x"'),
        "[hosts[0]] name: 'n8|x': use only letters, digits",
    ),
    (
        "host name with a control character",
        GOOD.replace('name = "n8"', 'name = "n8\\u0007"'),
        "[hosts[0]] name: 'n8\\x07': use only letters, digits",
    ),
    (
        "check name with a pipe",
        GOOD + '[checks."a|b"]\n',
        "[checks.'a|b']: a check name uses only letters, digits",
    ),
    (
        "two password sources",
        GOOD.replace("redis://127.0.0.1", "redis://:Sekr3tPW@127.0.0.1").replace(
            '/0"\n', '/0"\npassword_env = "PW"\n', 1
        ),
        "[broker] password_env: password given both in url and here: keep one",
    ),
    (
        "tls file without rediss",
        GOOD.replace('/0"\n', '/0"\nca_file = "/etc/ca.pem"\n', 1),
        "[broker] ca_file: goes with a rediss:// (or valkeys://) url",
    ),
    (
        "sentinels without service",
        GOOD.replace('url = "redis://127.0.0.1:6379/0"', 'sentinels = ["127.0.0.1:26379"]'),
        "[broker] service: sentinels need service",
    ),
    (
        "sentinels and url",
        GOOD.replace('/0"\n', '/0"\nsentinels = ["127.0.0.1:26379"]\nservice = "m"\n', 1),
        "[broker] url: give either url or sentinels, not both",
    ),
    (
        "sentinel without a port",
        GOOD.replace(
            'url = "redis://127.0.0.1:6379/0"', 'sentinels = ["127.0.0.1"]\nservice = "m"'
        ),
        "[broker] sentinels: '127.0.0.1': expected HOST:PORT",
    ),
    (
        "client name with a space",
        GOOD.replace('/0"\n', '/0"\nclient_name = "fleet check"\n', 1),
        "[broker] client_name: 1-64 printable characters without spaces",
    ),
    (
        "alertmanager url without a scheme",
        GOOD + '[outputs]\nalertmanager = ["localhost:9093/Sekr3tPW"]\n',
        "[outputs] alertmanager[0]: ",
    ),
    (
        "heartbeat url without a scheme",
        GOOD + '[outputs]\nheartbeat = "hc-ping.com/Sekr3tPW"\n',
        "[outputs] heartbeat: no scheme",
    ),
    (
        "unknown outputs key",
        GOOD + '[outputs]\nalertmanagr = ["http://a:9093"]\n',
        "[outputs] alertmanagr: unknown key",
    ),
]

SECRETS = ("Sekr3t", "Zq#9", "pLw/x")


@pytest.mark.parametrize(("what", "text", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_config_error_is_one_line_exit_3(
    tmp_path: Path, what: str, text: str, message: str
) -> None:
    p = tmp_path / "hosts.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as info:
        load(p, registry.config_type, registry.host_config_types)
    assert message in str(info.value)
    assert str(p) in str(info.value)
    proc = cli("run", "-c", str(p))
    assert proc.returncode == 3
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert message in lines[0] and str(p) in lines[0]
    assert "Traceback" not in proc.stderr
    for secret in SECRETS:  # no config error ever repeats a password or token
        assert secret not in proc.stderr and secret not in str(info.value)


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("valkey://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("valkeys://127.0.0.1:6380/0", "rediss://127.0.0.1:6380/0"),
        ("Redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("REDISS://u:p%23w@127.0.0.1:6380/1", "rediss://u:p%23w@127.0.0.1:6380/1"),
        ("UNIX:///run/redis.sock", "unix:///run/redis.sock"),
    ],
)
def test_url_schemes_case_insensitive_with_valkey_aliases(given: str, normal: str) -> None:
    from fleetcheck.config import BrokerConfig

    assert BrokerConfig(url=given).url == normal


def test_percent_encoded_password_is_decoded() -> None:
    from fleetcheck.config import BrokerConfig
    from fleetcheck.transport.redis import password_of, redact_url

    cfg = BrokerConfig(url="redis://:Zq%239xK2pLw%2Fx@127.0.0.1:6379/0")
    assert password_of(cfg) == "Zq#9xK2pLw/x"
    assert redact_url(cfg.url) == "redis://***@127.0.0.1:6379/0"


def test_config_check_command_prints_resolved_fleet(tmp_path: Path) -> None:
    p = tmp_path / "hosts.toml"
    p.write_text(GOOD.replace("redis://127.0.0.1", "redis://:s3cret@127.0.0.1"))
    proc = cli("config", "check", "-c", str(p))
    assert proc.returncode == 0, proc.stderr
    assert "valid" in proc.stdout and "n8: ssh=local" in proc.stdout
    assert "s3cret" not in proc.stdout


def test_config_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.toml").write_text(GOOD)
    (tmp_path / "hosts.toml").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FLEETCHECK_CONFIG", raising=False)
    assert find_config(None) == Path("hosts.toml")
    monkeypatch.setenv("FLEETCHECK_CONFIG", str(tmp_path / "a.toml"))
    assert find_config(None) == tmp_path / "a.toml"
    assert find_config(str(tmp_path / "hosts.toml")) == tmp_path / "hosts.toml"
    monkeypatch.setenv("FLEETCHECK_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ConfigError, match="FLEETCHECK_CONFIG"):
        find_config(None)
    monkeypatch.delenv("FLEETCHECK_CONFIG")
    (tmp_path / "hosts.toml").unlink()
    with pytest.raises(ConfigError, match="no config file found"):
        find_config(None)
    home_cfg = tmp_path / "home" / ".config" / "fleetcheck" / "hosts.toml"
    home_cfg.parent.mkdir(parents=True)
    home_cfg.write_text(GOOD)
    assert find_config(None) == home_cfg


def test_missing_config_file_exit_3(tmp_path: Path) -> None:
    proc = cli("run", "-c", str(tmp_path / "nope.toml"))
    assert proc.returncode == 3
    assert "no such config file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_config_anywhere_exit_3(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = cli("run", cwd=tmp_path, env=env)
    assert proc.returncode == 3
    assert "no config file found" in proc.stderr
