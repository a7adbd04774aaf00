"""--format prometheus / --textfile: the names, `promtool check metrics` on our output, and a
real node_exporter (Debian prometheus-node-exporter) serving the textfile we write."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fleetcheck.core.model import Report, Result, Standing, Status
from fleetcheck.render import prometheus
from tests.lab import free_port, port_open, wait_for
from tests.standing import Row, recorded

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")


def require(binary: str | None, package: str) -> str:
    if binary is None:
        message = f"{package} is not installed (apt-get install {package})"
        if os.environ.get("FLEETCHECK_REQUIRE_LAB") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return binary


def report(*results: Row, started: str = "2026-11-29T07:00:00Z") -> Report:
    return recorded(started, 1.25, results)


FLEET = report(
    Result(
        "clients",
        "n8",
        Status.CRIT,
        "no broker connections",
        {"connections": 0, "by_addr": {"198.18.0.10": 0, "198.18.0.11": 2}, "min_clients": 10},
        duration_s=0.0125,
    ),
    Result("clients", "n9", Status.OK, "9 connections", {"connections": 9}, duration_s=0.01),
    Result(
        "broker",
        None,
        Status.WARN,
        "PING took 250 ms",
        {"ping_s": 0.25, "server": "redis", "used_memory_bytes": 123456, "ok": True},
        duration_s=0.25,
    ),
    (
        Result("logs", "mini host", Status.UNKNOWN, 'ssh: "refused"\nretry', {}, duration_s=5.0),
        Standing("2026-11-29T04:29:00Z", 3, alerting=True),
    ),
)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, tuple(sorted(labels.items())))]


# ------------------------------------------------------------------ names (pure)
@pytest.mark.parametrize(
    "check, metric, name, unit",
    [
        ("clients", "connections", "fleetcheck_clients_connections", ""),
        ("clients", "by_addr", "fleetcheck_clients_by_addr", ""),
        # the unit suffixes of model.UNIT_SUFFIXES, spelled out as base units
        ("broker", "ping_s", "fleetcheck_broker_ping_seconds", "seconds"),
        ("queue_depth", "oldest_wait_s", "fleetcheck_queue_depth_oldest_wait_seconds", "seconds"),
        ("broker", "used_memory_bytes", "fleetcheck_broker_used_memory_bytes", "bytes"),
        ("broker", "clients_ratio", "fleetcheck_broker_clients_ratio", "ratio"),
        ("logs", "error_rate_per_s", "fleetcheck_logs_error_rate_per_second", "per_second"),
        # a suffix alone is a name, not a unit
        ("q", "s", "fleetcheck_qs", ""),
        # no other unit is read from a name (the convention has none): counts, and tokens
        # promtool would reject glued so no count looks like it has a unit
        ("broker", "ping_ms", "fleetcheck_broker_pingms", ""),
        ("q", "wait_seconds", "fleetcheck_q_waitseconds", ""),
        ("q", "size_bytes_x", "fleetcheck_q_size_bytes_x", ""),
        ("q", "fooBar", "fleetcheck_q_foo_bar", ""),
        ("q", "p95.latency-x", "fleetcheck_q_p95_latency_x", ""),
        ("q", "samples_total", "fleetcheck_q_samplestotal", ""),
        ("q", "depth_count", "fleetcheck_q_depthcount", ""),
        ("q", "depth_count_s", "fleetcheck_q_depth_count_seconds", "seconds"),
        ("q", "m_x", "fleetcheck_qm_x", ""),
        ("q", "gauge_x", "fleetcheck_qgauge_x", ""),
        ("summary", "x", "fleetcheck_xsummary_x", ""),
        ("q", "temp_fahrenheit", "fleetcheck_q_tempfahrenheit", ""),
    ],
)
def test_metric_names(check: str, metric: str, name: str, unit: str) -> None:
    assert prometheus.metric_name(check, metric) == (name, unit)


def test_render_contents() -> None:
    text = prometheus.render(FLEET)
    # severity: 0 OK, 1 WARN, 2 UNKNOWN, 3 CRIT, so max() is the worst row
    assert value(text, "fleetcheck_check_severity", check="clients", host="n8") == 3
    assert value(text, "fleetcheck_check_severity", check="broker", host="") == 1
    assert value(text, "fleetcheck_check_severity", check="logs", host="mini host") == 2
    assert value(text, "fleetcheck_check_severity", check="clients", host="n9") == 0
    assert value(text, "fleetcheck_check_duration_seconds", check="clients", host="n8") == 0.0125
    assert value(text, "fleetcheck_check_alerting", check="clients", host="n9") == 0
    assert value(text, "fleetcheck_check_alerting", check="logs", host="mini host") == 1
    assert value(text, "fleetcheck_check_bad_rounds", check="logs", host="mini host") == 3
    assert value(
        text, "fleetcheck_check_since_timestamp_seconds", check="logs", host="mini host"
    ) == pytest.approx(1795926540.0)
    assert value(text, "fleetcheck_clients_by_addr", host="n8", key="198.18.0.11") == 2
    assert value(text, "fleetcheck_clients_connections", host="n9") == 9
    assert value(text, "fleetcheck_broker_ping_seconds", host="") == pytest.approx(0.25)
    assert value(text, "fleetcheck_broker_ok", host="") == 1
    assert value(text, "fleetcheck_results", status="CRIT") == 1
    assert value(text, "fleetcheck_results", status="OK") == 1
    assert value(text, "fleetcheck_severity") == 3
    assert value(text, "fleetcheck_last_run_timestamp_seconds") == pytest.approx(1795935601.25)
    assert value(text, "fleetcheck_last_run_duration_seconds") == 1.25
    # strings are skipped, and no family is left without samples
    assert "server" not in text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert all(any(s for s in f.samples) for f in text_string_to_metric_families(text))
    assert "fleetcheck_check_severity" in names
    assert value(text, "fleetcheck_broker_used_memory_bytes", host="") == 123456


def test_limits_never_become_series() -> None:
    """A row's limits (the settings it was judged against) stay out of the exposition: a
    configured threshold is not a reading."""
    row = Result(
        "queue_depth",
        None,
        Status.WARN,
        "depth 90 >= 80% of cap 100",
        {"depth": 90},
        limits={"cap": 100, "warn_at_ratio": 0.8, "max_wait_s": 600},
        headline="depth",
    )
    text = prometheus.render(Report("2026-11-29T07:00:00Z", 1.0, (row,)))
    assert value(text, "fleetcheck_queue_depth_depth", host="") == 90
    families = {f.name for f in text_string_to_metric_families(text)}
    assert not {n for n in families if "cap" in n or "warn_at" in n or "max_wait" in n}, families
    assert "cap" not in text and "max_wait" not in text


def test_mixed_shapes_share_one_family_with_padded_labels() -> None:
    r = report(
        Result("q", "a", Status.OK, "x", {"lag": 1, "n": {"k": {"deep": 2}}}),
        Result("q", "b", Status.OK, "x", {"lag": {"k1": 3}, "n": {"k": 4}}),
    )
    text = prometheus.render(r)
    assert value(text, "fleetcheck_q_lag", host="a", key="") == 1
    assert value(text, "fleetcheck_q_lag", host="b", key="k1") == 3
    assert value(text, "fleetcheck_q_n", host="a", key="k", key2="deep") == 2
    assert value(text, "fleetcheck_q_n", host="b", key="k", key2="") == 4


def test_colliding_names_keep_the_first_and_never_duplicate() -> None:
    r = report(
        Result("q", None, Status.CRIT, "x", {"wait_s": 1.0, "wait": {"s": 2.0}}),
        # a check whose metric would take a reserved name is left out
        Result("check", "h", Status.OK, "x", {"severity": 7, "other": 1}),
    )
    text = prometheus.render(r)
    assert value(text, "fleetcheck_q_wait_seconds", host="") == 1.0
    assert text.count('fleetcheck_q_wait_seconds{host=""}') == 1
    assert value(text, "fleetcheck_check_severity", check="check", host="h") == 0
    assert value(text, "fleetcheck_check_other", host="h") == 1


def test_empty_report() -> None:
    text = prometheus.render(report())
    assert value(text, "fleetcheck_severity") == 0
    assert value(text, "fleetcheck_results", status="OK") == 0


# ------------------------------------------------------------------ promtool
def promtool_check(text: str) -> subprocess.CompletedProcess[str]:
    binary = require(PROMTOOL, "prometheus")
    return subprocess.run(
        [binary, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )


def test_promtool_accepts_our_output() -> None:
    proc = promtool_check(prometheus.render(FLEET))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == ""


AWKWARD_METRICS: dict[str, Any] = {
    "ping_ms": 1.5,
    "oldest_wait_s": 3,
    "age_minutes": 2,
    "rss_kb": 10,
    "fooBar": 1,
    "samples_total": 4,
    "depth_count": 5,
    "size_sum": 6,
    "le_bucket": 7,
    "gauge_x": 8,
    "m_x_h": 9,
    "weird name!": 10,
    "temp_fahrenheit": 50,
    "weight_kilograms": 2,
    "by_addr": {"198.18.0.10": 2, "fe80::1": 1, 'quote"d': 3},
    "nested": {"a": {"b": 1}, "c": 2},
    "flag": False,
    "nan": float("nan"),
    "inf": float("inf"),
}


@pytest.mark.parametrize("check", ["clients", "summary", "m", "queue-depth", "fooCheck"])
def test_promtool_accepts_awkward_names(check: str) -> None:
    r = report(Result(check, "h", Status.WARN, "x", AWKWARD_METRICS))
    proc = promtool_check(prometheus.render(r))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == ""


def test_promtool_would_catch_a_bad_name() -> None:
    """The check above can fail: promtool rejects the raw names we rewrite."""
    proc = promtool_check("# HELP x_ping_ms h\n# TYPE x_ping_ms gauge\nx_ping_ms 1\n")
    assert proc.returncode != 0


# ------------------------------------------------------------------ textfile + node_exporter
@pytest.fixture
def node_exporter(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A real node_exporter on a free loopback port with only the textfile collector; killed
    (its whole process group) at teardown, also on failure."""
    binary = require(NODE_EXPORTER, "prometheus-node-exporter")
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    port = free_port()
    log = open(tmp_path / "node_exporter.log", "wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={textdir}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(
            lambda: proc.poll() is not None or port_open("127.0.0.1", port),
            timeout=15,
            what="node_exporter to listen",
        )
        assert proc.poll() is None, (tmp_path / "node_exporter.log").read_text()
        yield textdir, f"http://127.0.0.1:{port}/metrics"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)
        log.close()


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def scrape_until(url: str, needle: str, what: str) -> str:
    def ready() -> str | None:
        text = scrape(url)
        return text if needle in text else None

    return str(wait_for(ready, timeout=10, what=what))


