"""Benchmark: one fleetcheck patrol of N lab hosts (real sshd in namespaces) against the same
gathered commands run one host after another, Ansible ad-hoc (`ansible all -m raw`) and
parallel-ssh, all in one run on the same hosts. Reports wall time and client CPU per host.

Not part of the test run. Needs root and the lab prerequisites; Ansible and parallel-ssh come
from a separate venv (default /tmp/bench-venv: `python3 -m venv /tmp/bench-venv &&
/tmp/bench-venv/bin/pip install ansible-core parallel-ssh`), never from the project's.

    .venv/bin/python bench/bench_ssh.py --hosts 50 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.lab import Lab  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy (all cores, /proc/stat): the lab's sshds and
    remote commands run on the same cores as the client, so this bounds the wall time."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(x) for x in fields]
    idle = ticks[3] + ticks[4]
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


BUSY: dict[str, list[float]] = {}


def measure(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds and CPU seconds (user+sys of the process and everything it reaped)."""
    cpu0, t0, busy0 = children_cpu(), time.monotonic(), machine_busy()
    proc = subprocess.run(args, capture_output=True, env=env, timeout=600)
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    BUSY.setdefault(args[0] + (args[2] if len(args) > 2 else ""), []).append(machine_busy() - busy0)
    if proc.returncode not in (0, 1, 2, 3):
        raise RuntimeError(f"{args[0]} failed ({proc.returncode}): {proc.stderr[-500:]!r}")
    return wall, cpu, proc.stdout.decode(errors="replace")


SEQUENTIAL = textwrap.dedent(
    """\
    import sys, json
    from fleetcheck.config import load
    from fleetcheck import registry, runner
    from fleetcheck.context import build_gather_script
    from fleetcheck.transport.ssh import open_shell
    fleet = load(sys.argv[1], registry.config_type)
    items = runner.plan(fleet, registry.available())
    frags = runner.fragments_for(items)
    ok = 0
    for host in fleet.hosts:
        shell = open_shell(host, fleet.ssh)
        try:
            r = shell.run(build_gather_script("0" * 16, frags(host)), 60, 8 << 20)
            ok += r.rc == 0
        finally:
            shell.close()
    print(json.dumps({"ok": ok}))
    """
)

