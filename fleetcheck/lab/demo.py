"""`fleetcheck demo`: a throwaway fleet on this machine with the incidents of
docs/incidents.md planted, one patrol over it, and a few lines on what each non-OK row means.

As root with network namespaces the hosts are namespaces with their own sshd (one with two
default routes); otherwise they are `ssh = "local"` hosts whose workers connect from
127.0.0.x addresses. Everything is torn down afterwards, also on Ctrl-C, unless --keep.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fleetcheck.core.model import place
from fleetcheck.lab import Lab, LabHost, missing_prerequisites
from fleetcheck.zones import zone_named

# What a non-OK row of each check means, in the demo's words (the planted faults).
MEANING = {
    "clients": "no broker connection from this machine: its workers are gone or cut off, while "
    "queue depth and throughput still look fine because the others absorb the work (incident 4)",
    "logs": "this machine's log stopped moving; read in the writer's own zone and compared in "
    "UTC, so it is really silent, not a time-zone illusion (incidents 3, 6)",
    "live_hash": "entries of the live hash whose match is certainly over: leaked when workers "
    "were SIGKILLed; `fleetcheck reap-live --apply` removes exactly those (incident 1)",
    "queue_depth": "the summed depth is over the cap, which proves the enqueue guard is not "
    "holding (a check-then-act race), not merely that the fleet is busy (incident 2)",
    "routes": "two default routes through two interfaces on one subnet: the OS flips between "
    "them and connections drop; keep one interface per subnet or bond them (incident 5)",
    "rater_probe": "a test envelope pushed to the rater's inbox was not consumed in time: its "
    "loop is not running, whatever its process and log say (incidents 6, 7)",
    "broker": "the broker itself is unhealthy or misconfigured (incident 8)",
}

INBOX = "arena:rater:inbox"


@dataclass
class Demo:
    lab: Lab
    config: Path
    mode: str  # "network-namespace" or "local"
    eastern_host: str


def _write_log(path: Path, lines: list[str], mtime: float) -> None:
    path.write_text("".join(line + "\n" for line in lines))
    os.utime(path, (mtime, mtime))


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
    now = time.time()
    hosts: dict[str, LabHost] = {}
    for name in ("n8", "laptop", "mini", "broker"):
        hosts[name] = lab.add_host(name, sshd=netns)
    if netns:
        lab.add_interface(hosts["mini"], "wifi0", metric=600)  # the Mac mini's Wi-Fi
    else:
        hosts["broker"].extra_addrs.append("127.0.0.1")  # the rater connects over loopback
    lab.start_workers(hosts["n8"], 12, "worker-n8")
    lab.start_workers(hosts["laptop"], 4, "worker-laptop")
    lab.start_workers(hosts["broker"], 2, "worker-broker")
    # mini has no workers: the silently dead machine.

    # Logs in three zones. n8 writes US Eastern without an offset: a naive reader comparing its
    # last line with a UTC clock calls it 5 hours stale. laptop writes classic syslog in
    # Asia/Kolkata. mini's UTC log stopped 2.5 hours ago.
    def eastern(t: float) -> str:
        local = datetime.fromtimestamp(t, zone_named("America/New_York"))
        return local.strftime("%Y-%m-%d %H:%M:%S,") + f"{local.microsecond // 1000:03d}"

    def kolkata(t: float) -> str:
        return datetime.fromtimestamp(t, zone_named("Asia/Kolkata")).strftime("%b %d %H:%M:%S")

    def utc(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    n8_log = hosts["n8"].dir / "worker.log"
    _write_log(n8_log, [f"{eastern(now - 60 * i)} INFO match done" for i in (5, 3, 1)], now - 60)
    laptop_log = hosts["laptop"].dir / "worker.log"
    _write_log(
        laptop_log,
        [f"{kolkata(now - 60 * i)} laptop worker[311]: match done" for i in (4, 2)],
        now - 120,
    )
    stopped = now - 2.5 * 3600
    mini_log = hosts["mini"].dir / "worker.log"
    _write_log(
        mini_log,
        [f"{utc(stopped - 60)} INFO match done", f"{utc(stopped)} INFO match done"],
        stopped,
    )
    broker_log = hosts["broker"].dir / "rater.log"
    _write_log(broker_log, [f"{utc(now - 30)} INFO rater loop tick"], now - 30)

    # The rater, consuming its inbox for real.
    lab.start_rater(hosts["broker"] if netns else None, inbox=INBOX, log=broker_log)

    # Broker state: zombies in the live hash, a queue over its cap.
    r = lab.client()
    live = {}
    for i in range(30):  # up to 7m15s old: far from max_age (15m) however long a patrol takes
        live[f"m{i}"] = json.dumps({"started_at": now - 15 * i, "host": "n8"})
    for i in range(12):
        live[f"z{i}"] = json.dumps({"started_at": now - 7200 - 600 * i, "host": "mini"})
    live["bad1"] = "not json"
    live["bad2"] = json.dumps({"host": "laptop"})
    r.hset("arena:live", mapping=live)
    r.rpush(
        "arena:queue", *[json.dumps({"id": i, "enqueued_at": now - 300 + i}) for i in range(120)]
    )
    r.rpush("arena:queue:processing", *[json.dumps({"id": i}) for i in range(47)])
    r.close()

    logs = {
        "n8": ("America/New_York", n8_log),
        "laptop": ("Asia/Kolkata", laptop_log),
        "mini": ("UTC", mini_log),
        "broker": ("UTC", broker_log),
    }
    host_extra = {
        name: f'tz = "{tz}"\nlogs = [{{ path = "{path}", max_age = "10m" }}]'
        for name, (tz, path) in logs.items()
    }
    host_extra["n8"] += "\nmin_clients = 10"
    checks = [
        "[checks.clients]",
        "[checks.live_hash]",
        'key = "arena:live"',
        'max_age = "900s"',
        "[checks.queue_depth]",
        'keys = ["arena:queue", "arena:queue:processing"]',
        "cap = 100",
        "samples = 1",
        "[checks.rater_probe]",
        f'inbox = "{INBOX}"',
        'timeout = "5s"',
        "[checks.broker]",
        # The demo's broker is the machine it runs on: a busy laptop or CI runner can take longer
        # than the production default (50ms) to answer PING, which is not one of its stories.
        'max_ping = "1s"',
        "[checks.logs]",
    ]
    if netns:
        checks.append("[checks.routes]")
    config = lab.config(checks="\n".join(checks) + "\n", host_extra=host_extra)
    return Demo(lab, config, "network-namespace" if netns else "local", "n8")


def explain(report: Any) -> list[str]:
    """A few lines on what each non-OK row means, and why the Eastern log is OK."""
    out = []
    seen = set()
    for r in report.sorted_results():
        if r.status.label == "OK" or (r.check, r.host) in seen:
            continue
        seen.add((r.check, r.host))
        where = place(r.host)
        meaning = MEANING.get(r.check, r.summary)
        if r.check == "clients" and r.host is None:
            meaning = "broker clients from addresses no host claims: an unknown machine or tool"
        out.append(f"- {where} / {r.check} ({r.status.label}): {meaning}")
    for r in report.results:
        if r.check == "logs" and r.host == "n8" and r.status.label == "OK":
            out.append(
                "- n8 / logs (OK): n8 logs in US Eastern time without an offset. Its last line "
                "reads about 5 hours behind UTC, which a naive reader would call 5 hours silent; "
                "read in its declared zone it was written a minute ago (incident 6)."
            )
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
