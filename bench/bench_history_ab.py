"""Benchmark: appending a round at a week's end, the tree before a change against this one
(issue 29: "appending a round at most 0.5 s").

Builds the history of bench_history's simulated fleet (--hosts hosts, 3 checks each, 2
broker-wide rows) to --build-rounds rounds untimed (this tree's store, no newest-round file),
then appends the next --rounds rounds twice in one process, each round's one report: by
`store.py` and `history.py` as they were at --before (bench/at_revision.py) to one copy of the
database, by this tree to another, the order alternating round by round, so that both see the
same rounds on the same machine at the same moments. Each append as `history.append` does it
(the rows made, the document made by the revision's `Report`, the store's transaction, its
keys file when it keeps one, the newest round's file), collector held, timed in
wall and CPU seconds; the rows each copy stored are counted (they must be equal).

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_history_ab.py --hosts 10000 \
        --build-rounds 480 --rounds 192 --before d73f891 \
        --json bench/history_append_week_end_results.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_history as bh  # noqa: E402
from at_revision import module_at  # noqa: E402

from fleetcheck import collector  # noqa: E402
from fleetcheck.core import model  # noqa: E402
from fleetcheck.core.model import Report  # noqa: E402
from fleetcheck.rounds import history, store  # noqa: E402


def report_of(fleet: bh.Fleet, i: int) -> Report:
    at = bh.T0 + timedelta(minutes=15 * i)
    results = bh.broker_rows(i, fleet.rng) + fleet.results()
    return Report(at.strftime("%Y-%m-%dT%H:%M:%S.000Z"), 12.0, tuple(results))


def append(report: Report, path: Path, st: Any, hi: Any, md: Any) -> None:
    """`history._append` (this tree's itself; a revision's as it was, with the given store,
    history and model modules; no lock file):
    the report made the given model's, its rows as `Result.to_dict` makes them; the keys
    file written after the commit where the store keeps one."""
    with collector.paused():
        if hi is history:  # this tree: its own append, as a patrol's (without the lock file)
            history._append(report, path)
            return
        rows = [r.to_dict() for r in report.results]
        doc = md.Report(report.started_at, report.duration_s, report.results).to_dict(rows)
        line = {"started_at": report.started_at, "duration_s": 12.0, "status": doc["status"]}
        line["rows"] = rows
        kept = None
        db = st.connect(path, write=True)
        try:
            hi.migrate(db, path)
            with st.transaction(db):
                if hasattr(st, "keys_path"):
                    kept = st.add_round(db, line, keys_file=st.keys_path(path))
                else:
                    st.add_round(db, line)
                st.expire(db, st.epoch(line["started_at"]))
        finally:
            db.close()
        if kept is not None:
            kept.write()
        hi.write_latest(doc, hi.latest_path(path))


def stats(v: list[float]) -> dict[str, float]:
    v = sorted(v)
    p95 = v[min(len(v) - 1, int(len(v) * 0.95))]
    return {"median_s": round(v[len(v) // 2], 3), "p95_s": round(p95, 3), "max_s": round(v[-1], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--build-rounds", type=int, default=480)
    ap.add_argument("--rounds", type=int, default=192)
    ap.add_argument("--before", required=True, help="the revision to compare with")
    ap.add_argument("--json")
    a = ap.parse_args()
    old = (
        module_at(a.before, "fleetcheck/rounds/store.py", "before_store"),
        module_at(a.before, "fleetcheck/rounds/history.py", "before_history"),
        module_at(a.before, "fleetcheck/core/model.py", "before_model"),
    )
    fleet = bh.Fleet(a.hosts)
    with tempfile.TemporaryDirectory(prefix="fc-bench-ab-") as tmp:
        built = Path(tmp) / "built" / "history.jsonl"
        t = time.perf_counter()
        for i in range(a.build_rounds):
            report = report_of(fleet, i)
            with collector.paused():
                db = store.connect(built, write=True)
                try:
                    history.migrate(db, built)
                    with store.transaction(db):
                        store.add_round(db, history._line(report))
                        store.expire(db, bh.T0.timestamp() + 900 * i)
                finally:
                    db.close()
        print(f"built {a.build_rounds} rounds in {time.perf_counter() - t:.0f} s", flush=True)
        paths = {}
        for name in ("before", "after"):
            shutil.copytree(built.parent, Path(tmp) / name)
            paths[name] = Path(tmp) / name / "history.jsonl"
        mods = {"before": old, "after": (store, history, model)}
        wall: dict[str, list[float]] = {"before": [], "after": []}
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        load_before = list(os.getloadavg())
        for i in range(a.build_rounds, a.build_rounds + a.rounds):
            report = report_of(fleet, i)
            for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
                w, c = time.perf_counter(), time.process_time()
                append(report, paths[name], *mods[name])
                wall[name].append(time.perf_counter() - w)
                cpu[name].append(time.process_time() - c)
        res: dict[str, Any] = {
            "hosts": a.hosts,
            "from_round": a.build_rounds,
            "rounds": a.rounds,
            "before_rev": a.before,
            "load_before": load_before,
            "load_after": list(os.getloadavg()),
        }
        for name, path in paths.items():
            db = sqlite3.connect(store.db_path(path))
            (stored,) = db.execute("SELECT count(*) FROM rows").fetchone()
            db.close()
            res[name] = {
                "append_wall": stats(wall[name]),
                # from the third round on: a store whose signatures have another form than
                # the built history's stores every row once more on its first round
                "append_wall_from_third": stats(wall[name][2:]),
                "append_cpu": stats(cpu[name]),
                "rows_stored": stored,
            }
    print(json.dumps(res, indent=1))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
