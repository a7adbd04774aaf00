"""[notify]: one message per round through Apprise, state-aware (new, reminded, resolved once,
flapping once, nothing for a round that changed nothing), received by real servers on
loopback: an SMTP server (aiosmtpd), Apprise's json:// webhook and a Mattermost incoming
webhook (mmost://, Slack-compatible), and a receiver that hangs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.core.model import Result, Standing, Status
from fleetcheck.rounds import notify
from fleetcheck.rounds.notify import plan
from fleetcheck.rounds.notify_targets import Settings, Target, resolve
from tests.cli import fleetcheck as fc
from tests.hang import returns_within
from tests.lab import Lab
from tests.notify_receivers import hanging_receiver, http_receiver, smtp_server
from tests.standing import Row, recorded

T0 = "2026-11-29T07:00:00.000Z"
SECRET = "Tok3nS3cretXyz"  # in every URL's token or password: never in any output


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loopback only: an inherited proxy must not route the test traffic elsewhere."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)


def at(minutes: float) -> str:
    """T0 plus `minutes`, as a report's started_at."""
    from datetime import timedelta

    from fleetcheck.iso import iso_utc, parse_iso

    return iso_utc(parse_iso(T0) + timedelta(minutes=minutes))


def crit(
    host: str,
    check: str = "clients",
    alerting: bool = True,
    flapping: bool = False,
    silenced: str | None = None,
) -> Row:
    says = f"{host} has no broker connections"
    row = Result(check, host, Status.CRIT, says, evidence_strength="proof")  # as the runner
    return row, Standing(T0, alerting=alerting, flapping=flapping, silenced=silenced)


def ok(host: str, check: str = "clients", flapping: bool = False) -> Row:
    standing = Standing(T0, alerting=False, flapping=flapping)
    return Result(check, host, Status.OK, "2 connections"), standing


TARGET = Target(1, "json://127.0.0.1:9/x", "[notify] urls[0]", "JSON")


class Rounds:
    """Plans rounds for one target, carrying its ledger entries as after_round does."""

    def __init__(self, target: Target = TARGET, remind_every: float = 3600, **kw: Any) -> None:
        self.target, self.remind_every, self.kw = target, remind_every, kw
        self.told: dict[str, Any] = {}

    def __call__(self, minutes: float, *rows: Row) -> notify.Message | None:
        report = recorded(at(minutes), 1.0, rows)
        message, self.told = plan(report, self.told, self.target, self.remind_every, **self.kw)
        return message


# ---------------------------------------------------------------- what is said (pure)
def test_new_then_quiet_then_reminder_then_resolved_once() -> None:
    rounds = Rounds()
    m = rounds(0, crit("mini"), ok("n8"))
    assert m is not None
    assert [h for h, _ in m.sections] == ["New problems"]
    text = m.text()
    assert "- CRIT mini clients: mini has no broker connections" in text
    assert "since 2026-11-29 07:00 UTC" in text and "evidence: proof" in text
    assert m.footer == "Failing now: 1 row (1 CRIT)."
    assert m.title == "fleetcheck CRIT: 1 new"
    assert rounds(15, crit("mini"), ok("n8")) is None  # nothing changed: nothing sent
    assert rounds(59, crit("mini"), ok("n8")) is None
    m = rounds(60, crit("mini"), ok("n8"))
    assert m is not None and [h for h, _ in m.sections] == ["Still failing (reminder)"]
    assert "since 2026-11-29 07:00 UTC" in m.text()  # since the problem began, not the reminder
    assert rounds(75, crit("mini"), ok("n8")) is None
    m = rounds(90, ok("mini"), ok("n8"))
    assert m is not None and [h for h, _ in m.sections] == ["Recovered"]
    assert "- OK mini clients: 2 connections (was CRIT)" in m.text()
    assert m.footer == "Nothing is failing now."
    assert rounds(105, ok("mini"), ok("n8")) is None  # resolved once


def test_fail_after_holds_back_and_status_change_is_news() -> None:
    rounds = Rounds()
    assert rounds(0, crit("mini", alerting=False)) is None  # not yet fail_after rounds bad
    m = rounds(15, crit("mini"))
    assert m is not None and "New problems" in m.text()
    warn = (
        Result("clients", "mini", Status.WARN, "1 connection", evidence_strength="proof"),
        Standing(at(30), alerting=True),
    )
    m = rounds(30, warn)
    assert m is not None and "(since 2026-11-29 07:30 UTC; evidence: proof; was CRIT)" in m.text()


