"""What a broker-only patrol imports (issue 15): the real CLI, on a fleet with every check
configured and five hosts, run with `--only broker --format json` against a real
redis-server on loopback. A patrol imports the modules of its checks and outputs only:
no paramiko (host checks), no rich (terminal table), no prometheus_client, no parsers of
checks it does not run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fleetcheck.core import registry
from tests.lab import Lab, missing_prerequisites

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parent.parent

# every module of ours a broker-only patrol loads: the CLI, config, the patrol and its
# state/history, the registry and the modules of the configured checks (for their config
# types), the broker transport and the JSON renderer; not core.peers (host rows only) nor
# rounds.silences (only once a silence is set, or the config has [silences] windows)
OURS = {
    "fleetcheck",
    "fleetcheck.__main__",
    "fleetcheck.collector",  # the cycle collector during start-up
    "fleetcheck.core",
    "fleetcheck.core.check",
    "fleetcheck.core.declarations",  # what checks declare for explain, peers, charts
    "fleetcheck.core.hostfacts",
    "fleetcheck.checks",
    # the module of every built-in check (all are configured), from the registry
    *(f"fleetcheck.checks.{name}" for name in registry._builtin_names()),
    "fleetcheck.cli",
    # the root group imports only the module of the command it runs (cli.app.OWN); the
    # patrol reads its notification settings through cli.notify
    *(f"fleetcheck.cli.{name}" for name in ("app", "common", "notify", "run")),
    "fleetcheck.config",
    "fleetcheck.envfile",
    *(f"fleetcheck.config.{name}" for name in ("builder", "loading", "tables", "values")),
    "fleetcheck.core.brokerlink",
    "fleetcheck.core.judge",
    "fleetcheck.core.context",
    "fleetcheck.core.memo",
    "fleetcheck.core.sessions",
    "fleetcheck.core.errors",
    "fleetcheck.files",
    "fleetcheck.rounds",
    "fleetcheck.rounds.history",
    "fleetcheck.rounds.store",  # the history database (sqlite3)
    "fleetcheck.iso",
    "fleetcheck.core.model",
    "fleetcheck.core.safe_text",  # the model makes its text safe, and warnings are
    "fleetcheck.core.stderr",  # written through it
    "fleetcheck.parse",
    "fleetcheck.parse.duration",
    "fleetcheck.rounds.patrol",
    "fleetcheck.core.registry",
    "fleetcheck.render",
    "fleetcheck.render.json",
    "fleetcheck.core.runner",
    "fleetcheck.core.correlate",  # the post-patrol rules over all rows (half-open)
    "fleetcheck.rounds.state",
    "fleetcheck.transport",
    "fleetcheck.transport.redis",
    "fleetcheck.transport.shell",
    "fleetcheck.zones",
}
CHECK_PACKAGES = [["fleetcheck", "checks", name] for name in registry._builtin_names()]
# third-party top-level packages allowed: typer and its own imports, redis-py with hiredis
# (redis-py looks for cryptography's package, not its modules). Never pydantic: typer 0.29
# coerces every option through it (+150-200 ms a process), hence typer < 0.29 in pyproject.
THIRD_PARTY = {
    "typer",
    "shellingham",
    "annotated_doc",
    "typing_extensions",
    "redis",
    "hiredis",
    "cryptography",
    "async_timeout",  # redis-py on Python < 3.11.3
}
NEVER = {
    "paramiko",
    "rich",
    "prometheus_client",
    "dateutil",
    "tabulate",
    "nacl",
    "bcrypt",
    "pydantic",
    "pydantic_core",
}

PROBE = """
import atexit, json, sys
out = sys.argv[1]
def dump():
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
atexit.register(dump)
sys.argv = ["fleetcheck", *sys.argv[2:]]
from fleetcheck.__main__ import main
main()
"""


def fleet_config(tmp: Path, url: str) -> Path:
    """hosts.example.toml with every registered check's declared example table (those it
    shows are the same text: tests/test_example_config.py), our broker, five hosts with logs."""
    text = (ROOT / "hosts.example.toml").read_text()
    text = text.replace('url = "redis://192.168.1.10:6379/0"', f'url = "{url}"', 1)
    assert url in text
    text = text[: text.index("\n[checks.")] + "\n"
    text += "\n".join(check.example for check in registry.available().values())
    start, end = text.index("\n[[hosts]]") + 1, text.index("# A check runs when")
    hosts = "".join(
        f'[[hosts]]\nname = "w{i}"\nssh = "local"\naddrs = ["127.0.1.{i}"]\ntz = "UTC"\n'
        f'logs = [{{ path = "/var/log/arena/worker.log", max_age = "10m" }}]\n\n'
        for i in range(1, 6)
    )
    path = tmp / "hosts.toml"
    path.write_text(text[:start] + hosts + text[end:])
    return path


def _broker_only_patrol(tmp_path: Path, probe: str, out: Path) -> subprocess.CompletedProcess[str]:
    """A broker-only patrol of the five-host fleet against a local redis-server, run under
    `probe` (a script that writes what it saw to `out`)."""
    if missing_prerequisites(netns=False):
        if os.environ.get("FLEETCHECK_REQUIRE_LAB") == "1":
            pytest.fail("needs redis-server")
        pytest.skip("needs redis-server")
    with Lab(netns=False) as lab:
        config = fleet_config(tmp_path, f"redis://127.0.0.1:{lab.redis_port}/0")
        args = ["run", "-c", str(config), "--only", "broker", "--format", "json"]
        return subprocess.run(
            [sys.executable, "-c", probe, str(out), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )


def test_a_broker_only_patrol_imports_only_what_it_uses(tmp_path: Path) -> None:
    out = tmp_path / "modules.json"
    proc = _broker_only_patrol(tmp_path, PROBE, out)
    report = json.loads(proc.stdout)
    assert [r["check"] for r in report["results"]] == ["broker"]
    assert report["results"][0]["status"] == "OK", report
    modules = set(json.loads(out.read_text()))
    ours = {m for m in modules if m.split(".")[0] == "fleetcheck"}
    # a check that is a package may load modules of its own for its config types: allowed
    # below a configured check's package, never elsewhere
    own_parts = {m for m in ours - OURS if m.split(".")[:3] in CHECK_PACKAGES}
    assert ours - own_parts == OURS
    tops = {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"fleetcheck"}
    # site hooks of this venv (and the sitecustomize tests/test_new_check.py runs this under)
    tops = {t for t in tops if not t.startswith("_") and t != "sitecustomize"}
    assert not tops & NEVER
    assert tops <= THIRD_PARTY, tops - THIRD_PARTY
    # the parsers of checks this patrol does not run are not loaded, nor the checks that
    # declare their settings apart (only those settings: the config is validated whole)
    assert (
        not {
            "fleetcheck.checks.rater_probe.check",
            "fleetcheck.checks.queue_depth.check",
            "fleetcheck.checks.clients.check",
            "fleetcheck.checks.clients.facts",
            "fleetcheck.checks.groups.check",
            "fleetcheck.checks.live_hash.reaper",
            "fleetcheck.checks.live_hash.scan",
            "fleetcheck.parse.live_entry",
            "fleetcheck.parse.logtail",
            "fleetcheck.parse.timestamps",
            "fleetcheck.parse.routes",
            "fleetcheck.parse.clientlist",  # clients' and rater_probe's
            "fleetcheck.parse.instant",  # queue_depth's
        }
        & modules
    )


def test_typer_reads_no_string_annotations_from_the_cli() -> None:
    """typer resolves every command's annotations before it runs any command (also for
    `--help`); from strings that is one eval each (~280: ~20 ms of every start-up). The CLI
    module therefore has no `from __future__ import annotations`: every annotation typer reads
    is an object already."""
    import inspect

    import typer.main

    from fleetcheck import cli

    group = typer.main.get_command(cli.app)
    seen = 0

    def walk(command: Any) -> None:
        nonlocal seen
        if hasattr(command, "list_commands"):  # built as click resolves them (lazily)
            for name in command.list_commands(None):
                walk(command.get_command(None, name))
        callback = getattr(command, "callback", None)
        if callback is None:
            return
        target = inspect.unwrap(callback)
        for name, annotation in getattr(target, "__annotations__", {}).items():
            seen += 1
            assert not isinstance(annotation, str), f"{target.__qualname__}: {name}: {annotation!r}"

    walk(group)
    assert seen > 50  # the walk reached the commands' parameters


GC_PROBE = """
import gc, json, sys
out = sys.argv[1]
seen = {}
from fleetcheck.core import runner
real = runner.run_patrol
def run_patrol(*a, **kw):  # the moment the checks start: the collector must be on again
    seen["enabled_when_checks_start"] = gc.isenabled()
    seen["frozen_at_start"] = gc.get_freeze_count()
    return real(*a, **kw)