def test_node_exporter_serves_the_textfile(node_exporter: tuple[Path, str]) -> None:
    textdir, url = node_exporter
    path = textdir / "fleetcheck.prom"
    prometheus.write_textfile(FLEET, str(path))
    text = scrape_until(url, "fleetcheck_check_severity", "fleetcheck metrics on /metrics")
    assert value(text, "node_textfile_scrape_error") == 0
    assert value(text, "fleetcheck_check_severity", check="clients", host="n8") == 3
    assert value(text, "fleetcheck_check_severity", check="logs", host="mini host") == 2
    assert value(text, "fleetcheck_clients_by_addr", host="n8", key="198.18.0.11") == 2
    assert value(text, "fleetcheck_severity") == 3
    assert value(text, "fleetcheck_last_run_timestamp_seconds") == pytest.approx(1795935601.25)
    assert value(text, "fleetcheck_check_severity", check="broker", host="") == 1
    assert value(text, "fleetcheck_broker_ping_seconds", host="") == pytest.approx(0.25)


def test_textfile_is_replaced_atomically(node_exporter: tuple[Path, str]) -> None:
    textdir, url = node_exporter
    path = textdir / "fleetcheck.prom"
    prometheus.write_textfile(FLEET, str(path))
    first_inode = path.stat().st_ino
    healed = report(Result("clients", "n8", Status.OK, "12 connections", {"connections": 12}))
    prometheus.write_textfile(healed, str(path))
    # rename(2) put a new file in place (never a rewrite in place a scrape could see half of)
    assert path.stat().st_ino != first_inode
    assert sorted(p.name for p in textdir.iterdir()) == ["fleetcheck.prom"]
    text = scrape_until(url, "fleetcheck_clients_connections", "the rewritten textfile")
    assert value(text, "fleetcheck_check_severity", check="clients", host="n8") == 0
    assert value(text, "fleetcheck_clients_connections", host="n8") == 12
    assert ("fleetcheck_check_severity", (("check", "logs"), ("host", "mini host"))) not in (
        samples(text)
    )
    assert value(text, "node_textfile_scrape_error") == 0


