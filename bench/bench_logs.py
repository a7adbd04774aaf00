"""Benchmark: what one journal source per host adds to a patrol's client CPU (issue 12's
target: at most 10 % more per host), measured in one run on the same lab hosts.

Two configs over N lab hosts (real sshd in namespaces), patrolled in alternation for R rounds:
`base` is bench_ssh.py's patrol (one 200-line text log per host, logs + routes checks);
`journal` adds one journal source per host (`journal = "worker.service"`, reading the default
300 newest of 1,000 entries from a real journal file written by systemd-journal-remote, a few
of them PRIORITY 3). Reported: client CPU (user+sys of the `fleetcheck run` process) per host,
whole (start-up included, as bench_ssh.py reports it) and marginal (minus a one-host patrol's
CPU, i.e. without the interpreter's start-up), the medians and their ratios.

Not part of the test run. Needs root and the lab prerequisites. Run under the bench lock:

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_logs.py --hosts 40 --rounds 5

`--formats` instead measures the format library's cost per tail (issue 25: at most 2x
today's parser), no lab needed: for a 200-line tail of each format of the corpus
(tests/log_corpus), the client CPU to find the newest stamps with the format detected from
the tail (detection included) against the parser before the library (`find_stamp` on each
line, taken from git at --before, run in the same process and the same run):

    .venv/bin/python bench/bench_logs.py --formats --before 057231a
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_ssh import measure  # noqa: E402
from tests.lab import Lab, write_journal  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def wire_cost(journal: Path) -> dict[str, float]:
    """What the journal source adds per host, measured without the machine's noise: the
    bytes its fragment prints (run here by /bin/sh against the same journal) and the client
    CPU (thread time) to parse and judge them, median of 2,000 runs."""
    from fleetcheck.checks.logs import CHECK, LogsConfig, LogsFacts, journal_fragment

    from fleetcheck.config import HostConfig
    from fleetcheck.core.hostfacts import LogsHostConfig, LogSpec
    from fleetcheck.parse.journal import parse_journal_facts

    spec = LogSpec(journal="worker.service", journal_dir=str(journal))
    host = HostConfig(name="h", ssh="local").with_settings(LogsHostConfig(logs=(spec,)))
    out = subprocess.run(
        ["/bin/sh", "-c", journal_fragment(spec)], capture_output=True, check=True
    ).stdout
    text = out.decode()
    now = datetime.now(UTC)
    times = []
    for _ in range(2000):
        t0 = time.thread_time()
        jf = parse_journal_facts(spec.label, 0, text)
        CHECK.evaluate(LogsFacts((jf,), 0.0), LogsConfig(), host, now)
        times.append(time.thread_time() - t0)
    return {"fragment_bytes": len(out), "parse_and_judge_us": statistics.median(times) * 1e6}


def tails() -> dict[str, list[str]]:
    """A 200-line tail of each corpus file: its lines repeated, CR stripped as judging does."""
    corpus = ROOT / "tests" / "log_corpus"
    out = {}
    for path in sorted(corpus.glob("*.log")):
        lines = [line.removesuffix("\r") for line in path.read_text().split("\n") if line]
        out[path.stem] = (lines * (200 // len(lines) + 1))[:200]
    return out


def format_cost(before: str, repeat: int) -> dict[str, Any]:
    """Per corpus format: microseconds of thread CPU per 200-line tail, new and old (medians
    of `repeat` runs, the two interleaved so both see the same machine), and the ratio."""
    from fleetcheck.checks.logs.reading import newest_stamped

    from bench.at_revision import module_at
    from fleetcheck.parse.logformats import detect

    old = module_at(before, "fleetcheck/parse/timestamps.py", "timestamps_before")
    rows: dict[str, Any] = {}
    for name, lines in tails().items():
        new_t, old_t = [], []
        for _ in range(repeat):
            t0 = time.thread_time()
            newest_stamped(lines, detect(lines).find)
            t1 = time.thread_time()
            newest_stamped(lines, old.find_stamp)
            t2 = time.thread_time()
            new_t.append(t1 - t0)
            old_t.append(t2 - t1)
        new_us, old_us = statistics.median(new_t) * 1e6, statistics.median(old_t) * 1e6
        rows[name] = {
            "format": detect(lines).format.name if detect(lines).format else None,
            "new_us": round(new_us, 1),
            "old_us": round(old_us, 1),
            "ratio": round(new_us / old_us, 3),
        }
    return rows


def formats_main(before: str, repeat: int, json_path: str | None) -> None:
    rows = format_cost(before, repeat)
    print(f"# per 200-line tail, thread CPU, median of {repeat}; old = find_stamp at {before}")
    print("| corpus file | detected | library us | old parser us | ratio |")
    print("|---|---|---|---|---|")
    for name, r in rows.items():
        print(
            f"| {name} | {r['format']} | {r['new_us']:.0f} | {r['old_us']:.0f} | {r['ratio']:.2f} |"
        )
    ratios = [r["ratio"] for r in rows.values()]
    worst = max(ratios)
    print(
        f"# ratio median x{statistics.median(ratios):.2f}, worst x{worst:.2f}; "
        "target <= x2: " + ("MET" if worst <= 2 else "MISSED")
    )
    if json_path:
        Path(json_path).write_text(json.dumps({"before": before, "tails": rows}, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="also write the numbers to this file")
    ap.add_argument("--formats", action="store_true", help="the format library's cost per tail")
    ap.add_argument("--before", default="057231a", help="--formats: the parser to compare with")
    ap.add_argument("--repeat", type=int, default=200, help="--formats: runs per tail")
    a = ap.parse_args()
    if a.formats:
        formats_main(a.before, a.repeat, a.json)
        return
    with Lab() as lab:
        hosts = [lab.add_host(f"h{i:03d}") for i in range(a.hosts)]
        now = datetime.now(UTC)
        log = lab.dir / "bench.log"  # one path for every host (namespaces share the fs)
        log.write_text(f"{now:%Y-%m-%dT%H:%M:%S}Z tick\n" * 200)
        journal = lab.dir / "journal"
        entries: list[dict[str, str | bytes | int]] = [
            {
                "__REALTIME_TIMESTAMP": int((now - timedelta(seconds=1000 - i)).timestamp() * 1e6),
                "_SYSTEMD_UNIT": "worker.service",
                "SYSLOG_IDENTIFIER": "worker",
                "PRIORITY": 3 if i % 250 == 0 else 6,
                "MESSAGE": f"pulled job {i} from arena:rater:inbox in 12 ms",
            }
            for i in range(1000)
        ]
        write_journal(journal, entries)
        base_extra = f'tz = "UTC"\n[[hosts.logs]]\npath = "{log}"\n'
        journal_extra = (
            base_extra + f'[[hosts.logs]]\njournal = "worker.service"\njournal_dir = "{journal}"\n'
        )

        def config(extra: str, subset: list[Any] | None = None) -> Path:
            path = lab.config(
                checks="[checks.logs]\n[checks.routes]\n",
                host_extra={h.name: extra for h in hosts},
                hosts=subset,
            )
            text = path.read_text().replace('command_timeout = "5s"', 'command_timeout = "60s"')
            # the lab's sshds share the client's cores: room for handshakes under load
            path.write_text(text.replace('connect_timeout = "3s"', 'connect_timeout = "30s"'))
            return path

        configs = {
            "base": (config(base_extra), config(base_extra, hosts[:1])),
            "journal": (config(journal_extra), config(journal_extra, hosts[:1])),
        }
        wire = wire_cost(journal)
        cli = [str(ROOT / ".venv/bin/fleetcheck"), "run", "--format", "json", "-c"]
        for name, (full, _) in configs.items():  # correctness first
            _, _, out = measure([*cli, str(full)])
            bad = [r for r in json.loads(out)["results"] if r["status"] != "OK"]
            if bad:
                raise SystemExit(f"{name} patrol not clean: {bad[:2]}")
        cpu: dict[str, list[float]] = {k: [] for k in configs}
        single: dict[str, list[float]] = {k: [] for k in configs}
        wall: dict[str, list[float]] = {k: [] for k in configs}
        for r in range(a.rounds):  # alternate which config goes first
            order = list(configs.items())
            for name, (full, one) in order if r % 2 == 0 else order[::-1]:
                w, c, _ = measure([*cli, str(full)])
                cpu[name].append(c)
                wall[name].append(w)
                _, c1, _ = measure([*cli, str(one)])
                single[name].append(c1)

    n = a.hosts
    med = statistics.median
    summary: dict[str, Any] = {}
    for name in configs:
        per_host = med(cpu[name]) / n * 1000
        marginal = (med(cpu[name]) - med(single[name])) / (n - 1) * 1000
        summary[name] = {
            "client_cpu_ms_per_host": round(per_host, 2),
            "marginal_client_cpu_ms_per_host": round(marginal, 2),
            "one_host_patrol_cpu_ms": round(med(single[name]) * 1000, 1),
            "wall_s": round(med(wall[name]), 3),
        }
    growth = (
        summary["journal"]["client_cpu_ms_per_host"] / summary["base"]["client_cpu_ms_per_host"]
    )
    growth_marginal = (
        summary["journal"]["marginal_client_cpu_ms_per_host"]
        / summary["base"]["marginal_client_cpu_ms_per_host"]
    )
    # the same comparison paired round by round (both patrols a few seconds apart), whose
    # median is less exposed to the load other work puts on a shared machine
    paired = med(j / b for j, b in zip(cpu["journal"], cpu["base"], strict=True))
    print(f"# {n} hosts, {a.rounds} rounds, {os.cpu_count()} cores; medians")
    print(
        f"# journal fragment: {wire['fragment_bytes']} bytes per host on the wire; parse and "
        f"judge {wire['parse_and_judge_us']:.0f} us of client CPU"
    )
    print("| config | client CPU ms/host | marginal ms/host | 1-host patrol CPU ms | wall s |")
    print("|---|---|---|---|---|")
    for name, s in summary.items():
        print(
            f"| {name} | {s['client_cpu_ms_per_host']:.2f} | "
            f"{s['marginal_client_cpu_ms_per_host']:.2f} | {s['one_host_patrol_cpu_ms']:.0f} | "
            f"{s['wall_s']:.2f} |"
        )
    print(
        f"# one journal source per host: client CPU per host x{growth:.3f} "
        f"(marginal x{growth_marginal:.3f}; per-round paired ratio, median x{paired:.3f}); "
        "target <= x1.10: " + ("MET" if growth <= 1.10 else "MISSED")
    )
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {
                    "hosts": n,
                    "rounds": a.rounds,
                    "cores": os.cpu_count(),
                    "configs": summary,
                    "growth_per_host": round(growth, 4),
                    "growth_marginal_per_host": round(growth_marginal, 4),
                    "growth_paired_median": round(paired, 4),
                    "journal_fragment_bytes": wire["fragment_bytes"],
                    "journal_parse_and_judge_us": round(wire["parse_and_judge_us"], 1),
                    "patrol_cpu_s": {k: [round(c, 3) for c in v] for k, v in cpu.items()},
                    "when": datetime.now(UTC).isoformat(timespec="seconds"),
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
