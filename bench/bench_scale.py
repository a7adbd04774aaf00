"""Benchmark: 10,000 host entries with default settings (issue 29 item 3).

One lab of --hosts hosts (network namespaces, each its own OpenSSH sshd, as in
bench_ssh_scale.py; they share this machine's cores with the client) and --entries host
entries spread over them round-robin (entry j is lab host j mod N under its own name: several
entries an sshd, as the 1,800-entry run of bench_ssh_scale.py does). One patrol through the
CLI (`fleetcheck run --format json`, the state file and the history on, as a cron patrol
keeps them), fleetcheck's default settings: the `routes` host check, default timeouts
(connect 5 s, command 10 s), adaptive concurrency under the bound 128, and `[patrol] deadline`
= --deadline (default 900 s: a row not in by 15 minutes is UNKNOWN, so the share of real
verdicts is the share in within 15 minutes). Reported:

- rows, share of real verdicts (not UNKNOWN) and why the others were not, wall;
- client CPU (the CLI process, user + sys) per entry; the hosts' CPU: every process in the lab
  namespaces, read from /proc as bench_ssh_rounds.py does (each listening sshd's utime + stime
  and the cutime + cstime of the per-connection sshds it reaped, which include the shells and
  commands they reaped), taken once every per-connection sshd has exited; the machine's busy
  CPU over the same time (/proc/stat), whose rest is the kernel's work charged to no process
  and the other engineers' work (the top other processes by name, and the 1-minute load
  average sampled every 5 s, are reported with it);
- peak RSS (the process's maxrss) and open file descriptors (sampled every 20 ms) against the
  bound 4 x 128;
- the state file's size and the time its write took, the history's append time, and the
  history's size (database + WAL + the newest round kept whole) after the run;
- then --rounds (default 96, a day at 15 minutes) SIMULATED rounds: the real run's rows
  rebuilt from its JSON report, each round 15 minutes after the one before, written through
  the same path a patrol takes (`state.remember`: the state file and the history's append
  under its lock). No SSH in them: what grows is the state and the history, and their sizes
  and write times are reported after the last.

Needs root and the lab prerequisites. Develop with a small run (`--hosts 100 --entries 1000
--rounds 4`); the full run, under the bench lock:

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_scale.py \
        --json bench/scale_results.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.lab import Lab, LabHost  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable  # the CLI runs from ROOT: this checkout's fleetcheck
TICK = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1
FD_BOUND = 4 * 128  # a host in flight holds a socket and a poll pipe; 128 the default bound

# The CLI as `python -m fleetcheck` runs it, with the state file's write and the history's
# append timed (the same functions, wrapped: one line on stderr each call)
TIMED_CLI = """\
import sys, time
from fleetcheck.rounds import history, state
def timed(name, fn):
    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            sys.stderr.write(f"#timing {name} {time.perf_counter() - t0:.6f}\\n")
    return wrapper
state.StateFile._save = timed("state_write", state.StateFile._save)
history.append = timed("history_append", history.append)
sys.argv = ["fleetcheck", *sys.argv[1:]]
from fleetcheck.__main__ import main
main()
"""


def machine_jiffies() -> dict[str, int]:
    """The whole machine's CPU time from /proc/stat, in jiffies: busy (everything but idle
    and iowait), of which softirq (the kernel's network work, charged to no process) and
    steal (taken by the hypervisor), and the total."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return {"busy": sum(f) - f[3] - f[4], "softirq": f[6], "steal": f[7], "total": sum(f)}


def proc_stats() -> Iterator[tuple[int, str, list[str]]]:
    """Every live process's (pid, name, the fields of /proc/PID/stat after its name)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        head, _, tail = stat.rpartition(")")
        yield int(entry.name), head.split("(", 1)[1], tail.split()


def process_cpu() -> dict[int, tuple[str, int]]:
    """Every live process's (name, utime + stime in jiffies)."""
    return {pid: (name, int(f[11]) + int(f[12])) for pid, name, f in proc_stats()}


def top_others(
    before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]], mine: set[int]
) -> dict[str, float]:
    """The other processes' CPU over the run (seconds), by name, the top 8: those alive at
    both ends (what ran and exited in between shows only in its reaper's numbers)."""
    by_name: dict[str, float] = {}
    for pid, (name, cpu) in after.items():
        if pid in mine or pid not in before or before[pid][0] != name:
            continue
        by_name[name] = by_name.get(name, 0.0) + (cpu - before[pid][1]) / TICK
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:8]
    return {k: round(v, 1) for k, v in top if v >= 0.5}


