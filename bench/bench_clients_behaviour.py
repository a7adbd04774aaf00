"""The clients check before and after issue 24 (connection behaviour: age and flags read in
the same pass, quiet times, clients by age, waiting clients, name patterns, reconnects, churn
from INFO), end to end at 10,000 clients, in the same run.

The broker and the clients are bench_broker's (its own redis-server on loopback, 10,000
connections from 100 loopback hosts, two names a host, idle times spread over 0-10 s by
PINGs). Each variant runs in a child process of its own (so no variant runs on a heap
another one left, and the two trees never share a process), all against that one broker.
By default every round starts a fresh process for each variant and runs the variants one
after another, their order rotated round by round: on this VM the same code measured up to
25 % apart from one process to the next, and the machine's speed drifts by as much within
minutes, so the figure is the median over the rounds of each round's ratio to `before`
(the medians of each variant are printed too). Each run goes through a fresh patrol
context (the connection and its PING not counted):

- `before`: the tree at BASE, whole (`git archive`, as bench_broker's tree variants): its
  clients check, its CLIENT LIST reader and the framework they ran on (patrol context,
  results, safe text). This is "the clients check's time at BASE" the issue's cost line
  names;
- `after, first round` (no state), `after` (the steady state: every row's carry from a
  previous round, as the state file hands it over, the pools older than that round; its
  broker-wide row WARNs, rightly, about the bench's own connection churn: a fresh patrol
  connection per run, several runs a second) and `after, all reconnected` (the worst case:
  the previous round 15 minutes back, so every connection is new since it and every host
  row reports a reconnect). The after variants read INFO too (the churn counter), which a
  patrol with the broker check shares; here it is counted against them.

The host rows' verdicts must be equal in every variant.

    .venv/bin/python bench/bench_clients_behaviour.py                # 10,000 clients, 30 runs
    .venv/bin/python bench/bench_clients_behaviour.py --clients 400 --runs 4 --generations 2

Only loopback is used. Not part of the test run: numbers are measurements, not assertions.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_broker import Bench, raise_nofile  # noqa: E402

BASE = "fc8cffc"  # main when issue 24's clients work started

BEFORE = "before"
FIRST, STEADY, RESTARTED = "after, first round", "after", "after, all reconnected"
VARIANTS = (BEFORE, FIRST, STEADY, RESTARTED)


# ---------------------------------------------------------------- in a child process
def one_run(fleet: Any, check: Any, context: Any, carried: dict[str, Any] | None) -> Any:
    from fleetcheck.core.context import PatrolContext

    config = fleet.checks["clients"]
    if context is not None:
        ctx = context(fleet)
    elif carried is not None:
        ctx = PatrolContext(fleet, carried=carried)
    else:
        ctx = PatrolContext(fleet)  # BASE's context may not know `carried`
    ctx.broker()  # the connection and its PING are not the check's cost
    # every run starts from a collected heap: the collector then runs during the run as in
    # a patrol, and pays for what this run made, not for a full collection that the
    # garbage of earlier runs happened to trigger in this one
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    try:
        targets = check.targets(fleet, config)
        if hasattr(check, "probe_all"):  # all rows measured at once, as a patrol does
            measured = check.probe_all(ctx, targets, config)
            facts = [measured[t.name if t else None] for t in targets]
        else:  # a BASE from before probe_all
            facts = [check.probe(ctx, t, config) for t in targets]
        rows = [
            check.evaluate(f, config, t, ctx.clock()) for f, t in zip(facts, targets, strict=True)
        ]
    finally:
        took, cpu = time.perf_counter() - start, time.process_time() - cpu
        ctx.close()
    return (took, cpu), rows


def worker(config_path: Path, tree: str, label: str) -> int:
    """A child: the variant `label` of one tree (`tree` on sys.path first; "" for this
    checkout), one run per line read, one JSON line written per run."""
    if tree:
        sys.path.insert(0, tree)
    from fleetcheck.config import load
    from fleetcheck.core import registry

    fleet = load(config_path, registry.config_type, registry.host_config_types)
    new = registry.available()["clients"]
    measured: tuple[Any, Any, Any]  # (check, context class or None, carried state or None)
    if label in (BEFORE, FIRST):
        measured = (new, None, None)
    else:
        _, rows = one_run(fleet, new, None, None)
        carried = {f"clients|{r.host or ''}": r.carry for r in rows if r.carry}
        if label == RESTARTED:
            # the worst case apart: the previous round 15 minutes back, so every connection
            # is new since then (a fleet-wide restart: every host row says it reconnected)
            carried = {k: {**v, "at": v["at"] - 900.0} for k, v in carried.items()}
        measured = (new, None, carried)
    one_run(fleet, *measured)  # warmed up (imports, caches)
    # where the measured code came from (a tree's own, or this checkout's)
    import fleetcheck

    check_file = getattr(sys.modules[type(measured[0]).__module__], "__file__", None)
    code_from = [check_file or f"{BASE}: checks/clients.py", fleetcheck.__file__ or ""]
    print(json.dumps({"code_from": code_from}), flush=True)
    for _ in sys.stdin:  # a line: one run
        (took, cpu), rows = one_run(fleet, *measured)
        # host rows only: the broker-wide row of the steady state rightly sees the bench's
        # own churn (a fresh patrol connection a run, many runs a second)
        verdicts = [(r.host, r.status.label) for r in rows if r.host]
        print(json.dumps({"wall": took, "cpu": cpu, "verdicts": verdicts}), flush=True)
    return 0


# ---------------------------------------------------------------- the parent
class Child:
    def __init__(self, config: Path, tree: str, label: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", tree, "--config", str(config)]
            + ["--variant", label],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.code_from: list[str] = self.read()["code_from"]

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a bench child ended (exit {self.proc.wait()})")
        out: dict[str, Any] = json.loads(line)
        return out

    def run(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--generations", type=int, help="fresh processes this often (default: every round)"
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # child: a tree ("" for this one)
    ap.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        return worker(args.config, args.worker, args.variant)
    args.generations = min(args.generations or args.runs, args.runs)
    raise_nofile()

    bench = Bench(1000, args.clients, args.runs)
    children: list[Child] = []
    try:
        bench.start_redis()
        bench.fill()
        bench.open_clients()
        # a steady state's pools are older than the previous round (the warm-up in the
        # child, whose carry the steady state reads), as a pool's are between two patrols
        # (not a synchronisation: the wait is the age itself)
        time.sleep(3.0)
        config = bench.config()
        tree = str(bench.unpack(BASE))
        times: dict[str, list[float]] = {k: [] for k in VARIANTS}
        cpus: dict[str, list[float]] = {k: [] for k in VARIANTS}
        verdicts: dict[str, Any] = {}
        code_from: dict[str, list[str]] = {}
        order = list(VARIANTS)
        run = 0
        for generation in range(args.generations):
            # fresh processes for every variant each generation: one process's own luck moved
            # the same variant's median by up to 25 % from one process to the next (the same
            # code, one after another, a fixed hash seed or not, either core)
            by_label: dict[str, Child] = {}
            for label in VARIANTS:
                by_label[label] = Child(config, tree if label == BEFORE else "", label)
                children.append(by_label[label])
                code_from.setdefault(label, by_label[label].code_from)
            for _ in range(generation, args.runs, args.generations):
                # the order rotated run by run, so each variant follows each other one
                # equally often (the machine's state after one variant's run is the next's)
                turn = run % len(order)
                run += 1
                for label in order[turn:] + order[:turn]:
                    got = by_label[label].run()
                    times[label].append(got["wall"])
                    cpus[label].append(got["cpu"])
                    verdicts.setdefault(label, got["verdicts"])
            for child in by_label.values():
                child.close()
        if len({json.dumps(v) for v in verdicts.values()}) != 1:
            print(verdicts, file=sys.stderr)
            raise RuntimeError("the verdicts differ between the variants")
        base = statistics.median(times[BEFORE])
        base_cpu = statistics.median(cpus[BEFORE])
        out: dict[str, Any] = {
            "clients": args.clients,
            "runs": args.runs,
            "base": BASE,
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "statuses": sorted({s for _, s in verdicts[BEFORE]}),
            "generations": args.generations,
            "code_from": code_from,
        }
        for label, ts in times.items():
            med, cpu = statistics.median(ts), statistics.median(cpus[label])
            # each round's variants ran back to back in processes started together: the
            # ratio within a round cancels the machine's moment, its median over the rounds
            # (each a fresh set of processes by default) the processes' luck
            paired = statistics.median(t / b for t, b in zip(ts, times[BEFORE], strict=True))
            paired_cpu = statistics.median(
                c / b for c, b in zip(cpus[label], cpus[BEFORE], strict=True)
            )
            out[label] = {
                "paired_ratio_to_before": round(paired, 3),
                "paired_cpu_ratio_to_before": round(paired_cpu, 3),
                "median_s": round(med, 4),
                "best_s": round(min(ts), 4),
                "ratio_to_before": round(med / base, 3),
                "cpu_median_s": round(cpu, 4),
                "cpu_ratio_to_before": round(cpu / base_cpu, 3),
                "runs_s": [round(t, 4) for t in ts],
                "cpu_runs_s": [round(c, 4) for c in cpus[label]],
            }
            print(
                f"{label:<38} round by round: wall {paired:.3f}x, CPU {paired_cpu:.3f}x before;"
                f" medians: {med * 1000:5.1f} ms = {med / base:.3f}x,"
                f" CPU {cpu * 1000:5.1f} ms = {cpu / base_cpu:.3f}x before",
                flush=True,
            )
        for label, files in code_from.items():
            print(f"  {label}: {', '.join(files)}")
        if args.json:
            args.json.write_text(json.dumps(out, indent=2) + "\n")
        return 0
    finally:
        for child in children:
            child.close()
        bench.close()


if __name__ == "__main__":
    sys.exit(main())
