"""SSH connections kept between rounds (issue 15), on the lab's real sshds: reused by the
next round (the server reports the same TCP connection), replaced when its sshd is restarted
(a new connection, host key verified: a changed key is CRIT), bounded, never kept unhealthy
or past keep_alive_for."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from fleetcheck.config import ConfigError, FleetConfig, HostConfig, load
from fleetcheck.core import registry
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.model import Status
from fleetcheck.core.runner import plan, run_patrol
from fleetcheck.transport.keep import Keeper
from fleetcheck.transport.ssh.session import StaleConnection
from tests.hang import returns_within
from tests.lab import Lab, LabHost, wait_for

WHO = {"t.conn": 'echo "$SSH_CONNECTION"'}  # client addr, client port, server addr, port


def fleet_of(lab: Lab, checks: str = "[checks.routes]\n") -> FleetConfig:
    return load(lab.config(checks=checks), registry.config_type, registry.host_config_types)


def host_cfg(fleet: FleetConfig, h: LabHost) -> HostConfig:
    return next(x for x in fleet.hosts if x.name == h.name)


def connection(fleet: FleetConfig, host: HostConfig, keeper: Keeper) -> str:
    """One round's view of the host's connection, as its sshd reports it."""
    ctx = PatrolContext(fleet, lambda _h: dict(WHO), keeper=keeper)
    try:
        return ctx.host_facts(host).get("t.conn").text.strip()
    finally:
        ctx.close()


def restart_sshd(lab: Lab, h: LabHost, new_key: bool = False) -> None:
    """Stop every sshd of the host (the listener and the per-connection ones, which live in
    their own sessions and survive the listener), then start it again."""
    lab.stop_sshd(h)
    pids = subprocess.run(
        ["ip", "netns", "pids", h.ns], capture_output=True, text=True, check=True
    ).stdout.split()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                os.kill(int(pid), signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError):
            pass
    if new_key:
        lab.change_host_key(h)
    else:
        lab.start_sshd(h)


@pytest.mark.lab
def test_a_kept_connection_is_reused_across_rounds(lab: Lab) -> None:
    hosts = [lab.add_host("a"), lab.add_host("b")]
    fleet = fleet_of(lab)
    keeper = Keeper(300.0)
    try:
        first = {h.name: connection(fleet, host_cfg(fleet, h), keeper) for h in hosts}
        assert keeper.idle() == 2 and keeper.reused == 0
        second = {h.name: connection(fleet, host_cfg(fleet, h), keeper) for h in hosts}
        assert second == first  # the same TCP connections, seen from the servers' side
        assert keeper.reused == 2 and keeper.idle() == 2
        # through the runner, with a real check: every row judged, every connection reused
        items = plan(fleet, registry.select(fleet.checks))
        for _ in range(2):
            report = run_patrol(fleet, items, keeper=keeper)
            assert [r.status for r in report.results] == [Status.OK, Status.OK], report
        assert keeper.reused == 6 and keeper.replaced == 0
    finally:
        keeper.close()
    assert keeper.idle() == 0


@pytest.mark.lab
def test_a_kept_connection_is_replaced_after_its_sshd_restarts(lab: Lab) -> None:
    h = lab.add_host("a")
    fleet = fleet_of(lab)
    host = host_cfg(fleet, h)
    keeper = Keeper(300.0)
    try:
        before = connection(fleet, host, keeper)
        restart_sshd(lab, h)
        after = connection(fleet, host, keeper)  # no error: replaced within the round
        assert after and after != before  # another client port: a new connection
        assert keeper.replaced == 1
        assert connection(fleet, host, keeper) == after  # and that one is kept in turn
    finally:
        keeper.close()


@pytest.mark.lab
def test_a_changed_host_key_on_reconnect_is_crit(lab: Lab) -> None:
    h = lab.add_host("a")
    fleet = fleet_of(lab)
    items = plan(fleet, registry.select(fleet.checks))
    keeper = Keeper(300.0)
    try:
        assert run_patrol(fleet, items, keeper=keeper).results[0].status is Status.OK
        restart_sshd(lab, h, new_key=True)
        row = run_patrol(fleet, items, keeper=keeper).results[0]
        assert row.status is Status.CRIT
        assert "host key changed" in row.summary
        assert keeper.replaced == 1 and keeper.idle() == 0
    finally:
        keeper.close()


@pytest.mark.lab
def test_an_idle_kept_connection_sends_ssh_keepalives(lab: Lab) -> None:
    """While it waits for the next round, a kept connection sends SSH keepalives (its sshd,
    at LogLevel DEBUG, logs each global request), so a NAT or firewall on the way does not
    drop it as idle; the connection that sent them is the one the next round gets."""
    h = lab.add_host("a")
    lab.stop_sshd(h)
    log = h.dir / "sshd.log"
    log.write_bytes(b"")
    lab.start_sshd(h, log_level="DEBUG")
    fleet = fleet_of(lab)
    host = host_cfg(fleet, h)
    keeper = Keeper(300.0, keepalive=1.0)

    def keepalives() -> int:
        return log.read_text().count("rtype keepalive@lag.net")

    try:
        before = first_connection(fleet, host, keeper)
        wait_for(lambda: keepalives() >= 2, 15, "two keepalives on the idle connection")
        assert connection(fleet, host, keeper) == before and keeper.reused == 1
    finally:
        keeper.close()


def first_connection(fleet: FleetConfig, host: HostConfig, keeper: Keeper) -> str:
    """`connection` on a host whose sshd was just restarted at LogLevel DEBUG: under a loaded
    CI machine its first session was once refused with a broken pipe right after the login
    (1 run in ~3,000 tests; not reproduced in 8 runs alone). Not this test's subject, so a
    refused first session is tried again, twice at most, each on a new connection."""
    for attempt in range(3):
        try:
            return connection(fleet, host, keeper)
        except StaleConnection:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@pytest.mark.lab
def test_idle_connections_are_bounded(lab: Lab) -> None:
    """Past the bound the connection handed back is closed, not the oldest idle one: rounds
    walk the fleet in one order, and dropping the oldest would close every kept connection
    just before its host's turn on a fleet larger than the bound (none ever reused)."""
    hosts = [lab.add_host("a"), lab.add_host("b"), lab.add_host("c")]
    fleet = fleet_of(lab)
    keeper = Keeper(300.0, max_idle=2)
    try:
        for _ in range(3):  # rounds in one order, as a patrol's lanes take them
            for h in hosts:
                connection(fleet, host_cfg(fleet, h), keeper)
            assert keeper.idle() == 2
        # a and b kept from the first round and reused in the next two; c never kept
        assert keeper.reused == 4 and keeper.dropped == 3
    finally:
        keeper.close()


