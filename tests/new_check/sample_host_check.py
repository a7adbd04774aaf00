"""`stamp`: did each host's periodic job leave a fresh stamp? (a sample host check)

A newcomer's host check written as ONE file by docs/CONTRIBUTING.md, copied into `checks/` of
a copy of the repository beside `sample_check.py` by tests/test_new_check.py. It is not
installed: nothing in fleetcheck names it.

A job on each host (a cron backup, a sync) touches a file when it succeeds. Each host that
names it with `stamp_path` gets a row: OK while the file was modified at most `max_age` ago
(default 1d) by the host's own clock, WARN past it, CRIT when the file is missing. Metric
`age_s` (the headline); limit `max_age_s`. It reads one line from each host, in the host's one
gathered exec.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fleetcheck.config import Duration, FleetConfig, HostConfig, InvalidValue
from fleetcheck.core.check import HostCheck
from fleetcheck.core.context import PatrolContext
from fleetcheck.core.errors import CheckError
from fleetcheck.core.model import Result, Status
from fleetcheck.core.safe_text import printable
from fleetcheck.parse.duration import format_duration

if TYPE_CHECKING:  # the demo's lab, for demo_fault's type only (never imported at run time)
    from fleetcheck.lab.demo import DemoFleet


@dataclass(frozen=True)
class StampConfig:
    max_age: Duration = 86400.0  # WARN when a host's stamp is older than this

    def __post_init__(self) -> None:
        if self.max_age <= 0:
            raise InvalidValue("max_age", "must be more than 0s")


@dataclass(frozen=True)
class StampHostConfig:
    stamp_path: str | None = None  # the file the host's job touches when it succeeds

    def __post_init__(self) -> None:
        if self.stamp_path is not None and not self.stamp_path.startswith("/"):
            raise InvalidValue("stamp_path", "must be an absolute path")


class StampCheck(HostCheck[StampConfig, "float | None"]):
    name = "stamp"
    description = "each host's periodic job touched its stamp file recently"
    host_config_type = StampHostConfig
    headline = "age_s"
    example = """\
[checks.stamp]
max_age = "1d"                   # WARN when a host's stamp file is older than this
"""
    host_example = 'stamp_path = "/var/lib/backup/last-ok"   # the file its job touches'
    no_targets_reason = "no host names a stamp_path"
    demo_meaning = "this machine's periodic job has not succeeded lately: its stamp is old"

    def demo_fault(self, fleet: DemoFleet) -> str | None:
        """n8's job ran a minute ago, every other machine's two days ago."""
        import os

        for name, host in fleet.hosts.items():
            path = host.dir / "last-ok"
            path.write_text("")
            when = fleet.now - (60 if name == "n8" else 2 * 86400)
            os.utime(path, (when, when))
            fleet.host_keys(name, f'stamp_path = "{path}"')
        return ""

    def targets(self, fleet: FleetConfig, config: StampConfig) -> list[HostConfig | None]:
        return [h for h in fleet.hosts if h.ssh and h.settings(StampHostConfig).stamp_path]

    def remote_commands(
        self, host: HostConfig, config: StampConfig, fleet: FleetConfig
    ) -> dict[str, str]:
        path = shlex.quote(host.settings(StampHostConfig).stamp_path or "/")
        return {"stamp": f'if [ -e {path} ]; then echo "$(date +%s) $(stat -c %Y {path})"; fi'}

    def probe_host(self, ctx: PatrolContext, host: HostConfig, config: StampConfig) -> float | None:
        text = ctx.host_facts(host, self).get("stamp").text.strip()
        if not text:
            return None  # no such file
        try:
            now, mtime = (float(w) for w in text.split())
        except ValueError:
            raise CheckError(f"cannot read the stamp's age: {printable(text[:80])}") from None
        return now - mtime  # both by the host's clock

    def evaluate_host(
        self, facts: float | None, config: StampConfig, host: HostConfig, now: datetime
    ) -> Result:
        path = host.settings(StampHostConfig).stamp_path
        limits = {"max_age_s": config.max_age}
        if facts is None:
            return self.result(host, Status.CRIT, f"no stamp: {path} is missing", limits=limits)
        age = max(0.0, facts)
        status = Status.OK if age <= config.max_age else Status.WARN
        summary = f"{path}: touched {format_duration(age)} ago"
        if status is Status.WARN:
            summary += f" (max_age {format_duration(config.max_age)})"
        return self.result(host, status, summary, metrics={"age_s": age}, limits=limits)


CHECK = StampCheck()
