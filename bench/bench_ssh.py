"""Benchmark: one fleetcheck patrol of N lab hosts (real sshd in namespaces) against the same
gathered commands run one host after another, Ansible ad-hoc (`ansible all -m raw`) and
parallel-ssh, all in one run on the same hosts. Also, in the same run: patrols of single hosts
alone (the slowest one is the yardstick for the N-host patrol), and connect+auth+exec latency
per host from inside a patrol-shaped harness (bench/ssh_harness.py), each host alone and all
hosts at once. Reports wall time, client CPU per host and the whole machine's CPU time (the
lab's sshds share the client's cores) and checks issue 6's targets.

Not part of the test run. Needs root and the lab prerequisites; Ansible and parallel-ssh come
from a separate venv (default /tmp/bench-venv: `python3 -m venv /tmp/bench-venv &&
/tmp/bench-venv/bin/pip install ansible-core parallel-ssh`), never from the project's.

    .venv/bin/python bench/bench_ssh.py --hosts 100 --rounds 3 --json bench/ssh_results.json
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
from typing import Any

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


def measure(
    args: list[str], env: dict[str, str] | None = None, key: str = ""
) -> tuple[float, float, str]:
    """Wall seconds and CPU seconds (user+sys of the process and everything it reaped)."""
    cpu0, t0, busy0 = children_cpu(), time.monotonic(), machine_busy()
    proc = subprocess.run(args, capture_output=True, env=env, timeout=600)
    wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    if key:
        BUSY.setdefault(key, []).append(machine_busy() - busy0)
    if proc.returncode not in (0, 1, 2, 3):
        raise RuntimeError(f"{args[0]} failed ({proc.returncode}): {proc.stderr[-500:]!r}")
    return wall, cpu, proc.stdout.decode(errors="replace")


SEQUENTIAL = textwrap.dedent(
    """\
    import sys, json
    from fleetcheck.config import load
    from fleetcheck.core import registry, runner
    from fleetcheck.transport.gather import build_gather_script
    from fleetcheck.transport.ssh import open_shell
    fleet = load(sys.argv[1], registry.config_type, registry.host_config_types)
    items = runner.plan(fleet, registry.available())
    frags = runner.fragments_for(items, fleet)
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


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def harness(config: Path, mode: str) -> dict[str, Any]:
    out = subprocess.run(
        [str(ROOT / ".venv/bin/python"), str(ROOT / "bench/ssh_harness.py"), str(config), mode],
        capture_output=True,
        timeout=600,
        check=True,
    ).stdout
    data: dict[str, Any] = json.loads(out)
    bad = {k: v for k, v in data["hosts"].items() if v.get("rc") != 0}
    if bad:
        raise SystemExit(f"harness ({mode}): hosts failed: {dict(list(bad.items())[:3])}")
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--singles", type=int, default=10, help="hosts (spread evenly) patrolled alone per round"
    )
    ap.add_argument("--bench-venv", default="/tmp/bench-venv")
    ap.add_argument("--json", help="also write the numbers to this file")
    a = ap.parse_args()
    venv_bin = Path(a.bench_venv) / "bin"
    results: dict[str, list[tuple[float, float]]] = {}
    notes: dict[str, str] = {}
    singles: list[list[float]] = []  # per round: wall of each sampled host patrolled alone
    singles_cpu: list[float] = []  # client CPU of those single-host patrols (mostly start-up)
    lat_alone: list[dict[str, Any]] = []
    lat_true: list[dict[str, Any]] = []  # the transport alone: each host runs `true`
    lat_conc: list[dict[str, Any]] = []
    with Lab() as lab:
        t0 = time.monotonic()
        hosts = [lab.add_host(f"h{i:03d}") for i in range(a.hosts)]
        setup = time.monotonic() - t0
        sshd_config = (hosts[0].dir / "sshd_config").read_text()
        log = lab.dir / "bench.log"  # one path for every host (namespaces share the fs)
        log.write_text(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%S}Z tick\n" * 200)
        extra = {h.name: f'tz = "UTC"\n[[hosts.logs]]\npath = "{log}"\n' for h in hosts}

        def fleet_config(subset: list[Any] | None = None) -> Path:
            path = lab.config(
                checks="[checks.logs]\n[checks.routes]\n", host_extra=extra, hosts=subset
            )
            # the lab's sshds share the client's 2 cores: give commands room under load
            path.write_text(
                path.read_text().replace('command_timeout = "5s"', 'command_timeout = "60s"')
            )
            return path

        config = fleet_config()
        step = max(1, a.hosts // max(1, min(a.singles, a.hosts)))
        single_configs = [fleet_config([h]) for h in hosts[::step][: a.singles]]

        # the exact script a patrol runs on each host (same for all: one log path)
        from fleetcheck.config import load
        from fleetcheck.core import registry, runner
        from fleetcheck.transport.gather import build_gather_script

        fleet = load(config, registry.config_type, registry.host_config_types)
        frags = runner.fragments_for(runner.plan(fleet, registry.available()), fleet)
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
        cli = [str(ROOT / ".venv/bin/fleetcheck"), "run", "--format", "json", "-c"]
        methods: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "fleetcheck patrol (concurrent)": ([*cli, str(config)], None),
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
            walls = []
            for cfg in single_configs:
                wall, cpu, out = measure([*cli, str(cfg)])
                singles_cpu.append(cpu)
                if any(r["status"] != "OK" for r in json.loads(out)["results"]):
                    raise SystemExit(f"single-host patrol not clean: {out[:300]}")
                walls.append(wall)
            singles.append(walls)
            lat_alone.append(harness(config, "alone"))
            busy0 = machine_busy()
            lat_true.append(harness(config, "alone-true"))
            BUSY.setdefault("bare sessions", []).append(machine_busy() - busy0)
            for name, (args, env) in methods.items():
                wall, cpu, out = measure(args, env, key=name)
                results.setdefault(name, []).append((wall, cpu))
                if (
                    name == "ansible all -m raw"
                    and out.count("CHANGED") + out.count("SUCCESS") < a.hosts
                ):
                    notes[name] = f"only {out.count('CHANGED')} hosts answered: {out[-300:]}"
                if name == "fleetcheck patrol (concurrent)":
                    bad = [r for r in json.loads(out)["results"] if r["status"] != "OK"]
                    if bad:
                        notes[name] = f"{len(bad)} non-OK rows, e.g. {bad[0]}"
            busy0 = machine_busy()
            lat_conc.append(harness(config, "concurrent"))
            BUSY.setdefault("harness", []).append(machine_busy() - busy0)
    report(
        a, setup, sshd_config, results, notes, singles, singles_cpu, lat_alone, lat_true, lat_conc
    )


def report(
    a: argparse.Namespace,
    setup: float,
    sshd_config: str,
    results: dict[str, list[tuple[float, float]]],
    notes: dict[str, str],
    singles: list[list[float]],
    singles_cpu: list[float],
    lat_alone: list[dict[str, Any]],
    lat_true: list[dict[str, Any]],
    lat_conc: list[dict[str, Any]],
) -> None:
    n = a.hosts
    med = statistics.median
    print(f"# {n} lab hosts (sshd in network namespaces), {a.rounds} rounds, median shown;")
    print(f"# lab setup {setup:.1f}s; CPU = user+sys of the client and all its children")
    print(f"# machine: {os.cpu_count()} cores; lab sshd_config:")
    for line in sshd_config.splitlines():
        print(f"#   {line}")
    print()
    print(
        "| method | wall (s) | wall per host (ms) | client CPU (s) | client CPU per host (ms) "
        "| whole-machine CPU (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    summary: dict[str, Any] = {}
    for name, samples in results.items():
        wall = med(s[0] for s in samples)
        cpu = med(s[1] for s in samples)
        busy = med(BUSY[name])
        summary[name] = {"wall_s": wall, "cpu_s": cpu, "machine_cpu_s": busy}
        print(
            f"| {name} | {wall:.2f} | {wall / n * 1000:.0f} | {cpu:.2f} | "
            f"{cpu / n * 1000:.1f} | {busy:.1f} |"
        )
    patrol = summary["fleetcheck patrol (concurrent)"]
    base = patrol["wall_s"]
    print()
    for name, v in summary.items():
        print(f"# {name}: {v['wall_s'] / base:.2f}x the patrol's wall time")

    def lat(runs: list[dict[str, Any]], key: str) -> list[float]:
        return [h[key] * 1000 for r in runs for h in r["hosts"].values()]

    slowest = med(max(w) for w in singles)
    single_med = med(med(w) for w in singles)
    ratio = base / slowest
    alone_total, conc_total = lat(lat_alone, "total_s"), lat(lat_conc, "total_s")
    conc_wall = med(r["wall_s"] for r in lat_conc)
    slowest_alone = med(max(h["total_s"] for h in r["hosts"].values()) for r in lat_alone)
    harness_cpu = med(r["cpu_s"] for r in lat_conc) / n * 1000
    conc_busy = med(BUSY["harness"])
    conc_server = med(
        b - r["process_cpu_s"] for b, r in zip(BUSY["harness"], lat_conc, strict=True)
    )
    print()
    print(
        f"# single-host patrols (CLI, {len(singles[0])} hosts alone per round): "
        f"median {single_med:.3f}s, slowest {slowest:.3f}s"
    )
    print(
        f"# {n}-host patrol / slowest single-host patrol = "
        f"{base:.2f}s / {slowest:.3f}s = {ratio:.1f}x"
    )
    print(
        "# connect+auth+exec per host (ms), each host alone: "
        f"p50 {pct(alone_total, 0.5):.1f}, p95 {pct(alone_total, 0.95):.1f}, "
        f"max {max(alone_total):.1f}; connect p50 {pct(lat(lat_alone, 'connect_s'), 0.5):.1f}, "
        f"exec p50 {pct(lat(lat_alone, 'exec_s'), 0.5):.1f}"
    )
    print(
        f"# connect+auth+exec per host (ms), all {n} at once (in-process patrol harness): "
        f"p50 {pct(conc_total, 0.5):.1f}, p95 {pct(conc_total, 0.95):.1f}, "
        f"max {max(conc_total):.1f}; wall {conc_wall:.3f}s = {conc_wall / slowest_alone:.1f}x "
        f"the slowest host alone ({slowest_alone * 1000:.0f} ms); "
        f"client CPU {harness_cpu:.1f} ms/host (after imports); machine CPU {conc_busy:.1f}s, "
        f"{conc_server / n * 1000:.0f} ms/host outside the client"
    )
    true_total = lat(lat_true, "total_s")
    print(
        "# connect+auth+exec of `true` per host (ms), each host alone (the transport without "
        f"the gathered script): p50 {pct(true_total, 0.5):.1f}, p95 {pct(true_total, 0.95):.1f}; "
        f"connect p50 {pct(lat(lat_true, 'connect_s'), 0.5):.1f}, "
        f"exec p50 {pct(lat(lat_true, 'exec_s'), 0.5):.1f}"
    )
    bare_server = med(
        b - r["process_cpu_s"] for b, r in zip(BUSY["bare sessions"], lat_true, strict=True)
    )
    print(
        f"# machine CPU per bare session outside the client (sshd: connect, auth, `true`): "
        f"{bare_server / n * 1000:.0f} ms"
    )
    cpu_host = patrol["cpu_s"] / n * 1000
    startup = med(singles_cpu)
    marginal = (patrol["cpu_s"] - startup) / (n - 1) * 1000 if n > 1 else cpu_host
    print(
        f"# client CPU: a one-host patrol costs {startup * 1000:.0f} ms (interpreter, imports, "
        f"one host); each further host {marginal:.1f} ms; the transport alone (harness, after "
        f"imports) {harness_cpu:.1f} ms/host"
    )
    server_host = (patrol["machine_cpu_s"] - patrol["cpu_s"]) / n * 1000
    print(
        f"# machine CPU during the patrol: {patrol['machine_cpu_s']:.1f}s in {base:.2f}s wall "
        f"({patrol['machine_cpu_s'] / base:.2f} of {os.cpu_count()} cores busy); "
        f"client {cpu_host:.1f} ms/host, everything else (sshd, remote commands) "
        f"{server_host:.0f} ms/host"
    )
    targets = {
        "patrol <= 1.5x slowest single host": (ratio <= 1.5, f"{ratio:.1f}x"),
        "client CPU <= 10 ms/host": (cpu_host <= 10, f"{cpu_host:.1f} ms"),
        "connect+auth+exec p50 <= 30 ms (host alone, `true`)": (
            pct(true_total, 0.5) <= 30,
            f"{pct(true_total, 0.5):.1f} ms",
        ),
        "connect+auth+exec p50 <= 30 ms (host alone, gathered script)": (
            pct(alone_total, 0.5) <= 30,
            f"{pct(alone_total, 0.5):.1f} ms",
        ),
        "connect+auth+exec p50 <= 30 ms (all at once)": (
            pct(conc_total, 0.5) <= 30,
            f"{pct(conc_total, 0.5):.1f} ms",
        ),
    }
    if "parallel-ssh" in summary:
        r = summary["parallel-ssh"]["wall_s"] / base
        targets["at least on par with parallel-ssh"] = (r >= 0.95, f"pssh {r:.2f}x our time")
    if "ansible all -m raw" in summary:
        r = summary["ansible all -m raw"]["wall_s"] / base
        targets["10x faster than ansible -m raw"] = (r >= 10, f"ansible {r:.1f}x our time")
    print()
    for name, (ok, value) in targets.items():
        print(f"# target {name}: {'MET' if ok else 'MISSED'} ({value})")
    for name, note in notes.items():
        print(f"# NOTE {name}: {note}")
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "hosts": n,
                    "rounds": a.rounds,
                    "cores": os.cpu_count(),
                    "results": summary,
                    "single_host_patrol_s": {"median": single_med, "slowest": singles},
                    "patrol_over_slowest_single": ratio,
                    "client_cpu_ms": {
                        "per_host": cpu_host,
                        "one_host_patrol": startup * 1000,
                        "each_further_host": marginal,
                        "transport_harness_per_host": harness_cpu,
                    },
                    "bare_session_server_cpu_ms": bare_server / n * 1000,
                    "latency_ms": {
                        "alone_true": {"p50": pct(true_total, 0.5), "p95": pct(true_total, 0.95)},
                        "alone": {"p50": pct(alone_total, 0.5), "p95": pct(alone_total, 0.95)},
                        "concurrent": {"p50": pct(conc_total, 0.5), "p95": pct(conc_total, 0.95)},
                    },
                    "harness": {
                        "concurrent_wall_s": conc_wall,
                        "slowest_alone_s": slowest_alone,
                        "client_cpu_ms_per_host": harness_cpu,
                        "machine_cpu_s": conc_busy,
                        "server_cpu_ms_per_host": conc_server / n * 1000,
                    },
                    "targets": {k: {"met": ok, "value": v} for k, (ok, v) in targets.items()},
                    "notes": notes,
                    "sshd_config": sshd_config,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