@pytest.mark.lab
def test_a_kept_connection_is_not_reused_once_ssh_config_moves_the_host(lab: Lab) -> None:
    """ssh_config is read anew every round; a kept connection to where the host used to
    resolve must not serve it (it would report the old machine for as long as it lives)."""
    a, b = lab.add_host("a"), lab.add_host("b")
    ssh_config = lab.dir / "ssh_config_moving"
    ssh_config.write_text("")
    path = lab.config(checks="[checks.routes]\n", hosts=[a])
    text = path.read_text()
    assert 'config_file = "/dev/null"' in text
    path.write_text(text.replace('config_file = "/dev/null"', f'config_file = "{ssh_config}"'))
    fleet = load(path, registry.config_type, registry.host_config_types)
    host = host_cfg(fleet, a)
    keeper = Keeper(300.0)
    try:
        assert connection(fleet, host, keeper).split()[2] == a.addr
        assert connection(fleet, host, keeper).split()[2] == a.addr and keeper.reused == 1
        ssh_config.write_text(f"Host {a.addr}\n  HostName {b.addr}\n")
        assert connection(fleet, host, keeper).split()[2] == b.addr  # where it resolves now
        assert keeper.reused == 1 and keeper.replaced == 1
    finally:
        keeper.close()


@pytest.mark.lab
def test_a_kept_connection_whose_key_known_hosts_now_revokes_is_crit(lab: Lab) -> None:
    """The host key is checked against known_hosts as it is now, also for a kept
    connection: a key marked @revoked since the last round is CRIT, not an old login."""
    h = lab.add_host("a")
    fleet = fleet_of(lab)
    items = plan(fleet, registry.select(fleet.checks))
    keeper = Keeper(300.0)
    try:
        for _ in range(2):
            assert run_patrol(fleet, items, keeper=keeper).results[0].status is Status.OK
        assert keeper.reused == 1
        with lab.known_hosts.open("a") as f:
            f.write(f"@revoked * {h.host_key_pub}\n")
        row = run_patrol(fleet, items, keeper=keeper).results[0]
        assert row.status is Status.CRIT and "REVOKED" in row.summary, row
        assert keeper.reused == 1 and keeper.replaced == 1
    finally:
        keeper.close()


