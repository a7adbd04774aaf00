"""The settings issue 9 added, through the real validator and renderers: known_hosts as a
list, [patrol] adaptive, and the report's notes in every human format and in JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleetcheck.config import ConfigError, load
from fleetcheck.core import registry
from fleetcheck.core.model import Report, Result, Status
from tests.test_config import GOOD


def load_text(tmp_path: Path, text: str) -> object:
    p = tmp_path / "hosts.toml"
    p.write_text(text)
    return load(p, registry.config_type, registry.host_config_types)


def test_known_hosts_may_be_a_list_and_adaptive_a_flag(tmp_path: Path) -> None:
    fleet = load_text(
        tmp_path,
        GOOD.replace(
            "[broker]",
            '[ssh]\nknown_hosts = ["~/a", "/b"]\n[patrol]\nadaptive = false\n[broker]',
        ),
    )
    assert fleet.ssh.known_hosts_files == ("~/a", "/b")  # type: ignore[attr-defined]
    assert fleet.patrol.adaptive is False  # type: ignore[attr-defined]
    single = load_text(tmp_path, GOOD.replace("[broker]", '[ssh]\nknown_hosts = "/k"\n[broker]'))
    assert single.ssh.known_hosts_files == ("/k",)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("[ssh]\nknown_hosts = []\n", "[ssh] known_hosts: must name at least one file"),
        ("[ssh]\nknown_hosts = 3\n", "[ssh] known_hosts: expected a string"),
        ("[ssh]\nknown_hosts = [3]\n", "known_hosts[0]: expected a string"),
        ('[patrol]\nadaptive = "yes"\n', "[patrol] adaptive: expected true or false"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, GOOD.replace("[broker]", table + "[broker]"))
    assert message in str(info.value)


NOTE = "patrol slowed down: SSH handshakes took up to 900 ms (fastest 20 ms), ..."


@pytest.fixture
def report() -> Report:
    row = Result("routes", "n8", Status.OK, "one default route")
    return Report(
        started_at="2026-11-29T06:21:00.000Z", duration_s=1.0, results=(row,), notes=(NOTE,)
    )


def test_plain_and_table_footers_say_the_patrol_slowed_down(report: Report) -> None:
    from rich.console import Console

    from fleetcheck.render import plain, table

    assert f"note: {NOTE}" in plain.render(report)
    console = Console(record=True, width=200)
    table.render(report, console)
    assert f"note: {NOTE}" in console.export_text()


def test_json_has_notes_only_when_there_are_some(report: Report) -> None:
    assert report.to_dict()["notes"] == [NOTE]
    quiet = Report(report.started_at, report.duration_s, report.results)
    assert "notes" not in json.loads(json.dumps(quiet.to_dict()))
