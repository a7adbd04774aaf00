"""CLIENT LIST read at 10,000 clients: the reader before issue 43 (a column-wise regex pass
with a line-by-line fallback, loaded from git at BEFORE) and the one reader now, alternating
run by run in one process, each run from a collected heap.

The list is generated offline in a Redis 7.2 line's shape (every field, lib-name and
lib-ver; ~310 bytes a line), as bench_broker's fleet shows it: 100 hosts (127.0.1.1-100),
two client names a host, idle times over 0-10 s, ages over minutes, one client in four
blocked. Two things are timed, as bytes (what redis-py hands over):

- `table`: read_client_table + without_own + every question the clients check asks for a
  patrol of 100 host rows and the broker row (facts_of);
- `clients`: parse_client_list, the Client rows rater_probe and discover read.

The answers must be equal (checked). Numbers are measurements, not assertions.

    .venv/bin/python bench/bench_clientlist.py                  # 10,000 clients, 21 runs
    .venv/bin/python bench/bench_clientlist.py --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from at_revision import module_at  # noqa: E402

BEFORE = "9ddf95b"  # main before issue 43's part 4 (two readers)
LINE = (
    "id={id} addr=127.0.1.{h}:{port} laddr=127.0.0.1:6379 fd={fd} name=worker-{h}-{n} "
    "age={age} idle={idle} flags={flags} db=0 sub=0 psub=0 ssub=0 multi=-1 watch=0 qbuf=0 "
    "qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 "
    "events=r cmd={cmd} user=default redir=-1 resp=2 lib-name=redis-py lib-ver=5.0.1"
)
OWN_ID = 3  # the patrol's own connection (first line)


def client_list(n: int) -> bytes:
    rng = random.Random(43)
    lines = []
    for i in range(n):
        h = i % 100 + 1
        blocked = rng.random() < 0.25
        lines.append(
            LINE.format(
                id=OWN_ID + i,
                h=h,
                port=30000 + i,
                fd=8 + i,
                n=i % 2,
                age=rng.randint(100, 5000),
                idle=rng.randint(0, 10),
                flags="b" if blocked else "N",
                cmd="blmove" if blocked else "ping",
            )
        )
    return ("\n".join(lines) + "\n").encode()


def table_questions(reader: Any, raw: bytes) -> list[Any]:
    """What one patrol of the clients check asks of the table (without evaluate)."""
    from fleetcheck.checks.clients.check import facts_of

    table = reader.read_client_table(raw).without_own(OWN_ID)
    hosts = [f"127.0.1.{h}" for h in range(1, 101)]
    claimed = frozenset(hosts)
    rows = [facts_of(table, claimed, {h}) for h in hosts]
    return [*rows, facts_of(table, claimed, None)]


def timed(fn: Any) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from fleetcheck.parse import clientlist as after

    before = module_at(BEFORE, "fleetcheck/parse/clientlist.py", "bench43_old_clientlist")
    raw = client_list(args.clients)
    readers = {"before": before, "after": after}
    times: dict[str, dict[str, list[float]]] = {k: {"table": [], "clients": []} for k in readers}
    answers: dict[str, Any] = {}
    for _ in range(args.runs):
        for label, reader in readers.items():
            t, facts = timed(lambda r=reader: table_questions(r, raw))
            times[label]["table"].append(t)
            t, rows = timed(lambda r=reader: r.parse_client_list(raw))
            times[label]["clients"].append(t)
            answers[label] = (facts, [(c.id, c.host, c.port, c.name, c.cmd) for c in rows])
    if answers["before"] != answers["after"]:
        raise RuntimeError("the readers answer differently")

    tracemalloc.start()
    table = after.read_client_table(raw)
    table.groups()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del table

    out: dict[str, Any] = {"clients": args.clients, "reply_bytes": len(raw), "runs": args.runs}
    for label in readers:
        for what, ts in times[label].items():
            out[f"{label} {what}"] = {
                "median_ms": round(statistics.median(ts) * 1e3, 1),
                "best_ms": round(min(ts) * 1e3, 1),
            }
    for what in ("table", "clients"):
        ratio = statistics.median(
            a / b for a, b in zip(times["after"][what], times["before"][what], strict=True)
        )
        out[f"after / before, {what} (median of the runs' ratios)"] = round(ratio, 2)
    out["after table: held MB, peak MB (tracemalloc)"] = [
        round(held / 2**20, 1),
        round(peak / 2**20, 1),
    ]
    out["after table, share of a 15-minute round"] = (
        f"{statistics.median(times['after']['table']) / 900:.6%}"
    )
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