def test_rows_of_one_cause_are_one_line() -> None:
    cause = "broker 198.18.0.1:6379 did not answer"
    rows = [
        (
            Result("clients", f"n{i}", Status.UNKNOWN, "no broker", cause=cause),
            Standing(T0, alerting=True),
        )
        for i in range(20)
    ]
    m = Rounds()(0, *rows, crit("mini", check="logs"))
    assert m is not None
    lines = [line for line in m.text().splitlines() if line.startswith("- ")]
    assert len(lines) == 2, lines
    assert lines[0].startswith("- CRIT mini logs")
    assert lines[1].startswith(f"- UNKNOWN 20 rows: {cause} (on n0, n1, n10, n11, n12 and 15 more")
    assert "evidence: absence, nothing seen: absence of evidence" in lines[1]
    assert m.footer == "Failing now: 21 rows (1 CRIT, 20 UNKNOWN)."


def test_flapping_is_told_once_and_its_end_too() -> None:
    rounds = Rounds()
    m = rounds(0, crit("mini", flapping=True))
    assert m is not None and [h for h, _ in m.sections] == ["Flapping"]
    assert rounds(15, ok("mini", flapping=True)) is None
    assert rounds(30, crit("mini", flapping=True)) is None
    assert rounds(300, crit("mini", flapping=True)) is None  # no reminders while flapping
    m = rounds(315, ok("mini"))
    assert m is not None and "(stopped flapping)" in m.text()


def test_filters_statuses_hosts_groups_checks() -> None:
    warn = Result("logs", "n8", Status.WARN, "quiet"), Standing(T0, alerting=True)
    broker = Result("broker", None, Status.CRIT, "down"), Standing(T0, alerting=True)
    rows = (crit("mini"), warn, broker, crit("n9", check="logs"))
    groups = {"mini": ("edge",), "n8": ("core",), "n9": ("core",)}

    def said(**filters: Any) -> list[str]:
        target = Target(1, "json://h/x", "w", "JSON", **filters)
        m = Rounds(target, groups_of=groups)(0, *rows)
        return [] if m is None else [x for x in m.text().splitlines() if x.startswith("- ")]

    assert len(said()) == 4
    assert [x.split(":")[0] for x in said(statuses=("CRIT",))] == [
        "- CRIT * broker-wide broker",
        "- CRIT mini clients",
        "- CRIT n9 logs",
    ]
    assert [x.split(":")[0] for x in said(hosts=("n8",))] == [
        "- CRIT * broker-wide broker",  # broker-wide rows concern every host
        "- WARN n8 logs",
    ]
    assert [x.split(":")[0] for x in said(groups=("core",), checks=("logs",))] == [
        "- CRIT n9 logs",
        "- WARN n8 logs",
    ]


def test_silenced_rows_say_nothing_until_the_silence_ends() -> None:
    rounds = Rounds()
    assert rounds(0, crit("mini")) is not None
    assert rounds(15, crit("mini", silenced="silenced until 09:00 UTC (deploy)")) is None
    m = rounds(30, crit("mini"))  # the silence ended, the row still bad: said again
    assert m is not None and "New problems" in m.text()
    m = rounds(45, crit("mini"), crit("n8", silenced="until 09:00 UTC (deploy)"))
    assert m is None
    m = rounds(60, ok("mini"), crit("n8", silenced="until 09:00 UTC (deploy)"))
    assert m is not None and m.footer == "Nothing is failing now; 1 silenced."


def test_links_markdown_and_no_control_characters() -> None:
    hostile = (
        Result("logs", "mini", Status.CRIT, "error: *boom* [x](http://evil) \x1b[2J\rover\u202e"),
        Standing(T0, alerting=True),
    )
    m = Rounds(public_url="https://console.example/fc/")(0, hostile)
    assert m is not None
    text, md = m.text(), m.markdown()
    for body in (text, md, m.title):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", body), body
    assert "https://console.example/fc/row?check=logs&host=mini" in text
    assert "([details](https://console.example/fc/row?check=logs&host=mini))" in md
    assert "\\*boom\\* \\[x\\]\\(http://evil\\)" in md  # shows as written, not as markup


def test_scrub_takes_every_piece_of_the_url_out() -> None:
    url = f"mmost://ops:{SECRET}@chat.example:8065/hooks/{SECRET}x?channel=ops{SECRET}"
    said = (
        f"Failed to send to chat.example: 403 for /hooks/{SECRET}x (user ops:{SECRET}) ops{SECRET}"
    )
    out = notify.scrub(said, url)
    assert SECRET not in out and "chat.example" not in out