def children_of(parents: set[int]) -> set[int]:
    """Every live process whose parent is one of `parents`."""
    return {pid for pid, _, f in proc_stats() if int(f[1]) in parents}


def listeners(hosts: list[LabHost]) -> set[int]:
    pids = set()
    for h in hosts:
        assert h.sshd is not None
        if Path(f"/proc/{h.sshd.pid}/comm").read_text().strip() != "sshd":
            raise SystemExit(f"{h.name}: pid {h.sshd.pid} is not its sshd")
        pids.add(h.sshd.pid)
    return pids


def hosts_cpu(pids: set[int]) -> float:
    """Seconds of CPU of the listening sshds: their own and what they reaped (every
    per-connection sshd, and through its cutime the shell and commands it ran)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / TICK


def settle(pids: set[int], timeout: float = 120) -> float:
    """Wait until no listening sshd has a child left (every connection closed and reaped)."""
    t0 = time.monotonic()
    while children_of(pids):
        if time.monotonic() - t0 > timeout:
            raise SystemExit(f"per-connection sshds still alive after {timeout:.0f}s")
        time.sleep(0.1)
    return time.monotonic() - t0


def run_measured(args: list[str]) -> dict[str, Any]:
    """Run the CLI; wall, its CPU (user + sys), peak RSS, the most fds and threads it had
    open at once (sampled every 20 ms), the machine's 1-minute load average (every 5 s), its
    stdout, and its #timing lines."""
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    peak = {"fds": 0, "threads": 0}
    loads: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        n = 0
        while not stop.is_set():
            try:
                peak["fds"] = max(peak["fds"], len(os.listdir(f"/proc/{proc.pid}/fd")))
                peak["threads"] = max(peak["threads"], len(os.listdir(f"/proc/{proc.pid}/task")))
            except OSError:
                pass
            if n % 250 == 0:
                loads.append(os.getloadavg()[0])
            n += 1
            stop.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stdout is not None and proc.stderr is not None
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    err = proc.stderr.read().decode(errors="replace")
    reader.join()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    stop.set()
    sampler.join()
    timings: dict[str, list[float]] = {}
    rest = []
    for line in err.splitlines():
        if line.startswith("#timing "):
            _, name, secs = line.split()
            timings.setdefault(name, []).append(float(secs))
        else:
            rest.append(line)
    return {
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "max_rss_mb": ru.ru_maxrss / 1024,
        "max_fds": peak["fds"],
        "max_threads": peak["threads"],
        "rc": proc.returncode,
        "pid": proc.pid,
        "load_1m_during": {"max": max(loads), "median": statistics.median(loads)},
        "stdout": b"".join(out).decode(errors="replace"),
        "stderr": "\n".join(rest)[-2000:],
        "timings": timings,
    }


def write_config(lab: Lab, hosts: list[LabHost], entries: int, patrol_extra: str) -> Path:
    """hosts.toml with `entries` host entries over the lab's hosts, round-robin, and
    fleetcheck's own timeouts (the lab's are shorter)."""
    path = lab.config(checks="", hosts=[], patrol=patrol_extra)
    text = path.read_text()
    text = text.replace('connect_timeout = "3s"\n', "").replace('command_timeout = "5s"\n', "")
    blocks = []
    for j in range(entries):
        h = hosts[j % len(hosts)]
        blocks.append(
            f'[[hosts]]\nname = "e{j:05d}-{h.name}"\nssh = "{h.addr}"\naddrs = ["{h.addr}"]\n'
        )
    path.write_text(text + "\n".join(blocks) + "\n[checks.routes]\n")
    return path


def disk(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.exists())


def history_files(history: Path) -> list[Path]:
    """The history's files: its database, the database's WAL, the newest round kept whole,
    the keys the newest round left (where the store keeps them in a file).
    (A fleetcheck before the database, fc8cffc and older: the JSON lines, the one older file
    its rotation keeps, the newest round.)"""
    from fleetcheck.rounds import history as hist

    try:
        from fleetcheck.rounds import store
    except ImportError:
        return [history, history.with_name(history.name + ".1"), hist.latest_path(history)]
    db = store.db_path(history)
    keys = [store.keys_path(history)] if hasattr(store, "keys_path") else []
    return [db, db.with_name(db.name + "-wal"), hist.latest_path(history), *keys]


