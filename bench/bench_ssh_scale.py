"""Benchmark: the SSH side of a patrol at fleet scale, on one lab built once per run.

In one run, on N lab hosts (network namespaces, each its own OpenSSH sshd; all share this
machine's cores, so they are slow under load, like a real fleet on a bad day):

1. small fleet (default 50 hosts): the fleetcheck CLI (default settings) against a bare
   threaded-paramiko reference (one thread per host: connect, auth, exec of the SAME gathered
   script, read, close; the reference imports paramiko only). Wall and client CPU per host,
   alternating, median of --rounds.
2. N hosts (default 600), default settings (adaptive, concurrency bound 128) against a sweep
   of fixed concurrency (`[patrol] adaptive = false`, concurrency 8..128): share of rows with
   a real verdict (not UNKNOWN) and wall.
3. 3 x N host entries (three per sshd), default settings: real verdicts, wall against the
   N-host run, peak RSS, and open file descriptors sampled every 20 ms.

Every patrol gets `[patrol] deadline = "600s"` (the default 60 s would cut the big runs: the
deadline is not what is measured) and the lab's [ssh] defaults but for the timeouts, which are
fleetcheck's defaults (connect 5 s, command 10 s). Needs root and the lab prerequisites. Run it
under the bench lock:

    flock /tmp/fleetcheck-bench.lock .venv/bin/python bench/bench_ssh_scale.py \
        --json bench/ssh_scale_results.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.lab import Lab  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PY = str(ROOT / ".venv/bin/python")

REFERENCE = textwrap.dedent(
    """\
    import json, sys, threading, time, resource
    import paramiko
    hosts, key_path, kh, script = sys.argv[1].split(","), sys.argv[2], sys.argv[3], sys.argv[4]
    script = open(script).read()
    key = paramiko.Ed25519Key.from_private_key_file(key_path)
    known = paramiko.HostKeys(kh)
    out = {}
    def one(addr):
        try:
            t = paramiko.Transport((addr, 22))
            t.start_client(timeout=30)
            k = t.get_remote_server_key()
            if known.lookup(addr) is None or known.lookup(addr).get(k.get_name()) != k:
                raise RuntimeError("host key")
            t.auth_publickey("root", key)
            ch = t.open_session()
            ch.exec_command("/bin/sh -s")
            ch.sendall(script.encode())
            ch.shutdown_write()
            data = b""
            while True:
                chunk = ch.recv(65536)
                if not chunk:
                    break
                data += chunk
            out[addr] = ch.recv_exit_status()
            t.close()
        except Exception as e:
            out[addr] = repr(e)
    cpu0, t0 = time.process_time(), time.monotonic()
    threads = [threading.Thread(target=one, args=(h,)) for h in hosts]
    for t in threads: t.start()
    for t in threads: t.join()
    print(json.dumps({"ok": sum(1 for v in out.values() if v == 0), "n": len(hosts),
                      "wall_s": time.monotonic() - t0, "cpu_s": time.process_time() - cpu0}))
    """
)

# The patrol proper, in-process, timed after the imports (like the reference above): what
# fleetcheck adds per host, without the CLI's interpreter start-up and imports.
INPROCESS = textwrap.dedent(
    """    import json, sys, time
    from fleetcheck.core import registry, runner
    from fleetcheck.config import load
    from fleetcheck.transport.ssh.lazy import load_paramiko
    load_paramiko()
    fleet = load(sys.argv[1], registry.config_type, registry.host_config_types)
    items = runner.plan(fleet, registry.available())
    cpu0, t0 = time.process_time(), time.monotonic()
    report = runner.run_patrol(fleet, items)
    wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    ok = sum(1 for r in report.results if r.status.label == "OK")
    print(json.dumps({"ok": ok, "n": len(report.results), "wall_s": wall, "cpu_s": cpu}))
    """
)


def run_measured(args: list[str], sample_fds: bool = False) -> dict[str, Any]:
    """Run a process; wall, its own CPU (user+sys, children included), peak RSS, max fds."""
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    max_fds = [0]
    stop = threading.Event()

    def sample() -> None:
        fd_dir = f"/proc/{proc.pid}/fd"
        while not stop.is_set():
            try:
                max_fds[0] = max(max_fds[0], len(os.listdir(fd_dir)))
            except OSError:
                pass
            stop.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    if sample_fds:
        sampler.start()
    assert proc.stdout is not None and proc.stderr is not None
    out_chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    err = proc.stderr.read()
    reader.join()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    stop.set()
    return {
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "max_rss_mb": ru.ru_maxrss / 1024,
        "max_fds": max_fds[0],
        "rc": proc.returncode,
        "stdout": b"".join(out_chunks).decode(errors="replace"),
        "stderr": err.decode(errors="replace")[-2000:],
    }


def patrol(config: Path, sample_fds: bool = False) -> dict[str, Any]:
    r = run_measured(
        [PY, "-m", "fleetcheck", "run", "-c", str(config), "--format", "json", "--no-state"],
        sample_fds=sample_fds,
    )
    try:
        report = json.loads(r["stdout"])
    except json.JSONDecodeError:
        raise SystemExit(f"patrol failed: {r['stderr']}") from None
    rows = report["results"]
    unknown = [x for x in rows if x["status"] == "UNKNOWN"]
    reasons: dict[str, int] = {}
    for x in unknown:
        key = x["summary"][:90]
        reasons[key] = reasons.get(key, 0) + 1
    r.update(
        rows=len(rows),
        real=len(rows) - len(unknown),
        real_pct=100.0 * (len(rows) - len(unknown)) / max(1, len(rows)),
        unknown_reasons=dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:5]),
        notes=report.get("notes", []),
        duration_s=report["duration_s"],
    )
    del r["stdout"]
    return r


def write_config(lab: Lab, hosts: list[Any], copies: int, patrol_extra: str) -> Path:
    path = lab.config(checks="[checks.routes]\n", hosts=hosts, patrol=patrol_extra)
    text = path.read_text()
    # fleetcheck's own defaults for the timeouts (the lab's are shorter)
    text = text.replace('connect_timeout = "3s"\n', "").replace('command_timeout = "5s"\n', "")
    if copies > 1:
        head, sep, rest = text.partition("[[hosts]]")
        blocks = [sep + b for b in rest.split("[[hosts]]") if b.strip()]
        tail = ""
        last = blocks[-1]
        if "[checks" in last:
            idx = last.index("[checks")
            blocks[-1], tail = last[:idx], last[idx:]
        out = [head]
        for c in range(copies):
            for b in blocks:
                out.append(b.replace('name = "', f'name = "c{c}-', 1))
        text = "".join(out) + tail
    path.write_text(text)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--hosts", type=int, default=600)
    ap.add_argument("--small", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sweep", default="8,16,32,64,128")
    ap.add_argument("--json", help="also write the numbers to this file")
    a = ap.parse_args()
    deadline = 'deadline = "600s"\n'
    results: dict[str, Any] = {"hosts": a.hosts, "small_hosts": a.small, "cores": os.cpu_count()}
    with Lab(prefix=22) as lab:
        t0 = time.monotonic()
        hosts = [lab.add_host(f"h{i:03d}") for i in range(a.hosts)]
        results["setup_s"] = time.monotonic() - t0
        print(f"# lab: {a.hosts} hosts in {results['setup_s']:.0f}s", flush=True)

        # 1. small fleet against bare threaded paramiko
        small = hosts[: a.small]
        small_cfg = write_config(lab, small, 1, deadline)
        from fleetcheck.config import load
        from fleetcheck.core import registry, runner
        from fleetcheck.transport.gather import build_gather_script

        fleet = load(small_cfg, registry.config_type, registry.host_config_types)
        frags = runner.fragments_for(runner.plan(fleet, registry.available()), fleet)
        script = lab.dir / "gather.sh"
        script.write_text(build_gather_script("0" * 16, frags(fleet.hosts[0])))
        ref_args = [
            PY, "-c", REFERENCE, ",".join(h.addr for h in small), str(lab.client_key),
            str(lab.known_hosts), str(script),
        ]  # fmt: skip
        ours, ref, inproc = [], [], []
        for _ in range(a.rounds):
            ours.append(patrol(small_cfg))
            r = run_measured(ref_args)
            got = json.loads(r["stdout"])
            if got["ok"] != a.small:
                raise SystemExit(f"reference failed: {got} {r['stderr']}")
            ref.append({**r, "timed": got})
            r = run_measured([PY, "-c", INPROCESS, str(small_cfg)])
            got = json.loads(r["stdout"])
            if got["ok"] != a.small:
                raise SystemExit(f"in-process patrol failed: {got} {r['stderr']}")
            inproc.append(got)
        med = statistics.median
        k = 1000 / a.small
        small_res = {
            "fleetcheck_wall_s": med(x["wall_s"] for x in ours),
            "fleetcheck_cpu_ms_per_host": med(x["cpu_s"] for x in ours) * k,
            "fleetcheck_real_pct": min(x["real_pct"] for x in ours),
            "reference_wall_s": med(x["wall_s"] for x in ref),
            "reference_cpu_ms_per_host": med(x["cpu_s"] for x in ref) * k,
            "patrol_after_imports_wall_s": med(x["wall_s"] for x in inproc),
            "patrol_after_imports_cpu_ms_per_host": med(x["cpu_s"] for x in inproc) * k,
            "reference_after_imports_wall_s": med(x["timed"]["wall_s"] for x in ref),
            "reference_after_imports_cpu_ms_per_host": med(x["timed"]["cpu_s"] for x in ref) * k,
        }
        small_res["wall_ratio"] = (
            small_res["patrol_after_imports_wall_s"] / small_res["reference_after_imports_wall_s"]
        )
        small_res["cpu_ratio"] = (
            small_res["patrol_after_imports_cpu_ms_per_host"]
            / small_res["reference_after_imports_cpu_ms_per_host"]
        )
        small_res["process_wall_ratio"] = (
            small_res["fleetcheck_wall_s"] / small_res["reference_wall_s"]
        )
        small_res["process_cpu_ratio"] = (
            small_res["fleetcheck_cpu_ms_per_host"] / small_res["reference_cpu_ms_per_host"]
        )
        results["small"] = small_res
        print(f"# small: {json.dumps(small_res)}", flush=True)
        if not a.sweep:
            print(json.dumps(results, indent=1))
            return

        # 2. N hosts: default (adaptive) against a fixed-concurrency sweep
        default_cfg = write_config(lab, hosts, 1, deadline)
        runs: dict[str, dict[str, Any]] = {}
        runs["default"] = patrol(default_cfg)
        print(f"# default: {json.dumps(runs['default'])}", flush=True)
        for c in [int(x) for x in a.sweep.split(",")]:
            cfg = write_config(lab, hosts, 1, deadline + f"adaptive = false\nconcurrency = {c}\n")
            runs[f"fixed {c}"] = patrol(cfg)
            print(f"# fixed {c}: {json.dumps(runs[f'fixed {c}'])}", flush=True)
        runs["default (again)"] = patrol(default_cfg)
        print(f"# default again: {json.dumps(runs['default (again)'])}", flush=True)
        fixed = {k: v for k, v in runs.items() if k.startswith("fixed")}
        complete = {k: v for k, v in fixed.items() if v["real_pct"] >= 99.0} or fixed
        best = min(complete, key=lambda k: complete[k]["wall_s"])
        default_wall = statistics.median(
            [runs["default"]["wall_s"], runs["default (again)"]["wall_s"]]
        )
        results["fleet"] = {
            "runs": runs,
            "best_fixed": best,
            "default_wall_s": default_wall,
            "ratio_to_best_fixed": default_wall / runs[best]["wall_s"],
            "default_real_pct": min(
                runs["default"]["real_pct"], runs["default (again)"]["real_pct"]
            ),
        }

        # 3. three host entries per sshd
        triple_cfg = write_config(lab, hosts, 3, deadline)
        triple = patrol(triple_cfg, sample_fds=True)
        print(f"# triple: {json.dumps(triple)}", flush=True)
        results["triple"] = {
            **triple,
            "ratio_to_default": triple["wall_s"] / default_wall,
            "fd_bound": 4 * 128,
        }
    report(results)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


def report(r: dict[str, Any]) -> None:
    s, f, t = r["small"], r["fleet"], r["triple"]
    n, n_small = r["hosts"], r.get("small_hosts", 50)
    print()
    print(
        f"# small fleet ({s['fleetcheck_wall_s']:.2f}s vs reference {s['reference_wall_s']:.2f}s)"
    )
    print("| run | rows | real verdicts | wall (s) | client CPU (s) | peak RSS (MB) | notes |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, x in f["runs"].items():
        print(
            f"| {n} hosts, {name} | {x['rows']} | {x['real_pct']:.1f} % | {x['wall_s']:.1f} | "
            f"{x['cpu_s']:.1f} | {x['max_rss_mb']:.0f} | {'; '.join(x['notes'])[:120]} |"
        )
    print(
        f"| {3 * n} entries, default | {t['rows']} | {t['real_pct']:.1f} % | {t['wall_s']:.1f} | "
        f"{t['cpu_s']:.1f} | {t['max_rss_mb']:.0f} | max fds {t['max_fds']} |"
    )
    targets = {
        f"{n} hosts default: >= 99 % real verdicts": f["default_real_pct"] >= 99,
        f"{n} hosts default: wall <= 1.2x best fixed ({f['best_fixed']})": (
            f["ratio_to_best_fixed"] <= 1.2
        ),
        f"{n_small} hosts: wall <= 1.05x bare threaded paramiko": s["wall_ratio"] <= 1.05,
        f"{n_small} hosts: client CPU per host <= 1.2x bare threaded paramiko": (
            s["cpu_ratio"] <= 1.2
        ),
        f"{3 * n} entries: >= 99 % real verdicts": t["real_pct"] >= 99,
        f"{3 * n} entries: wall <= 3.3x the {n}-host run": t["ratio_to_default"] <= 3.3,
        f"{3 * n} entries: peak RSS <= 300 MB": t["max_rss_mb"] <= 300,
        f"{3 * n} entries: fds <= 4x the concurrency bound": t["max_fds"] <= t["fd_bound"],
    }
    values = {
        list(targets)[0]: f"{f['default_real_pct']:.1f} %",
        list(targets)[1]: f"{f['ratio_to_best_fixed']:.2f}x",
        list(targets)[2]: (
            f"{s['wall_ratio']:.2f}x after imports; whole processes {s['process_wall_ratio']:.2f}x"
        ),
        list(targets)[3]: (
            f"{s['cpu_ratio']:.2f}x after imports ({s['patrol_after_imports_cpu_ms_per_host']:.1f}"
            f" vs {s['reference_after_imports_cpu_ms_per_host']:.1f} ms); whole processes "
            f"{s['process_cpu_ratio']:.2f}x ({s['fleetcheck_cpu_ms_per_host']:.1f} vs "
            f"{s['reference_cpu_ms_per_host']:.1f} ms)"
        ),
        list(targets)[4]: f"{t['real_pct']:.1f} %",
        list(targets)[5]: f"{t['ratio_to_default']:.2f}x",
        list(targets)[6]: f"{t['max_rss_mb']:.0f} MB",
        list(targets)[7]: f"{t['max_fds']} (bound {t['fd_bound']})",
    }
    for name, ok in targets.items():
        print(f"# target {name}: {'MET' if ok else 'MISSED'} ({values[name]})")
    r["targets"] = {k: {"met": v, "value": values[k]} for k, v in targets.items()}


if __name__ == "__main__":
    main()
