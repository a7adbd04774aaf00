"""Benchmark: `history.append` of two source trees side by side, at a week's end.

Each tree runs in a worker process of its own (its own package, e.g. `git archive REV | tar
-x -C DIR`, with `fleetcheck/checks` linked to `DIR/checks`): both build bench_history's
simulated fleet (same seed, so the same rounds) for --build rounds untimed through
`store.add_round`, then append the next --rounds rounds each through its own
`history.append`, the trees taking turns (the order alternating round by round) so both see
the machine's same moments; wall and CPU seconds timed in the worker. Then each times the
console's pages (bench_history.pages) on its week, one after the other.

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_history_trees.py \
        --before /tmp/tree-main --after . --build 576 --rounds 96 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def worker(tree: str, tmp: str, build: int) -> None:
    sys.path[:0] = [tree, f"{tree}/bench"]
    from datetime import timedelta

    import bench_history as bh

    from fleetcheck.core.model import Report
    from fleetcheck.rounds import history, store

    fleet = bh.Fleet(10000)
    path = Path(tmp) / "history.jsonl"

    def report(i: int) -> Report:
        at = bh.T0 + timedelta(minutes=15 * i)
        rows = bh.broker_rows(i, fleet.rng) + fleet.results()
        return Report(at.strftime("%Y-%m-%dT%H:%M:%S.000Z"), 12.0, tuple(rows))

    for i in range(build):
        r = report(i)
        db = store.connect(path, write=True)
        try:
            history.migrate(db, path)
            with store.transaction(db):
                store.add_round(db, history._line(r))
                store.expire(db, store.epoch(r.started_at))
        finally:
            db.close()
    print(json.dumps({"mb_built": bh.disk(path) / 1e6}), flush=True)
    i = build
    for line in sys.stdin:
        if line.strip() == "end":
            break
        r = report(i)
        i += 1
        wall, cpu = time.perf_counter(), time.process_time()
        history.append(r, path)
        took = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}
        print(json.dumps(took), flush=True)
    out: dict[str, Any] = {"mb": bh.disk(path) / 1e6}
    out["latest_mb"] = history.latest_path(path).stat().st_size / 1e6
    out.update(bh.pages(path, bh.T0 + timedelta(minutes=15 * (i - 1), seconds=30), fleet.hosts))
    print(json.dumps(out), flush=True)


def stats(v: list[float]) -> dict[str, float]:
    v = sorted(v)
    p95 = v[min(len(v) - 1, int(len(v) * 0.95))]
    return {"median_s": round(v[len(v) // 2], 3), "p95_s": round(p95, 3), "max_s": round(v[-1], 3)}


def main() -> None:
    if sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--before", required=True, help="a source tree")
    ap.add_argument("--after", required=True, help="another source tree")
    ap.add_argument("--build", type=int, default=576)
    ap.add_argument("--rounds", type=int, default=96)
    ap.add_argument("--json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fc-bench-trees-")
    res: dict[str, Any] = {"build": a.build, "rounds": a.rounds, "load_before": os.getloadavg()}
    procs = {}
    try:
        for name in ("before", "after"):
            tree = str(Path(getattr(a, name)).resolve())
            (Path(tmp) / name).mkdir()
            cmd = [sys.executable, __file__, "worker", tree, f"{tmp}/{name}", str(a.build)]
            procs[name] = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tree
            )
        for name, p in procs.items():
            assert p.stdout is not None
            res[name] = json.loads(p.stdout.readline())
        took: dict[str, list[dict[str, float]]] = {name: [] for name in procs}
        for k in range(a.rounds):
            for name in ("before", "after") if k % 2 == 0 else ("after", "before"):
                p = procs[name]
                assert p.stdin is not None and p.stdout is not None
                p.stdin.write("go\n")
                p.stdin.flush()
                took[name].append(json.loads(p.stdout.readline()))
        for name, p in procs.items():
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write("end\n")
            p.stdin.flush()
            res[name].update(json.loads(p.stdout.readline()))
            p.wait()
            res[name]["append_wall"] = stats([t["wall"] for t in took[name]])
            res[name]["append_cpu"] = stats([t["cpu"] for t in took[name]])
    finally:
        for p in procs.values():
            p.kill()
        shutil.rmtree(tmp)
    res["load_after"] = os.getloadavg()
    print(json.dumps(res, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
