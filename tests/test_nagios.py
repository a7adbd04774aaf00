"""--format nagios: the status line and perfdata syntax (pure; table-driven)."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from fleetcheck.core.model import Report, Result, Status
from fleetcheck.render import nagios

# The perfdata grammar of the Monitoring Plugins guidelines:
# 'label'=value[UOM];[warn];[crit];[min];[max]  (value in [-0-9.] or U)
PERF = re.compile(
    r"'(?P<label>(?:[^'=]|'')+)'=(?P<value>-?[0-9.]+|U)(?P<uom>s|ms|us|%|B|KB|MB|TB|c)?"
    r"(?:;(?P<warn>[^;]*)(?:;(?P<crit>[^;]*)(?:;(?P<min>[-0-9.]*)(?:;(?P<max>[-0-9.]*))?)?)?)?"
)


def report(*results: Result, duration: float = 1.5) -> Report:
    return Report("2026-11-29T07:00:00Z", duration, tuple(results))


ITEM = re.compile(r"'(?:[^']|'')*'=\S*")


def split_perf(text: str) -> list[str]:
    """Perfdata items: whitespace-separated, labels quoted (they may contain spaces)."""
    items = ITEM.findall(text)
    assert ITEM.sub("", text).strip() == "", f"junk in perfdata: {text!r}"
    return items


def parse_plugin_output(text: str) -> tuple[str, list[str], list[str]]:
    """(status text, long output lines, perfdata items) as Nagios/Icinga parse plugin output:
    text up to the first '|' of line 1, long output up to the next '|', perfdata after it."""
    lines = text.split("\n")
    head, _, perf = lines[0].partition("|")
    perf_text = [perf]
    long_lines: list[str] = []
    in_perf = False
    for line in lines[1:]:
        if in_perf:
            perf_text.append(line)
        elif "|" in line:
            before, _, after = line.partition("|")
            if before.strip():
                long_lines.append(before.rstrip())
            perf_text.append(after)
            in_perf = True
        else:
            long_lines.append(line)
    return head.rstrip(), long_lines, split_perf(" ".join(perf_text))


def perf_items(text: str) -> dict[str, re.Match[str]]:
    _, _, items = parse_plugin_output(text)
    out = {}
    for item in items:
        m = PERF.fullmatch(item)
        assert m, f"not valid perfdata: {item!r}"
        out[m.group("label")] = m
    return out


@pytest.mark.parametrize(
    "results, first",
    [
        ((), "FLEETCHECK OK - no checks ran"),
        ((Result("clients", "n8", Status.OK, "12 connections"),), "FLEETCHECK OK - 1 OK"),
        (
            (
                Result("clients", "n8", Status.WARN, "3 connections (< 10)"),
                Result("broker", None, Status.OK, "up"),
            ),
            "FLEETCHECK WARNING - 1 WARN, 1 OK; n8 clients: 3 connections (< 10)",
        ),
        (
            (
                Result("clients", "n8", Status.CRIT, "no broker connections"),
                Result("logs", "mini", Status.UNKNOWN, "ssh: connection refused"),
            ),
            "FLEETCHECK CRITICAL - 1 CRIT, 1 UNKNOWN; n8 clients: no broker connections; "
            "mini logs: ssh: connection refused",
        ),
        (
            (Result("broker", None, Status.UNKNOWN, "broker unreachable"),),
            "FLEETCHECK UNKNOWN - 1 UNKNOWN; * broker-wide broker: broker unreachable",
        ),
        (  # a '|' in a summary would start the perfdata: replaced; newlines folded
            (Result("logs", "n8", Status.WARN, "matched ERROR|Traceback\nin 3 lines"),),
            "FLEETCHECK WARNING - 1 WARN; n8 logs: matched ERROR/Traceback in 3 lines",
        ),
    ],
)
def test_status_line(results: tuple[Result, ...], first: str) -> None:
    head, _, _ = parse_plugin_output(nagios.render(report(*results)))
    assert head == first


def test_headline_shows_the_three_worst_and_counts_the_rest() -> None:
    rows = [Result("clients", f"h{i}", Status.WARN, f"few {i}") for i in range(5)]
    rows.append(Result("clients", "z", Status.CRIT, "x" * 200))
    head, long_lines, _ = parse_plugin_output(nagios.render(report(*rows)))
    assert head.startswith("FLEETCHECK CRITICAL - 1 CRIT, 5 WARN; z clients: " + "x" * 70)
    assert "..." in head and len(head) < 400
    assert head.endswith("h0 clients: few 0; h1 clients: few 1; +3 more")
    # long output: one line per non-OK row, worst first, summary shortened
    assert long_lines[0] == "CRIT z clients: " + "x" * 101 + "..."
    assert long_lines[1:] == [f"WARN h{i} clients: few {i}" for i in range(5)]


def test_ok_rows_get_no_long_output_but_keep_perfdata() -> None:
    row = Result("clients", "n8", Status.OK, "ok", {"connections": 12}, headline="connections")
    text = nagios.render(report(row))
    head, long_lines, _ = parse_plugin_output(text)
    assert long_lines == []
    assert perf_items(text)["n8_clients_connections"].group("value") == "12"


@pytest.mark.parametrize(
    "host, check, metrics, expected",
    [
        # one item per row: its declared headline metric (Result.headline), wherever it is
        # in the dict; label host_check_metric, broker rows check_metric
        ("n8", "clients", {"connections": 3, "min": 1}, ("n8_clients_connections", "3", None)),
        (
            None,
            "broker",
            {"server": "redis", "connected_clients": 12},
            ("broker_connected_clients", "12", None),
        ),
        # UOM from the unit suffix: seconds, bytes; ratios, rates and counts have none
        (None, "q", {"oldest_wait_s": 1.5}, ("q_oldest_wait_s", "1.5", "s")),
        (None, "broker", {"used_memory_bytes": 2048}, ("broker_used_memory_bytes", "2048", "B")),
        (None, "broker", {"clients_ratio": 0.25}, ("broker_clients_ratio", "0.25", None)),
        (None, "broker", {"ops_per_s": 12.5}, ("broker_ops_per_s", "12.5", None)),
        # rounded to their precision: 4 significant digits, whole from 1000 on
        ("mini", "logs", {"age_s": 9012.757}, ("mini_logs_age_s", "9013", "s")),
        (None, "q", {"skew_s": -0.03570818901062012}, ("q_skew_s", "-0.03571", "s")),
        (None, "q", {"tiny_s": 1.234567e-7}, ("q_tiny_s", "0.0000001235", "s")),
        (None, "q", {"huge": 1e20}, ("q_huge", "100000000000000000000", None)),
        (None, "q", {"nan": float("nan")}, ("q_nan", "U", None)),
        # a headline not measured this round (None) is U, never another metric
        (None, "rater", {"latency_s": None, "inbox_length": 3}, ("rater_latency_s", "U", None)),
        # booleans 0/1; other metrics are never an item (a map's keys are never a label)
        (None, "rater", {"proof": "logged", "consumed": True}, ("rater_consumed", "1", None)),
        (
            "n8",
            "clients",
            {"by_addr": {"/var/log/x": 2}, "connections": 0},
            ("n8_clients_connections", "0", None),
        ),
        # characters outside [A-Za-z0-9._:@-] become _
        (None, "q", {"a=b c/d": 1}, ("q_a_b_c_d", "1", None)),
    ],
)
def test_row_perfdata_is_one_item_per_row(
    host: str | None, check: str, metrics: dict[str, Any], expected: tuple[str, str, Any]
) -> None:
    label = expected[0].removeprefix(f"{host}_" if host else "").removeprefix(f"{check}_")
    headline = next(k for k in metrics if nagios.label(k) == f"'{label}'")
    row = Result(check, host, Status.OK, "x", metrics, duration_s=0.5, headline=headline)
    text = nagios.render(report(row))
    items = perf_items(text)
    rows = {
        k: v
        for k, v in items.items()
        if k not in ("ok", "warn", "crit", "unknown", "patrol_duration")
    }
    name, value, uom = expected
    assert list(rows) == [name]
    assert rows[name].group("value") == value
    assert rows[name].group("uom") == uom


def test_a_row_without_a_headline_has_no_item() -> None:
    text = nagios.render(report(Result("q", None, Status.OK, "x", {"depth": 3, "m": {"a": 1}})))
    assert set(perf_items(text)) == {"ok", "warn", "crit", "unknown", "patrol_duration"}


def test_the_declared_headline_wins_over_the_first_numeric_metric() -> None:
    """A check whose first metric is a setting echo, not its measurement: the perfdata item is
    the metric it declares as headline (Check.result fills Result.headline from it)."""
    from fleetcheck.core.check import Check, Scope

    class Aged(Check[Any, Any]):
        name = "aged"
        description = "a check whose first metric is not its headline"
        scope = Scope.BROKER
        headline = "age_s"

    row = Aged().result(None, Status.OK, "x", metrics={"samples": 3, "age_s": 12.5})
    assert row.headline == "age_s"
    items = perf_items(nagios.render(report(row)))
    assert "aged_samples" not in items
    assert items["aged_age_s"].group("value") == "12.5"


def test_a_check_whose_rows_differ_declares_a_headline_per_kind_of_row() -> None:
    from fleetcheck.core.check import Check, Scope

    class Two(Check[Any, Any]):
        name = "two"
        description = "host rows and a broker-wide row with different measurements"
        scope = Scope.BROKER
        headline = ("connections", "clients")

    check = Two()
    assert check.result(None, Status.OK, "x", metrics={"clients": 3}).headline == "clients"
    row = check.result(None, Status.OK, "x", metrics={"clients": 3, "connections": 1})
    assert row.headline == "connections"
    assert check.result(None, Status.OK, "x", metrics={"other": 1}).headline is None


@pytest.mark.parametrize(
    "raw, quoted",
    [
        ("plain", "'plain'"),
        ("n8.example:22@x-y", "'n8.example:22@x-y'"),
        ("with space", "'with_space'"),
        ("a=b", "'a_b'"),
        ("it's", "'it_s'"),
        ("pipe|here", "'pipe_here'"),
        ("tab\there", "'tab_here'"),
        ("/var/log/worker.log", "'_var_log_worker.log'"),
    ],
)
def test_label_sanitising(raw: str, quoted: str) -> None:
    assert nagios.label(raw) == quoted


def fleet_of(n_hosts: int, seed: int, bad_share: float) -> Report:
    """A generated fleet as the checks report it: three checks per host with their real metric
    shapes (maps keyed by file path and address, strings, unrounded floats), five broker rows."""
    rng = random.Random(seed)

    def status() -> Status:
        if rng.random() < bad_share:
            return rng.choice([Status.WARN, Status.CRIT, Status.UNKNOWN])
        return Status.OK

    rows = []
    for i in range(n_hosts):
        host = f"worker-{i:02d}.example.org"
        path = f"/var/lib/fleet/{host}/worker-{rng.randint(0, 99)}.log"
        rows.append(
            Result(
                "clients",
                host,
                status(),
                f"{rng.randint(0, 30)} broker connections from 198.18.{i}.10" * rng.randint(1, 3),
                {
                    "connections": rng.randint(0, 30),
                    "by_addr": {f"198.18.{i}.10": 3, f"198.18.{i}.11": 0},
                    "min_clients": 1,
                },
                headline="connections",
            )
        )
        rows.append(
            Result(
                "logs",
                host,
                status(),
                f"file {path}: last line 12:24:53 UTC, {rng.random():.3f}s ago (crit_age 30m)",
                {
                    "age_s": rng.random() * 1e4,
                    "mtime_age_s": rng.random() * 1e4,
                    "clock_skew_s": rng.random() - 0.5,
                    "tz": "UTC",
                    "error_lines": rng.randint(0, 9),
                    "size_bytes": rng.randint(0, 1 << 40),
                    "logs": {
                        path: {
                            "age_s": rng.random() * 1e4,
                            "clock_skew_s": rng.random(),
                            "size_bytes": 5,
                        }
                    },
                },
                headline="age_s",
            )
        )
        rows.append(
            Result(
                "routes",
                host,
                status(),
                "one default route: via 198.18.0.1 dev eth0 " * rng.randint(1, 4),
                {"default_routes": 1, "interfaces": 1, "unscoped_default_routes": 1},
                headline="default_routes",
            )
        )
    for check in ("broker", "clients", "queue_depth", "live_hash", "rater_probe"):
        rows.append(
            Result(
                check,
                None,
                Status.OK,
                "fine " * 30,
                {
                    "ping_s": rng.random() / 1000,
                    "used_memory_bytes": 2373264,
                    "lengths": {"arena:queue": 120},
                },
                headline="ping_s",
            )
        )
    return Report("2026-11-29T07:00:00Z", 3.14159265, tuple(rows))


@pytest.mark.parametrize("bad_share", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("n_hosts", [4, 40])
def test_output_is_bounded(n_hosts: int, bad_share: float) -> None:
    report_ = fleet_of(n_hosts, n_hosts, bad_share)
    text = nagios.render(report_)
    assert len(text.encode()) < 8 * 1024, len(text.encode())
    head, long_lines, items = parse_plugin_output(text)
    assert all(PERF.fullmatch(i) for i in items)
    assert all("/" not in i.split("=")[0] for i in items)  # no paths in labels
    bad = [r for r in report_.results if r.status is not Status.OK]
    if n_hosts == 40 and bad_share <= 0.1:  # a normal day: every row has its item and line
        assert len(items) == len(report_.results) + 5
        assert len(long_lines) == len(bad)
    if len(items) < len(report_.results) + 5 or len(long_lines) < len(bad):
        assert long_lines[-1].startswith("(left out to stay under 8000 bytes")
    for item in items:  # rounded: at most 4 significant digits in a fraction
        value = PERF.fullmatch(item).group("value")
        if "." in value:
            assert len(value.replace("-", "").replace(".", "").lstrip("0")) <= 4, item


def test_patrol_perfdata_counts_and_duration() -> None:
    rows = [
        Result("a", "h1", Status.CRIT, "x"),
        Result("a", "h2", Status.OK, "y"),
        Result("a", "h3", Status.OK, "y"),
    ]
    text = nagios.render(report(*rows, duration=2.25))
    head_line = text.split("\n")[0]
    items = perf_items(text)
    assert items["ok"].group("value") == "2" and items["ok"].group("min") == "0"
    assert items["crit"].group("value") == "1" and items["crit"].group("crit") == "0"
    assert items["warn"].group("value") == "0" and items["unknown"].group("value") == "0"
    assert items["warn"].group("warn") == "0" and items["unknown"].group("warn") == "0"
    assert items["patrol_duration"].group("value") == "2.25"
    assert items["patrol_duration"].group("uom") == "s"
    # every perfdata item is on the first line, the patrol's first (see the layout test)
    assert "'patrol_duration'=2.25s" in head_line


def test_multiline_layout_follows_the_plugin_guidelines() -> None:
    rows = [
        Result("clients", "n8", Status.CRIT, "none", {"connections": 0}, headline="connections"),
        Result("clients", "n9", Status.OK, "ok", {"connections": 9}, headline="connections"),
    ]
    lines = nagios.render(report(*rows)).split("\n")
    # one '|', on the first line, every perfdata item after it: Icinga 2 before 2.13.8 reads
    # perfdata only from lines holding a '|' (Icinga/icinga2#8912, #9379)
    assert lines[0].count("|") == 1
    assert lines[0].endswith("'n8_clients_connections'=0 'n9_clients_connections'=9")
    assert lines[1:] == ["CRIT n8 clients: none"]


def test_renderer_does_not_decide_the_exit_code() -> None:
    r = report(Result("clients", "n8", Status.UNKNOWN, "ssh refused"))
    assert nagios.render(r).startswith("FLEETCHECK UNKNOWN")
    assert r.exit_code == 3
