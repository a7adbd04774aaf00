"""--format nagios: the status line and perfdata syntax (pure; table-driven)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from fleetcheck.model import Report, Result, Status
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
            "FLEETCHECK UNKNOWN - 1 UNKNOWN; (broker) broker: broker unreachable",
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
    # long output: one line per non-OK row, worst first, full summary
    assert long_lines[0] == "CRIT z clients: " + "x" * 200
    assert long_lines[1:] == [f"WARN h{i} clients: few {i}" for i in range(5)]


def test_ok_rows_get_no_long_output_but_keep_perfdata() -> None:
    text = nagios.render(report(Result("clients", "n8", Status.OK, "ok", {"connections": 12})))
    head, long_lines, _ = parse_plugin_output(text)
    assert long_lines == []
    assert perf_items(text)["n8_clients_connections"].group("value") == "12"


@pytest.mark.parametrize(
    "host, check, metrics, expected",
    [
        # label: host_check_metric; broker rows: check_metric
        ("n8", "clients", {"connections": 3}, {"n8_clients_connections": ("3", None)}),
        (None, "broker", {"connected_clients": 12}, {"broker_connected_clients": ("12", None)}),
        # UOM from the name: durations in s / ms, bytes, percent
        (None, "q", {"oldest_wait_s": 1.5}, {"q_oldest_wait_s": ("1.5", "s")}),
        (None, "broker", {"ping_ms": 0.25}, {"broker_ping_ms": ("0.25", "ms")}),
        (None, "broker", {"used_bytes": 2048}, {"broker_used_bytes": ("2048", "B")}),
        (None, "disk", {"used_pct": 97.5}, {"disk_used_pct": ("97.5", "%")}),
        # booleans 0/1; strings, lists and None skipped
        (None, "rater", {"consumed": True, "proof": "logged"}, {"rater_consumed": ("1", None)}),
        (None, "rater", {"acked": False, "ids": [1, 2], "p": None}, {"rater_acked": ("0", None)}),
        # nested maps flattened with _
        (
            "n8",
            "clients",
            {"by_addr": {"198.18.0.10": 2, "198.18.0.11": 0}},
            {
                "n8_clients_by_addr_198.18.0.10": ("2", None),
                "n8_clients_by_addr_198.18.0.11": ("0", None),
            },
        ),
        (None, "q", {"a": {"b": {"c": 4}}}, {"q_a_b_c": ("4", None)}),
        # no exponent notation (the syntax allows [-0-9.] only); non-finite is U
        (None, "q", {"tiny": 1e-7, "huge": 1e20}, {"q_tiny": ("0.0000001", None)}),
        (None, "q", {"nan": float("nan"), "neg": -2.5}, {"q_nan": ("U", None)}),
        # labels with spaces stay intact inside the quotes; = and ' are replaced
        ("mini host", "logs", {"age_s": 5}, {"mini host_logs_age_s": ("5", "s")}),
        (None, "q", {"a=b": 1, "it's": 2}, {"q_a_b": ("1", None), "q_it_s": ("2", None)}),
    ],
)
def test_row_perfdata(
    host: str | None, check: str, metrics: dict[str, Any], expected: dict[str, tuple[str, Any]]
) -> None:
    text = nagios.render(report(Result(check, host, Status.OK, "x", metrics, duration_s=0.5)))
    items = perf_items(text)
    for label, (value, uom) in expected.items():
        assert label in items, (label, sorted(items))
        assert items[label].group("value") == value
        assert items[label].group("uom") == uom
    prefix = f"{host}_{check}" if host else check
    # one item per numeric leaf, plus the row's duration, plus the patrol's five
    leaves = len(list(nagios.flatten("x", metrics)))
    assert leaves >= len(expected)
    assert len(items) == leaves + 1 + 5
    assert items[f"{prefix}_duration"].group("value") == "0.5"
    assert items[f"{prefix}_duration"].group("uom") == "s"


def test_huge_and_negative_values_are_plain_decimals() -> None:
    text = nagios.render(report(Result("q", None, Status.OK, "x", {"huge": 1e20, "neg": -2.5})))
    items = perf_items(text)
    assert items["q_huge"].group("value") == "100000000000000000000"
    assert items["q_neg"].group("value") == "-2.5"


@pytest.mark.parametrize(
    "raw, quoted",
    [
        ("plain", "'plain'"),
        ("with space", "'with space'"),
        ("a=b", "'a_b'"),
        ("it's", "'it_s'"),
        ("pipe|here", "'pipe_here'"),
        ("tab\there", "'tab_here'"),
    ],
)
def test_label_sanitising(raw: str, quoted: str) -> None:
    assert nagios.label(raw) == quoted


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
    assert items["crit"].group("value") == "1"
    assert items["warn"].group("value") == "0" and items["unknown"].group("value") == "0"
    assert items["patrol_duration"].group("value") == "2.25"
    assert items["patrol_duration"].group("uom") == "s"
    # the patrol's own perfdata is on the first line, the rows' after the long output
    assert "'patrol_duration'=2.25s" in head_line
    assert "'h1_a_duration'" not in head_line


def test_multiline_layout_follows_the_plugin_guidelines() -> None:
    rows = [
        Result("clients", "n8", Status.CRIT, "none", {"connections": 0}),
        Result("clients", "n9", Status.OK, "ok", {"connections": 9}),
    ]
    lines = nagios.render(report(*rows)).split("\n")
    assert lines[0].count("|") == 1
    # the last long-output line carries the second '|', then one perfdata item per line
    assert lines[1].startswith("CRIT n8 clients: none | '")
    assert all(line.startswith("'") and "|" not in line for line in lines[2:])
    assert sum(line.count("|") for line in lines) == 2


def test_renderer_does_not_decide_the_exit_code() -> None:
    r = report(Result("clients", "n8", Status.UNKNOWN, "ssh refused"))
    assert nagios.render(r).startswith("FLEETCHECK UNKNOWN")
    assert r.exit_code == 3
