"""[[inventory]] sources: the real ansible-inventory (ansible-core, the test extra) with
`ansible ... --list-hosts` as the oracle, ssh_config against the real `ssh -G`, command sources
run for real (fleetcheck's schema, file_sd, a failure, a hang), Tailscale from a recording;
the merge with [[hosts]] and [groups.NAME]; the last good list when a source fails, hangs,
returns nothing or falls too far; every error class of the [[inventory]] table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fleetcheck.config import ConfigError, FleetConfig, load
from fleetcheck.config.inventory_ansible import from_ansible, jump_from_ssh_args
from fleetcheck.config.inventory_sources import from_command_json, from_tailscale
from fleetcheck.core import registry

BIN = Path(sys.executable).parent
ANSIBLE_INVENTORY = shutil.which("ansible-inventory") or str(BIN / "ansible-inventory")
ANSIBLE = shutil.which("ansible") or str(BIN / "ansible")
HAVE_ANSIBLE = os.access(ANSIBLE_INVENTORY, os.X_OK)
SSH = shutil.which("ssh")
RECORDINGS = Path(__file__).parent / "recordings"
needs_ansible = pytest.mark.skipif(not HAVE_ANSIBLE, reason="ansible-core not installed")


def load_toml(tmp_path: Path, text: str, name: str = "hosts.toml") -> FleetConfig:
    path = tmp_path / name
    base = '[broker]\nurl = "redis://127.0.0.1:1"\n[ssh]\nconfig_file = "/dev/null"\n'
    path.write_text(base + textwrap.dedent(text))
    return load(path, registry.config_type, registry.host_config_types)


def script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    p.chmod(0o755)
    return p


# ---------------------------------------------------------------- pure parsers


@pytest.mark.parametrize(
    ("args", "jump", "refused"),
    [
        ("-J bastion", "bastion", None),
        ("-Jjump@b:2222", "jump@b:2222", None),
        ("-o ProxyJump=a,b", "a,b", None),
        ("-o 'ProxyJump a'", "a", None),
        ('-o ProxyCommand="ssh -W %h:%p -q jump@bastion.example"', "jump@bastion.example", None),
        ("-o ProxyCommand='ssh -p 2200 -l ops -W %h:%p gw'", "ops@gw:2200", None),
        ("-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null", None, None),
        ("-o ProxyCommand='nc -X 5 -x proxy:1080 %h %p'", None, "ProxyCommand"),
        ("-o Port=2200", None, "-o Port"),
        ("-L 8080:localhost:80", None, "'-L'"),
        ("-o ProxyCommand='ssh -W", None, "shell line"),
    ],
)
def test_jump_hosts_from_ansible_ssh_args(args: str, jump: str | None, refused: str | None):
    got, why = jump_from_ssh_args(args)
    assert got == jump
    if refused is None:
        assert why is None
    else:
        assert why is not None and refused in why


def test_ansible_list_output_mapped() -> None:
    data = {
        "_meta": {
            "hostvars": {
                "a": {"ansible_host": "10.0.0.1", "ansible_port": "2222", "ansible_user": "u"},
                "b": {"ansible_connection": "local"},
                "c": {"ansible_port": "twenty"},
                "d": {"ansible_connection": "winrm"},
                "bad name": {},
                "e": {"fleetcheck_min_clients": 4, "ansible_ssh_private_key_file": "~/k"},
            }
        },
        "all": {"children": ["ungrouped", "prod"]},
        "prod": {"children": ["workers"]},
        "workers": {"hosts": ["a", "c", "d", "e"]},
        "ungrouped": {"hosts": ["b", "bad name"]},
    }
    found, problems = from_ansible(data, "ansible inv")
    got = {h.name: (h.keys, h.groups, h.addrs) for h in found}
    assert got == {
        "a": ({"ssh": "10.0.0.1", "port": 2222, "user": "u"}, ["workers", "prod"], ["10.0.0.1"]),
        "b": ({"ssh": "local"}, [], []),
        "e": ({"ssh": "e", "min_clients": 4, "identity_file": "~/k"}, ["workers", "prod"], []),
    }
    assert sorted(problems) == [
        "ansible inv: host 'bad name': 'bad name' is not a host name fleetcheck can use "
        "(letters, digits, '.', '_', '-', ':' and '@'); left out",
        "ansible inv: host c: ansible_port='twenty': not a port number (1-65535); left out",
        "ansible inv: host d: ansible_connection=winrm: fleetcheck reaches hosts over SSH "
        "only; left out",
    ]


def test_file_sd_and_own_schema() -> None:
    sd = [
        {"targets": ["10.0.0.5:9100", "web-1:9100"], "labels": {"job": "node", "env": "p"}},
        {"targets": ["[fd00::7]:9100"], "labels": {"groups": "a,b", "fleetcheck_user": "ops"}},
        {"targets": ["web-1:9256"], "labels": {"job": "proc"}},
    ]
    found, problems = from_command_json(sd, "cmd")
    got = {h.name: (h.keys, h.groups, h.addrs) for h in found}
    assert got == {
        "10.0.0.5": ({"ssh": "10.0.0.5"}, ["node"], ["10.0.0.5"]),
        "web-1": ({"ssh": "web-1"}, ["node", "proc"], []),
        "fd00::7": ({"ssh": "fd00::7", "user": "ops"}, ["a", "b"], ["fd00::7"]),
    }
    assert problems == []
    own = {"hosts": [{"name": "w1", "ssh": "10.1.1.1", "groups": ["pool"], "addrs": ["10.9.9.9"]},
                     {"name": ""}, "x"]}  # fmt: skip
    found, problems = from_command_json(own, "cmd")
    assert [(h.name, h.keys, h.groups, h.addrs) for h in found] == [
        ("w1", {"ssh": "10.1.1.1"}, ["pool"], ["10.9.9.9", "10.1.1.1"])
    ]
    assert problems == [
        "cmd: hosts[1]: an empty name; left out",
        "cmd: hosts[2]: not an object; left out",
    ]


def test_tailscale_recording() -> None:
    data = json.loads((RECORDINGS / "tailscale-status.json").read_text())
    assert data["_recording"].startswith("RECORDING")
    found, problems = from_tailscale(data, "tailscale")
    got = {h.name: (h.keys, h.groups, h.vars["online"]) for h in found}
    assert got == {
        "worker-a": ({"ssh": "100.101.102.2"}, ["worker", "prod"], True),
        "worker-a-1": ({"ssh": "100.101.102.3"}, ["worker"], False),  # two machines, two hosts
        "mac-mini": ({"ssh": "100.101.102.4"}, [], True),
    }
    assert problems == []
    online, _ = from_tailscale(data, "tailscale", include_self=True, online_only=True)
    assert [h.name for h in online] == ["ops-laptop", "worker-a", "mac-mini"]


def test_tailscale_source_reads_the_saved_status(tmp_path: Path) -> None:
    fleet = load_toml(
        tmp_path,
        f"""
        [[inventory]]
        source = "tailscale"
        saved = "{RECORDINGS / "tailscale-status.json"}"
        [groups.worker]
        min_clients = 3
        """,
    )
    from fleetcheck.core.hostfacts import ClientsHostConfig

    assert [h.name for h in fleet.hosts] == ["worker-a", "worker-a-1", "mac-mini"]
    assert fleet.host("worker-a").settings(ClientsHostConfig).min_clients == 3
    assert fleet.host("worker-a").inventory_addrs == ("100.101.102.2", "fd7a:115c:a1e0::2")


# ---------------------------------------------------------------- the [[inventory]] table


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('source = "chef"', "[inventory[0]] source: 'chef': one of ansible, ssh_config"),
        ('source = "ansible"', "[inventory[0]] path: an ansible source needs path"),
        ('source = "command"', "[inventory[0]] run: a command source needs run"),
        ('source = "ssh_config"\nrun = ["x"]', "[inventory[0]] run: not a key of a ssh_config"),
        ('source = "tailscale"\nmax_drop = 2.0', "[inventory[0]] max_drop: a share above 0"),
        ('source = "tailscale"\ntimeout = "0s"', "[inventory[0]] timeout: must be longer"),
        ('source = "tailscale"\ncolour = 1', "[inventory[0]] colour: unknown key"),
        ('source = "tailscale"\ngroups = ["a b"]', "[inventory[0]] groups: 'a b': a group"),
    ],
)
def test_inventory_table_errors(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_toml(tmp_path, f"[[inventory]]\n{table}\n")
    assert message in str(e.value)


def test_inventory_must_be_an_array(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"inventory: expected an array of tables"):
        load_toml(tmp_path, '[inventory]\nsource = "tailscale"\n')


# ---------------------------------------------------------------- command sources


def test_command_source_file_sd_merged_with_hosts(tmp_path: Path) -> None:
    sd = [{"targets": [f"w{i}:9100" for i in range(1, 4)], "labels": {"job": "workers"}}]
    cmd = script(tmp_path, "gen", f"print({json.dumps(json.dumps(sd))})\n")
    fleet = load_toml(
        tmp_path,
        f"""
        [[inventory]]
        source = "command"
        run = ["{cmd}", "--json"]
        [groups.workers]
        min_clients = 5
        [groups.special]
        min_clients = 7
        [[hosts]]
        name = "w2"
        user = "ops"
        groups = ["special"]
        [[hosts]]
        name = "broker"
        ssh = "local"
        """,
    )
    from fleetcheck.core.hostfacts import ClientsHostConfig

    assert [h.name for h in fleet.hosts] == ["w2", "broker", "w1", "w3"]
    w2 = fleet.host("w2")
    assert (w2.ssh, w2.user, w2.groups) == ("w2", "ops", ("special", "workers"))
    assert w2.settings(ClientsHostConfig).min_clients == 7  # hosts.toml's group first
    assert fleet.host("w1").settings(ClientsHostConfig).min_clients == 5
    assert fleet.host("broker").origin == ""
    assert w2.origin == f"command {cmd} --json and [[hosts]]"
    (status,) = fleet.inventory
    assert (status.error, len(status.hosts)) == (None, 3)


def test_a_variable_the_loader_refuses_leaves_only_that_host_out(tmp_path: Path) -> None:
    hosts = {"hosts": [{"name": "ok-1", "ssh": "10.0.0.1"},
                       {"name": "odd", "ssh": "10.0.0.2", "min_clients": "many"}]}  # fmt: skip
    cmd = script(tmp_path, "gen", f"print({json.dumps(json.dumps(hosts))})\n")
    fleet = load_toml(tmp_path, f'[[inventory]]\nsource = "command"\nrun = ["{cmd}"]\n')
    assert [h.name for h in fleet.hosts] == ["ok-1"]
    (problem,) = fleet.inventory[0].problems
    assert "host odd from command" in problem and "min_clients" in problem
    assert problem.endswith("left out")


def test_failing_command_shows_its_stderr_and_the_last_good_list(tmp_path: Path) -> None:
    flag = tmp_path / "broken"
    cmd = script(
        tmp_path,
        "gen",
        f"""
        import os, sys, time
        if os.path.exists("{flag}"):
            mode = open("{flag}").read()
            if mode == "hang":
                time.sleep(600)
            if mode == "empty":
                print("[]"); sys.exit(0)
            print("boom: the CMDB said 503", file=sys.stderr); sys.exit(1)
        print('{{"hosts": [{{"name": "a", "ssh": "10.0.0.1"}}, {{"name": "b"}}]}}')
        """,
    )
    text = f'[[inventory]]\nsource = "command"\nrun = ["{cmd}"]\ntimeout = "2s"\n'
    first = load_toml(tmp_path, text)
    assert [h.name for h in first.hosts] == ["a", "b"]

    flag.write_text("exit")
    failed = load_toml(tmp_path, text)
    assert [h.name for h in failed.hosts] == ["a", "b"]  # never emptied
    (st,) = failed.inventory
    assert st.error == f"{cmd}: exited 1: boom: the CMDB said 503"
    assert st.cached_at is not None and st.age_s is not None and st.age_s >= 0

    flag.write_text("hang")
    hung = load_toml(tmp_path, text)
    assert [h.name for h in hung.hosts] == ["a", "b"]
    assert hung.inventory[0].error == f"{cmd}: no answer within 2s (killed)"

    flag.write_text("empty")
    empty = load_toml(tmp_path, text)
    assert [h.name for h in empty.hosts] == ["a", "b"]
    assert empty.inventory[0].error == "returned no hosts"


def test_a_sudden_fall_keeps_the_last_good_list_until_it_repeats(tmp_path: Path) -> None:
    count = tmp_path / "count"
    count.write_text("10")
    cmd = script(
        tmp_path,
        "gen",
        f"""
        import json
        n = int(open("{count}").read())
        print(json.dumps([{{"name": f"w{{i}}"}} for i in range(n)]))
        """,
    )
    text = f'[[inventory]]\nsource = "command"\nrun = ["{cmd}"]\n'
    assert len(load_toml(tmp_path, text).hosts) == 10
    count.write_text("6")  # a fall of 40%: below max_drop 0.5, believed at once
    assert len(load_toml(tmp_path, text).hosts) == 6
    count.write_text("2")
    fell = load_toml(tmp_path, text)
    assert len(fell.hosts) == 6
    assert fell.inventory[0].error is not None
    assert fell.inventory[0].error.startswith("reported 2 hosts, 6 before: a fall of more than 50%")
    again = load_toml(tmp_path, text)  # the same answer twice: a scale-in
    assert [h.name for h in again.hosts] == ["w0", "w1"]
    assert again.inventory[0].error is None


def test_a_command_that_is_not_there_or_prints_no_json(tmp_path: Path) -> None:
    fleet = load_toml(tmp_path, '[[inventory]]\nsource = "command"\nrun = ["/nonexistent/x"]\n')
    assert (
        fleet.hosts == () and fleet.inventory[0].error == "/nonexistent/x: not found (not in PATH)"
    )
    cmd = script(tmp_path, "gen", "print('hosts: a, b')\n")
    fleet = load_toml(tmp_path, f'[[inventory]]\nsource = "command"\nrun = ["{cmd}"]\n', "b.toml")
    assert (
        fleet.inventory[0].error == f"command {cmd}: not JSON (line 1, column 1: Expecting value)"
    )


# ---------------------------------------------------------------- ansible, for real

INI = """\
[web]
web-[01:03].example ansible_user=deploy

