"""Verdicts that say what failed, once (issue 24 item 7), on the real lab: a host gone from
the network while the broker still holds its connections is not OK within one patrol; a
changed host key is one grouped problem, not one per check; every non-OK row carries its
evidence strength."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import fleetcheck
from tests.lab import Lab

pytestmark = pytest.mark.lab


def patrol(cfg: Path, fmt: str = "json") -> tuple[str, int]:
    proc = fleetcheck("run", "-c", str(cfg), "--format", fmt, "--no-state")
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout, proc.returncode


def rows(text: str) -> dict[tuple[str | None, str], dict]:
    return {(r["host"], r["check"]): r for r in json.loads(text)["results"]}


def test_host_gone_with_its_connections_left_open_is_not_ok(lab: Lab) -> None:
    """A machine cut off the network (its link down: no FIN, so the broker keeps its 25
    connections) beside a healthy one: its SSH row is CRIT (no answer) and its clients row
    says likely half-open under the same cause, within one patrol; the healthy host is OK."""
    gone, fine = lab.add_host("gone"), lab.add_host("fine")
    lab.start_workers(gone, 25)
    lab.start_workers(fine, 3)
    cfg = lab.config(checks="[checks.clients]\n[checks.routes]\n")
    lab.link_down(gone)
    out, code = patrol(cfg)
    by = rows(out)
    clients, routes = by[("gone", "clients")], by[("gone", "routes")]
    assert routes["status"] == "CRIT", routes
    assert clients["status"] == "WARN", clients
    assert clients["summary"] == (
        "25 broker connections but the host does not answer SSH: likely half-open "
        "(a machine gone without closing them)"
    )
    assert clients["evidence_strength"] == "inference"
    assert clients["cause"] == routes["cause"] and routes["cause"].startswith("gone: ")
    assert by[("fine", "clients")]["status"] == "OK" and by[("fine", "routes")]["status"] == "OK"
    assert code == 2
    text, _ = patrol(cfg, "plain")
    flat = " ".join(text.split())
    assert flat.count(routes["cause"]) == 1, text  # one problem, its rows under it


def test_changed_host_key_is_one_grouped_problem(lab: Lab) -> None:
    h = lab.add_host("rekeyed")
    log = h.log_path("w.log")
    log.write_text("2026-01-01T00:00:00Z tick\n")
    cfg = lab.config(
        checks="[checks.logs]\n[checks.routes]\n",
        host_extra={"rekeyed": f'tz = "UTC"\n[[hosts.logs]]\npath = "{log}"\n'},
    )
    lab.change_host_key(h)
    out, code = patrol(cfg)
    by = rows(out)
    logs, routes = by[("rekeyed", "logs")], by[("rekeyed", "routes")]
    assert logs["status"] == routes["status"] == "CRIT"
    assert logs["cause"] == routes["cause"] and "host key changed" in logs["cause"]
    assert code == 2
    for fmt in ("plain", "table", "nagios"):
        text, _ = patrol(cfg, fmt)
        if fmt == "nagios":  # the status line names the worst problem; the long output tells it
            text = text.split("\n", 1)[1]
        flat = " ".join(text.replace("│", " ").split())
        assert flat.count("possible man-in-the-middle") == 1, (fmt, text)
        assert "2 rows" in flat, (fmt, text)


def test_hosts_behind_a_hung_jump_host_share_its_cause(lab: Lab) -> None:
    """A jump host whose sshd hangs: every host behind it could not be looked at (UNKNOWN,
    not CRIT: the hosts may be fine, their workers do not go through it), all under one cause
    naming the jump host, told once; and their broker connections are not called half-open."""
    a, b = lab.add_host("a"), lab.add_host("b")
    jump = lab.add_host("jump")
    lab.start_workers(a, 2)
    lab.start_workers(b, 1)
    d = lab.dir / "ssh-jump"
    d.mkdir()
    (d / "config").write_text(
        "".join(
            f"Host {h.name}-alias\n  HostName {h.addr}\n  User root\n  ProxyJump jump-alias\n"
            for h in (a, b)
        )
        + f"Host jump-alias\n  HostName {jump.addr}\n  User root\n"
    )
    config = lab.config(checks="[checks.clients]\n[checks.routes]\n", hosts=[a, b])
    text = config.read_text().replace('config_file = "/dev/null"', f'config_file = "{d}/config"')
    for h in (a, b):
        text = text.replace(f'ssh = "{h.addr}"', f'ssh = "{h.name}-alias"')
    config.write_text(text)
    lab.freeze_sshd(jump)
    try:
        out, code = patrol(config)
        plain_text, _ = patrol(config, "plain")
    finally:
        lab.thaw_sshd(jump)
    by = rows(out)
    ra, rb = by[("a", "routes")], by[("b", "routes")]
    assert ra["status"] == rb["status"] == "UNKNOWN", (ra, rb)
    assert ra["cause"] == rb["cause"], (ra, rb)
    assert ra["cause"].startswith(f"jump host jump-alias ({jump.addr}:22)")
    assert by[("a", "clients")]["status"] == "OK"  # no half-open guess: a was never seen
    assert code == 3
    assert " ".join(plain_text.split()).count(ra["cause"]) == 1, plain_text
