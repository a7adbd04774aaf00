"""Silences: a silenced row still shows, marked, in every output, but does not alert, notify
or raise the exit code; a silence ends on its own and says so; [silences] windows recur
daily. The lab test runs the real CLI against a real Alertmanager-style receiver (the alerts
fleetcheck posts) and an Apprise json:// receiver."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleetcheck.config.tables import SilenceWindow
from fleetcheck.core.model import Report, Result, Status
from fleetcheck.render import prometheus
from fleetcheck.rounds import silences
from fleetcheck.rounds.alerting import build_alerts
from fleetcheck.rounds.silences import matches, window_active
from tests.cli import fleetcheck as fc
from tests.lab import Lab, wait_for
from tests.notify_receivers import http_receiver
from tests.standing import silenced

T0 = datetime(2026, 11, 29, 2, 10, tzinfo=UTC)


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)


@pytest.mark.parametrize(
    ("target", "check", "host", "expected"),
    [
        ("mini", "clients", "mini", True),
        ("mini", "clients", "n8", False),
        ("clients", "clients", "n8", True),
        ("clients", "clients", None, True),
        ("mini/clients", "clients", "mini", True),
        ("mini/clients", "logs", "mini", False),
        ("mini/*", "logs", "mini", True),
        ("*/logs", "logs", None, True),
        ("*", "broker", None, True),
        ("mini", "broker", None, False),  # a broker-wide row belongs to no host
    ],
)
def test_matches(target: str, check: str, host: str | None, expected: bool) -> None:
    assert matches(target, check, host) is expected


@pytest.mark.parametrize(
    ("daily", "hh_mm", "expected"),
    [
        ("02:00-02:30", "02:00", True),
        ("02:00-02:30", "02:29", True),
        ("02:00-02:30", "02:30", False),
        ("02:00-02:30", "01:59", False),
        ("23:50-00:20", "23:55", True),
        ("23:50-00:20", "00:10", True),
        ("23:50-00:20", "00:20", False),
        ("23:50-00:20", "12:00", False),
    ],
)
def test_daily_windows(daily: str, hh_mm: str, expected: bool) -> None:
    w = SilenceWindow("mini", daily, "deploys")
    h, m = (int(x) for x in hh_mm.split(":"))
    assert window_active(*w.minutes(), T0.replace(hour=h, minute=m)) is expected


def rows() -> tuple[Result, ...]:
    return (
        Result("clients", "mini", Status.CRIT, "no broker connections", evidence_strength="proof"),
        Result("clients", "n8", Status.OK, "2 connections"),
    )


def test_apply_marks_and_the_exit_code_ignores_silenced_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.silences.json"
    silences.add(path, "mini", 7200, "deploy \x1b[2J", T0)
    report = silenced(Report(T0.isoformat(), 1.0, rows()), path)
    mini = next(r for r in report.results if r.host == "mini")
    assert mini.status is Status.CRIT
    words = report.standing_of(mini).silenced
    assert words == "silenced until 2026-11-29 04:10 UTC (deploy \\x1b[2J)"
    assert mini.summary.startswith(words + ": no broker connections")
    assert not report.standing_of(mini).pages(mini.status)
    assert report.exit_code == 0 and report.status is Status.OK
    assert report.to_dict()["results"][0]["silenced"] == words
    # no firing alert, and the textfile's alerting gauge is 0
    firing = [a for a in build_alerts(report, now=T0) if a["endsAt"] != a["startsAt"]]
    assert firing == []
    text = prometheus.render(report)
    assert 'fleetcheck_check_alerting{check="clients",host="mini"} 0.0' in text
    assert "fleetcheck_severity 0.0" in text
    # unsilenced, the same rows would fail the patrol
    assert Report(T0.isoformat(), 1.0, rows()).exit_code == 2


def test_a_silence_ends_on_its_own_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "s.silences.json"
    s = silences.add(path, "mini/clients", 1800, "swap disk", T0)
    later = (T0 + timedelta(minutes=31)).isoformat()
    report = silenced(Report(later, 1.0, rows()), path)
    assert report.exit_code == 2
    assert report.notes == (
        f"silence {s.id} of mini/clients ended at 2026-11-29 02:40 UTC (it was: swap disk)",
    )
    again = silenced(Report(later, 1.0, rows()), path)
    assert again.notes == ()  # said once
    assert silences.SilenceFile(path).read() == []


def test_config_windows_silence_daily(tmp_path: Path) -> None:
    w = SilenceWindow("clients", "02:00-02:30", "deploys")
    inside = silenced(Report(T0.isoformat(), 1.0, rows()), None, [w])
    assert inside.exit_code == 0
    assert (
        inside.standing_of(inside.results[0]).silenced == "silenced daily 02:00-02:30 UTC (deploys)"
    )
    outside = (T0 + timedelta(minutes=20)).isoformat()
    assert silenced(Report(outside, 1.0, rows()), None, [w]).exit_code == 2


def test_damaged_silences_file_is_set_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.silences.json"
    path.write_text("{not json")
    assert silences.SilenceFile(path).read() == []
    assert "unreadable" in capsys.readouterr().err
    assert list(tmp_path.glob("s.silences.json.corrupt-*"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["nohost", "--for", "2h", "--reason", "x"],
            "silence nohost: neither a host in the config nor a check",
        ),
        (["mini/nocheck", "--for", "2h", "--reason", "x"], "no check 'nocheck'"),
        (
            ["no host", "--for", "2h", "--reason", "x"],
            "expected HOST, CHECK, HOST/CHECK or HOST/CHECK/ITEM",
        ),
        (["mini", "--reason", "x"], "--for DURATION is required"),
        (["mini", "--for", "2h"], "--reason TEXT is required"),
        (["mini", "--for", "40d", "--reason", "x"], "--for 40d: at most 30d"),
        (["mini", "--for", "soon", "--reason", "x"], "--for: bad duration"),
        (["end"], "name the silence"),
        (["end", "abc123"], "no running silence"),
    ],
)
def test_silence_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    cfg = tmp_path / "hosts.toml"
    cfg.write_text(
        '[broker]\nurl = "redis://127.0.0.1:1/0"\n[[hosts]]\nname = "mini"\nssh = "local"\n'
    )
    proc = fc("silence", *args, "-c", str(cfg), "--state", str(tmp_path / "state.json"))
    assert proc.returncode == 3, proc.stderr
    assert message in proc.stderr


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            '[[silences.windows]]\nmatch = "mini"\ndaily = "2:00-2:30"\nreason = "x"',
            "daily: '2:00-2:30': expected HH:MM-HH:MM",
        ),
        (
            '[[silences.windows]]\nmatch = "mini"\ndaily = "02:00-02:00"\nreason = "x"',
            "the window is empty",
        ),
        (
            '[[silences.windows]]\nmatch = "a b"\ndaily = "02:00-02:30"\nreason = "x"',
            "match: 'a b': expected HOST",
        ),
        (
            '[[silences.windows]]\nmatch = "mini"\ndaily = "02:00-02:30"\nreason = " "',
            "reason: say why",
        ),
        ('[[silences.windows]]\nmatch = "mini"\ndaily = "02:00-02:30"', "reason: missing"),
    ],
)
def test_bad_silence_windows(tmp_path: Path, table: str, message: str) -> None:
    cfg = tmp_path / "hosts.toml"
    cfg.write_text(f'[broker]\nurl = "redis://127.0.0.1:1/0"\n{table}\n')
    proc = fc("config", "check", "-c", str(cfg))
    assert proc.returncode == 3
    assert "[silences.windows[0]]" in proc.stderr and message in proc.stderr, proc.stderr


@pytest.mark.lab
def test_lab_silenced_crit_row(lab: Lab, tmp_path: Path) -> None:
    lab.add_host("mini", sshd=False)  # no workers: clients CRIT
    state = tmp_path / "state.json"
    with http_receiver() as (port, posts):
        cfg = lab.config(extra=f'[notify]\nurls = ["json://127.0.0.1:{port}/n"]\n')
        base = ["-c", str(cfg), "--state", str(state)]
        from tests.test_docs_consumers import silence_commands

        first = silence_commands()[0]  # docs/outputs.md's: silence mini --for 2h --reason ...
        assert first == ["silence", "mini", "--for", "2h", "--reason", "replacing its disk"]
        proc = fc(*first, *base)
        assert proc.returncode == 0, proc.stderr
        assert "silenced mini until" in proc.stdout
        listed = fc("silence", "list", *base)
        assert "mini" in listed.stdout and "replacing its disk" in listed.stdout

        def run(offset_s: float, *args: str) -> tuple[int, str, str]:
            p = fc(
                "run",
                *base,
                f"--alertmanager=http://127.0.0.1:{port}",
                *args,
                env={"FLEETCHECK_TEST_CLOCK_OFFSET_S": str(offset_s)},
            )
            return p.returncode, p.stdout, p.stderr

        code, out, err = run(0, "--format", "json")
        assert (code, err) == (0, "")
        row = next(r for r in json.loads(out)["results"] if r["host"] == "mini")
        assert row["status"] == "CRIT" and row["alerting"] is False
        assert row["silenced"].endswith("(replacing its disk)")
        code, out, _ = run(60, "--format", "table")
        assert code == 0 and "silenced until" in out and "replacing its disk" in out
        code, out, _ = run(120, "--format", "nagios")
        assert code == 0 and "silenced until" in out
        alerts = [a for batch in posts.on("/api/v2/alerts") for a in batch]
        assert alerts and all(a["endsAt"] == a["startsAt"] for a in alerts)  # none firing
        assert posts.on("/n") == []  # no notification
        # two hours later the silence has ended by itself; mini is still CRIT: one message
        code, out, err = run(7300, "--format", "json")
        assert code == 2, err
        data = json.loads(out)
        assert any("ended at" in n and "replacing its disk" in n for n in data["notes"])
        wait_for(lambda: len(posts.on("/n")) == 1, 10, "the notification")
        assert "CRIT mini clients" in posts.on("/n")[0]["message"]
        run(7400, "--format", "json")
        assert len(posts.on("/n")) == 1
        firing = [a for a in posts.on("/api/v2/alerts")[-1] if a["endsAt"] != a["startsAt"]]
        assert [a["labels"]["host"] for a in firing] == ["mini"]
