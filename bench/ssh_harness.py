"""In-process timing harness for bench/bench_ssh.py (not a test; run by the benchmark).

Runs exactly what a patrol runs on each host of a fleet config (fleetcheck.transport.ssh's
open_shell, then one `run` of the host's gathered script, then close) and reports, per host,
the time from the start of the connect to the end of the exec, split into connect (TCP + SSH
handshake + host key check + auth) and exec (session + script + exit status).

    python bench/ssh_harness.py CONFIG concurrent   # one thread per host, like a patrol's lanes
    python bench/ssh_harness.py CONFIG alone        # one host after another, nothing else running
    python bench/ssh_harness.py CONFIG alone-true   # the same with `true` as the script

Prints one JSON object: {"hosts": {name: {...}}, "wall_s", "cpu_s" (this process, the timed
part only: paramiko is imported before the clock starts), "process_cpu_s" (whole process)}.
"""

from __future__ import annotations

import json
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleetcheck.config import HostConfig, SshConfig, load  # noqa: E402
from fleetcheck.core import registry, runner  # noqa: E402
from fleetcheck.transport import ssh  # noqa: E402
from fleetcheck.transport.gather import build_gather_script  # noqa: E402
from fleetcheck.transport.ssh.lazy import load_paramiko  # noqa: E402


def one(host: HostConfig, cfg: SshConfig, script: str, out: dict[str, Any]) -> None:
    t0 = time.monotonic()
    try:
        shell = ssh.open_shell(host, cfg)
        t1 = time.monotonic()
        try:
            r = shell.run(script, cfg.command_timeout, cfg.max_output_bytes)
        finally:
            shell.close()
        t2 = time.monotonic()
        out[host.name] = {"connect_s": t1 - t0, "exec_s": t2 - t1, "total_s": t2 - t0, "rc": r.rc}
    except Exception as e:  # noqa: BLE001 (reported, the benchmark refuses bad runs)
        out[host.name] = {"error": str(e)}


def main() -> None:
    config, mode = sys.argv[1], sys.argv[2]
    fleet = load(config, registry.config_type, registry.host_config_types)
    frags = runner.fragments_for(runner.plan(fleet, registry.available()), fleet)
    scripts = {h.name: build_gather_script("0" * 16, frags(h)) for h in fleet.hosts}
    if mode.endswith("-true"):  # the transport alone: the remote side runs `true`
        mode = mode.removesuffix("-true")
        scripts = dict.fromkeys(scripts, "true\n")
    # import cost is start-up, not per-host latency
    load_paramiko()
    out: dict[str, Any] = {}
    cpu0, t0 = time.process_time(), time.monotonic()
    if mode == "concurrent":
        lanes = [
            threading.Thread(target=one, args=(h, fleet.ssh, scripts[h.name], out), daemon=True)
            for h in fleet.hosts
        ]
        for t in lanes:
            t.start()
        for t in lanes:
            t.join()
    elif mode == "alone":
        for h in fleet.hosts:
            one(h, fleet.ssh, scripts[h.name], out)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "hosts": out,
                "wall_s": wall,
                "cpu_s": cpu,
                "process_cpu_s": ru.ru_utime + ru.ru_stime,
            }
        )
    )


if __name__ == "__main__":
    main()