def simulate(report_doc: dict[str, Any], state: Path, history: Path, rounds: int) -> dict[str, Any]:
    """`rounds` more rounds of the real run's rows, 15 minutes apart, through the patrol's
    own state-and-history path (state.remember, then history.append), timed per round."""
    from fleetcheck.config.tables import PatrolConfig
    from fleetcheck.console.source import report_from_dict
    from fleetcheck.rounds import history as hist
    from fleetcheck.rounds import state as state_mod

    base = report_from_dict(report_doc)
    rows = base.results  # verdicts only: their standing is the state step's
    t0 = datetime.fromisoformat(base.started_at.replace("Z", "+00:00"))
    defaults = PatrolConfig()
    memory = state_mod.Memory(defaults.fail_after, defaults.flap_changes, defaults.flap_window)
    timings: dict[str, list[float]] = {"state_write": [], "history_append": [], "round": []}
    saved_write = state_mod.StateFile._save

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            s = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                timings[name].append(time.perf_counter() - s)

        return wrapper

    state_mod.StateFile._save = timed("state_write", saved_write)  # type: ignore[method-assign]
    try:
        for i in range(1, rounds + 1):
            at = (t0 + timedelta(minutes=15 * i)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            report = dataclasses.replace(base, started_at=at, results=rows, standing={})
            s = time.perf_counter()
            recorded = state_mod.remember(report, state, memory)
            a = time.perf_counter()
            hist.append(recorded, history)
            timings["history_append"].append(time.perf_counter() - a)
            timings["round"].append(time.perf_counter() - s)
    finally:
        state_mod.StateFile._save = saved_write  # type: ignore[method-assign]
    out: dict[str, Any] = {"rounds": rounds, "kind": "the real run's rows appended again"}
    for name, values in timings.items():
        out[f"{name}_median_s"] = round(statistics.median(values), 4)
        out[f"{name}_max_s"] = round(max(values), 4)
    out["state_bytes"] = disk([state])
    out["history_bytes"] = disk(history_files(history))
    out["history_db_bytes"] = disk(history_files(history)[:2])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=600, help="lab hosts (sshds)")
    ap.add_argument("--entries", type=int, default=10000, help="host entries over them")
    ap.add_argument("--deadline", default="900s", help="[patrol] deadline")
    ap.add_argument("--rounds", type=int, default=96, help="simulated rounds after the real one")
    ap.add_argument("--json", help="also write the numbers to this file")
    a = ap.parse_args()
    res: dict[str, Any] = {
        "hosts": a.hosts,
        "entries": a.entries,
        "deadline": a.deadline,
        "cores": CORES,
        "load_before": list(os.getloadavg()),
    }
    with Lab(prefix=22) as lab:
        t0 = time.monotonic()
        hosts = [lab.add_host(f"h{i:03d}") for i in range(a.hosts)]
        res["setup_s"] = round(time.monotonic() - t0, 1)
        print(f"# lab: {a.hosts} hosts in {res['setup_s']:.0f}s", flush=True)
        cfg = write_config(lab, hosts, a.entries, f'deadline = "{a.deadline}"\n')
        state, history = lab.dir / "state.json", lab.dir / "history.jsonl"
        sshds = listeners(hosts)
        settle(sshds)
        res["load_at_start"] = list(os.getloadavg())
        h0, m0, p0 = hosts_cpu(sshds), machine_jiffies(), process_cpu()
        r = run_measured(
            [PY, "-c", TIMED_CLI, "run", "-c", str(cfg), "--format", "json"]
            + ["--state", str(state), "--history", str(history)]
        )
        res["load_at_end"] = list(os.getloadavg())
        res["settle_s"] = round(settle(sshds), 2)
        h1, m1, p1 = hosts_cpu(sshds), machine_jiffies(), process_cpu()
        m = {k: (m1[k] - m0[k]) / TICK for k in m0}
        try:
            doc = json.loads(r["stdout"])
        except json.JSONDecodeError:
            raise SystemExit(f"patrol failed (rc {r['rc']}): {r['stderr']}") from None
        rows = doc["results"]
        unknown = [x for x in rows if x["status"] == "UNKNOWN"]
        reasons: dict[str, int] = {}
        for x in unknown:
            reasons[x["summary"][:100]] = reasons.get(x["summary"][:100], 0) + 1
        client, on_hosts = r["cpu_s"], h1 - h0
        run: dict[str, Any] = {
            "rows": len(rows),
            "real": len(rows) - len(unknown),
            "real_pct": round(100.0 * (len(rows) - len(unknown)) / max(1, len(rows)), 2),
            "statuses": doc.get("status"),
            "unknown_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:5]),
            "wall_s": round(r["wall_s"], 1),
            "patrol_duration_s": round(doc["duration_s"], 1),
            "client_cpu_s": round(client, 1),
            "client_cpu_ms_per_entry": round(1000 * client / a.entries, 2),
            "hosts_cpu_s": round(on_hosts, 1),
            "hosts_cpu_ms_per_entry": round(1000 * on_hosts / a.entries, 2),
            "machine_cpu_s": round(m["total"], 1),
            "machine_busy_cpu_s": round(m["busy"], 1),
            "machine_softirq_s": round(m["softirq"], 1),
            "machine_steal_s": round(m["steal"], 1),
            "others_cpu_s": round(m["busy"] - client - on_hosts, 1),
            "others_top_s": top_others(p0, p1, sshds | {r["pid"]}),
            "load_1m_during": r["load_1m_during"],
            "floor_s": round((client + on_hosts) / CORES, 1),
            "max_rss_mb": round(r["max_rss_mb"], 1),
            "max_fds": r["max_fds"],
            "fd_bound": FD_BOUND,
            "max_threads": r["max_threads"],
            "rc": r["rc"],
            "notes": doc.get("notes", []),
            "stderr": r["stderr"],
        }
        for name, values in r["timings"].items():
            run[f"{name}_s"] = round(sum(values), 4)
        run["state_bytes"] = disk([state])
        run["history_bytes"] = disk(history_files(history))
        run["history_db_bytes"] = disk(history_files(history)[:2])
        res["run"] = run
        print(f"# run: {json.dumps(run)}", flush=True)
        if a.rounds:
            res["simulated"] = simulate(doc, state, history, a.rounds)
            print(f"# simulated: {json.dumps(res['simulated'])}", flush=True)
    res["load_after"] = list(os.getloadavg())
    res["commit"] = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    report(res)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")