def test_textfile_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "fleetcheck.prom"
    with pytest.raises(OSError):
        prometheus.write_textfile(FLEET, str(missing))
    # a failed write leaves nothing behind
    target = tmp_path / "dir.prom"
    target.mkdir()
    with pytest.raises(OSError):
        prometheus.write_textfile(FLEET, str(target))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.prom"]


# ------------------------------------------------------------------ rules (generated reports)
UNIT_CODE = {"": 0, "seconds": 1, "bytes": 2, "ratio": 3, "per_second": 4}
SUFFIX_UNIT = {
    "": "",
    "_s": "seconds",
    "_bytes": "bytes",
    "_ratio": "ratio",
    "_per_s": "per_second",
}
OWN_FAMILIES = {
    "fleetcheck_check_severity",
    "fleetcheck_check_duration_seconds",
    "fleetcheck_check_alerting",
    "fleetcheck_check_flapping",
    "fleetcheck_check_bad_rounds",
    "fleetcheck_check_since_timestamp_seconds",
    "fleetcheck_results",
    "fleetcheck_severity",
    "fleetcheck_last_run_timestamp_seconds",
    "fleetcheck_last_run_duration_seconds",
}


def generated(seed: int) -> Report:
    """Rows with metrics named by the convention (a unit suffix or a plain count), some in maps
    keyed by addresses and paths, some maps of per-item records whose keys carry units. Each
    leaf's value is `10 * n + code of its unit`, so a sample's value tells its source's unit."""
    import random

    rng = random.Random(seed)
    n = iter(range(1, 10**6))

    def leaf(suffix: str) -> float:
        return 10.0 * next(n) + UNIT_CODE[SUFFIX_UNIT[suffix]]

    results = []
    for h in range(rng.randint(1, 6)):
        for check in ("clients", "logs", "queue_depth")[: 3 if h == 0 else 2]:
            metrics: dict[str, Any] = {}
            for stem in rng.sample(["age", "wait", "size", "depth", "share", "rate", "lines"], 4):
                suffix = rng.choice(list(SUFFIX_UNIT))
                shape = rng.choice(["flat", "map", "records"])
                if shape == "flat":
                    metrics[stem + suffix] = leaf(suffix)
                elif shape == "map":  # keys are labels; the unit is the metric's
                    metrics[stem + suffix] = {f"198.18.0.{i}": leaf(suffix) for i in range(3)}
                else:  # per-path records: each key's own unit
                    metrics[stem] = {
                        f"/var/log/w{i}.log": {
                            k + s: leaf(s)
                            for k, s in (("age", "_s"), ("size", "_bytes"), ("lines", ""))
                        }
                        for i in range(2)
                    }
            status = rng.choice(list(Status))
            results.append(
                Result(check, f"h{h}" if check != "queue_depth" else None, status, "x", metrics)
            )
    return Report("2026-11-29T07:00:00Z", 1.0, tuple(results))


