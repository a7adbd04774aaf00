"""The journal source without the lab: its config errors, the output parser (table tests), the
pure evaluate, and the fragment run by /bin/sh on this machine against real journal files
(written by systemd-journal-remote, read by the real journalctl)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fleetcheck.checks.logs import LogsConfig, LogsFacts, journal_fragment
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetcheck.config import ConfigError, HostConfig, build, load
from fleetcheck.core import registry
from fleetcheck.core.hostfacts import LogsHostConfig, LogSpec
from fleetcheck.core.model import Status
from fleetcheck.parse.journal import JournalFacts, parse_journal_facts, parse_journal_output
from tests.lab import JOURNAL_REMOTE, write_journal
from tests.log_rows import evaluate_one

NOW = datetime(2026, 11, 29, 7, 24, 0, tzinfo=UTC)
CFG = LogsConfig()
ROOT = Path(__file__).resolve().parent.parent


def us(t: datetime) -> int:
    return int(t.timestamp() * 1_000_000)


def line(t: datetime, priority: int | None = 6, message: str = "tick") -> str:
    prio = f'"PRIORITY":"{priority}",' if priority is not None else ""
    return (
        f'{{"__CURSOR":"s=1;i=2","__REALTIME_TIMESTAMP":"{us(t)}",{prio}'
        f'"MESSAGE":"{message}","_BOOT_ID":"0123"}}'
    )


# ---------------------------------------------------------------- config errors


@pytest.mark.parametrize(
    "table,message",
    [
        ({}, "path: missing: a log needs path (a file) or journal / journal_match"),
        ({"path": "/l", "journal": "w.service"}, "journal: a log reads either a file"),
        ({"path": "/l", "journal_match": ["A=b"]}, "journal_match: a log reads either a file"),
        ({"journal": "two words"}, "journal: 'two words' is not a unit name"),
        ({"journal": ""}, "journal: '' is not a unit name"),
        ({"journal_match": ["rater"]}, "journal_match[0]: 'rater' is not FIELD=VALUE"),
        ({"journal_match": ["syslog_identifier=x"]}, "journal_match[0]: "),
        ({"journal_match": ["+", "A=b"]}, "journal_match: '+' (or) must stand between"),
        ({"path": "/l", "journal_dir": "/j"}, "journal_dir: only for a journal source"),
        ({"journal": "w", "journal_dir": "rel"}, "journal_dir: must be an absolute path"),
        ({"journal": "w", "format": "json"}, "format: not for a journal source"),
        ({"journal": "w", "regex": "(?P<ts>x)"}, "regex: not for a journal source"),
        ({"journal": "w", "time_field": "t"}, "time_field: not for a journal source"),
        ({"journal": "w", "entries": 0}, "entries: must be between 1 and 100000"),
        ({"path": "/l", "entries": 10}, "entries: only for a journal source (files: tail_bytes)"),
    ],
)
def test_bad_journal_config_is_refused(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        build(LogSpec, table, "hosts.toml", "hosts[0].logs[0]")


def test_a_journal_only_host_needs_no_tz_a_file_log_does() -> None:
    h = build(LogsHostConfig, {"logs": [{"journal": "w"}]}, "h", "x")
    assert h.tz is None and h.logs[0].journal_entries == 300
    with pytest.raises(ConfigError, match="a host with logs needs tz"):
        build(LogsHostConfig, {"logs": [{"journal": "w"}, {"path": "/l"}]}, "h", "hosts[0]")


def test_example_config_shows_a_journal_source_and_a_json_log() -> None:
    fleet = load(ROOT / "hosts.example.toml", registry.config_type, registry.host_config_types)
    logs = [log for h in fleet.hosts for log in h.settings(LogsHostConfig).logs]
    assert any(log.journal for log in logs)
    assert any(log.format == "json" for log in logs)


# ---------------------------------------------------------------- the output parser


def test_parser_reads_times_priorities_and_the_newest_message() -> None:
    text = "\n".join(
        [
            line(NOW, 3, 'lost \\"broker\\", \\"PRIORITY\\":\\"0\\"'),
            line(NOW - timedelta(seconds=1), None),
            line(NOW - timedelta(seconds=2), 6),
            "@@rc 0",
        ]
    )
    read = parse_journal_output(text)
    assert read.times_us == (
        us(NOW),
        us(NOW - timedelta(seconds=1)),
        us(NOW - timedelta(seconds=2)),
    )
    assert read.priorities == (3, None, 6)  # a MESSAGE quoting JSON cannot fake a field
    assert read.newest_message == 'lost "broker", "PRIORITY":"0"'
    assert read.rc == 0 and not read.notes and not read.any_asked


@pytest.mark.parametrize(
    "text,times,rc,notes,any_newest,denied",
    [
        ("@@rc 0\n@@any\n@@rc 0", 0, 0, (), None, False),  # an empty journal
        ("-- No entries --\n@@rc 0\n@@any\n-- No entries --\n@@rc 0", 0, 0, (), None, False),
        (f"@@rc 0\n@@any\n{line(NOW)}\n@@rc 0", 0, 0, (), us(NOW), False),  # no such unit
        (
            "No journal files were opened due to insufficient permissions.\n@@rc 1\n@@any\n"
            "No journal files were opened due to insufficient permissions.\n@@rc 1",
            0,
            1,
            ("No journal files were opened due to insufficient permissions.",),
            None,
            True,
        ),
        (
            "Hint: You are currently not seeing messages from other users and the system.\n"
            f"{line(NOW)}\n@@rc 0",
            1,
            0,
            ("Hint: You are currently not seeing messages from other users and the system.",),
            None,
            True,
        ),
        (f"{line(NOW)}\n{line(NOW)[:40]}", 1, None, (), None, False),  # cut at the byte bound
    ],
)
def test_parser_states(
    text: str, times: int, rc: int | None, notes: tuple[str, ...], any_newest: int | None,
    denied: bool,
) -> None:  # fmt: skip
    read = parse_journal_output(text)
    assert len(read.times_us) == times
    assert read.rc == rc and read.notes == notes
    assert read.any_newest_us == any_newest and read.denied is denied


def test_unexpected_output_is_an_error_row() -> None:
    jf = parse_journal_facts("w.service", 2, "sh: syntax error")
    assert jf.state == "error" and "unexpected output from the host (rc 2)" in jf.detail


# ---------------------------------------------------------------- evaluate


def host(**spec: object) -> HostConfig:
    return HostConfig(name="m", ssh="local").with_settings(
        LogsHostConfig(
            tz="America/New_York",
            logs=(LogSpec(journal="w.service", **spec),),  # type: ignore[arg-type]
        )
    )


def evaluate(text: str, **spec: object) -> tuple[Status, str]:
    jf = parse_journal_facts(LogSpec(journal="w.service", **spec).label, 0, text)  # type: ignore[arg-type]
    r = evaluate_one(LogsFacts((jf,), 0.0), CFG, host(**spec), NOW)
    return r.status, r.summary


def test_recent_journal_is_ok_and_says_its_times_are_utc() -> None:
    status, summary = evaluate(line(NOW - timedelta(seconds=30)) + "\n@@rc 0")
    assert status is Status.OK
    assert summary == (
        "journal w.service: last entry 07:23:30 UTC (journal times are UTC), 30s ago"
    )


def test_stale_journal_is_crit() -> None:
    status, summary = evaluate(line(NOW - timedelta(hours=1)) + "\n@@rc 0")
    assert status is Status.CRIT and "1h00m ago (crit_age 30m00s)" in summary


def test_journal_flood_and_burst() -> None:
    burst = "\n".join(line(NOW - timedelta(microseconds=50 * i), 3) for i in range(300))
    status, summary = evaluate(burst + "\n@@rc 0")
    assert status is Status.WARN, summary
    assert "300 error entries (PRIORITY <= 3) in the newest 300" in summary
    # healthy: one error among many
    healthy = "\n".join(
        line(NOW - timedelta(seconds=10 * i), 3 if i == 7 else 6) for i in range(300)
    )
    status, summary = evaluate(healthy + "\n@@rc 0")
    assert status is Status.OK and "1 error entries" in summary


@pytest.mark.parametrize(
    "text,spec,expected",
    [
        ("@@rc 0\n@@any\n@@rc 0", {}, "the journal is empty (no entries at all)"),
        (
            f"@@rc 0\n@@any\n{line(NOW)}\n@@rc 0",
            {},
            "no entries for unit w.service in the journal (it holds other entries, newest "
            "2026-11-29 07:24:00 UTC): the unit does not exist on this host or never logged",
        ),
        (
            "Failed to open /j: No such file or directory\n@@rc 1\n@@any\n"
            "Failed to open /j: No such file or directory\n@@rc 1",
            {"journal_dir": "/j"},
            "journal directory /j not found",
        ),
        (
            "No journal files were opened due to insufficient permissions.\n@@rc 1",
            {},
            "no permission to read the journal: the SSH user is not in the systemd-journal or "
            "adm group",
        ),
        ("journalctl: bad thing\n@@rc 1\n@@any\njournalctl: bad thing\n@@rc 1", {},
         "journalctl failed: journalctl: bad thing"),
        ("state no-journalctl\n", {}, "journalctl not found on the host"),
    ],
)  # fmt: skip
def test_each_journal_failure_is_its_own_unknown(
    text: str, spec: dict[str, object], expected: str
) -> None:
    status, summary = evaluate(text, **spec)
    assert status is Status.UNKNOWN
    assert summary.startswith(f"journal w.service: {expected}"), summary


# ---------------------------------------------------------------- the fragment, for real


def need_journal_tools() -> None:
    if not (shutil.which("journalctl") and os.path.exists(JOURNAL_REMOTE)):
        if os.environ.get("FLEETCHECK_REQUIRE_LAB") == "1":
            pytest.fail("needs journalctl and systemd-journal-remote")
        pytest.skip("needs journalctl and systemd-journal-remote")


def run_fragment(spec: LogSpec, path: str | None = None) -> JournalFacts:
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    proc = subprocess.run(["/bin/sh", "-c", journal_fragment(spec)], capture_output=True, env=env)
    return parse_journal_facts(spec.label, proc.returncode, proc.stdout.decode())


def test_fragment_reads_a_real_journal_newest_first_and_bounded(tmp_path: Path) -> None:
    need_journal_tools()
    now = datetime.now(UTC)
    d = tmp_path / "journal"
    entries: list[dict[str, str | bytes | int]] = [
        {
            "__REALTIME_TIMESTAMP": us(now - timedelta(seconds=500 - i)),
            "_SYSTEMD_UNIT": "worker.service" if i % 2 else "cron.service",
            "PRIORITY": 3 if i % 10 == 1 else 6,
            "MESSAGE": f"entry {i}\nwith a second line and a 'quote' and a $HOME",
        }
        for i in range(500)
    ]
    write_journal(d, entries)
    spec = LogSpec(journal="worker.service", journal_dir=str(d), entries=100)
    jf = run_fragment(spec)
    assert jf.read is not None and jf.read.rc == 0
    assert jf.read.count == 100  # -n bounds it
    assert jf.read.times_us[0] == entries[499]["__REALTIME_TIMESTAMP"]  # newest first
    assert jf.read.newest_message == str(entries[499]["MESSAGE"])
    # besides the newest, only the 20 error entries of the 100 crossed the wire
    assert len(jf.read.times_us) == 21 and jf.read.priorities.count(3) == 20
    errors = [e["__REALTIME_TIMESTAMP"] for e in entries[301:] if e["PRIORITY"] == 3]
    assert sorted(jf.read.times_us[1:]) == sorted(errors)
    match = LogSpec(journal_match=("_SYSTEMD_UNIT=cron.service",), journal_dir=str(d))
    jm = run_fragment(match)
    assert jm.read is not None and jm.read.count == 250 and len(jm.read.times_us) == 1


def test_fragment_quotes_hostile_values(tmp_path: Path) -> None:
    need_journal_tools()
    marker = tmp_path / "pwned"
    spec = LogSpec(
        journal="x';touch${IFS}/tmp/x;'",
        journal_match=(f"MESSAGE=x'; touch {marker}; '",),
        journal_dir=f"{tmp_path}/$(touch {marker})",
    )
    jf = run_fragment(spec)
    assert not marker.exists()
    assert jf.read is not None and jf.read.rc == 1


def test_fragment_retries_without_output_fields_on_old_systemd(tmp_path: Path) -> None:
    """systemd before 236 has no --output-fields: a shim that refuses it (as old journalctl
    does) in front of the real one; the fragment asks again without it."""
    need_journal_tools()
    now = datetime.now(UTC)
    d = tmp_path / "journal"
    write_journal(d, [{"__REALTIME_TIMESTAMP": us(now), "_SYSTEMD_UNIT": "w.service",
                       "PRIORITY": 3, "MESSAGE": "x"}])  # fmt: skip
    shim = tmp_path / "bin"
    shim.mkdir()
    real = shutil.which("journalctl")
    (shim / "journalctl").write_text(
        '#!/bin/sh\nfor a; do case "$a" in --output-fields*) '
        "echo \"journalctl: unrecognized option '$a'\" >&2; exit 1;; esac; done\n"
        f'exec {real} "$@"\n'
    )
    (shim / "journalctl").chmod(0o755)
    jf = run_fragment(LogSpec(journal="w.service", journal_dir=str(d)), f"{shim}:/usr/bin:/bin")
    assert jf.read is not None and jf.read.rc == 0
    assert jf.read.times_us == (us(now),) and jf.read.priorities == (3,)
    assert jf.read.count == 1


def test_fragment_without_journalctl(tmp_path: Path) -> None:
    jf = run_fragment(LogSpec(journal="w.service"), str(tmp_path))
    assert jf.state == "no-journalctl"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=80),
            st.sampled_from(["@@rc 0", "@@rc 1", "@@any", "e 1795936920000000 3", "e x y"]),
            st.builds(lambda t, p: line(NOW - timedelta(seconds=t), p),
                      st.integers(0, 10**6), st.one_of(st.none(), st.integers(0, 7))),
        ),
        max_size=10,
    )
)  # fmt: skip
def test_any_journal_output_evaluates_to_a_row(lines: list[str]) -> None:
    text = "\n".join(lines)
    read = parse_journal_output(text)
    assert len(read.times_us) == len(read.priorities)
    status, summary = evaluate(text)
    assert summary.startswith("journal w.service: ")


def test_journal_only_host_without_tz_is_judged() -> None:
    spec = LogSpec(journal="w.service")
    h = HostConfig(name="m", ssh="local").with_settings(LogsHostConfig(logs=(spec,)))
    jf = parse_journal_facts(spec.label, 0, line(NOW - timedelta(seconds=30)) + "\n@@rc 0")
    r = evaluate_one(LogsFacts((jf,), 0.0), CFG, h, NOW)
    assert r.status is Status.OK and r.evidence["tz"] == "UTC"


def test_parser_reads_the_hosts_compacted_form() -> None:
    text = "\n".join(
        [line(NOW, 6), f"e {us(NOW - timedelta(seconds=3))} 3", "e x y", "@@rc 0", "n 300"]
    )
    read = parse_journal_output(text)
    assert read.count == 300 and read.rc == 0
    assert read.times_us == (us(NOW), us(NOW - timedelta(seconds=3)))
    assert read.priorities == (6, 3)


@pytest.mark.parametrize(
    "stamp",
    ["99999999999999999999", "253402300800000000", "1e300", "\u0661\u0662\u0663"],
)
def test_item14_a_journal_time_past_year_9999_is_skipped_with_a_note(stamp: str) -> None:
    """Issue 22 item 14 for the journal: a realtime stamp no datetime can hold (or not ASCII
    digits) is a note on the row, never a time and never an internal error."""
    good = 1_700_000_000_000_000
    text = (
        f'{{"__REALTIME_TIMESTAMP":"{stamp}","PRIORITY":"3","MESSAGE":"x"}}\n'
        f"e {stamp} 3\n"
        f'{{"__REALTIME_TIMESTAMP":"{good}","PRIORITY":"6","MESSAGE":"ok"}}\n'
        "@@rc 0"
    )
    read = parse_journal_output(text)
    assert read.times_us == (good,)
    assert all("unusable time" in n for n in read.notes) and read.notes
