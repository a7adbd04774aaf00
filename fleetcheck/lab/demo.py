"""`fleetcheck demo`: a throwaway fleet on this machine with the incidents of
docs/incidents.md planted, one patrol over it, and a few lines on what each non-OK row means.

A generic driver: every registered check plants its own incident (`Check.demo_fault`) and says
what its rows mean (`Check.demo_meaning`, `Check.demo_explain`); nothing here names a check.

As root with network namespaces the hosts are namespaces with their own sshd (one with two
default routes); otherwise they are `ssh = "local"` hosts whose workers connect from
127.0.0.x addresses. Everything is torn down afterwards, also on Ctrl-C, unless --keep.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetcheck.core.model import Status, place
from fleetcheck.lab import Lab, LabHost, missing_prerequisites


@dataclass
class Demo:
    lab: Lab
    config: Path
    mode: str  # "network-namespace" or "local"


@dataclass
class DemoFleet:
    """The demo fleet as each check's `demo_fault` sees it while it plants its incident.

    Four machines: n8 and laptop (workers), mini (the one that silently died) and broker (the
    broker's machine, which runs the rater). A check plants its fault here (workers, logs,
    broker keys, an interface) and names the per-host keys it needs with `host_keys`; the
    driver writes the config from them. `now` is when the fleet was built: every planted age
    is relative to it.
    """

    lab: Lab
    netns: bool
    now: float
    hosts: dict[str, LabHost]
    host_lines: dict[str, list[str]] = field(default_factory=dict)

    def host_keys(self, host: str, *lines: str) -> None:
        """TOML lines for `host`'s [[hosts]] table."""
        self.host_lines.setdefault(host, []).extend(lines)

    def log_path(self, host: str) -> Path:
        """The file each machine's program logs to (the broker's machine: the rater's log)."""
        return self.hosts[host].dir / ("rater.log" if host == "broker" else "worker.log")

    def write_log(self, host: str, lines: list[str], mtime: float) -> Path:
        path = self.log_path(host)
        path.write_text("".join(line + "\n" for line in lines))
        os.utime(path, (mtime, mtime))
        return path


def build(netns: bool | None = None) -> Demo:
    """Start the demo fleet. netns None: namespaces when this machine allows them."""
    if netns is None:
        netns = not missing_prerequisites(netns=True)
    lab = Lab(netns=netns)
    try:
        return _populate(lab, netns)
    except BaseException:
        lab.close()
        raise


def _populate(lab: Lab, netns: bool) -> Demo:
    """The four machines, then each check's planted fault (registry order), then the config."""
    from fleetcheck.core import registry

    now = time.time()
    hosts = {name: lab.add_host(name, sshd=netns) for name in ("n8", "laptop", "mini", "broker")}
    if not netns:
        hosts["broker"].extra_addrs.append("127.0.0.1")  # the rater connects over loopback
    fleet = DemoFleet(lab, netns, now, hosts)
    tables = []
    for name, check in registry.available().items():
        body = check.demo_fault(fleet)
        if body is not None:
            tables.append(f"[checks.{name}]" + (f"\n{body}" if body else ""))
    host_extra = {name: "\n".join(lines) for name, lines in fleet.host_lines.items()}
    config = lab.config(checks="\n".join(tables) + "\n", host_extra=host_extra)
    return Demo(lab, config, "network-namespace" if netns else "local")


def explain(report: Any) -> list[str]:
    """A few lines on what each non-OK row means (worst first), then what the checks say
    about some OK rows (why the Eastern log is OK), in each check's own words."""
    from fleetcheck.core import registry

    out = []
    seen = set()
    for r in report.sorted_results():
        if r.status is Status.OK or (r.check, r.host) in seen:
            continue
        seen.add((r.check, r.host))
        check = registry.find(r.check)
        meaning = (check.demo_explain(r) if check else None) or r.summary
        out.append(f"- {place(r.host)} / {r.check} ({r.status.label}): {meaning}")
    for r in report.results:
        check = registry.find(r.check)
        said = check.demo_explain(r) if check and r.status is Status.OK else None
        if said:
            out.append(f"- {place(r.host)} / {r.check} ({r.status.label}): {said}")
    return out


def run_demo(keep: bool, render: Any, netns: bool | None = None) -> int:
    """Build, patrol once, render, explain, tear down. Returns the patrol's exit code."""
    from fleetcheck.config import load
    from fleetcheck.core import registry, runner

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, on_term)
    demo = None
    try:
        print("fleetcheck demo: starting a throwaway fleet on this machine ...", flush=True)
        demo = build(netns)
        print(
            f"fleetcheck demo: {len(demo.lab.hosts)} {demo.mode} hosts, broker "
            f"{demo.lab.broker_url}; patrolling once\n",
            flush=True,
        )
        fleet = load(demo.config, registry.config_type, registry.host_config_types)
        report = runner.run_patrol(fleet, runner.plan(fleet, registry.available()))
        render(report)
        print("\nWhat the rows mean:")
        for line in explain(report):
            print(line)
        print("(The incidents are told in docs/incidents.md of the fleetcheck repository.)")
        if keep:
            demo.lab.keep()
            import shlex

            from fleetcheck.timer import fleetcheck_command

            again = shlex.join([*fleetcheck_command(), "run", "-c", str(demo.config)])
            print(
                "\nThe fleet keeps running. Patrol it again with:\n"
                f"  {again}\n"
                f"Stop it with:\n  sh {demo.lab.dir / 'stop.sh'}"
            )
        return report.exit_code
    finally:
        signal.signal(signal.SIGTERM, old)
        if demo is not None and not keep:
            demo.lab.close()
