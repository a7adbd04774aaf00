"""`python -m tests.ssh_diff_config.summary`: the harness's corpus as a markdown section for
docs/ssh.md (cases by family, agreeing and documented-refusal counts, the ssh version), so
the docs say what the harness checks rather than what someone remembered."""

from __future__ import annotations

import subprocess
from collections import Counter

from tests.ssh_diff_config.cases import CASES

BEGIN = "<!-- ssh-diff-config:begin -->"
END = "<!-- ssh-diff-config:end -->"


def ssh_version() -> str:
    try:
        p = subprocess.run(["ssh", "-V"], capture_output=True, timeout=10)
    except OSError:
        return "ssh not found"
    return (p.stderr or p.stdout).decode(errors="replace").strip()


def counts_table() -> list[str]:
    """The part a test compares with docs/ssh.md (the version line is left out there)."""
    families = Counter(c.family for c in CASES)
    refusals = Counter(c.family for c in CASES if c.refusal is not None)
    rows = ["| family | cases | agree with ssh -G | documented refusals |", "|---|---|---|---|"]
    for fam in sorted(families):
        n, r = families[fam], refusals[fam]
        rows.append(f"| {fam} | {n} | {n - r} | {r} |")
    total_r = sum(refusals.values())
    rows.append(f"| **all** | **{len(CASES)}** | **{len(CASES) - total_r}** | **{total_r}** |")
    return rows


def section(version: str | None = None) -> str:
    lines = [
        BEGIN,
        "#### ssh_config against the real client (tests/ssh_diff_config)",
        "",
        f"Produced by `python -m tests.ssh_diff_config.summary`; oracle: "
        f"`{version or ssh_version()}` (`ssh -G -F`, private home, no network).",
        "Every case agrees with `ssh -G` on hostname, user, port, identity files (as written "
        "and expanded), IdentitiesOnly, ProxyJump, ProxyCommand, ConnectTimeout, HostKeyAlias, "
        "User/GlobalKnownHostsFile, StrictHostKeyChecking, ServerAliveInterval/CountMax, or "
        "both refuse the config (fleetcheck with one line naming the file and line).",
        "",
        *counts_table(),
        "",
        "##### Differences from OpenSSH (documented refusals)",
        "",
        "Where fleetcheck deliberately does less than ssh it refuses the host with one line "
        "saying why; it never accepts a config ssh refuses. The corpus's cases of this kind:",
        "",
    ]
    seen: set[str] = set()
    for case in CASES:
        if case.refusal is not None and case.why not in seen:
            seen.add(case.why)
            lines.append(f"- {case.name}: {case.why}.")
    lines += [
        "",
        "Outside the corpus: a `Match exec` command gets 10 s (then it does not match), where "
        "ssh waits for it; a `config_file` that does not exist is an empty config, as ssh "
        "treats a missing ~/.ssh/config (fleetcheck's default), not as `ssh -F` would; "
        "forwarding specs (`LocalForward`, ...) are not validated; `StrictHostKeyChecking no` "
        "is strict (see known_hosts below).",
        END,
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(section())
