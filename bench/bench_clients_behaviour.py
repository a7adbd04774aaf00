"""The clients check before and after issue 24 (connection behaviour: age and flags read in
the same pass, quiet times, clients by age, waiting clients, name patterns, reconnects, churn
from INFO), end to end at 10,000 clients, in the same run.

The broker and the clients are bench_broker's (its own redis-server on loopback, 10,000
connections from 100 loopback hosts, two names a host, idle times spread over 0-10 s by
PINGs). Four variants, their order rotated run by run, each through a fresh patrol context
(connection and its PING not counted): `before` (checks/clients.py and
fleetcheck/parse/clientlist.py as at BASE, loaded from git), `after, first round` (no state),
`after` (the steady state: every row's carry from a previous round, as the state file
hands it over, the pools older than that round; its broker-wide row WARNs, rightly, about
the bench's own connection churn: a fresh patrol connection per run, several runs a
second) and `after, all reconnected` (the worst case: the previous round 15 minutes back,
so every connection is new since it and every host row reports a reconnect). The after
variants read INFO too (the churn counter), which a patrol with the broker check shares;
here it is counted against them. The host rows' verdicts must be equal.

    .venv/bin/python bench/bench_clients_behaviour.py                # 10,000 clients, 15 runs
    .venv/bin/python bench/bench_clients_behaviour.py --clients 400 --runs 3   # seconds

Only loopback is used. Not part of the test run: numbers are measurements, not assertions.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_broker import Bench, raise_nofile, table_context  # noqa: E402

BASE = "fc8cffc"  # main when issue 24's clients work started


def old_check() -> tuple[Any, Any]:
    from at_revision import module_at
    from fleetcheck.checks import clients as now

    reader = module_at(BASE, "fleetcheck/parse/clientlist.py", "bench24_old_reader")
    check: Any = module_at(BASE, "checks/clients.py", "bench24_old_clients")
    # the fleet's settings are keyed by today's config classes (the old fields are there)
    check.ClientsConfig, check.ClientsHostConfig = now.ClientsConfig, now.ClientsHostConfig
    check.normalise_ip = reader.normalise_ip
    return check.CHECK, table_context(reader)


def one_run(fleet: Any, check: Any, context: Any, carried: dict[str, Any] | None) -> Any:
    from fleetcheck.core.context import PatrolContext

    config = fleet.checks["clients"]
    ctx = context(fleet) if context is not None else PatrolContext(fleet, carried=carried)
    ctx.broker()  # the connection and its PING are not the check's cost
    # every run starts from a collected heap: the collector then runs during the run as in
    # a patrol, and pays for what this run made, not for a full collection that the
    # garbage of earlier runs (of any variant) happened to trigger in this one
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    try:
        rows = [
            check.evaluate(check.probe(ctx, t, config), config, t, ctx.clock())
            for t in check.targets(fleet, config)
        ]
    finally:
        took, cpu = time.perf_counter() - start, time.process_time() - cpu
        ctx.close()
    return (took, cpu), rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    raise_nofile()
    from fleetcheck.config import load
    from fleetcheck.core import registry

    bench = Bench(1000, args.clients, args.runs)
    try:
        bench.start_redis()
        bench.fill()
        bench.open_clients()
        # a steady state's pools are older than the previous round (the warm-up below,
        # whose carry the steady state reads): their ages then fall outside the check's
        # horizon (the interval plus HORIZON_SLACK), as a pool's do between two patrols
        # (not a synchronisation: the wait is the age itself)
        new = registry.available()["clients"]
        time.sleep(sys.modules[type(new).__module__].HORIZON_SLACK + 1.0)
        fleet = load(bench.config(), registry.config_type, registry.host_config_types)
        before, before_ctx = old_check()
        _, rows = one_run(fleet, new, None, None)
        one_run(fleet, before, before_ctx, None)  # both warmed up (imports, caches)
        carried = {f"clients|{r.host or ''}": r.carry for r in rows if r.carry}
        # the worst case apart: the previous round 15 minutes back, so every connection is
        # new since then (a fleet-wide restart: every host row says it reconnected)
        restarted = {k: {**v, "at": v["at"] - 900.0} for k, v in carried.items()}
        variants = {
            "before": (before, before_ctx, None),
            "after, first round": (new, None, None),
            "after": (new, None, carried),
            "after, all reconnected": (new, None, restarted),
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        cpus: dict[str, list[float]] = {k: [] for k in variants}
        verdicts: dict[str, Any] = {}
        order = list(variants.items())
        for run in range(args.runs):
            # the order rotated run by run, so each variant follows each other one equally
            # often: the run right after `before` pays ~1,300 page faults (the allocator's
            # memory handed back between runs, ~2-3 ms), which a fixed order always gave
            # to the same variant
            turn = run % len(order)
            for label, (check, context, carry) in order[turn:] + order[:turn]:
                (took, cpu), rows = one_run(fleet, check, context, carry)
                times[label].append(took)
                cpus[label].append(cpu)
                # host rows only: the broker-wide row of the steady state rightly sees the
                # bench's own churn (a fresh patrol connection a run, many runs a second)
                verdicts.setdefault(label, [(r.host, r.status.label) for r in rows if r.host])
        if len({json.dumps(v) for v in verdicts.values()}) != 1:
            print(verdicts, file=sys.stderr)
            raise RuntimeError("the verdicts differ between the variants")
        base = statistics.median(times["before"])
        base_cpu = statistics.median(cpus["before"])
        out: dict[str, Any] = {
            "clients": args.clients,
            "runs": args.runs,
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "statuses": sorted({s for _, s in verdicts["before"]}),
        }
        for label, ts in times.items():
            med, cpu = statistics.median(ts), statistics.median(cpus[label])
            out[label] = {
                "median_s": round(med, 4),
                "best_s": round(min(ts), 4),
                "ratio_to_before": round(med / base, 3),
                "cpu_median_s": round(cpu, 4),
                "cpu_ratio_to_before": round(cpu / base_cpu, 3),
                "runs_s": [round(t, 4) for t in ts],
            }
            print(
                f"{label:<20} {med * 1000:7.1f} ms (best {min(ts) * 1000:.1f} ms)"
                f" = {med / base:.3f}x before; CPU {cpu * 1000:.1f} ms = {cpu / base_cpu:.3f}x",
                flush=True,
            )
        if args.json:
            args.json.write_text(json.dumps(out, indent=2) + "\n")
        return 0
    finally:
        bench.close()


if __name__ == "__main__":
    sys.exit(main())
