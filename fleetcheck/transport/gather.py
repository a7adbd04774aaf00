"""The one script a host runs per patrol: every check's shell fragment in one exec, each in
its own subshell between markers, with the host's clock read first.

One exec per host per patrol (not one per check) is what keeps a 100-host patrol cheap for
the fleet's sshds; the markers carry a random nonce so a log line that looks like one cannot
confuse fleetcheck.parse.gathered, which reads the output back. Plain POSIX sh: BusyBox and
BSD hosts run it as they are."""

from __future__ import annotations

import re


def build_gather_script(nonce: str, fragments: dict[str, str]) -> str:
    """One POSIX sh script that runs each fragment in a subshell between markers.

    The random nonce keeps a log line that happens to look like a marker from confusing the
    parser; fragments cannot see or break each other (subshell, stdin from /dev/null).
    """
    # BusyBox and BSD date print %N literally: then whole seconds
    lines = [
        "c=$(date +%s.%N 2>/dev/null); case \"$c\" in *[!0-9.]*|'') c=$(date +%s);; esac",
        f"printf '@@{nonce} clock %s\\n' \"$c\"",
    ]
    for key, body in fragments.items():
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", key):
            raise ValueError(f"bad fragment key {key!r}")
        lines.append(f"printf '@@{nonce} begin {key}\\n'")
        lines.append(f"( {body}\n) </dev/null")
        lines.append(f"printf '\\n@@{nonce} end {key} %d\\n' $?")
    return "\n".join(lines) + "\n"
