"""`config discover` and the inventories it sees (issue 26, item 5): hosts named from an Ansible
inventory read through the real `ansible-inventory`, and commented `[[inventory]]` tables
proposed for that inventory and for the ssh_config whose Host entries name the drafts."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from fleetcheck import discover
from fleetcheck.config.inventory import InventorySpec, SourceFailed
from fleetcheck.config.inventory_programs import find_program
from fleetcheck.discover_hosts import HostDraft
from tests.cli import fleetcheck
from tests.lab import Lab
from tests.test_discover import _setup, _ssh_config


def draft(name: str, addr: str, ssh: str | None = None, **kw: object) -> HostDraft:
    return HostDraft(name, (addr,), 3, ("w",), ssh, "client names", **kw)  # type: ignore[arg-type]


def uncommented(lines: list[str]) -> dict:
    body = "\n".join(line[2:] for line in lines if line.startswith("# ") and "PROPOSED" not in line)
    return tomllib.loads(body)


def test_ssh_config_proposal_with_a_common_glob_validates() -> None:
    hosts = [
        draft("worker-1", "198.18.9.1", "worker-1"),
        draft("worker-2", "198.18.9.2", "worker-2"),
    ]
    lines = discover.inventory_tables(hosts, "~/.ssh/config", None, 0)
    assert "PROPOSED: 2 of these hosts have Host entries" in lines[0]
    table = uncommented(lines)["inventory"][0]
    assert table == {"source": "ssh_config", "match": "worker-*"}
    InventorySpec(**table)  # what `config check` would accept
    other = discover.inventory_tables(hosts, "/etc/fleetcheck/ssh_config", None, 0)
    assert uncommented(other)["inventory"][0]["path"] == "/etc/fleetcheck/ssh_config"


def test_nothing_proposed_without_a_source() -> None:
    assert discover.inventory_tables([draft("a", "198.18.9.1")], "~/.ssh/config", None, 0) == []
    # one alias: no glob guessed from a single name
    one = discover.inventory_tables([draft("a", "198.18.9.1", "db")], "~/.ssh/config", None, 0)
    assert "match" not in uncommented(one)["inventory"][0]


def test_named_by_inventory_renames_unclaimed_drafts_only() -> None:
    hosts = [
        draft("ip", "198.18.9.1"),
        draft("host-198-18-9-2", "198.18.9.2", claimed={"198.18.9.2": "kept"}),
        draft("w1", "198.18.9.3"),
    ]
    names = {"198.18.9.1": "web-01", "198.18.9.2": "web-02"}
    out, renamed = discover.named_by_inventory(hosts, names, "the Ansible inventory X")
    assert [h.name for h in out] == ["web-01", "host-198-18-9-2", "w1"] and renamed == 1
    assert out[0].named_from == "the Ansible inventory X"


needs_ansible = pytest.mark.skipif(
    find_program("ansible-inventory") is None, reason="ansible-inventory (the test extra) missing"
)


@needs_ansible
def test_ansible_addresses_through_the_real_ansible_inventory(tmp_path: Path) -> None:
    inv = tmp_path / "hosts.ini"
    inv.write_text(
        "[workers]\n"
        "web-0[1:2] ansible_user=ops\n"
        "dbhost ansible_host=db.example.invalid\n"
        "[workers:vars]\n"
        "ansible_port=22\n"
    )
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "web-01.yml").write_text("ansible_host: 198.18.250.11\n")
    (tmp_path / "host_vars" / "web-02.yml").write_text("ansible_host: 198.18.250.12\n")
    got = discover.ansible_addresses(str(inv), 60)
    assert got == {"198.18.250.11": "web-01", "198.18.250.12": "web-02"}  # DNS names not looked up
    lines = discover.inventory_tables([], "~/.ssh/config", str(inv), 2)
    table = uncommented(lines)["inventory"][0]
    assert table == {"source": "ansible", "path": str(inv)}
    InventorySpec(**table)


@needs_ansible
def test_an_unreadable_inventory_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yml"
    bad.write_text("all:\n  hosts: [unclosed\n")
    with pytest.raises(SourceFailed) as e:
        discover.ansible_addresses(str(bad), 60)
    assert "\n" not in e.value.reason and e.value.reason


@pytest.mark.lab
@needs_ansible
def test_discover_names_hosts_from_the_ansible_inventory_and_proposes_both(lab: Lab) -> None:
    """The lab's broker with workers from four machines; an Ansible inventory that knows
    laptop's address by another name: discover names that host from the inventory, and the
    draft proposes the inventory and the ssh_config (whose Host entry names mini)."""
    hosts = _setup(lab)
    ssh_cfg = _ssh_config(lab, hosts)
    inv = lab.dir / "inventory.ini"
    inv.write_text(f"[workers]\nlaptop-17 ansible_host={hosts['laptop'].addr}\n")
    proc = fleetcheck(
        "config", "discover", "--url", lab.broker_url, "--ssh-config", str(ssh_cfg),
        "--ansible", str(inv),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = tomllib.loads(proc.stdout)
    got = {h["name"]: h for h in doc["hosts"]}
    assert got["laptop-17"]["addrs"] == [hosts["laptop"].addr]
    assert "# from the Ansible inventory" in proc.stdout
    assert f"# path = {json.dumps(str(inv))}" in proc.stdout
    assert "PROPOSED: 1 of these hosts are in the Ansible inventory" in proc.stdout
    assert '# source = "ssh_config"' in proc.stdout
    # an inventory that cannot be read: one warning, the draft still made
    bad = lab.dir / "broken.yml"
    bad.write_text("all:\n  hosts: [unclosed\n")
    proc = fleetcheck(
        "config", "discover", "--url", lab.broker_url, "--ssh-config", "/dev/null",
        "--ansible", str(bad),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"--ansible {bad}:" in proc.stderr and "not named from it" in proc.stderr
    assert "Traceback" not in proc.stderr
