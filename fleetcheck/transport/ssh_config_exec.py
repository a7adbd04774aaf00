"""`Match exec` as the resolver runs it: bounded, and never leaving a process behind.

ssh waits for a `Match exec` command however long it takes; fleetcheck gives each one
EXEC_TIMEOUT (then it does not match) or less when the caller has an overall deadline
(`config discover`). The command runs in its own session so that at the bound its whole
process group is killed: a shell's `sleep` or a hung helper under it would otherwise outlive
the patrol."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping

from fleetcheck.transport.local import kill_group
from fleetcheck.transport.ssh_config_model import SshConfigError

EXEC_TIMEOUT = 10.0  # seconds a `Match exec` command may take before it does not match


def match_exec(cmd: str, env: Mapping[str, str], until: float | None) -> tuple[bool, bool]:
    """(matched, cut): whether `cmd` exited 0, run by $SHELL -c as ssh runs it, and whether
    it was ended by `until` (a time.monotonic() instant) rather than by EXEC_TIMEOUT."""
    timeout = EXEC_TIMEOUT
    if until is not None:
        timeout = min(timeout, until - time.monotonic())
        if timeout <= 0:
            return False, True
    shell = env.get("SHELL") or "/bin/sh"
    try:
        proc = subprocess.Popen(
            [shell, "-c", cmd],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(env),
            start_new_session=True,  # so that the whole group can be ended at the bound
        )
    except OSError as e:
        raise SshConfigError(f"Match exec {cmd!r}: cannot run {shell}: {e}") from None
    try:
        return proc.wait(timeout) == 0, False
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return False, until is not None and time.monotonic() >= until
