"""Benchmark: a repeat round on kept SSH connections against a fresh round (issue 15).

On N lab hosts (default 50; each a network namespace with its own OpenSSH sshd), in one run,
alternating, --pairs times:

- fresh round: a patrol as every round was before (connect, key exchange, auth, one exec,
  close), through the runner, with the routes check (one gathered exec per host);
- repeat round: the same patrol on connections kept from the round before (Keeper, as
  `run --every` does): one channel per host;

and the same pair again with an exec of `true` instead of the routes check's commands (what
is left is the connection's own cost).

For each: wall time of the patrol, the client's CPU, and the server side's CPU read from
/proc of every sshd process in the lab's namespaces (utime + stime + cutime + cstime: the
listeners, the per-connection sshds and, through cutime, the session shells and the gathered
commands they reaped), taken once every sshd process of the round has exited or settled.
The gathered commands cost the same in both rounds; the difference is the connection.

With --before REV the routes check also runs with the routes fragment and parser as they were
at git revision REV (read with `git show`, swapped in for those rounds), in the same run: the
before/after of the commands' cost. Each fragment's gathered script is also measured on its
own in one lab namespace: processes per exec (strace -f, when installed) and CPU per exec
(the mean of 100 runs of `/bin/sh -s` with the script, one loop).

With --rc-ms and --kill, then one more pair of rounds on kept connections with every resident
shell killed on the hosts between them: the second round's rows must all be real verdicts (the
broken shells replaced by a fresh exec within the round). Run from a checkout of a revision
before the resident shell (e.g. copied into a `git worktree` of it), its repeat round is
that revision's: one exec a round.

The floor: the commands, the sshds and the client share the machine's cores, so no round can
take less wall than (server CPU + client CPU) / cores; the bench prints it per round.

Needs root and the lab prerequisites. Run it under the bench lock:

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_ssh_rounds.py \
        --before 60a3116 --json bench/ssh_rounds_results.json
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.lab import Lab, LabHost  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1


ROOT = Path(__file__).resolve().parent.parent


def at_revision(rev: str) -> tuple[Callable[[str | None], str], Callable[..., Any]]:
    """routes_fragment and the route parser's parse_gathered as they were at `rev`."""
    from at_revision import module_at

    mods = [
        module_at(rev, path, f"_at_{rev}_{Path(path).parent.name}_routes")
        for path in ("fleetcheck/parse/routes.py", "checks/routes.py")
    ]
    return mods[1].routes_fragment, mods[0].parse_gathered


@contextlib.contextmanager
def swapped(
    fragment: Callable[[str | None], str] | None, parser: Callable[..., Any] | None
) -> Iterator[None]:
    """The routes check with another fragment and parser (None: its own) while inside."""
    import fleetcheck.checks.routes as check

    import fleetcheck.parse.routes as parse

    saved = check.routes_fragment, parse.parse_gathered
    if fragment is not None and parser is not None:
        check.routes_fragment, parse.parse_gathered = fragment, parser  # type: ignore[assignment]
    try:
        yield
    finally:
        check.routes_fragment, parse.parse_gathered = saved  # type: ignore[assignment]