runner.run_patrol = run_patrol
import fleetcheck.rounds.patrol as patrol
patrol.run_patrol = run_patrol
seen["enabled_before"] = gc.isenabled()
sys.argv = ["fleetcheck", *sys.argv[2:]]
from fleetcheck.__main__ import main
try:
    main()
finally:
    with open(out, "w") as f:
        json.dump(seen, f)
"""


def test_start_up_runs_without_the_cycle_collector_and_the_patrol_with_it(tmp_path: Path) -> None:
    """fleetcheck.collector: the collector is off for start-up (what it made is frozen), on
    again before any check runs; a program running the CLI in-process keeps its own."""
    out = tmp_path / "gc.json"
    proc = _broker_only_patrol(tmp_path, GC_PROBE, out)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(out.read_text())
    assert seen["enabled_before"] is True
    assert seen["enabled_when_checks_start"] is True
    assert seen["frozen_at_start"] > 10_000  # the imports and the config, out of its reach

    # in-process (CliRunner, as the CLI tests run it): the collector is left as it was
    import gc

    from typer.testing import CliRunner

    from fleetcheck.cli import app

    frozen = gc.get_freeze_count()
    result = CliRunner().invoke(app, ["run", "-c", str(tmp_path / "missing.toml")])
    assert result.exit_code != 0
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
