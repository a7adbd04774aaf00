"""Outputs of real patrols of a demo fleet: --format json against its JSON Schema
(fleetcheck/report.schema.json, shipped in the wheel), checked with the reference validator
(jsonschema, a test dependency): the schema is valid, real `run -f json` output conforms (rows
with and without state), it rejects what the format forbids (so the checks above can fail), and
the renderer writes metrics as numbers only. And `run --problems` on the same fleet."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from jsonschema import Draft202012Validator

from fleetcheck.core.model import Report, Result, Status
from fleetcheck.render import json as render_json

ROOT = Path(__file__).resolve().parent.parent


def validator() -> Draft202012Validator:
    schema = render_json.schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def errors(doc: Any) -> list[str]:
    return [e.message for e in validator().iter_errors(doc)]


def fleetcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fleetcheck", *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def demo_fleet() -> Any:
    """A demo fleet left running (loopback hosts, a real redis-server), stopped afterwards."""
    proc = fleetcheck("demo", "--local", "--keep", "--format", "json")
    if "needs redis-server" in proc.stderr:
        pytest.skip("redis-server missing")
    config = re.search(r"fleetcheck run -c (\S+)", proc.stdout)
    stop = re.search(r"sh (\S+/stop\.sh)", proc.stdout)
    assert config and stop, proc.stdout + proc.stderr
    try:
        yield proc.stdout, config.group(1)
    finally:
        subprocess.run(["sh", stop.group(1)], check=True, timeout=60)


def first_json(text: str) -> Any:
    start = text.index("\n{") + 1
    doc, _ = json.JSONDecoder().raw_decode(text[start:])
    return doc


def test_the_schema_is_valid_draft_2020_12() -> None:
    validator()


def test_real_output_conforms_with_and_without_state(demo_fleet: Any, tmp_path: Path) -> None:
    demo_out, config = demo_fleet
    docs = [first_json(demo_out)]
    state = tmp_path / "state.json"
    for _ in range(2):  # the second round has since/bad_rounds/alerting/flapping
        proc = fleetcheck("run", "-c", config, "-f", "json", "--state", str(state))
        assert proc.returncode == 2, proc.stderr
        docs.append(json.loads(proc.stdout))
    assert any("since" in row for row in docs[-1]["results"])
    for doc in docs:
        assert errors(doc) == []
        assert {row["status"] for row in doc["results"]} >= {"OK", "WARN", "CRIT"}
        for row in doc["results"]:
            assert isinstance(row["metrics"], dict) and row["metrics"], row  # numbers kept
            # every row with metrics names its declared headline, which is one of them
            assert row["headline"] in row["metrics"], row
            assert isinstance(row["limits"], dict), row


@pytest.mark.parametrize(
    "change, complaint",
    [
        (lambda d: d["results"][0]["metrics"].update(tz="UTC"), "is not valid"),
        (lambda d: d["results"][0]["metrics"].update(consumed=True), "is not valid"),
        (lambda d: d["results"][0]["metrics"].update(n={"a": "b"}), "is not valid"),
        (lambda d: d["results"][0]["metrics"].update(samples=[1, "x"]), "is not valid"),
        (lambda d: d["results"][0]["metrics"].update(n={"a": [None]}), "is not valid"),
        (lambda d: d["results"][0]["limits"].update(tz="UTC"), "is not valid"),
        (lambda d: d["results"][0].pop("limits"), "is a required property"),
        (lambda d: d["results"][0].update(headline="Not A Name"), "is not valid"),
        (lambda d: d["results"][0].pop("headline"), "is a required property"),
        (lambda d: d["results"][0].update(status="CRITICAL"), "is not one of"),
        (lambda d: d["results"][0].update(host="(broker)"), "is not valid"),
        (lambda d: d["results"][0].update(since="2026-11-29T07:00:00Z"), "dependency"),
        (lambda d: d.update(started_at="2026-11-29 07:00:00"), "does not match"),
        (lambda d: d.update(exit_code=4), "is not one of"),
        (lambda d: d.pop("results"), "is a required property"),
        (lambda d: d.update(extra=1), "Additional properties"),
        (lambda d: d["results"][0].pop("evidence_strength"), "is a required property"),
        (lambda d: d["results"][0].update(evidence_strength="hunch"), "is not one of"),
    ],
)
def test_the_schema_rejects_what_the_format_forbids(change: Any, complaint: str) -> None:
    report = Report(
        "2026-11-29T07:00:00.000Z",
        1.0,
        (
            Result(
                "clients",
                "n8",
                Status.CRIT,
                "no broker connections",
                {"connections": 0},
                limits={"min_clients": 1},
                headline="connections",
                evidence_strength="proof",
            ),
        ),
    )
    doc = json.loads(render_json.render(report))
    assert errors(doc) == []
    change(doc)
    found = errors(doc)
    assert found and any(complaint in e for e in found), found


def test_limits_and_headline_are_shown_apart_from_the_metrics() -> None:
    row = Result(
        "queue_depth",
        None,
        Status.WARN,
        "x",
        {"depth": 90, "lengths": {"q": 90}},
        limits={"cap": 100, "warn_at_ratio": 0.8, "max_wait_s": None, "mode": "rpush"},
        headline="depth",
        evidence_strength="proof",
    )
    doc = json.loads(render_json.render(Report("2026-11-29T07:00:00.000Z", 1.0, (row,))))
    assert errors(doc) == []
    shown = doc["results"][0]
    assert shown["metrics"] == {"depth": 90, "lengths": {"q": 90}}
    assert shown["limits"] == {"cap": 100, "warn_at_ratio": 0.8, "max_wait_s": None}
    assert shown["headline"] == "depth"
    bare = Result("broker", None, Status.UNKNOWN, "unreachable")
    doc = json.loads(render_json.render(Report("2026-11-29T07:00:00.000Z", 1.0, (bare,))))
    assert errors(doc) == [] and doc["results"][0]["limits"] == {}
    assert doc["results"][0]["headline"] is None


def test_metrics_are_written_as_numbers_only() -> None:
    metrics = {
        "connections": 3,
        "age_s": 1.5,
        "consumed": True,
        "tz": "UTC",
        "maxclients": None,
        "nan": math.nan,
        "samples": [167, 167],
        "words": ["a"],
        "by_addr": {"198.18.0.10": 2, "fe80::1": False, "label": "x"},
        "empty": {},
    }
    report = Report("2026-11-29T07:00:00.000Z", 1.0, (Result("q", None, Status.OK, "x", metrics),))
    doc = json.loads(render_json.render(report))
    assert errors(doc) == []
    assert doc["results"][0]["metrics"] == {
        "connections": 3,
        "age_s": 1.5,
        "consumed": 1,
        "maxclients": None,
        "nan": None,
        "samples": [167, 167],
        "by_addr": {"198.18.0.10": 2, "fe80::1": 0},
        "empty": {},
    }


def test_the_wheel_ships_the_schema(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "-o", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("fleetcheck-*.whl")
    with zipfile.ZipFile(wheel) as z:
        shipped = json.loads(z.read("fleetcheck/report.schema.json"))
    assert shipped == render_json.schema()
    jsonschema.validators.validator_for(shipped).check_schema(shipped)


def test_run_problems_on_the_demo_fleet(demo_fleet: Any) -> None:
    """`run --problems`: only the rows not OK, the footer still counting every row; refused
    with a machine format (they always carry every row)."""
    _, config = demo_fleet
    full = json.loads(fleetcheck("run", "-c", config, "-f", "json", "--no-state").stdout)
    bad = [r for r in full["results"] if r["status"] != "OK"]
    assert bad and len(bad) < len(full["results"])
    proc = fleetcheck("run", "-c", config, "-f", "plain", "--no-state", "--problems")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stdout.splitlines()
    table = [line for line in lines[2 : lines.index("")] if not line.startswith(" ")]  # wrapped
    assert sorted(line.split()[0] for line in table) == sorted(r["status"] for r in bad)
    assert not any(line.startswith("OK ") for line in lines)
    footer = [line for line in lines if " rows: " in line][0]
    ok = sum(r["status"] == "OK" for r in full["results"])
    assert f"{len(full['results'])} rows: {ok} OK" in footer
    assert not any(line != line.rstrip() for line in lines)
    refused = fleetcheck("run", "-c", config, "-f", "json", "--no-state", "--problems")
    assert refused.returncode == 3 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "--problems" in refused.stderr


def test_real_prometheus_names_carry_the_json_metrics_units(demo_fleet: Any) -> None:
    """Every numeric metric of a real patrol appears in Prometheus under its check, with the
    base unit its JSON name's suffix says (or none for a count), and promtool accepts it all."""
    from prometheus_client.parser import text_string_to_metric_families

    from fleetcheck.render import prometheus

    _, config = demo_fleet
    doc = json.loads(fleetcheck("run", "-c", config, "-f", "json", "--no-state").stdout)
    text = fleetcheck("run", "-c", config, "-f", "prometheus", "--no-state").stdout
    promtool = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert promtool.returncode == 0, promtool.stdout + promtool.stderr
    families = {f.name for f in text_string_to_metric_families(text)}
    units = {"_s": "_seconds", "_per_s": "_per_second", "_bytes": "_bytes", "_ratio": "_ratio"}
    seen = 0
    for row in doc["results"]:
        for metric, value in row["metrics"].items():
            if not isinstance(value, int | float):
                continue
            name, _ = prometheus.metric_name(row["check"], metric)
            assert name in families, (row["check"], metric, name)
            suffix = max((s for s in units if metric.endswith(s)), key=len, default="")
            tail = [u for u in set(units.values()) if name.endswith(u)]
            assert tail == ([units[suffix]] if suffix else []), (metric, name)
            seen += 1
    assert seen >= 20
