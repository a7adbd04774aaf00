"""Issue 28 item 3: a host whose login shell's startup files are slow (a stale pyenv lock in
~/.bashrc; here $BASH_ENV, which bash reads before every non-interactive command) runs out of
command_timeout: its rows say the startup files are the cause, with the measured time."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli import fleetcheck
from tests.lab import Lab

pytestmark = pytest.mark.lab


def test_timeout_names_the_slow_login_shell(lab: Lab) -> None:
    startup = lab.dir / "slow-startup.sh"
    startup.write_text("sleep 3\n")
    slow = lab.add_host("slow", sshd_options=f"SetEnv BASH_ENV={startup}\n")
    fast = lab.add_host("fast")
    conf = lab.config(checks="[checks.routes]\n", hosts=[slow, fast])
    conf.write_text(conf.read_text().replace('command_timeout = "5s"', 'command_timeout = "2s"'))
    proc = fleetcheck("run", "-c", str(conf), "--no-state", "-f", "json")
    rows = {r["host"]: r for r in json.loads(proc.stdout)["results"]}
    assert rows["fast"]["status"] != "UNKNOWN", rows["fast"]
    summary = rows["slow"]["summary"]
    assert rows["slow"]["status"] == "UNKNOWN"
    assert "host commands did not finish within command_timeout 2s: the login shell's startup " \
        "files (~/.bashrc, ~/.profile, $BASH_ENV) take" in summary, summary  # fmt: skip
    took = float(re.search(r"take (\d+\.\d)s", summary).group(1))  # type: ignore[union-attr]
    # what it measured holds the startup's `sleep 3`: a loaded machine can only add to it
    # (no upper bound: that would time the machine, not the check)
    assert took >= 3.0, summary