@pytest.mark.lab
def test_a_shell_a_check_holds_is_a_new_connection_not_a_kept_one(lab: Lab) -> None:
    """`ctx.shell()` (rater_probe's ack wait) runs without the gathered exec's
    replace-if-silent path, so it never gets a connection kept from an earlier round."""
    h = lab.add_host("a")
    fleet = fleet_of(lab)
    host = host_cfg(fleet, h)
    keeper = Keeper(300.0)
    try:
        kept = connection(fleet, host, keeper)
        ctx = PatrolContext(fleet, keeper=keeper)
        try:
            shell = ctx.shell(host)
            cfg = fleet.ssh
            said = shell.run(WHO["t.conn"], cfg.command_timeout, cfg.max_output_bytes)
            assert said.stdout.decode().strip() not in ("", kept)
        finally:
            ctx.close()
        assert keeper.reused == 0
        assert connection(fleet, host, keeper) == kept  # still kept for the next round
    finally:
        keeper.close()


@pytest.mark.lab
def test_nothing_is_kept_past_keep_alive_for(lab: Lab) -> None:
    h = lab.add_host("a")
    fleet = fleet_of(lab)
    host = host_cfg(fleet, h)
    keeper = Keeper(0.0)  # any idle time is too long
    try:
        before = connection(fleet, host, keeper)
        assert connection(fleet, host, keeper) != before
        assert keeper.reused == 0 and keeper.dropped >= 1
    finally:
        keeper.close()


@pytest.mark.lab
def test_a_connection_whose_exec_timed_out_is_not_kept(lab: Lab) -> None:
    h = lab.add_host("a")
    fleet = fleet_of(lab)
    host = host_cfg(fleet, h)
    keeper = Keeper(300.0)
    ctx = PatrolContext(fleet, lambda _h: {"t.slow": "sleep 30"}, keeper=keeper)
    try:
        facts = ctx.host_facts(host)
        assert facts.problem is not None and "did not finish" in facts.problem
        assert keeper.idle() == 0 and keeper.dropped >= 1 and keeper.kept == 0
    finally:
        ctx.close()
        keeper.close()


@pytest.mark.lab
def test_closed_keeper_keeps_nothing(lab: Lab) -> None:
    h = lab.add_host("a")
    fleet = fleet_of(lab)
    keeper = Keeper(300.0)
    keeper.close()
    connection(fleet, host_cfg(fleet, h), keeper)
    assert keeper.idle() == 0


def test_keep_alive_for_is_a_duration_of_five_minutes_by_default(tmp_path: Path) -> None:
    p = tmp_path / "hosts.toml"
    p.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\n')
    assert load(p, registry.config_type, registry.host_config_types).ssh.keep_alive_for == 300.0
    p.write_text('[broker]\nurl = "redis://127.0.0.1:1/0"\n[ssh]\nkeep_alive_for = "-1s"\n')
    with pytest.raises(ConfigError, match=r"\[ssh\] keep_alive_for: bad duration"):
        load(p, registry.config_type, registry.host_config_types)


