"""Issue 22, item 13: a host command that hangs (a `tail` on a hung NFS mount, played by a
`tail` opening a FIFO nobody writes) must not outlive command_timeout on the host.

Closing the SSH channel at command_timeout signals nothing on the host (no pty, no SIGHUP), so
before the fix the `tail` and its `/bin/sh -s` stayed in the host's namespace after the
patrol had reported the timeout (the lab test below failed so: they were still there at its
deadline). The gathered script now watches itself in plain sh and kills its process group
at command_timeout. The shell tests run the script the way sshd does (a new session, the
script on stdin) under each POSIX shell this machine has."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcheck.config import load
from fleetcheck.core import registry
from fleetcheck.core.context import PatrolContext
from fleetcheck.parse.gathered import parse_gathered
from fleetcheck.transport.gather import build_gather_script, watchdog_lines
from tests.lab import Lab, wait_for

NONCE = "feedfacecafe0013"
SHELLS = [["sh"], ["dash"], ["bash"], ["bash", "--posix"], ["busybox", "sh"]]


def available(argv: list[str]) -> bool:
    found = shutil.which(argv[0])
    return found is not None and (argv[0] != "busybox" or os.access(found, os.X_OK))


def session_members(sid: int) -> list[int]:
    """Processes of session `sid` (field 6 of /proc/PID/stat), the leader included."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid:
            members.append(int(entry))
    return members


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO nobody writes: opening it for reading blocks, as a read on a hung mount does."""
    path = tmp_path / "hung-nfs.fifo"
    os.mkfifo(path)
    yield path


@contextlib.contextmanager
def as_sshd_runs_it(argv: list[str], script: str) -> Iterator[subprocess.Popen[bytes]]:
    """`argv -s` leading a new session with `script` on stdin, as sshd runs an exec. Its
    whole session is killed on the way out, also when the test fails."""
    proc = subprocess.Popen(
        [*argv, "-s"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(script.encode())  # small: fits the pipe's buffer
    proc.stdin.close()
    proc.stdin = None  # closed: communicate() only reads
    try:
        yield proc
    finally:
        for pid in session_members(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.parametrize("argv", SHELLS, ids=" ".join)
def test_item13_the_host_kills_a_hung_command_at_command_timeout(
    argv: list[str], fifo: Path
) -> None:
    if not available(argv):
        pytest.skip(f"no {argv[0]} here")
    timeout = 1.5  # a fraction too (never early: the test below)
    fragments = {"a.before": "echo fine", "b.hung": f"tail -c 100 -- '{fifo}'", "c.after": ":"}
    with as_sshd_runs_it(argv, build_gather_script(NONCE, fragments, timeout)) as proc:
        try:
            out, _ = proc.communicate(timeout=timeout + 15)  # a hang guard, not a timing
        except subprocess.TimeoutExpired:
            pytest.fail(f"{' '.join(argv)}: hung: the hung command outlived command_timeout")
        assert proc.returncode == -signal.SIGKILL
        parsed, epoch = parse_gathered(NONCE, out)
        assert set(parsed) == {"a.before"} and parsed["a.before"].text == "fine\n"
        assert epoch is not None
        # the tail, the fragment's subshell and the watchdog went with the shell
        wait_for(lambda: session_members(proc.pid) == [], timeout=5, what="the session to end")


@pytest.mark.parametrize("fractions", [True, False], ids=["sleep-takes-fractions", "whole-only"])
@pytest.mark.parametrize("argv", SHELLS, ids=" ".join)
def test_item13_the_watchdog_never_fires_before_command_timeout(
    argv: list[str], fractions: bool, fifo: Path, tmp_path: Path
) -> None:
    """Never early, as a sum instead of a timing: a `sleep` first on PATH that returns at once
    and writes down what it slept, so the watchdog fires as soon as its sleeps are done; they
    must add up to all of command_timeout. A `sleep` that takes no fractions (BusyBox, the
    BSDs) refuses the fraction, and a whole second is slept instead."""
    if not available(argv):
        pytest.skip(f"no {argv[0]} here")
    slept = tmp_path / "slept"
    shim = tmp_path / "bin" / "sleep"
    shim.parent.mkdir()
    refuse = "" if fractions else 'case "$1" in *.*) exit 1;; esac\n'
    shim.write_text(f'#!/bin/sh\n{refuse}echo "$1" >> "{slept}"\n')
    shim.chmod(0o755)
    for timeout in (1.5, 2.0, 0.25, 3.999):
        slept.write_text("")
        script = f'PATH="{shim.parent}:$PATH"\n' + build_gather_script(
            NONCE, {"b.hung": f"tail -c 100 -- '{fifo}'"}, timeout
        )
        with as_sshd_runs_it(argv, script) as proc:
            try:
                proc.communicate(timeout=30)  # a hang guard, not a timing
            except subprocess.TimeoutExpired:
                pytest.fail(f"{' '.join(argv)}: hung: the watchdog never fired")
            assert proc.returncode == -signal.SIGKILL  # the watchdog's kill ended it
        seconds = [float(x) for x in slept.read_text().split()]
        assert sum(seconds) >= timeout, (timeout, seconds)  # requested sleeps, not a clock
        assert all(x == int(x) for x in seconds) or fractions, seconds


@pytest.mark.parametrize("argv", SHELLS, ids=" ".join)
def test_a_script_done_in_time_stops_its_watchdog(argv: list[str]) -> None:
    if not available(argv):
        pytest.skip(f"no {argv[0]} here")
    script = build_gather_script(NONCE, {"a.x": "echo hi", "b.y": "exit 4"}, 30)
    with as_sshd_runs_it(argv, script) as proc:
        out, err = proc.communicate(timeout=20)  # not 30: the script does not wait for it
        assert proc.returncode == 0 and err == b""
        parsed, _ = parse_gathered(NONCE, out)
        assert parsed["a.x"].text == "hi\n" and parsed["b.y"].rc == 4
        # the stopped watchdog's last `sleep 1` ends within a second; nothing stays 30 s
        wait_for(lambda: session_members(proc.pid) == [], timeout=5, what="the session to end")


def test_a_host_without_sleep_keeps_its_exec() -> None:
    """A host whose PATH has no `sleep` (the lab's host with `SetEnv PATH=/nonexistent`): the
    watchdog cannot count, so it gives up; it must never kill the exec at once (its loop
    would otherwise run through command_timeout in no time)."""
    busy = "i=0; while [ $i -lt 30000 ]; do i=$((i + 1)); done; echo done"
    script = "PATH=/nonexistent\n" + build_gather_script(NONCE, {"a.busy": busy}, 30)
    with as_sshd_runs_it(["/bin/sh"], script) as proc:
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0
        parsed, _ = parse_gathered(NONCE, out)
        assert parsed["a.busy"].text == "done\n"


def test_a_shell_that_does_not_lead_its_group_gets_no_watchdog() -> None:
    """Under an SSH server that does not start a session per exec, the script's process
    group is not its own (it might hold the server): the watchdog must not kill it. Here an
    outer shell shares the group; it survives and the slow fragment finishes."""
    script = build_gather_script(NONCE, {"a.slow": "sleep 1; echo finished"}, 0.2)
    proc = subprocess.run(
        ["sh", "-c", 'sh -s; echo "outer alive"'],
        input=script.encode(),
        capture_output=True,
        start_new_session=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc
    assert proc.stdout.endswith(b"outer alive\n")
    assert parse_gathered(NONCE, proc.stdout)[0]["a.slow"].text == "finished\n"


@pytest.mark.parametrize("timeout", [0.0, -1.0, float("nan"), float("inf"), 1e300])
def test_no_watchdog_for_a_timeout_it_cannot_keep(timeout: float) -> None:
    assert watchdog_lines(timeout) == []
    assert "fc_dog" not in build_gather_script(NONCE, {"a.x": ":"}, timeout)


# ---------------------------------------------------------------- on a lab host, over SSH
def leftovers(ns: str) -> list[str]:
    """What runs in the lab host's namespace besides its sshds."""
    pids = subprocess.run(
        ["ip", "netns", "pids", ns], capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for pid in pids:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if not comm.startswith("sshd"):
            found.append(f"{pid} {args.strip()}")
    return found


@pytest.mark.lab
@pytest.mark.parametrize("kind", ["openssh", "busybox"])
def test_item13_no_process_of_a_timed_out_command_stays_on_the_host(
    lab: Lab, fifo: Path, kind: str
) -> None:
    h = lab.add_busybox_host("bb") if kind == "busybox" else lab.add_host("hung")
    path = lab.config(checks="[checks.routes]\n")
    path.write_text(path.read_text().replace('command_timeout = "5s"', 'command_timeout = "2s"'))
    fleet = load(path, registry.config_type, registry.host_config_types)
    host = next(x for x in fleet.hosts if x.name == h.name)
    assert leftovers(h.ns) == []
    fragments = {"t.hung": f"tail -c 100 -- '{fifo}'", "t.after": "echo after"}
    ctx = PatrolContext(fleet, lambda _h: dict(fragments))
    try:
        facts = ctx.host_facts(host)
        assert facts.problem == "host commands did not finish within command_timeout 2s"
        ctx.close()
        wait_for(
            lambda: leftovers(h.ns) == [],
            timeout=5,
            what=f"the timed-out command to be gone from {h.name}",
        )
    finally:
        ctx.close()
        for line in leftovers(h.ns):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
