"""The resident shell on kept connections (issue 29), on the lab's real sshds: the login shell
and its rc file run once per connection, not once per round; a resident shell killed on the
host, or one that prints anything unframed (a banner, an echo, output left over from the
round before), is replaced within the round by a fresh exec with a real verdict; what the
host prints reaches the parser byte for byte as a fresh exec's would."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from fleetcheck.config import FleetConfig, HostConfig, load
from fleetcheck.core import registry
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.model import Status
from fleetcheck.core.runner import plan, run_patrol
from fleetcheck.transport.keep import Keeper
from fleetcheck.transport.ssh import resident
from tests.lab import Lab, LabHost, resident_shells, wait_for


def fleet_of(lab: Lab) -> FleetConfig:
    return load(
        lab.config(checks="[checks.routes]\n"), registry.config_type, registry.host_config_types
    )


def rc_host(lab: Lab, name: str, rc: str, options: str = "") -> tuple[LabHost, Path]:
    """A host whose login shell (root's bash) sources `rc` (BASH_ENV) for every command sshd
    runs, as Debian's bash sources ~/.bashrc; each start is counted in a file."""
    starts = lab.dir / f"{name}.starts"
    rcfile = lab.dir / f"{name}.rc"
    rcfile.write_text(f"echo x >> {starts}\n{rc}")
    h = lab.add_host(name, sshd_options=f"SetEnv BASH_ENV={rcfile}\n{options}")
    return h, starts


def starts_of(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def one_round(fleet: FleetConfig, keeper: Keeper) -> Status:
    report = run_patrol(fleet, plan(fleet, registry.select(fleet.checks)), keeper=keeper)
    [row] = report.results
    assert row.status is Status.OK, row.summary
    return row.status


def resident_pids(h: LabHost) -> list[int]:
    pids = subprocess.run(
        ["ip", "netns", "pids", h.ns], capture_output=True, text=True, check=True
    ).stdout.split()
    return resident_shells(map(int, pids))


def host_cfg(fleet: FleetConfig) -> HostConfig:
    return fleet.hosts[0]


@pytest.mark.lab
def test_the_rc_file_runs_once_per_kept_connection(lab: Lab) -> None:
    h, starts = rc_host(lab, "h1", "")
    fleet = fleet_of(lab)
    keeper = Keeper(300.0)
    try:
        for _ in range(4):
            one_round(fleet, keeper)
        assert keeper.reused == 3
        assert starts_of(starts) == 1  # one login shell for four rounds
        assert len(resident_pids(h)) == 1  # waiting for the next round
    finally:
        keeper.close()
    wait_for(lambda: not resident_pids(h), 10, "the resident shell to end with its connection")


@pytest.mark.lab
def test_a_resident_shell_killed_on_the_host_is_replaced_within_the_round(lab: Lab) -> None:
    h, starts = rc_host(lab, "h1", "")
    fleet = fleet_of(lab)
    keeper = Keeper(300.0)
    try:
        one_round(fleet, keeper)
        [pid] = resident_pids(h)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not resident_pids(h), 10, "the resident shell to die")
        broken = resident.counts.broken
        one_round(fleet, keeper)  # a real verdict, from a fresh exec on the same connection
        assert resident.counts.broken == broken + 1
        assert keeper.reused == 1 and keeper.replaced == 0
        assert starts_of(starts) == 2
        one_round(fleet, keeper)  # and the next round starts a new resident shell
        assert len(resident_pids(h)) == 1 and starts_of(starts) == 3
        one_round(fleet, keeper)
        assert starts_of(starts) == 3
    finally:
        keeper.close()


@pytest.mark.lab
@pytest.mark.parametrize(
    ("rc", "options"),
    [
        ("echo 'Welcome to h1 (a login banner)'\n", ""),  # on stdout, before any marker
        ("echo 'warning: pyenv is old' >&2\n", ""),  # on stderr
        ("", "ForceCommand /bin/sh -v -s\n"),  # a shell that echoes what it reads
    ],
    ids=["banner", "stderr", "echo"],
)
def test_a_shell_printing_unframed_output_is_never_trusted(lab: Lab, rc: str, options: str) -> None:
    h, starts = rc_host(lab, "h1", rc, options)
    fleet = fleet_of(lab)
    keeper = Keeper(300.0)
    refused = resident.counts.refused
    try:
        for _ in range(3):
            one_round(fleet, keeper)  # every round a real verdict, from a fresh exec
        assert resident.counts.refused == refused + 1
        assert keeper.reused == 2
        # the first round's resident shell and then one exec a round
        assert starts_of(starts) == 4 or options  # (a ForceCommand's bash has no BASH_ENV)
        # the refused shell ends when sshd sees its channel closed: soon, not at once
        wait_for(lambda: not resident_pids(h), 10, "the refused shell to end")
    finally:
        keeper.close()


@pytest.mark.lab
def test_output_left_over_from_a_round_makes_the_shell_untrusted(lab: Lab) -> None:
    lab.add_host("h1")
    fleet = fleet_of(lab)
    host = host_cfg(fleet)
    done = lab.dir / "late.done"
    late = {"t.late": f"( sleep 0.2; echo 'late output'; touch {done} ) >&1 &"}
    keeper = Keeper(300.0)
    try:
        ctx = PatrolContext(fleet, lambda _h: dict(late), keeper=keeper)
        try:
            assert ctx.host_facts(host).problem is None
        finally:
            ctx.close()
        wait_for(done.exists, 10, "the late writer to finish")
        refused = resident.counts.refused
        one_round(fleet, keeper)
        assert resident.counts.refused == refused + 1
    finally:
        keeper.close()


@pytest.mark.lab
def test_hostile_output_reaches_the_parser_as_from_a_fresh_exec(lab: Lab) -> None:
    lab.add_host("h1")
    fleet = fleet_of(lab)
    from fleetcheck.transport.ssh import Connector

    conn = Connector(fleet.ssh, 4, False)
    shell = conn.open(host_cfg(fleet))
    # forged markers, terminal escapes, invalid UTF-8, no final newline, on both streams
    script = (
        r"printf '@@0123 begin\n\033[2J\033]0;owned\007\377\376 end 0\n@@ end 1'; "
        r"printf '\033[31mred\n@@x end\n' >&2; exit 3"
    )
    try:
        fresh = shell.run(script, 10, 1 << 16)
        for _ in range(2):  # the resident shell's first round and a later one
            got = resident.run(shell, script, 10, 1 << 16)
            assert (got.rc, got.stdout, got.stderr, got.truncated) == (
                fresh.rc,
                fresh.stdout,
                fresh.stderr,
                fresh.truncated,
            )
        bounded = resident.run(shell, "head -c 100000 /dev/zero; exit 4", 10, 1000)
        assert bounded.truncated and len(bounded.stdout) == 1000 and bounded.rc == 4
    finally:
        resident.forget(shell)
        shell.close()
        conn.close()


@pytest.mark.lab
def test_a_round_past_command_timeout_ends_its_resident_shell(lab: Lab) -> None:
    """The script's own watchdog kills the resident shell on the host at command_timeout,
    our side stops waiting then too, and the connection (not healthy) is not kept."""
    h = lab.add_host("h1")
    fleet = fleet_of(lab)
    host = host_cfg(fleet)
    keeper = Keeper(300.0)
    try:
        for fragment, kept in (("true", 1), ("sleep 60", 0)):
            ctx = PatrolContext(fleet, lambda _h, f=fragment: {"t.x": f}, keeper=keeper)
            try:
                problem = ctx.host_facts(host).problem
            finally:
                ctx.close()
            assert keeper.idle() == kept
        assert problem is not None and "did not finish within command_timeout" in problem
        wait_for(lambda: not resident_pids(h), 10, "the resident shell to be killed")
        assert keeper.reused == 1
    finally:
        keeper.close()