PSSH = textwrap.dedent(
    """\
    import sys, json
    from pssh.clients import ParallelSSHClient
    hosts = sys.argv[1].split(",")
    script = open(sys.argv[3]).read()
    client = ParallelSSHClient(hosts, user="root", pkey=sys.argv[2], num_retries=0,
                               pool_size=len(hosts), timeout=60)
    command = "/bin/sh -c " + __import__("shlex").quote(script)
    out = client.run_command(command, stop_on_errors=False)
    client.join(out)
    ok = sum(1 for o in out if o.exit_code == 0)
    for o in out:
        for _ in o.stdout:
            pass
    print(json.dumps({"ok": ok}))
    """
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench-venv", default="/tmp/bench-venv")
    ap.add_argument("--json", help="also write the numbers to this file")
    a = ap.parse_args()
    venv_bin = Path(a.bench_venv) / "bin"
    results: dict[str, list[tuple[float, float]]] = {}
    notes: dict[str, str] = {}
    with Lab() as lab:
        t0 = time.monotonic()
        hosts = [lab.add_host(f"h{i:03d}") for i in range(a.hosts)]
        setup = time.monotonic() - t0
        log = lab.dir / "bench.log"  # one path for every host (namespaces share the fs)
        log.write_text(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%S}Z tick\n" * 200)
        extra = {h.name: f'tz = "UTC"\n[[hosts.logs]]\npath = "{log}"\n' for h in hosts}
        config = lab.config(checks="[checks.logs]\n[checks.routes]\n", host_extra=extra)
        # the lab's sshds share the client's 2 cores: give commands room under a 50-host load
        config.write_text(
            config.read_text().replace('command_timeout = "5s"', 'command_timeout = "60s"')
        )

        # the exact script a patrol runs on each host (same for all: one log path)
        from fleetcheck import registry, runner
        from fleetcheck.config import load
        from fleetcheck.context import build_gather_script

        fleet = load(config, registry.config_type)
        frags = runner.fragments_for(runner.plan(fleet, registry.available()))
        script = build_gather_script("0" * 16, frags(fleet.hosts[0]))
        script_file = lab.dir / "gather.sh"
        script_file.write_text(script)

        inventory = lab.dir / "inventory.ini"
        inventory.write_text(
            "[fleet]\n" + "".join(f"{h.name} ansible_host={h.addr}\n" for h in hosts)
        )
        ansible_env = dict(
            os.environ,
            ANSIBLE_HOST_KEY_CHECKING="True",
            ANSIBLE_SSH_ARGS=(
                f"-o UserKnownHostsFile={lab.known_hosts} -o StrictHostKeyChecking=yes "
                "-o ControlMaster=no -o BatchMode=yes -F /dev/null"
            ),
            ANSIBLE_PRIVATE_KEY_FILE=str(lab.client_key),
            ANSIBLE_REMOTE_USER="root",
            ANSIBLE_FORKS=str(a.hosts),
            ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
            ANSIBLE_LOCAL_TEMP=str(lab.dir / "ansible-tmp"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_TIMEOUT="60",
        )
        methods: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "fleetcheck patrol (concurrent)": (
                [str(ROOT / ".venv/bin/fleetcheck"), "run", "--format", "json", "-c", str(config)],
                None,
            ),
            "same commands, one host after another": (
                [str(ROOT / ".venv/bin/python"), "-c", SEQUENTIAL, str(config)],
                None,
            ),
        }
        ansible = venv_bin / "ansible"
        if ansible.exists():
            methods["ansible all -m raw"] = (
                [str(ansible), "all", "-i", str(inventory), "-m", "raw", "-a", script],
                ansible_env,
            )
        else:
            notes["ansible all -m raw"] = f"not installed in {a.bench_venv}"
        py = venv_bin / "python"
        try:
            subprocess.run([str(py), "-c", "import pssh"], check=True, capture_output=True)
            methods["parallel-ssh"] = (
                [
                    str(py),
                    "-c",
                    PSSH,
                    ",".join(h.addr for h in hosts),
                    str(lab.client_key),
                    str(script_file),
                ],
                None,
            )
        except (OSError, subprocess.CalledProcessError) as e:
            notes["parallel-ssh"] = f"cannot import pssh: {e}"

        # correctness first: every method must reach every host once
        _, _, out = measure(*methods["fleetcheck patrol (concurrent)"])
        rows = json.loads(out)["results"]
        bad = [r for r in rows if r["status"] not in ("OK",)]
        if bad:
            raise SystemExit(f"patrol not clean before benchmarking: {bad[:3]}")
        for _ in range(a.rounds):
            for name, (args, env) in methods.items():
                wall, cpu, out = measure(args, env)
                results.setdefault(name, []).append((wall, cpu))
                if (
                    name == "ansible all -m raw"
                    and out.count("CHANGED") + out.count("SUCCESS") < a.hosts
                ):
                    notes[name] = f"only {out.count('CHANGED')} hosts answered: {out[-300:]}"
    n = a.hosts
    print(f"# {n} lab hosts (sshd in network namespaces), {a.rounds} rounds, median shown;")
    print(f"# lab setup {setup:.1f}s; CPU = user+sys of the client and all its children\n")
    print(
        "| method | wall (s) | wall per host (ms) | client CPU (s) | client CPU per host (ms) "
        "| whole-machine CPU (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    summary = {}
    for name, samples in results.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        args = methods[name][0]
        busy = statistics.median(BUSY[args[0] + (args[2] if len(args) > 2 else "")])
        summary[name] = {"wall_s": wall, "cpu_s": cpu, "machine_cpu_s": busy}
        print(
            f"| {name} | {wall:.2f} | {wall / n * 1000:.0f} | {cpu:.2f} | "
            f"{cpu / n * 1000:.0f} | {busy:.1f} |"
        )
    base = summary["fleetcheck patrol (concurrent)"]["wall_s"]
    print()
    for name, v in summary.items():
        print(f"# {name}: {v['wall_s'] / base:.1f}x the patrol's wall time")
    for name, note in notes.items():
        print(f"# NOTE {name}: {note}")
    if a.json:
        Path(a.json).write_text(json.dumps({"hosts": n, "results": summary, "notes": notes}))


if __name__ == "__main__":
    main()
