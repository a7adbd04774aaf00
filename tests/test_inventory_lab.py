"""[[inventory]] on the real lab: an Ansible INI inventory (a range, children groups,
host_vars with each machine's address and key) read through the real ansible-inventory gives
the hosts Ansible itself lists, and a patrol of them gives real verdicts (a host whose sshd is
stopped is not OK, the others are)."""

from __future__ import annotations

import json
import os
import subprocess

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
    rows = {r["host"]: r for r in json.loads(out.stdout)["results"]}
    assert sorted(rows) == sorted(oracle) == ["db1", "worker-1", "worker-2", "worker-3"]
    assert {h: r["status"] for h, r in rows.items() if h != "worker-3"} == {
        "db1": "OK", "worker-1": "OK", "worker-2": "OK",
    }  # fmt: skip
    assert rows["worker-3"]["status"] in ("CRIT", "UNKNOWN")
    assert "refused" in rows["worker-3"]["summary"], rows["worker-3"]["summary"]

    shown = fleetcheck("config", "check", "--ssh", "-c", str(config))
    assert f"worker-2: root@{workers[1].addr} port 22" in shown.stdout
    assert f"key files: {lab.client_key}" in shown.stdout
