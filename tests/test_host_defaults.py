"""[defaults] and [groups.NAME]: every per-host key once for many hosts, the host's own value
winning, then its groups in order, then the defaults; one test per error class."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetcheck.config import ConfigError, load
from fleetcheck.core import registry
from fleetcheck.core.hostfacts import ClientsHostConfig, LogsHostConfig
from tests.cli import fleetcheck

ROOT = Path(__file__).resolve().parent.parent
BROKER = '[broker]\nurl = "redis://127.0.0.1:6379/0"\n'


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "hosts.toml"
    p.write_text(BROKER + text)
    return p


def refused(tmp_path: Path, text: str) -> str:
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load(p, registry.config_type, registry.host_config_types)
    message = str(e.value)
    assert message.startswith(f"{p}: "), message
    return message[len(f"{p}: ") :]


SHARED = """\
[defaults]
tz = "UTC"
user = "ops"
min_clients = 2
logs = [{ path = "/var/log/default.log" }]

[groups.east]
tz = "America/New_York"
port = 2222

[groups.big]
tz = "Asia/Kolkata"
min_clients = 10

[[hosts]]
name = "plain"
ssh = "10.0.0.1"

[[hosts]]
name = "east-big"
ssh = "10.0.0.2"
groups = ["east", "big"]

[[hosts]]
name = "big-east"
ssh = "10.0.0.3"
groups = ["big", "east"]

[[hosts]]
name = "own"
ssh = "10.0.0.4"
groups = ["big"]
tz = "Europe/Berlin"
min_clients = 0
logs = []
"""


def test_precedence_host_then_groups_in_order_then_defaults(tmp_path: Path) -> None:
    fleet = load(write(tmp_path, SHARED), registry.config_type, registry.host_config_types)
    h = {x.name: x for x in fleet.hosts}

    def tz(name: str) -> str | None:
        return h[name].settings(LogsHostConfig).tz

    def min_clients(name: str) -> int:
        return h[name].settings(ClientsHostConfig).min_clients

    assert (tz("plain"), min_clients("plain"), h["plain"].user) == ("UTC", 2, "ops")
    assert h["plain"].port is None
    assert (tz("east-big"), min_clients("east-big"), h["east-big"].port) == (
        "America/New_York",
        10,
        2222,
    )
    assert tz("big-east") == "Asia/Kolkata"  # the first group listed wins
    assert (tz("own"), min_clients("own")) == ("Europe/Berlin", 0)
    assert h["own"].settings(LogsHostConfig).logs == ()  # its own empty list beats [defaults]
    assert [log.path for log in h["plain"].settings(LogsHostConfig).logs] == [
        "/var/log/default.log"
    ]
    assert h["east-big"].sources["tz"] == "groups.east"
    assert h["plain"].sources["tz"] == "defaults"
    assert h["own"].sources["tz"] == "hosts"


def test_the_example_file_documents_defaults_and_groups() -> None:
    fleet = load(ROOT / "hosts.example.toml", registry.config_type, registry.host_config_types)
    joined = [h for h in fleet.hosts if h.groups]
    assert joined, "hosts.example.toml should show a host joining a group"
    h = joined[0]
    assert any(where.startswith("groups.") for where in h.sources.values())
    assert any(where == "defaults" for where in h.sources.values())
    assert h.settings(LogsHostConfig).logs  # from its group


def test_config_check_prints_effective_values_and_their_origin(tmp_path: Path) -> None:
    proc = fleetcheck("config", "check", "--elsewhere", "-c", str(write(tmp_path, SHARED)))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    i = lines.index(next(line for line in lines if line.startswith("  east-big: ")))
    assert "tz=America/New_York" in lines[i] and "min_clients=10" in lines[i]
    assert "port=2222" in lines[i] and "user=ops" in lines[i]
    assert lines[i + 1].strip() == (
        "from [defaults]: user, logs; from [groups.east]: port, tz; from [groups.big]: min_clients"
    )


def test_unknown_key_in_defaults(tmp_path: Path) -> None:
    msg = refused(tmp_path, '[defaults]\ntzz = "UTC"\n')
    assert msg.startswith("[defaults] tzz: unknown key (known keys: name, ssh, user, port, groups")


def test_unknown_key_in_a_group(tmp_path: Path) -> None:
    msg = refused(tmp_path, "[groups.east]\nmin_client = 1\n")
    assert msg.startswith("[groups.east] min_client: unknown key")


def test_name_is_not_a_default(tmp_path: Path) -> None:
    assert refused(tmp_path, '[defaults]\nname = "x"\n') == (
        "[defaults] name: not allowed here (set it in each [[hosts]] table)"
    )


def test_groups_cannot_join_groups(tmp_path: Path) -> None:
    assert refused(tmp_path, '[groups.a]\ngroups = ["b"]\n') == (
        "[groups.a] groups: not allowed here (set it in each [[hosts]] table)"
    )


def test_wrong_type_in_a_group_names_the_group(tmp_path: Path) -> None:
    assert refused(tmp_path, '[groups.east]\nmin_clients = "many"\n') == (
        "[groups.east] min_clients: expected a whole number, got 'many'"
    )


def test_bad_nested_value_in_defaults_names_defaults(tmp_path: Path) -> None:
    msg = refused(tmp_path, '[defaults]\nlogs = [{ path = "/l", max_age = "soon" }]\n')
    assert msg.startswith("[defaults.logs[0]] max_age: bad duration 'soon'")


def test_invalid_value_from_defaults_names_defaults_and_the_host(tmp_path: Path) -> None:
    msg = refused(tmp_path, '[defaults]\nport = 70000\n[[hosts]]\nname = "a"\nssh = "h"\n')
    assert msg == "[defaults] port: port 70000 is out of range (1-65535) (for host a)"


def test_unknown_group_is_named(tmp_path: Path) -> None:
    msg = refused(tmp_path, '[groups.east]\ntz = "UTC"\n[[hosts]]\nname = "a"\ngroups = ["west"]\n')
    assert msg == "[hosts[0] a] groups: unknown group 'west' (known: east)"


def test_groups_must_be_tables(tmp_path: Path) -> None:
    assert refused(tmp_path, "[groups]\neast = 1\n") == "[groups.east] must be a table, not a int"


def test_defaults_must_be_a_table(tmp_path: Path) -> None:
    p = tmp_path / "hosts.toml"
    p.write_text("defaults = 1\n" + BROKER)
    with pytest.raises(ConfigError) as e:
        load(p, registry.config_type, registry.host_config_types)
    assert str(e.value) == f"{p}: [defaults] must be a table, not a int"
