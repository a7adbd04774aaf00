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

from fleetcheck.model import Report, Result, Status
from fleetcheck.render import prometheus
from tests.lab import free_port, port_open, wait_for

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMTOOL = shutil.which("promtool")


def require(binary: str | None, package: str) -> str:
    if binary is None:
        message = f"{package} is not installed (apt-get install {package})"
        if os.environ.get("FLEETCHECK_REQUIRE_LAB") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return binary


def report(*results: Result, started: str = "2026-11-29T07:00:00Z") -> Report:
    return Report(started, 1.25, tuple(results))


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
        {"ping_ms": 250.0, "server": "redis", "used_memory": 123456, "ok": True},
        duration_s=0.25,
    ),
    Result(
        "logs",
        "mini host",
        Status.UNKNOWN,
        'ssh: "refused"\nretry',
        {},
        duration_s=5.0,
        since="2026-11-29T04:29:00Z",
        bad_rounds=3,
        alerting=True,
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
    "check, metric, name, factor",
    [
        ("clients", "connections", "fleetcheck_clients_connections", 1.0),
        ("clients", "by_addr", "fleetcheck_clients_by_addr", 1.0),
        ("broker", "ping_ms", "fleetcheck_broker_ping_seconds", 1e-3),
        ("queue_depth", "oldest_wait_s", "fleetcheck_queue_depth_oldest_wait_seconds", 1.0),
        ("q", "age_minutes", "fleetcheck_q_age_seconds", 60.0),
        ("q", "age_h", "fleetcheck_q_age_seconds", 3600.0),
        ("q", "rss_kb", "fleetcheck_q_rss_bytes", 1024.0),
        ("q", "size_kilobytes", "fleetcheck_q_size_bytes", 1000.0),
        ("q", "latency_us", "fleetcheck_q_latency_seconds", 1e-6),
        ("q", "fooBar", "fleetcheck_q_foo_bar", 1.0),
        ("q", "p95.latency-x", "fleetcheck_q_p95_latency_x", 1.0),
        ("q", "samples_total", "fleetcheck_q_samplestotal", 1.0),
        ("q", "depth_count", "fleetcheck_q_depthcount", 1.0),
        ("q", "m_x", "fleetcheck_qm_x", 1.0),
        ("q", "gauge_x", "fleetcheck_qgauge_x", 1.0),
        ("summary", "x", "fleetcheck_xsummary_x", 1.0),
        ("q", "temp_fahrenheit", "fleetcheck_q_tempfahrenheit", 1.0),
        # a unit word alone is a name, not a unit
        ("q", "m", "fleetcheck_qm", 1.0),
        ("q", "seconds", "fleetcheck_q_seconds", 1.0),
    ],
)
def test_metric_names(check: str, metric: str, name: str, factor: float) -> None:
    assert prometheus.metric_name(check, metric) == (name, pytest.approx(factor))


def test_render_contents() -> None:
    text = prometheus.render(FLEET)
    assert value(text, "fleetcheck_check_status", check="clients", host="n8") == 2
    assert value(text, "fleetcheck_check_status", check="broker", host="") == 1
    assert value(text, "fleetcheck_check_status", check="logs", host="mini host") == 3
    assert value(text, "fleetcheck_check_status", check="clients", host="n9") == 0
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
    assert value(text, "fleetcheck_status") == 2
    assert value(text, "fleetcheck_last_run_timestamp_seconds") == pytest.approx(1795935601.25)
    assert value(text, "fleetcheck_last_run_duration_seconds") == 1.25
    # strings are skipped, and no family is left without samples
    assert "server" not in text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert all(any(s for s in f.samples) for f in text_string_to_metric_families(text))
    assert "fleetcheck_check_status" in names


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
        Result("q", None, Status.CRIT, "x", {"wait_s": 1.0, "wait_seconds": 2.0}),
        # a check whose metric would take a reserved name is left out
        Result("check", "h", Status.OK, "x", {"status": 7, "other": 1}),
    )
    text = prometheus.render(r)
    assert value(text, "fleetcheck_q_wait_seconds", host="") == 1.0
    assert text.count('fleetcheck_q_wait_seconds{host=""}') == 1
    assert value(text, "fleetcheck_check_status", check="check", host="h") == 0
    assert value(text, "fleetcheck_check_other", host="h") == 1


def test_empty_report() -> None:
    text = prometheus.render(report())
    assert value(text, "fleetcheck_status") == 0
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
    text = scrape_until(url, "fleetcheck_check_status", "fleetcheck metrics on /metrics")
    assert value(text, "node_textfile_scrape_error") == 0
    assert value(text, "fleetcheck_check_status", check="clients", host="n8") == 2
    assert value(text, "fleetcheck_check_status", check="logs", host="mini host") == 3
    assert value(text, "fleetcheck_clients_by_addr", host="n8", key="198.18.0.11") == 2
    assert value(text, "fleetcheck_status") == 2
    assert value(text, "fleetcheck_last_run_timestamp_seconds") == pytest.approx(1795935601.25)
    assert value(text, "fleetcheck_check_status", check="broker", host="") == 1
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
    assert value(text, "fleetcheck_check_status", check="clients", host="n8") == 0
    assert value(text, "fleetcheck_clients_connections", host="n8") == 12
    assert ("fleetcheck_check_status", (("check", "logs"), ("host", "mini host"))) not in (
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