@pytest.mark.lab
def test_a_silent_kept_connection_is_replaced_within_the_round(lab: Lab) -> None:
    """The kept connection's sshd stops answering (SIGSTOP): its TCP connection still looks
    open, so only the channel request can tell; it gets connect_timeout, then the round goes
    on over a new connection (round_after_freezing checks that, under a hang guard)."""
    h = lab.add_host("a")
    round_after_freezing(fleet_of(lab), h)


@pytest.mark.lab
def test_a_kept_connection_that_answers_late_is_kept(lab: Lab) -> None:
    """The other side of the test above, as an order instead of a timing: the channel request
    on a kept connection is waited for, not judged at once. Its sshd is thawed only once the
    request sits in its socket; the round then goes on over the same connection."""
    h = lab.add_host("a")
    path = lab.config(checks="[checks.routes]\n")
    # ample, so that the thaw below always comes inside it, however loaded the machine
    path.write_text(
        path.read_text().replace('connect_timeout = "3s"', 'connect_timeout = "60s"', 1)
    )
    fleet = load(path, registry.config_type, registry.host_config_types)
    host = host_cfg(fleet, h)
    keeper = Keeper(300.0)
    frozen: list[int] = []
    try:
        before = connection(fleet, host, keeper)
        frozen += freeze_sessions(h)
        unread = waiting_bytes(h)  # what the round before may have left (a channel's close)
        after: list[str] = []
        t = threading.Thread(target=lambda: after.append(connection(fleet, host, keeper)))
        t.daemon = True
        t.start()
        wait_for(lambda: waiting_bytes(h) > unread, 30, "the channel request to reach the sshd")
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        t.join(30)  # a hang guard, not a timing
        assert after, "hung: the round on the thawed kept connection did not end in 30 s"
        assert after == [before] and keeper.replaced == 0, (before, after, keeper.replaced)
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        keeper.close()