[workers]
worker-[1:4]

[db]
db1 ansible_port=2222

[backend:children]
workers
db

[backend:vars]
fleetcheck_min_clients=2
"""


def ansible_hosts(inv: Path, pattern: str) -> list[str]:
    out = subprocess.run(
        [ANSIBLE, "-i", str(inv), pattern, "--list-hosts"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
    ).stdout
    return [ln.strip() for ln in out.splitlines()[1:] if ln.strip()]


@needs_ansible
def test_ansible_ini_through_the_real_parser(tmp_path: Path) -> None:
    inv = tmp_path / "inv"
    (inv / "host_vars").mkdir(parents=True)
    (inv / "group_vars").mkdir()
    (inv / "hosts.ini").write_text(INI)
    for i in range(1, 5):
        (inv / "host_vars" / f"worker-{i}.yml").write_text(f"ansible_host: 198.18.7.{i}\n")
    (inv / "host_vars" / "worker-2.yml").write_text(
        "ansible_host: 198.18.7.2\nansible_ssh_private_key_file: /tmp/k\n"
        "ansible_ssh_common_args: '-o ProxyCommand=\"ssh -W %h:%p -q jump@bastion\"'\n"
    )
    (inv / "group_vars" / "db.yml").write_text("ansible_user: dbadmin\nansible_host: 198.18.7.9\n")
    fleet = load_toml(
        tmp_path,
        f"""
        [[inventory]]
        source = "ansible"
        path = "{inv / "hosts.ini"}"
        [groups.workers]
        min_clients = 3
        """,
    )
    assert fleet.inventory[0].error is None and fleet.inventory[0].problems == []
    assert sorted(h.name for h in fleet.hosts) == sorted(ansible_hosts(inv / "hosts.ini", "all"))
    for group in ("web", "workers", "db", "backend"):
        assert sorted(h.name for h in fleet.hosts if group in h.groups) == sorted(
            ansible_hosts(inv / "hosts.ini", group)
        ), group
    w2 = fleet.host("worker-2")
    assert (w2.ssh, w2.identity_file, w2.proxy_jump) == ("198.18.7.2", "/tmp/k", "jump@bastion")
    assert w2.groups == ("workers", "backend")
    db = fleet.host("db1")
    assert (db.ssh, db.port, db.user) == ("198.18.7.9", 2222, "dbadmin")
    assert fleet.host("web-02.example").user == "deploy"
    # where each came from: the source, and the line that declares it (a range included)
    assert fleet.host("web-02.example").origin == f"ansible {inv}/hosts.ini (line 2)"
    assert db.origin == f"ansible {inv}/hosts.ini (line 8)"
    from fleetcheck.core.hostfacts import ClientsHostConfig

    # an inventory variable is the host's own value: it beats [groups.workers]
    assert w2.settings(ClientsHostConfig).min_clients == 2


@needs_ansible
def test_ansible_hundreds_of_hosts_and_odd_variables(tmp_path: Path) -> None:
    inv = tmp_path / "big.yml"
    inv.write_text(
        "all:\n  children:\n    pool:\n      hosts:\n        node-[001:300]:\n"
        "    odd:\n      hosts:\n        strange:\n          ansible_port: 99999\n"
        "        weird:\n          ansible_connection: docker\n"
        "        lan:\n          ansible_host: 198.18.8.8\n          ansible_port: '2200'\n"
    )
    fleet = load_toml(tmp_path, f'[[inventory]]\nsource = "ansible"\npath = "{inv}"\n')
    names = [h.name for h in fleet.hosts]
    assert len(names) == 301 and "node-001" in names and "node-300" in names and "lan" in names
    assert fleet.host("lan").port == 2200
    problems = fleet.inventory[0].problems
    assert any("host strange: ansible_port=99999: not a port number" in p for p in problems)
    assert any("host weird: ansible_connection=docker" in p for p in problems)


@needs_ansible
def test_ansible_unreadable_or_broken_inventory_says_why(tmp_path: Path) -> None:
    fleet = load_toml(tmp_path, f'[[inventory]]\nsource = "ansible"\npath = "{tmp_path}/nope"\n')
    assert (
        fleet.inventory[0].error
        == f"ansible {tmp_path}/nope: {tmp_path}/nope: no such file or directory"
    )
    bad = tmp_path / "bad.ini"
    bad.write_text("[web\nhost-a\n")
    fleet = load_toml(tmp_path, f'[[inventory]]\nsource = "ansible"\npath = "{bad}"\n', "b.toml")
    err = fleet.inventory[0].error
    assert err is not None and err.startswith("ansible-inventory: exited"), err
    saved = tmp_path / "saved.json"
    saved.write_text('{"_meta": {"hostvars": {"s1": {"ansible_host": "10.2.3.4"}}}}')
    fleet = load_toml(tmp_path, f'[[inventory]]\nsource = "ansible"\nsaved = "{saved}"\n', "c.toml")
    assert [(h.name, h.ssh) for h in fleet.hosts] == [("s1", "10.2.3.4")]


# ---------------------------------------------------------------- ssh_config, against ssh -G


@pytest.mark.skipif(SSH is None, reason="no ssh client")
def test_ssh_config_source_follows_includes_like_ssh(tmp_path: Path) -> None:
    d = tmp_path / "ssh"
    (d / "conf.d").mkdir(parents=True)
    (d / "config").write_text(
        f"Include {d}/conf.d/*.conf\n"
        "Host worker-1 worker-2\n  User ops\n"
        "Host worker-1\n  HostName 198.18.9.1\n"
        "Host worker-2\n  HostName %h.lan\n"
        "Host worker-* !worker-9\n  Port 2202\n"
        "Host bastion\n  HostName 198.18.9.254\n"
        "Host *\n  User nobody\n"
    )
    (d / "conf.d" / "a.conf").write_text(
        "Host worker-3\n  HostName 198.18.9.3\n  Port 2203\n  ProxyJump bastion\n"
    )
    (d / "conf.d" / "b.conf").write_text("Host db-1\n  HostName 198.18.9.9\n")

    def fleet_for(extra: str, name: str) -> FleetConfig:
        return load_toml(
            tmp_path,
            f'[[inventory]]\nsource = "ssh_config"\npath = "{d}/config"\n{extra}',
            name,
        )

    other = fleet_for('match = "worker-*"\n', "other.toml")  # [ssh] config_file is /dev/null
    assert [h.name for h in other.hosts] == ["worker-3", "worker-1", "worker-2"]
    for h in other.hosts:
        g = dict(
            line.split(" ", 1)
            for line in subprocess.run(
                [SSH, "-G", "-F", f"{d}/config", h.name],
                capture_output=True, text=True, check=True, timeout=30,
            ).stdout.splitlines()
        )  # fmt: skip
        assert (h.ssh, str(h.port), h.user) == (g["hostname"], g["port"], g["user"]), h.name
        want_jump = None if g.get("proxyjump", "none") == "none" else g["proxyjump"]
        assert h.proxy_jump == want_jump
    # the file [ssh] reads: each host is its alias, resolved by the transport like ssh -G
    path = tmp_path / "same.toml"
    path.write_text(
        '[broker]\nurl = "redis://127.0.0.1:1"\n'
        f'[ssh]\nconfig_file = "{d}/config"\n[[inventory]]\nsource = "ssh_config"\n'
    )
    same = load(path, registry.config_type, registry.host_config_types)
    assert [(h.name, h.ssh) for h in same.hosts] == [
        ("worker-3", "worker-3"), ("db-1", "db-1"), ("worker-1", "worker-1"),
        ("worker-2", "worker-2"), ("bastion", "bastion"),
    ]  # fmt: skip
    assert same.host("db-1").origin.endswith(f"({d}/conf.d/b.conf line 1)")


def test_config_check_shows_sources_and_origins(tmp_path: Path) -> None:
    from tests.cli import fleetcheck

    cmd = script(tmp_path, "gen", 'print(\'[{"targets": ["w1:9100"], "labels": {"job": "w"}}]\')\n')
    path = tmp_path / "hosts.toml"
    path.write_text(
        '[broker]\nurl = "redis://127.0.0.1:1"\n[ssh]\nconfig_file = "/dev/null"\n'
        f'known_hosts = "/dev/null"\n[[inventory]]\nsource = "command"\nrun = ["{cmd}"]\n'
        '[[inventory]]\nsource = "command"\nname = "cmdb"\nrun = ["/bin/false"]\n'
    )
    out = fleetcheck("config", "check", "-c", str(path))
    assert out.returncode == 0, out.stderr
    assert f"  command {cmd}: 1 hosts" in out.stdout
    assert "  cmdb: FAILED: /bin/false: exited 1 (nothing on stderr); no earlier list" in out.stdout
    assert f"    from command {cmd}\n" in out.stdout
    assert f"    from [command {cmd}]: ssh" in out.stdout


def test_merge_a_later_source_wins_key_by_key(tmp_path: Path) -> None:
    a = script(
        tmp_path,
        "a",
        'print(\'[{"name": "h", "ssh": "10.0.0.1", "user": "a", "groups": ["x"]}]\')\n',
    )
    b = script(tmp_path, "b", 'print(\'[{"name": "h", "user": "b", "groups": ["y"]}]\')\n')
    fleet = load_toml(
        tmp_path,
        f'[[inventory]]\nsource = "command"\nrun = ["{a}"]\n'
        f'[[inventory]]\nsource = "command"\nrun = ["{b}"]\n',
    )
    (h,) = fleet.hosts
    assert (h.ssh, h.user, h.groups) == ("10.0.0.1", "b", ("x", "y"))
    assert h.origin == f"command {a}; command {b}"
