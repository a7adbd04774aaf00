"""[[inventory]] on the real lab: an Ansible INI inventory (a range, children groups,
host_vars with each machine's address and key) read through the real ansible-inventory gives
the hosts Ansible itself lists, and a patrol of them gives real verdicts (a host whose sshd is
stopped is not OK, the others are)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import fleetcheck
from tests.lab import Lab
from tests.test_inventory import ANSIBLE, needs_ansible

pytestmark = pytest.mark.lab


@needs_ansible
def test_ansible_inventory_patrolled(lab: Lab) -> None:
    workers = [lab.add_host(f"worker-{i}") for i in range(1, 4)]
    db = lab.add_host("db1")
    inv = lab.dir / "ansible"
    (inv / "host_vars").mkdir(parents=True)
    (inv / "group_vars").mkdir()
    (inv / "hosts.ini").write_text(
        "[workers]\nworker-[1:3]\n\n[db]\ndb1\n\n[backend:children]\nworkers\ndb\n"
    )
    for h in [*workers, db]:
        (inv / "host_vars" / f"{h.name}.yml").write_text(f"ansible_host: {h.addr}\n")
    (inv / "group_vars" / "all.yml").write_text(
        f"ansible_user: root\nansible_ssh_private_key_file: {lab.client_key}\n"
    )
    config = lab.config(checks="[checks.routes]\n", hosts=[])
    text = config.read_text().replace(f'identity_file = "{lab.client_key}"\n', "")
    text = text.replace('user = "root"', 'user = "nobody-here"')  # the inventory's user wins
    text = text.replace(
        "[checks.routes]",
        f'[[inventory]]\nsource = "ansible"\npath = "{inv}/hosts.ini"\n\n[checks.routes]',
    )
    config.write_text(text)
    lab.stop_sshd(workers[2])

    oracle = (
        subprocess.run(
            [ANSIBLE, "-i", f"{inv}/hosts.ini", "backend", "--list-hosts"],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            env={**os.environ, "ANSIBLE_NOCOLOR": "1"},
        )
        .stdout.split("\n", 1)[1]
        .split()
    )
    out = fleetcheck("run", "-c", str(config), "--format", "json", "--no-state")
    results = json.loads(out.stdout)["results"]
    rows = {r["host"]: r for r in results if r["check"] == "routes"}
    (inventory,) = [r for r in results if r["check"] == "inventory"]
    assert (inventory["status"], inventory["summary"]) == (
        "OK",
        "4 hosts from 1 inventory source(s)",
    )
    assert sorted(rows) == sorted(oracle) == ["db1", "worker-1", "worker-2", "worker-3"]
    assert {h: r["status"] for h, r in rows.items() if h != "worker-3"} == {
        "db1": "OK", "worker-1": "OK", "worker-2": "OK",
    }  # fmt: skip
    assert rows["worker-3"]["status"] in ("CRIT", "UNKNOWN")
    assert "refused" in rows["worker-3"]["summary"], rows["worker-3"]["summary"]

    shown = fleetcheck("config", "check", "--ssh", "-c", str(config))
    assert f"worker-2: root@{workers[1].addr} port 22" in shown.stdout
    assert f"key files: {lab.client_key}" in shown.stdout


# ---------------------------------------------------------------- fleets that change


def _inventory_config(lab: Lab, listing: Path, timeout: str = "3s") -> Path:
    gen = lab.dir / "fleet-hosts"
    gen.write_text(
        f"#!{sys.executable}\n"
        "import sys, time\n"
        f"text = open({str(listing)!r}).read()\n"
        "if text == 'FAIL':\n"
        "    print('cmdb: 503 Service Unavailable', file=sys.stderr); sys.exit(1)\n"
        "if text == 'HANG':\n"
        "    time.sleep(600)\n"
        "print(text)\n"
    )
    gen.chmod(0o755)
    config = lab.config(
        hosts=[],
        extra=f'[[inventory]]\nsource = "command"\nname = "cmdb"\nrun = ["{gen}"]\n'
        f'timeout = "{timeout}"\n',
    )
    return config


def _listing(path: Path, hosts: list) -> None:
    path.write_text(
        json.dumps({"hosts": [{"name": h.name, "ssh": "local", "addrs": [h.addr]} for h in hosts]})
    )


def _notes(config: Path, state: Path) -> tuple[dict, list[str], int]:
    """One remembered round in plain text: its rows by (check, host) and its notes."""
    out = fleetcheck(
        "run", "-c", str(config), "--format", "plain", "--state", str(state),
        "--history", str(state.with_name("history.jsonl")),
    )  # fmt: skip
    rows: dict = {}
    notes = []
    for line in out.stdout.splitlines():
        if line.startswith("note: "):
            notes.append(line[6:])
    js = fleetcheck("run", "-c", str(config), "--format", "json", "--no-state")
    for r in json.loads(js.stdout)["results"]:
        rows[(r["check"], r["host"])] = r
    return rows, notes, out.returncode


@pytest.mark.lab
def test_hosts_join_and_leave_between_rounds(tmp_path: Path) -> None:
    with Lab(netns=False) as lab:
        hosts = [lab.add_host(f"n{i}") for i in range(1, 5)]
        workers = {h.name: lab.start_workers(h, 2) for h in hosts[:3]}
        listing = tmp_path / "listing.json"
        _listing(listing, hosts[:3])
        config = _inventory_config(lab, listing)
        state = tmp_path / "state" / "state-x.json"

        rows, notes, code = _notes(config, state)
        assert code == 0 and notes == []
        assert {h for (c, h) in rows if c == "clients" and h} == {"n1", "n2", "n3"}
        assert rows[("inventory", None)]["summary"] == "3 hosts from 1 inventory source(s)"

        # n3 scaled in: its workers gone with it, and it leaves the inventory
        lab.stop(workers["n3"])
        _listing(listing, hosts[:2])
        rows, notes, code = _notes(config, state)
        assert code == 0, rows  # no CRIT for a host that left
        assert not any(h == "n3" for (_, h) in rows)
        (left,) = notes
        assert left.startswith("n3 left the fleet at ") and "history is kept" in left
        rows, notes, code = _notes(config, state)
        assert notes == []  # noted once

        # n4 scaled out: patrolled from this round on, noted once
        lab.start_workers(hosts[3], 2)
        _listing(listing, [hosts[0], hosts[1], hosts[3]])
        rows, notes, code = _notes(config, state)
        assert notes == ["n4 joined the fleet (from cmdb)"]
        assert rows[("clients", "n4")]["status"] == "OK"

        # history still shows n3
        hist = fleetcheck("history", "-c", str(config), "--history",
                          str(state.with_name("history.jsonl")))  # fmt: skip
        assert hist.returncode == 0, hist.stderr
        assert "n3" in hist.stdout

        # the source fails, then hangs: the last good fleet is patrolled, nobody leaves
        for fault, why in (("FAIL", "exited 1: cmdb: 503 Service Unavailable"),
                           ("HANG", "no answer within 3s (killed)")):  # fmt: skip
            listing.write_text(fault)
            rows, notes, code = _notes(config, state)
            assert notes == [], fault
            assert {h for (c, h) in rows if c == "clients" and h} == {"n1", "n2", "n4"}
            inv = rows[("inventory", None)]
            assert inv["status"] == "WARN", inv
            assert inv["summary"].startswith(f"cmdb: {lab.dir}/fleet-hosts: {why}; patrolling "
                                             "its last good list (3 hosts, ")  # fmt: skip
            assert code == 1
