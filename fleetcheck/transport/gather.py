"""The one script a host runs per patrol: every check's shell fragment in one exec, each in
its own subshell between markers, with the host's clock read first, under a watchdog of its
own that kills the exec on the host at command_timeout.

One exec per host per patrol (not one per check) is what keeps a 100-host patrol cheap for
the fleet's sshds; the markers carry a random nonce so a log line that looks like one cannot
confuse fleetcheck.parse.gathered, which reads the output back. Plain POSIX sh: BusyBox and
BSD hosts run it as they are.

Why the watchdog: at command_timeout fleetcheck closes the channel, but closing it signals
nothing on the host (no pty, no SIGHUP): a `tail` blocked on a hung NFS mount would stay
there, one more per patrol. `timeout` is coreutils-only (macOS lacks it), so the script
watches itself in plain sh: a background subshell sleeps command_timeout, then kills the
exec's process group. It does so only when the exec leads its own group (as under OpenSSH,
which starts a session per command, and under `ssh = "local"`); a shell sharing its group
with something else (an SSH server that does not start sessions) gets no watchdog, since
its group might hold the server itself. When the script finishes in time it stops the
watchdog, whose last `sleep 1` ends within a second."""

from __future__ import annotations

import math
import re

WATCHDOG_MAX_S = 1_000_000  # beyond ~11 days no watchdog: nobody waits that long anyway


def build_gather_script(nonce: str, fragments: dict[str, str], timeout: float | None = None) -> str:
    """One POSIX sh script that runs each fragment in a subshell between markers.

    The random nonce keeps a log line that happens to look like a marker from confusing the
    parser; fragments cannot see or break each other (subshell, stdin from /dev/null). With
    `timeout` (command_timeout), the host kills the whole exec that many seconds after it
    started (see the module doc).
    """
    dog = watchdog_lines(timeout) if timeout is not None else []
    # BusyBox and BSD date print %N literally: then whole seconds
    lines = [
        *dog,
        "c=$(date +%s.%N 2>/dev/null); case \"$c\" in *[!0-9.]*|'') c=$(date +%s);; esac",
        f"printf '@@{nonce} clock %s\\n' \"$c\"",
    ]
    for key, body in fragments.items():
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", key):
            raise ValueError(f"bad fragment key {key!r}")
        lines.append(f"printf '@@{nonce} begin {key}\\n'")
        lines.append(f"( {body}\n) </dev/null")
        lines.append(f"printf '\\n@@{nonce} end {key} %d\\n' $?")
    if dog:
        lines.append('[ -z "$fc_dog" ] || kill "$fc_dog" 2>/dev/null || :')
    return "\n".join(lines) + "\n"


def watchdog_lines(timeout: float) -> list[str]:
    """The sh that starts the watchdog (empty for a timeout it cannot or need not keep).

    It never fires early: the fraction of a second is slept first, and a `sleep` that takes
    no fractions sleeps a whole second instead; then whole seconds, one `sleep 1` at a time
    so that a stopped watchdog leaves nothing behind for long. The group check reads
    /proc/$$/stat (Linux, no fork) or asks `ps -o pgid=` (macOS, the BSDs)."""
    if not (0 < timeout <= WATCHDOG_MAX_S) or math.isnan(timeout):
        return []
    whole = int(timeout)
    fraction = timeout - whole
    first = f"sleep {fraction:.3f} 2>/dev/null || sleep 1; " if fraction >= 0.001 else ""
    return [
        "fc_dog=; fc_pg=",
        'if [ -r /proc/$$/stat ]; then read -r fc_pg </proc/$$/stat; fc_pg=${fc_pg##*") "}; '
        "set -- $fc_pg; fc_pg=${3-}",
        "else fc_pg=$(ps -o pgid= -p $$ 2>/dev/null); set -- $fc_pg; fc_pg=${1-}; fi",
        'if [ "$fc_pg" = "$$" ]; then',
        f'  ( {first}n={whole}; while [ "$n" -gt 0 ]; do sleep 1 || exit 0; n=$((n - 1)); done; '
        "kill -s KILL 0 ) </dev/null >/dev/null 2>&1 &",
        "  fc_dog=$!",
        "fi",
    ]
