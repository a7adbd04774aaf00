"""Why a host's commands ran out of time, when the cause is its login shell: sshd runs every
command through the login shell, whose startup files (~/.bashrc for an SSH bash, $BASH_ENV,
a stale pyenv lock) run first, every time. After a timeout the patrol times `true` on the
same connection: if that alone takes seconds, the startup files are the cause, and the row
says so with the measured time instead of blaming the check's commands."""

from __future__ import annotations

from typing import Any

SLOW_S = 1.0  # a login shell slower than this to run `true` is the cause worth naming
FIX = 'make them return at once for a non-interactive shell ([ -z "$PS1" ] && return)'


def startup_note(shell: Any, bound: float) -> str | None:
    """What the login shell's startup costs, as a clause for the timeout's message (None when
    it is fast, or cannot be measured within `bound` seconds)."""
    if bound < SLOW_S:
        return None
    try:
        result = shell.run("true", bound, 4096)
    except Exception:
        return None
    if result.rc is None:
        return (
            f"the login shell's startup files (~/.bashrc, ~/.profile, $BASH_ENV) did not "
            f"finish within {bound:.0f}s even for `true`: {FIX}"
        )
    if result.duration_s > SLOW_S:
        return (
            f"the login shell's startup files (~/.bashrc, ~/.profile, $BASH_ENV) take "
            f"{result.duration_s:.1f}s (`true` alone took that long): {FIX}"
        )
    return None