def gather_cost(ns: str, script: str, workdir: Path, runs: int = 100) -> dict[str, Any]:
    """One gathered script run in namespace `ns` as sshd runs it (`/bin/sh -s`, the script
    on stdin): processes it starts (strace -f: every pid but the shell's own; None without
    strace), programs it executes, and its CPU per exec (the whole tree: a loop of `runs`
    execs in one shell, from the loop's reaped rusage, minus an empty loop's)."""
    path = workdir / f"gather-{os.getpid()}-{time.monotonic_ns()}.sh"
    path.write_text(script)
    out: dict[str, Any] = {"processes": None, "programs": None}
    if shutil.which("strace"):
        trace = path.with_suffix(".strace")
        subprocess.run(
            ["ip", "netns", "exec", ns, "strace", "-f", "-q", "-z", "-e", "trace=execve"]
            + ["-o", str(trace), "/bin/sh", "-s"],
            stdin=path.open("rb"),
            capture_output=True,
            check=True,
        )
        lines = trace.read_text().splitlines()
        out["processes"] = len({line.split()[0] for line in lines}) - 1
        out["programs"] = sorted(
            line.split('"')[1].rsplit("/", 1)[-1] for line in lines if "execve(" in line
        )
        out["programs"].remove("sh")  # the shell sshd starts
    empty = workdir / "empty.sh"
    empty.write_text("")

    def loop(file: Path) -> float:
        body = (
            f"i=0; while [ $i -lt {runs} ]; do /bin/sh -s <{file} >/dev/null 2>&1; i=$((i+1)); done"
        )
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(["ip", "netns", "exec", ns, "/bin/sh", "-c", body], check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / runs

    out["cpu_ms"] = round((loop(path) - loop(empty)) * 1000, 2)
    return out


def sshd_pids(hosts: list[LabHost]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for h in hosts:
        pids = subprocess.run(
            ["ip", "netns", "pids", h.ns], capture_output=True, text=True, check=True
        ).stdout.split()
        mine = set()
        for pid in map(int, pids):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                    mine.add(pid)
            except FileNotFoundError:
                pass
        out[h.name] = mine
    return out


def all_pids(hosts: list[LabHost]) -> dict[str, set[int]]:
    """Every process of the hosts' namespaces: the sshds and, on kept connections, the
    resident shells, whose gathered commands are reaped into their cutime, not the sshd's."""
    out: dict[str, set[int]] = {}
    for h in hosts:
        pids = subprocess.run(
            ["ip", "netns", "pids", h.ns], capture_output=True, text=True, check=True
        ).stdout.split()
        out[h.name] = set(map(int, pids))
    return out


def cpu_of(pids: dict[str, set[int]]) -> tuple[float, float]:
    """(own, reaped) seconds of CPU of these processes: their own utime + stime, and the
    cutime + cstime of the children they have reaped."""
    own = reaped = 0
    for group in pids.values():
        for pid in group:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except FileNotFoundError:
                continue
            # fields[0] is the state (stat field 3): utime..cstime are stat fields 14-17
            own += int(fields[11]) + int(fields[12])
            reaped += int(fields[13]) + int(fields[14])
    return own / TICK, reaped / TICK


def settle(hosts: list[LabHost], want: dict[str, set[int]] | None, timeout: float = 60) -> Any:
    """Wait until each host's sshd processes are `want` (None: only its listener)."""
    end = time.monotonic() + timeout
    while True:
        now = sshd_pids(hosts)
        if want is None:
            ok = all(len(p) == 1 for p in now.values())
        else:
            ok = now == want
        if ok:
            return now
        if time.monotonic() > end:
            raise SystemExit(f"sshd processes did not settle: {now} (want {want})")
        time.sleep(0.05)


def bare_patrol(fleet: Any, keeper: Any) -> None:
    """Every host's connection and one exec of `true`, concurrently (a round whose commands
    cost nothing: what is left is the connection)."""
    from concurrent.futures import ThreadPoolExecutor

    from fleetcheck.core.context import PatrolContext

    ctx = PatrolContext(fleet, lambda _h: {"bare.true": "true"}, keeper=keeper)
    try:
        with ThreadPoolExecutor(len(fleet.hosts)) as pool:
            facts = list(pool.map(ctx.host_facts, fleet.hosts))
    finally:
        ctx.close()
    bad = [f for f in facts if f.problem or f.get("bare.true").rc != 0]
    if bad:
        raise SystemExit(f"a bare exec failed: {bad[0]}")


def one_round(
    fleet: Any, items: Any, hosts: list[LabHost], keeper: Any, mode: str, bare: bool = False
) -> Any:
    """mode: "fresh" (no keeper), "prime" (connects, keeps), "repeat" (on kept ones)."""
    from fleetcheck.core.model import Status
    from fleetcheck.core.runner import run_patrol

    before_pids = sshd_pids(hosts)
    own0, reaped0 = cpu_of(all_pids(hosts))
    c0, t0 = time.process_time(), time.perf_counter()
    if bare:
        bare_patrol(fleet, keeper)
    else:
        report = run_patrol(fleet, items, keeper=keeper)
        bad = [r for r in report.results if r.status is not Status.OK]
        if bad:
            raise SystemExit(f"a row was not OK: {bad[0]}")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if mode == "prime":
        return None
    # fresh: every connection's sshd has exited (reaped into the listener's cutime);
    # repeat: the kept connections' sshds are the ones there before (the shells reaped)
    settle(hosts, None if mode == "fresh" else before_pids)
    own1, reaped1 = cpu_of(all_pids(hosts))
    row = {
        "wall_s": round(wall, 3),
        "client_cpu_s": round(cpu, 3),
        "server_cpu_s": round(own1 + reaped1 - own0 - reaped0, 3),  # sshds + commands
    }
    # no round on these cores can be shorter than all their work spread over them
    row["floor_s"] = round((row["server_cpu_s"] + cpu) / CORES, 3)
    if mode == "repeat":  # the kept sshds are alive: their own CPU and their shells' apart
        row["sshd_cpu_s"] = round(own1 - own0, 3)
        row["commands_cpu_s"] = round(reaped1 - reaped0, 3)
    return row


def rc_burning(ms: float) -> str:
    """An rc file that works `ms` of CPU in bash (a counting loop, calibrated here): the
    stand-in for a `pyenv init` or a conda hook in ~/.bashrc."""
    loop = "i=0; while [ $i -lt {n} ]; do i=$((i+1)); done\n"
    n = 20000
    while True:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(["bash", "-c", loop.format(n=n)], check=True)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        took = (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1000
        if took > 20:
            return loop.format(n=max(1, int(n * ms / took)))
        n *= 4


def resident_shells(hosts: list[LabHost]) -> list[int]:
    """The resident shells waiting on the hosts."""
    from tests.lab import resident_shells as of

    return [pid for pids in all_pids(hosts).values() for pid in of(pids)]


def killed_round(fleet: Any, items: Any, hosts: list[LabHost]) -> dict[str, Any]:
    """Kept connections whose resident shells are all killed on the hosts between two rounds:
    the second round's rows (real verdicts: not UNKNOWN), its wall, and how many resident
    shells it found broken and replaced by a fresh exec within the round."""
    from fleetcheck.core.model import Status
    from fleetcheck.core.runner import run_patrol
    from fleetcheck.transport.keep import Keeper
    from fleetcheck.transport.ssh import resident

    keeper = Keeper(300.0)
    try:
        run_patrol(fleet, items, keeper=keeper)
        shells = resident_shells(hosts)
        for pid in shells:
            os.kill(pid, signal.SIGKILL)
        end = time.monotonic() + 30
        while set(resident_shells(hosts)) & set(shells):
            if time.monotonic() > end:
                raise SystemExit("killed resident shells did not die")
            time.sleep(0.05)
        broken = resident.counts.broken
        t0 = time.perf_counter()
        report = run_patrol(fleet, items, keeper=keeper)
        wall = time.perf_counter() - t0
        rows = len(report.results)
        real = sum(r.status is not Status.UNKNOWN for r in report.results)
        return {
            "shells_killed": len(shells),
            "rows": rows,
            "real": real,
            "ok": sum(r.status is Status.OK for r in report.results),
            "real_pct": round(100.0 * real / max(1, rows), 2),
            "replaced_within_round": resident.counts.broken - broken,
            "reused": keeper.reused,
            "wall_s": round(wall, 3),
        }
    finally:
        keeper.close()
        settle(hosts, None)


LOAD_BEFORE = list(os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--before", metavar="REV", help="also the routes fragment as at REV")
    ap.add_argument("--json", help="also write the numbers to this file")
    ap.add_argument(
        "--rc-ms",
        type=float,
        default=0.0,
        help="the login shell sources an rc file that works this many ms of CPU for every "
        "command sshd runs (as Debian's bash sources ~/.bashrc); then a third round kind: "
        "repeat on kept connections with one exec a round (the before of the resident shell)",
    )
    ap.add_argument("--only", choices=["routes", "true"], help="one workload only")
    ap.add_argument(
        "--kill",
        action="store_true",
        help="then kill every resident shell between two rounds on kept connections: the "
        "second round's real verdicts (each shell replaced by a fresh exec within the round)",
    )
    a = ap.parse_args()
    from fleetcheck.checks.routes import routes_fragment

    from fleetcheck.config import load
    from fleetcheck.core import registry
    from fleetcheck.core.runner import plan
    from fleetcheck.transport.gather import build_gather_script
    from fleetcheck.transport.keep import Keeper

    # a fleetcheck before the resident shell (issue 29; this bench run in a checkout of an
    # older revision) keeps connections with one exec a round: its repeat round is that
    resident = "resident" in inspect.signature(Keeper).parameters
    # (label, bare exec of true, the fragment and parser swapped in or None)
    workloads: list[tuple[str, bool, Any]] = []
    before = at_revision(a.before) if a.before else None
    if before is not None:
        workloads.append((f"routes check as at {a.before}", False, before))
    workloads += [("routes check", False, None), ("exec of true", True, None)]
    if a.only:
        workloads = [w for w in workloads if w[1] == (a.only == "true")]
    results: dict[str, Any] = {}
    costs: dict[str, Any] = {}
    with Lab(prefix=24) as lab:
        options = ""
        if a.rc_ms:
            rcfile = lab.dir / "bashrc"
            rcfile.write_text(rc_burning(a.rc_ms))
            options = f"SetEnv BASH_ENV={rcfile}\n"
        hosts = [lab.add_host(f"h{i:03d}", sshd_options=options) for i in range(a.hosts)]
        cfg = lab.config(checks="[checks.routes]\n", patrol='deadline = "120s"\n')
        fleet = load(cfg, registry.config_type, registry.host_config_types)
        items = plan(fleet, registry.select(fleet.checks))
        target = fleet.broker.host
        for label, bare, swap in workloads:
            if not bare:
                fragment = swap[0] if swap else routes_fragment
                script = build_gather_script("0" * 16, {"routes.table": fragment(target)})
                costs[label] = gather_cost(hosts[0].ns, script, lab.dir)
        settle(hosts, None)
        one_round(fleet, items, hosts, None, "fresh")  # warm-up: imports, known_hosts cache
        for label, bare, swap in workloads:
            fresh, repeat, execs = [], [], []
            with swapped(*(swap or (None, None))):
                for _ in range(a.pairs):
                    fresh.append(one_round(fleet, items, hosts, None, "fresh", bare))
                    if a.rc_ms and resident:  # kept, one exec a round: as before issue 29
                        keeper = Keeper(300.0, resident=False)
                        one_round(fleet, items, hosts, keeper, "prime", bare)
                        execs.append(one_round(fleet, items, hosts, keeper, "repeat", bare))
                        keeper.close()
                        settle(hosts, None)
                    keeper = Keeper(300.0)
                    one_round(fleet, items, hosts, keeper, "prime", bare)  # connects, keeps
                    repeat.append(one_round(fleet, items, hosts, keeper, "repeat", bare))
                    # the commands cost the same in both rounds: a fresh round's sshds alone
                    # are its server CPU minus what the repeat round's shells took
                    fresh[-1]["sshd_cpu_s"] = round(
                        fresh[-1]["server_cpu_s"] - repeat[-1]["commands_cpu_s"], 3
                    )
                    if keeper.reused != a.hosts:
                        raise SystemExit(f"only {keeper.reused} of {a.hosts} connections reused")
                    keeper.close()
                    settle(hosts, None)
            results[label] = (fresh, repeat, execs)
        killed = killed_round(fleet, items, hosts) if a.kill and resident else None

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    machine = f"{CORES} cores, Python {platform.python_version()}"
    res: dict[str, Any] = {"hosts": a.hosts, "pairs": a.pairs, "machine": machine}
    res["rc_ms"] = a.rc_ms
    res["resident_shell"] = resident
    if killed is not None:
        res["killed_shells_round"] = killed
        print(
            f"resident shells killed between rounds: {killed['shells_killed']} killed, "
            f"{killed['real']} of {killed['rows']} rows real verdicts "
            f"({killed['replaced_within_round']} replaced within the round), "
            f"wall {killed['wall_s']:.2f} s"
        )
    res["load_before"] = LOAD_BEFORE
    res["load_after"] = list(os.getloadavg())
    res["gathered_exec_per_host"] = costs
    print(f"the routes check's gathered exec, per host ({machine}):")
    for label, cost in costs.items():
        print(
            f"  {label}: {cost['processes']} processes ({' '.join(cost['programs'] or [])}), "
            f"{cost['cpu_ms']:.1f} ms CPU"
        )
    for workload, (fresh, repeat, execs) in results.items():
        out: dict[str, Any] = {"fresh": fresh, "repeat": repeat}
        if execs:
            out["repeat_exec"] = execs
            print(f"{a.hosts} lab hosts, {workload}, rc file {a.rc_ms:g} ms, median of {a.pairs}:")
            print(
                f"  {'':<34}{'fresh':>8}{'kept, exec':>12}{'ratio':>7}"
                f"{'kept, resident':>16}{'ratio':>7}"
            )
            for key, label in (
                ("wall_s", "patrol wall (s)"),
                ("server_cpu_s", "host CPU: sshds + shells (s)"),
                ("client_cpu_s", "client CPU (s)"),
            ):
                f, e, r = med(fresh, key), med(execs, key), med(repeat, key)
                out[f"rc_{key}"] = {
                    "fresh": f,
                    "repeat_exec": e,
                    "repeat_resident": r,
                    "exec_ratio": round(e / f, 3) if f else None,
                    "resident_ratio": round(r / f, 3) if f else None,
                }
                print(f"  {label:<34}{f:>8.3f}{e:>12.3f}{e / f:>7.2f}{r:>16.3f}{r / f:>7.2f}")
        print(f"{a.hosts} lab hosts, {workload}, median of {a.pairs} pairs ({machine}):")
        print(f"  {'':<34}{'fresh round':>12}{'repeat round':>14}{'ratio':>8}")
        for key, label in (
            ("wall_s", "patrol wall (s)"),
            ("server_cpu_s", "server CPU: sshds + commands (s)"),
            ("sshd_cpu_s", "sshd CPU alone (s)"),
            ("commands_cpu_s", "commands CPU (s)"),
            ("client_cpu_s", "client CPU (s)"),
            ("floor_s", "floor: all CPU / cores (s)"),
        ):
            if key == "commands_cpu_s":  # measured in the repeat round; the same in both
                r = med(repeat, key)
                out[f"median_{key}"] = {"repeat": r, "per_host_ms": round(r / a.hosts * 1000, 2)}
                print(f"  {label:<34}{'':>12}{r:>14.3f}   ({r / a.hosts * 1000:.1f} ms per host)")
                continue
            f, r = med(fresh, key), med(repeat, key)
            out[f"median_{key}"] = {
                "fresh": f,
                "repeat": r,
                "ratio": round(r / f, 3) if f else None,
            }
            print(f"  {label:<34}{f:>12.3f}{r:>14.3f}{r / f if f else 0:>8.2f}")
        # the best ratio these cores allow: the repeat round at its floor
        floor_ratio = med(repeat, "floor_s") / med(fresh, "wall_s")
        out["repeat_floor_over_fresh_wall"] = round(floor_ratio, 3)
        print(f"  repeat round's floor / fresh round's wall: {floor_ratio:.2f}")
        res[workload] = out
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