def waiting_bytes(h: LabHost) -> int:
    """Bytes the host's sshds have received and not read, over its established SSH
    connections (Recv-Q): a request a frozen sshd has not seen."""
    out = subprocess.run(
        ["ip", "netns", "exec", h.ns, "ss", "-Htn", "state", "established", "sport = :22"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return sum(int(line.split()[0]) for line in out.splitlines() if line.strip())


def round_after_freezing(fleet: FleetConfig, h: LabHost) -> None:
    """A round that keeps the host's connection, its per-connection sshds frozen, then the
    next round: it must go on over a new connection, replacing the kept one. A hang guard
    (60 s) bounds that round: a kept connection nothing gives up on would wait forever."""
    host = host_cfg(fleet, h)
    keeper = Keeper(300.0)
    frozen: list[int] = []
    try:
        before = connection(fleet, host, keeper)
        frozen += freeze_sessions(h)
        after = returns_within(
            60, lambda: connection(fleet, host, keeper), "a round over a frozen kept connection"
        )
        assert after and after != before and keeper.replaced == 1
    finally:
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        keeper.close()


def freeze_sessions(h: LabHost) -> list[int]:
    """SIGSTOP the host's per-connection sshds (not the listener): their TCP connections
    still look open, and only a channel request can tell they are silent."""
    assert h.sshd is not None
    frozen = []
    pids = subprocess.run(
        ["ip", "netns", "pids", h.ns], capture_output=True, text=True, check=True
    ).stdout.split()
    for pid in map(int, pids):
        try:
            if pid != h.sshd.pid and Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                os.kill(pid, signal.SIGSTOP)
                frozen.append(pid)
        except (FileNotFoundError, ProcessLookupError):
            pass
    assert frozen
    return frozen


@pytest.mark.lab
def test_a_silent_kept_connection_gets_ssh_configs_connect_timeout(lab: Lab) -> None:
    """ssh_config's ConnectTimeout for the host beats [ssh] connect_timeout for a kept
    connection's channel too, as it does for a new connection: with 1 s there and 10 min in
    [ssh] (connect and command timeouts), a silent kept connection is given up and replaced
    within round_after_freezing's hang guard (60 s); [ssh]'s would have it wait 10 min."""
    h = lab.add_host("a")
    ssh_config = lab.dir / "ssh_config_timeout"
    ssh_config.write_text(f"Host {h.addr}\n  ConnectTimeout 1\n")
    path = lab.config(checks="[checks.routes]\n")
    text = path.read_text().replace('config_file = "/dev/null"', f'config_file = "{ssh_config}"')
    text = text.replace('connect_timeout = "3s"', 'connect_timeout = "10m"', 1)
    path.write_text(text.replace('command_timeout = "5s"', 'command_timeout = "10m"', 1))
    fleet = load(path, registry.config_type, registry.host_config_types)
    assert fleet.ssh.connect_timeout == fleet.ssh.command_timeout == 600  # neither caps it
    round_after_freezing(fleet, h)  # 1 s (ssh_config) and a new login, not 10 min ([ssh])


def host_logging_logins(lab: Lab, keep_alive_for: str) -> tuple[Path, Path]:
    """One lab host whose sshd logs every login (LogLevel INFO), and a config with that
    keep_alive_for: (the config, the sshd's log)."""
    h = lab.add_host("a")
    lab.stop_sshd(h)
    log = h.dir / "sshd.log"
    log.write_bytes(b"")
    lab.start_sshd(h, log_level="INFO")
    cfg = lab.config(checks="[checks.routes]\n")
    text = cfg.read_text().replace("[ssh]\n", f'[ssh]\nkeep_alive_for = "{keep_alive_for}"\n', 1)
    cfg.write_text(text)
    return cfg, log


@pytest.mark.lab
@pytest.mark.parametrize(("keep_alive_for", "logins"), [("5m", 1), ("0s", 3)])
def test_run_every_logs_in_once_while_rounds_are_close_enough(
    lab: Lab, keep_alive_for: str, logins: int
) -> None:
    """The real CLI, three rounds one second apart: the host's sshd (LogLevel INFO) logs one
    login when connections are kept, one per round when keep_alive_for is 0s."""
    from tests.cli import fleetcheck

    cfg, log = host_logging_logins(lab, keep_alive_for)
    proc = fleetcheck(
        "run", "-c", str(cfg), "--every", "1s", "--rounds", "3", "--format", "json", "--no-state"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count('"status": "OK"') >= 3
    assert log.read_text().count("Accepted publickey") == logins


@pytest.mark.lab
@pytest.mark.parametrize("keep_alive_for", ["5m", "0s"])
def test_serve_every_logs_in_once_while_rounds_are_close_enough(
    lab: Lab, tmp_path: Path, keep_alive_for: str
) -> None:
    """`serve --every` is a long-running process too: its rounds keep their connections
    (one login while they are close enough; one a round with keep_alive_for 0s)."""
    from tests.serve_util import serving

    cfg, log = host_logging_logins(lab, keep_alive_for)
    history = tmp_path / "history.jsonl"
    from fleetcheck.rounds import history as hist

    with serving("-c", str(cfg), "--history", str(history), "--every", "1s"):
        wait_for(
            lambda: hist.exists(history) and len(hist.load(history)[0]) >= 3,
            60,
            "three rounds of serve --every",
        )
    rounds = hist.load(history)[0]
    assert [r.status.label for r in rounds] == ["OK"] * len(rounds), rounds
    logins = log.read_text().count("Accepted publickey")
    if keep_alive_for == "5m":
        assert logins == 1, (logins, len(rounds))
    else:
        assert logins >= 3, (logins, len(rounds))