# ---------------------------------------------------------------- real receivers, in process
def deliver_rounds(url: str, received: Any, tmp_path: Path) -> list[Any]:
    """Rounds through after_round (ledger file, real delivery): new, quiet, reminder,
    resolution, quiet; what the receiver held after each."""
    settings = Settings((Target(1, url, "[notify] urls[0]", "?"),), remind_every=3600, timeout=5)
    ledger = tmp_path / "state.notify.json"
    seen = []
    for minutes, row in [
        (0, crit("mini")),
        (15, crit("mini")),
        (61, crit("mini")),
        (75, ok("mini")),
        (90, ok("mini")),
    ]:
        warnings: list[str] = []
        outcomes = notify.after_round(
            recorded(at(minutes), 1.0, (row,)), settings, ledger, warnings.append
        )
        assert warnings == []
        assert all(o.error is None for o in outcomes)
        seen.append(list(received()))
    return seen


def test_json_webhook_gets_the_sequence(tmp_path: Path) -> None:
    with http_receiver() as (port, posts):
        seen = deliver_rounds(
            f"json://127.0.0.1:{port}/in/{SECRET}", lambda: posts.on(f"/in/{SECRET}"), tmp_path
        )
    assert [len(s) for s in seen] == [1, 1, 2, 3, 3]
    bodies = seen[-1]
    assert [b["title"] for b in bodies] == [
        "fleetcheck CRIT: 1 new",
        "fleetcheck CRIT: 1 still failing",
        "fleetcheck OK: 1 recovered",
    ]
    assert bodies[0]["message"].startswith("New problems:\n- CRIT mini clients: mini has no")
    assert all(SECRET not in json.dumps(b) for b in bodies)


def test_mattermost_webhook_gets_the_sequence(tmp_path: Path) -> None:
    with http_receiver() as (port, posts):
        seen = deliver_rounds(
            f"mmost://127.0.0.1:{port}/{SECRET}", lambda: posts.on(f"/hooks/{SECRET}"), tmp_path
        )
    assert [len(s) for s in seen] == [1, 1, 2, 3, 3]
    texts = [b["text"] for b in seen[-1]]
    assert "New problems" in texts[0] and "CRIT mini clients" in texts[0]
    assert "Still failing (reminder)" in texts[1]
    assert "Recovered" in texts[2] and "(was CRIT)" in texts[2]


def test_smtp_server_gets_the_sequence(tmp_path: Path) -> None:
    with smtp_server() as (port, box):
        url = f"mailto://127.0.0.1:{port}?from=fleetcheck@example.org&to=ops@example.org&mode=insecure"
        seen = deliver_rounds(url, box.bodies, tmp_path)
    assert [len(s) for s in seen] == [1, 1, 2, 3, 3]
    first, reminder, resolved = seen[-1]
    assert first.startswith("fleetcheck CRIT: 1 new") and "mini clients" in first
    assert "Still failing (reminder)" in reminder
    assert "Recovered" in resolved and "was CRIT" in resolved


def test_failed_delivery_is_a_warning_and_is_sent_again(tmp_path: Path) -> None:
    with hanging_receiver() as port:
        url = f"json://ops:{SECRET}@127.0.0.1:{port}/{SECRET}"
        settings = Settings((Target(2, url, "w", "JSON"),), timeout=1)
        ledger = tmp_path / "l.json"
        warnings: list[str] = []
        returns_within(  # a hang guard (20x the timeout), not a timing
            20,
            lambda: notify.after_round(
                recorded(at(0), 1.0, (crit("mini"),)), settings, ledger, warnings.append
            ),
            "a notify delivery to a receiver that never answers (timeout 1s)",
        )
    # the warning names the bound that ended the delivery
    assert warnings == [
        "notify #2 (JSON): not delivered: timed out after 1s; sent again at the next round"
    ]
    with http_receiver() as (port, posts):
        url = f"json://127.0.0.1:{port}/in"
        # the ledger is per URL: the same URL again, now answering
        settings = Settings((Target(2, url, "w", "JSON"),), timeout=5)
        notify.after_round(recorded(at(0), 1.0, (crit("mini"),)), settings, ledger, warnings.append)
        notify.after_round(
            recorded(at(15), 1.0, (crit("mini"),)), settings, ledger, warnings.append
        )
        assert len(posts.on("/in")) == 1


# ---------------------------------------------------------------- the CLI on the lab
def notify_config(lab: Lab, urls: list[str], extra: str = "") -> Path:
    toml_urls = ", ".join(json.dumps(u) for u in urls)
    return lab.config(extra=f'[notify]\nurls = [{toml_urls}]\nremind_every = "1h"\n{extra}\n')


# the same rounds through the CLI, from docs/outputs.md's example: tests/test_docs_consumers.py


