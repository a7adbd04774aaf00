"""The harness's summary for docs/ssh.md: `python -m tests.ssh_diff_hostkeys.summary`.

Counts come from the corpus, whose every case the harness checks against the real client on
each run (what ssh does is asserted, so the counts are what was seen); the version is the
local `ssh -V`. tests/ssh_diff_hostkeys/test_summary.py keeps docs/ssh.md equal to it."""

from __future__ import annotations

import subprocess
from collections import Counter

from tests.ssh_diff_hostkeys.corpus import CASES, CONNECT

BEGIN, END = "<!-- ssh-diff-hostkeys:begin -->", "<!-- ssh-diff-hostkeys:end -->"
ORACLE = "Oracle: `{version}`."


def ssh_version() -> str:
    proc = subprocess.run(["ssh", "-V"], capture_output=True, text=True, timeout=10)
    return (proc.stderr or proc.stdout).strip()


def render(version: str) -> str:
    families = list(dict.fromkeys(c.family for c in CASES))
    rows: dict[str, Counter[str]] = {f: Counter() for f in families}
    for c in CASES:
        kind = "documented" if c.documented else c.openssh
        rows[c.family][kind] += 1
    total: Counter[str] = sum(rows.values(), Counter())
    out = [
        BEGIN,
        "#### Host keys against the real ssh client (differential harness)",
        "",
        "`tests/ssh_diff_hostkeys` runs each case with the real `ssh -o BatchMode=yes` and with",
        "fleetcheck's transport, against the same lab sshd and the same known_hosts file, and",
        "fails on any disagreement (a refusal must be of the same kind: revoked, changed,",
        "unknown). " + ORACLE.format(version=version),
        "",
        "| family | cases | both connect | both refuse | documented refusals |",
        "|---|---:|---:|---:|---:|",
    ]
    for f in families:
        r = rows[f]
        n = sum(r.values())
        out.append(f"| {f} | {n} | {r[CONNECT]} | {r['refuse']} | {r['documented']} |")
    n = sum(total.values())
    out.append(
        f"| **all** | **{n}** | **{total[CONNECT]}** | **{total['refuse']}** | "
        f"**{total['documented']}** |"
    )
    out += ["", "Documented refusals (ssh connects, fleetcheck refuses on purpose):", ""]
    for c in CASES:
        if c.documented:
            out.append(f"- `{c.id}` (StrictHostKeyChecking {c.strict}): {c.documented}")
    out.append(END)
    return "\n".join(out)


if __name__ == "__main__":
    print(render(ssh_version()))
