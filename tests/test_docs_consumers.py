"""docs/outputs.md's consumer examples, used as written (only hosts, ports and paths swapped for
the test's own): [notify] against a real SMTP server, a Mattermost webhook and a json://
receiver; the silence commands and windows; the Nagios and Icinga samples are the contrib files;
Prometheus scrapes `fleetcheck serve` and node_exporter and fires the shipped rule for mini;
`promtool test rules` passes on the shipped rules."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.config import from_dict
from fleetcheck.core import registry
from fleetcheck.core.model import Report, Result, Status
from tests.cli import fleetcheck as fc
from tests.lab import Lab, free_port, port_open, wait_for
from tests.notify_receivers import http_receiver, smtp_server
from tests.serve_util import serving
from tests.standing import silenced
from tests.test_prometheus import node_exporter  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs/outputs.md"


def example(name: str) -> str:
    """The fenced block after `<!-- example: NAME -->` in docs/outputs.md."""
    m = re.search(rf"<!-- example: {name} -->\n```[a-z]*\n(.*?)```", DOC.read_text(), re.S)
    assert m, f"docs/outputs.md has no example {name!r}"
    return m.group(1)


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("ALL_PROXY", raising=False)


# ---------------------------------------------------------------- the samples are the files
@pytest.mark.parametrize(
    ("name", "path"),
    [("nagios", "contrib/nagios/fleetcheck.cfg"), ("icinga", "contrib/icinga2/fleetcheck.conf")],
)
def test_the_doc_shows_the_shipped_samples(name: str, path: str) -> None:
    assert example(name) == (ROOT / path).read_text()


# ---------------------------------------------------------------- [notify]
@pytest.mark.lab
def test_notify_example_reaches_mail_chat_and_webhook(lab: Lab, tmp_path: Path) -> None:
    mini = lab.add_host("mini", sshd=False)  # no workers: clients CRIT
    state = tmp_path / "state.json"
    with smtp_server() as (smtp_port, box), http_receiver() as (http_port, posts):
        table = (
            example("notify")
            .replace("localhost:25", f"127.0.0.1:{smtp_port}")
            .replace("chat.example.org:8065", f"127.0.0.1:{http_port}")
        )
        cfg = lab.config(extra=table)
        env = {"FLEETCHECK_NOTIFY_URLS": f"json://127.0.0.1:{http_port}/fleetcheck"}

        def patrol(offset_s: float, expect_exit: int) -> None:
            proc = fc(
                "run", "-c", str(cfg), "--state", str(state), "--format", "json",
                env={**env, "FLEETCHECK_TEST_CLOCK_OFFSET_S": str(offset_s)},
            )  # fmt: skip
            assert proc.returncode == expect_exit, proc.stderr
            assert proc.stderr == ""
            assert "HOOKTOKEN" not in proc.stdout

        def counts() -> tuple[int, int, int]:
            return (
                len(box.bodies()),
                len(posts.on("/hooks/HOOKTOKEN")),
                len(posts.on("/fleetcheck")),
            )

        patrol(0, 2)
        wait_for(lambda: counts() == (1, 1, 1), 10, "the first messages")
        patrol(600, 2)  # nothing changed: nothing sent
        patrol(4 * 3600 + 60, 2)  # remind_every = "4h" after the first message
        wait_for(lambda: counts() == (2, 2, 2), 10, "the reminders")
        workers = lab.start_workers(mini, 2)
        try:
            patrol(4 * 3600 + 660, 0)
            wait_for(lambda: counts() == (3, 3, 3), 10, "the resolutions")
            patrol(4 * 3600 + 1260, 0)
        finally:
            lab.stop(workers)
        assert counts() == (3, 3, 3)
        sequences = [
            box.bodies(),
            [b["text"] for b in posts.on("/hooks/HOOKTOKEN")],
            [b["message"] for b in posts.on("/fleetcheck")],
        ]
    for seq in sequences:
        assert "New problems" in seq[0] and "mini clients" in seq[0], seq[0]
        assert "Still failing (reminder)" in seq[1]
        assert "Recovered" in seq[2]
        assert all("HOOKTOKEN" not in s for s in seq)
    link = "https://fleetcheck.example.org/row?check=clients&host=mini"
    assert link in sequences[2][0]  # the JSON receiver gets plain text with the link
    assert link.replace("&", "&amp;") in sequences[0][0]  # the e-mail is HTML


# ---------------------------------------------------------------- silences
def silence_commands() -> list[list[str]]:
    return [shlex.split(line)[1:] for line in example("silence").splitlines()]


def test_silence_example_commands(tmp_path: Path) -> None:
    cfg = tmp_path / "hosts.toml"
    cfg.write_text(
        '[broker]\nurl = "redis://127.0.0.1:1/0"\n[[hosts]]\nname = "mini"\nssh = "local"\n'
    )
    outputs = []
    for args in silence_commands():
        proc = fc(*args, "-c", str(cfg), "--state", str(tmp_path / "state.json"))
        assert proc.returncode == 0, (args, proc.stderr)
        outputs.append(proc.stdout)
    assert outputs[0].startswith("silenced mini until ")
    assert "replacing its disk" in outputs[1]
    assert outputs[2].startswith("ended silence ")


def test_silence_windows_example(tmp_path: Path) -> None:
    import tomllib

    data = {"broker": {"url": "redis://127.0.0.1:1/0"}, **tomllib.loads(example("silence-windows"))}
    fleet = from_dict(
        data, str(tmp_path / "h.toml"), registry.config_type, registry.host_config_types
    )
    row = Result("clients", "mini", Status.CRIT, "no broker connections", evidence_strength="proof")
    for hh_mm, code in (("02:10", 0), ("02:30", 2), ("01:59", 2)):
        at = datetime(2026, 11, 29, int(hh_mm[:2]), int(hh_mm[3:]), tzinfo=UTC).isoformat()
        report = silenced(Report(at, 1.0, (row,)), None, fleet.silences.windows)
        assert report.exit_code == code, hh_mm


# ---------------------------------------------------------------- Prometheus
def test_promtool_proves_the_shipped_rules(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (.ci/bootstrap installs prometheus)")
    rules = fc("rules")
    assert rules.returncode == 0
    (tmp_path / "fleetcheck.rules.yml").write_text(rules.stdout)
    (tmp_path / "test.yml").write_text(example("promtool"))
    check = subprocess.run([promtool, "check", "rules", "fleetcheck.rules.yml"], cwd=tmp_path,
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    proc = subprocess.run([promtool, "test", "rules", "test.yml"], cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the threshold follows --stale-after
    assert "> 600\n" in fc("rules", "--stale-after", "10m").stdout


@pytest.fixture
def prometheus_server(tmp_path: Path) -> Iterator[Any]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus is not installed (.ci/bootstrap installs it)")
    procs: list[subprocess.Popen[bytes]] = []

    def start(config: Path) -> str:
        port = free_port()
        log = open(tmp_path / "prometheus.log", "wb")
        proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        procs.append(proc)
        wait_for(lambda: proc.poll() is not None or port_open("127.0.0.1", port), 30,
                 "prometheus to listen")  # fmt: skip
        assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()
        return f"http://127.0.0.1:{port}"

    try:
        yield start
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def api(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())["data"]


@pytest.mark.lab
def test_prometheus_scrapes_both_and_fires_the_rule_for_mini(
    lab: Lab,
    tmp_path: Path,
    node_exporter: tuple[Path, str],  # noqa: F811
    prometheus_server: Any,
) -> None:
    lab.add_host("mini", sshd=False)  # no workers: clients CRIT
    cfg = lab.config()
    textdir, node_url = node_exporter
    history = tmp_path / "history.jsonl"
    proc = fc(
        "run", "-c", str(cfg), "--state", str(tmp_path / "state.json"), "--history",
        str(history), "--textfile", str(textdir / "fleetcheck.prom"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    rules = tmp_path / "fleetcheck.rules.yml"
    rules.write_text(fc("rules").stdout)
    with serving("-c", str(cfg), "--history", str(history)) as serve_url:
        config = (
            example("prometheus")
            .replace("1m", "1s")
            .replace("/etc/prometheus/fleetcheck.rules.yml", str(rules))
            .replace("127.0.0.1:8470", serve_url.removeprefix("http://"))
            .replace("127.0.0.1:9100", node_url.removeprefix("http://").removesuffix("/metrics"))
        )
        (tmp_path / "prometheus.yml").write_text(config)
        prom = prometheus_server(tmp_path / "prometheus.yml")

        def targets_up() -> bool:
            active = api(prom + "/api/v1/targets")["activeTargets"]
            return len(active) == 2 and all(t["health"] == "up" for t in active)

        wait_for(targets_up, 60, "both targets scraped")

        def firing() -> list[dict[str, Any]]:
            alerts = api(prom + "/api/v1/alerts")["alerts"]
            return [a for a in alerts if a["state"] == "firing"]

        wait_for(lambda: len(firing()) == 2, 60, "the rule firing from both endpoints")
        alerts = firing()
    assert {(a["labels"]["alertname"], a["labels"]["job"]) for a in alerts} == {
        ("FleetcheckRowCritical", "fleetcheck"),
        ("FleetcheckRowCritical", "node"),
    }
    for a in alerts:
        assert (a["labels"]["host"], a["labels"]["check"]) == ("mini", "clients")
        assert a["annotations"]["summary"] == "mini clients: CRIT (fleetcheck)"