@pytest.mark.parametrize("seed", range(20))
def test_every_metric_has_one_unit_suffix_consistent_with_its_values(seed: int) -> None:
    r = generated(seed)
    families = list(text_string_to_metric_families(prometheus.render(r)))
    checked = 0
    for family in families:
        if family.name in OWN_FAMILIES:
            continue
        tokens = family.name.split("_")
        units = [u for u in ("seconds", "bytes", "ratio") if u in tokens]
        if family.name.endswith("_per_second"):
            units.append("per_second")
        assert len(units) <= 1, family.name
        unit = units[0] if units else ""
        assert not unit or family.name.endswith("_" + unit), family.name
        for sample in family.samples:
            assert sample.value % 10 == UNIT_CODE[unit], (family.name, sample)
            checked += 1
    leaves = sum(
        1 for row in r.results for v in row.metrics.values() for _ in prometheus.leaves(v, ())
    )
    assert checked == leaves  # every leaf exported once, none scaled or dropped


@pytest.mark.parametrize("seed", range(20))
def test_max_severity_is_the_worst_row(seed: int) -> None:
    r = generated(seed)
    text = prometheus.render(r)
    rows = {
        s.labels["check"] + "/" + s.labels["host"]: s.value
        for f in text_string_to_metric_families(text)
        if f.name == "fleetcheck_check_severity"
        for s in f.samples
    }
    assert max(rows.values()) == value(text, "fleetcheck_severity") == r.status.rank
    by_rank = {s.rank: s for s in Status}
    assert by_rank[int(max(rows.values()))] is r.status


def test_the_severity_order_is_documented_in_the_help() -> None:
    text = prometheus.render(generated(1))
    assert "0 OK, 1 WARN, 2 UNKNOWN, 3 CRIT" in text
    assert [s.rank for s in (Status.OK, Status.WARN, Status.UNKNOWN, Status.CRIT)] == [0, 1, 2, 3]


@pytest.mark.parametrize("seed", range(3))
def test_promtool_accepts_generated_reports(seed: int) -> None:
    proc = promtool_check(prometheus.render(generated(seed)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "" and proc.stderr.strip() == ""