def report(res: dict[str, Any]) -> None:
    r, n = res["run"], res["entries"]
    print()
    print(
        f"# {n} entries over {res['hosts']} sshds, default settings, deadline {res['deadline']}"
        f" (load {res['load_before'][0]:.2f} before, {res['load_after'][0]:.2f} after)"
    )
    print(
        f"rows {r['rows']}, real verdicts {r['real_pct']:.2f} %, wall {r['wall_s']:.1f} s, "
        f"client CPU {r['client_cpu_s']:.1f} s ({r['client_cpu_ms_per_entry']:.1f} ms an entry), "
        f"hosts' CPU {r['hosts_cpu_s']:.1f} s ({r['hosts_cpu_ms_per_entry']:.1f} ms an entry), "
        f"others {r['others_cpu_s']:.1f} s (softirq {r['machine_softirq_s']:.1f} s, steal "
        f"{r['machine_steal_s']:.1f} s; {r['others_top_s']}), floor {r['floor_s']:.1f} s; "
        f"load during: max {r['load_1m_during']['max']:.2f}, median "
        f"{r['load_1m_during']['median']:.2f}"
    )
    print(
        f"peak RSS {r['max_rss_mb']:.0f} MB, fds {r['max_fds']} (bound {r['fd_bound']}), "
        f"threads {r['max_threads']}; state {r['state_bytes']} B written in "
        f"{r.get('state_write_s', 0):.2f} s, history {r['history_bytes']} B "
        f"(append {r.get('history_append_s', 0):.2f} s)"
    )
    if "simulated" in res:
        s = res["simulated"]
        print(
            f"after {s['rounds']} simulated rounds: state {s['state_bytes']} B (write median "
            f"{s['state_write_median_s']:.2f} s), history {s['history_bytes']} B (append median "
            f"{s['history_append_median_s']:.2f} s, max {s['history_append_max_s']:.2f} s)"
        )
    minutes = 15 * 60
    targets = {
        f"{n} entries: >= 99 % real verdicts": r["real_pct"] >= 99,
        f"{n} entries: within 15 minutes": r["wall_s"] <= minutes,
        f"{n} entries: peak RSS <= 600 MB": r["max_rss_mb"] <= 600,
        f"{n} entries: fds within the bound": r["max_fds"] <= r["fd_bound"],
    }
    for name, ok in targets.items():
        print(f"# target {name}: {'MET' if ok else 'MISSED'}")
    res["targets"] = targets


if __name__ == "__main__":
    main()