@pytest.mark.lab
def test_lab_hanging_receiver_costs_the_patrol_no_more_than_the_bound(
    lab: Lab, tmp_path: Path
) -> None:
    lab.add_host("mini", sshd=False)
    with hanging_receiver() as port:
        cfg = notify_config(
            lab, [f"json://ops:{SECRET}@127.0.0.1:{port}/{SECRET}"], 'timeout = "2s"'
        )
        # the subprocess timeout is the hang guard (30x the bound): the receiver never
        # lets go by itself; the warning below names the bound that ended the delivery
        proc = fc(
            "run", "-c", str(cfg), "--state", str(tmp_path / "s.json"), "--format", "json",
            timeout=60,
        )  # fmt: skip
    assert proc.returncode == 2 == json.loads(proc.stdout)["exit_code"]
    assert proc.stderr.strip() == (
        "fleetcheck: warning: notify #1 (JSON): not delivered: timed out after 2s; "
        "sent again at the next round"
    )
    assert SECRET not in proc.stdout + proc.stderr


def test_notify_test_reports_each_target(tmp_path: Path) -> None:
    with http_receiver() as (port, posts), hanging_receiver() as hang:
        cfg = tmp_path / "hosts.toml"
        cfg.write_text(
            '[broker]\nurl = "redis://127.0.0.1:1/0"\n[notify]\n'
            f'urls = ["json://127.0.0.1:{port}/t/{SECRET}"]\n'
            'urls_env = "FC_URLS"\ntimeout = "1s"\n'
        )
        proc = fc(
            "notify",
            "-c",
            str(cfg),
            "--test",
            env={"FC_URLS": f"mmost://127.0.0.1:{hang}/{SECRET}"},
        )
        assert len(posts.on(f"/t/{SECRET}")) == 1
    assert proc.returncode == 2
    assert proc.stdout.splitlines() == [
        "notify #1 (JSON): delivered",
        "notify #2 (Mattermost): not delivered: timed out after 1s",
    ]
    assert SECRET not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("notify_table", "env", "message"),
    [
        ('urls = ["nosuch://x/y"]', {}, "[notify] urls[0]: Apprise cannot use this nosuch:// URL"),
        ('urls = ["json://h/x y"]', {}, "[notify] urls[0]: contains spaces or control characters"),
        ('urls_env = "FC_NONE"', {}, "[notify] urls_env FC_NONE: not set in the environment"),
        ('urls_file = "nofile.txt"', {}, "[notify] urls_file nofile.txt: cannot read"),
        ('urls = [{url = "json://h/x", statuses = ["BAD"]}]', {}, "statuses: 'BAD': use WARN"),
        (
            'urls = [{url = "json://h/x", groups = ["nogroup"]}]',
            {},
            "groups: no host is in group 'nogroup'",
        ),
        ('urls = [{url = "json://h/x", hosts = ["nohost"]}]', {}, "hosts: no host 'nohost'"),
        ('urls = ["json://h/x"]\nremind_every = "soon"', {}, "[notify] remind_every: "),
        (
            'urls = ["json://h/x"]\ntimeout = "5m"',
            {},
            "[notify] timeout: must be longer than 0s and at most 1m",
        ),
    ],
)
def test_bad_notify_settings_are_usage_errors(
    tmp_path: Path, notify_table: str, env: dict[str, str], message: str
) -> None:
    cfg = tmp_path / "hosts.toml"
    cfg.write_text(f'[broker]\nurl = "redis://127.0.0.1:1/0"\n[notify]\n{notify_table}\n')
    proc = fc("run", "-c", str(cfg), "--state", str(tmp_path / "s.json"), env=env)
    assert proc.returncode == 3, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1


def test_urls_file_and_env_are_read(tmp_path: Path) -> None:
    from fleetcheck.config import from_dict
    from fleetcheck.core import registry

    (tmp_path / "urls.txt").write_text(
        f"# ops\njson://127.0.0.1:9/{SECRET}\n\nmmost://127.0.0.1:9/t\n"
    )
    data = {
        "broker": {"url": "redis://127.0.0.1:1/0"},
        "notify": {"urls_file": "urls.txt", "urls_env": "FC_URLS"},
    }
    fleet = from_dict(
        data, str(tmp_path / "hosts.toml"), registry.config_type, registry.host_config_types
    )
    settings = resolve(fleet, {"FC_URLS": "json://a:1/x, json://b:2/y"})
    assert settings is not None
    assert [(t.number, t.service, t.where) for t in settings.targets] == [
        (1, "JSON", "[notify] urls_env FC_URLS (URL 1)"),
        (2, "JSON", "[notify] urls_env FC_URLS (URL 2)"),
        (3, "JSON", "[notify] urls_file urls.txt line 2"),
        (4, "Mattermost", "[notify] urls_file urls.txt line 4"),
    ]
