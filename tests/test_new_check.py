"""The issue's "done when": a new check written as ONE file in `checks/` by docs/CONTRIBUTING.md
passes the suite's tests that cover every check (contract, example config, start-up imports,
read-only guarantees, docs, import cycles) with no other file touched but the three the
declarations generate (`python -m tests.catalog`: hosts.example.toml's check tables,
docs/checks.md's index, docs/brokers.md's ACL), and the framework serves it without naming it:
`fleetcheck checks`, `config check`, `config discover`'s draft, and `doctor`, which under an ACL
user lacking its command names the check and the `+command`, and agrees with a patrol on every
row both then and under the ACL docs/brokers.md gives.

tests/new_check/sample_check.py (a broker-scope check with one per-host key) is copied into
`checks/` of a copy of this repository (its tracked files as they are in the working tree) and
those tests run there in a subprocess. The copy is importable as itself: its directory comes
first on PYTHONPATH, and a meta-path finder (a sitecustomize beside it) maps
`fleetcheck.checks` to the copy's `checks/`, as [tool.setuptools.package-dir] does for an
install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _require_lab

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "new_check" / "sample_check.py"  # heartbeat: a broker check
HOST_SAMPLE = ROOT / "tests" / "new_check" / "sample_host_check.py"  # stamp: a host check
# the tests that cover every check, each deriving the list from the registry
SUITE = [
    "tests/test_check_contract.py",
    "tests/test_example_config.py",
    "tests/test_startup_imports.py",
    "tests/test_guarantees.py",
    "tests/test_docs_checks.py",
    "tests/test_import_cycles.py",
]

SITECUSTOMIZE = '''
import importlib.abc, importlib.util, os, sys

CHECKS = os.path.join(os.environ["FLEETCHECK_COPY"], "checks")


class CopyChecks(importlib.abc.MetaPathFinder):
    """fleetcheck.checks is the copy's checks/ (package-dir, as an install maps it)."""

    def find_spec(self, name, path=None, target=None):
        if name != "fleetcheck.checks":
            return None
        return importlib.util.spec_from_file_location(
            name, os.path.join(CHECKS, "__init__.py"), submodule_search_locations=[CHECKS]
        )


sys.meta_path.insert(0, CopyChecks())
'''


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [f for f in out if (ROOT / f).is_file()]


def copy_with_the_new_check(dest: Path) -> Path:
    repo = dest / "repo"
    for name in tracked_files():
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    shutil.copy2(SAMPLE, repo / "checks" / "sample_check.py")
    shutil.copy2(HOST_SAMPLE, repo / "checks" / "sample_host_check.py")
    return repo


GENERATED = {"hosts.example.toml", "docs/checks.md", "docs/brokers.md"}


@dataclass
class Copy:
    repo: Path
    env: dict[str, str]

    def run(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`python ARGS` in the copy (`-m fleetcheck ...` is its CLI)."""
        return subprocess.run(
            [sys.executable, *args],
            cwd=self.repo,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=300,
        )


def copy_and_env(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy with the new checks, and the environment that imports it as fleetcheck."""
    repo = copy_with_the_new_check(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(repo), str(site)]),
        "FLEETCHECK_COPY": str(repo),
    }
    return repo, env


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Copy:
    """The copy with the new check, its generated files written as a contributor would."""
    _require_lab()
    tmp_path = tmp_path_factory.mktemp("new-check")
    repo, env = copy_and_env(tmp_path)
    env["FLEETCHECK_REQUIRE_LAB"] = "1"  # in the copy a test that would skip fails instead
    out = Copy(repo, env)
    proc = out.run("-m", "tests.catalog")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == f"{', '.join(sorted(GENERATED, key=order))}: rewritten", (
        proc.stdout
    )
    return out


def order(name: str) -> int:
    return ["hosts.example.toml", "docs/checks.md", "docs/brokers.md"].index(name)


def test_a_new_check_in_one_file_passes_the_suite_with_no_other_file_touched(
    copy: Copy,
) -> None:
    repo, env = copy.repo, copy.env
    where = subprocess.run(
        [sys.executable, "-c", "import fleetcheck.checks.sample_check as m; print(m.__file__)"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.stdout.strip() == str(repo / "checks" / "sample_check.py"), where.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-rs", *SUITE],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert " SKIPPED" not in out and " FAILED" not in out, out[-6000:]
    # the new check was among "every check", in each test that covers them
    for test in (
        "test_every_registered_check_declares_everything[heartbeat] PASSED",
        "test_every_broker_check_keeps_the_contract[heartbeat] PASSED",
        "test_every_declared_example_loads_and_names_every_key[heartbeat] PASSED",
        "test_every_key_of_every_check_is_documented[heartbeat] PASSED",
        "test_every_registered_check_declares_everything[stamp] PASSED",
        "test_every_host_check_keeps_the_contract[stamp] PASSED",
        "test_every_declared_example_loads_and_names_every_key[stamp] PASSED",
        "test_every_key_of_every_check_is_documented[stamp] PASSED",
    ):
        assert test in out, out[-6000:]
    # and nothing but the new file differs from this tree
    changed = {
        str(p.relative_to(repo))
        for p in repo.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    } - set(tracked_files())
    assert changed == {"checks/sample_check.py", "checks/sample_host_check.py"}, changed
    # and of this tree's files only those the declarations generate differ, as generated
    edited = {n for n in tracked_files() if (repo / n).read_bytes() != (ROOT / n).read_bytes()}
    assert edited == GENERATED, edited
    proc = copy.run("-m", "tests.catalog", "--check")
    assert proc.returncode == 0 and proc.stdout.strip() == "up to date", proc.stdout


def documented_acl(repo: Path) -> list[str]:
    """The ACL rules the copy's docs/brokers.md gives (generated with the new check)."""
    text = (repo / "docs" / "brokers.md").read_text().split("<!-- acl:patrol -->", 1)[1]
    line = re.search(r"^ACL SETUSER fleetcheck (.+)$", text, re.M)
    assert line is not None, text[:400]
    return line.group(1).split()


CHECKS = (
    "[checks.heartbeat]\n[checks.stamp]\n[checks.broker]\n[checks.clients]\n"
    '[checks.queue_depth]\nkeys = ["arena:queue"]\ncap = 100\nsamples = 1\n'
    '[checks.live_hash]\n[checks.rater_probe]\ninbox = "arena:rater:inbox"\ntimeout = "2s"\n'
)


def test_the_framework_serves_the_new_check_without_naming_it(copy: Copy) -> None:
    from fleetcheck.lab import Lab

    repo = copy.repo
    example = (repo / "hosts.example.toml").read_text()
    assert "\n[checks.heartbeat]\nprefix = " in example  # its declared example, added
    assert "\n[checks.stamp]\nmax_age = " in example
    index = (repo / "docs" / "checks.md").read_text()
    assert re.search(r"^\| `heartbeat` \| the broker \| each worker host's heartbeat", index, re.M)
    assert re.search(r"^\| `stamp` \| each host \(SSH\) \| each host's periodic job", index, re.M)
    rules = documented_acl(repo)
    assert "+get" in rules, rules  # the new check's command, derived from its declaration
    proc = copy.run("-m", "fleetcheck", "checks")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^heartbeat +broker ", proc.stdout, re.M), proc.stdout
    assert re.search(r"^stamp +host ", proc.stdout, re.M), proc.stdout
    with Lab(netns=False) as lab:
        n1, n2 = lab.add_host("n1"), lab.add_host("n2")
        lab.start_workers(n1, 1)
        lab.start_workers(n2, 1)
        lab.start_rater()
        admin = lab.client()
        admin.set("arena:hb:n1", str(time.time()))  # n2 never beat: CRIT
        admin.rpush("arena:queue", '{"enqueued_at": 1}')
        admin.hset("arena:live", "m1", json.dumps({"started_at": int(time.time()), "host": "n1"}))
        stamp = lab.dir / "n1-last-ok"  # n1's job ran just now; n2's stamp is missing: CRIT
        stamp.write_text("")
        extra = {"n1": f'stamp_path = "{stamp}"', "n2": f'stamp_path = "{lab.dir}/n2-last-ok"'}
        conf = lab.config(checks=CHECKS, host_extra=extra)
        proc = copy.run("-m", "fleetcheck", "config", "check", "-c", str(conf))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "heartbeat" in proc.stdout and "stamp" in proc.stdout, proc.stdout
        args = ["config", "discover", "--url", lab.broker_url, "--ssh-config", "/dev/null"]
        proc = copy.run("-m", "fleetcheck", *args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "\n[checks.heartbeat]\nprefix = " in proc.stdout, proc.stdout

        def as_user(
            name: str, user_rules: list[str]
        ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
            """doctor, then a patrol, as ACL user `name` with `user_rules`."""
            admin.execute_command("ACL", "SETUSER", name, "reset", *user_rules, ">Pw-new")
            text = conf.read_text().replace(
                f'url = "{lab.broker_url}"',
                f'url = "{lab.broker_url}"\nusername = "{name}"\npassword_env = "FC_NEW_PW"',
            )
            path = conf.with_name(f"{name}.toml")
            path.write_text(text)
            env = {"FC_NEW_PW": "Pw-new"}
            doctor = copy.run("-m", "fleetcheck", "doctor", "-c", str(path), env=env)
            run = copy.run(
                "-m", "fleetcheck", "run", "-c", str(path), "--no-state", "-f", "json", env=env
            )
            assert run.returncode in (0, 1, 2, 3), run.stderr
            return doctor, json.loads(run.stdout)

        def unknown(report: dict[str, Any]) -> set[str]:
            return {r["check"] for r in report["results"] if r["status"] == "UNKNOWN"}

        # the ACL docs/brokers.md gives: doctor sees everything, and so does a patrol
        doctor, report = as_user("fleetcheck", rules)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert unknown(report) == set(), report["results"]
        rows = {(r["check"], r["host"]): r["status"] for r in report["results"]}
        assert rows[("heartbeat", "n1")] == "OK" and rows[("heartbeat", "n2")] == "CRIT", rows
        assert rows[("stamp", "n1")] == "OK" and rows[("stamp", "n2")] == "CRIT", rows
        # the same user without GET: doctor names the check and the +command; the patrol's
        # heartbeat rows are the only ones it cannot see
        doctor, report = as_user("nogets", [r for r in rules if r != "+get"])
        assert doctor.returncode == 3, doctor.stdout
        assert re.search(
            r"^broker .*: user nogets may not run GET on arena:hb:n1 \(heartbeat needs it\): "
            r"fix: ACL SETUSER nogets \+get ~arena:hb:n1 ",
            doctor.stdout,
            re.M,
        ), doctor.stdout
        assert unknown(report) == {"heartbeat"}, report["results"]
        named = set(re.findall(r"\((\w+) needs it\)", doctor.stdout))
        assert named == unknown(report), (named, doctor.stdout)
        admin.close()


# Run in the copy: the sample's rows over three rounds, drawn by the console and explained
SHOWN = """
import json
from datetime import UTC, datetime, timedelta
from fleetcheck.console import html
from fleetcheck.console.charts import charts as draw_charts
from fleetcheck.core import registry
from fleetcheck.core.model import Result, Status
from fleetcheck.rounds import explain
from fleetcheck.rounds.history import Round

name = registry.find("heartbeat").name
now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
rows = [
    Result(name, "n8", Status.OK, "beat 5s ago", {"age_s": 5.0}, limits={"max_age_s": 120.0}),
    Result(name, "mini", Status.WARN, "beat 2h ago", {"age_s": 9000.0},
           limits={"max_age_s": 120.0}),
]
rounds = [
    Round(now - timedelta(minutes=15 * i), Status.WARN, {}, {},
          rows=tuple(r.to_dict() for r in rows))
    for i in (2, 1, 0)
]
drawn = draw_charts(rounds, {})
page = html.sections_of(drawn, rounds[0].started_at.timestamp(), now.timestamp())
told = explain.explain("mini", rows, rounds, now, hints=explain.hints_from_registry())
print(json.dumps({
    "charts": {c.key: {s.label: [v for _, v in s.points] for s in c.series} for c in drawn},
    "page": page,
    "explain": told.lines(),
}))
"""


def test_the_new_check_shows_in_the_consoles_charts_and_explain(tmp_path: Path) -> None:
    """The sample declares a chart and a cause (`charts`, `causes`): with only its file
    added, the console draws its chart and `explain` names its cause, as for a built-in."""
    import json

    repo, env = copy_and_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-c", SHOWN], cwd=repo, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    shown = json.loads(proc.stdout)
    assert shown["charts"]["heartbeat"] == {
        "mini": [9000.0] * 3,
        "n8": [5.0] * 3,
        "max_age": [120.0, 120.0],
    }
    assert {"queue", "live", "connections", "logs"} <= set(shown["charts"])  # beside the others
    assert (
        '<section id="heartbeat"><h2>Heartbeat age per host against max_age</h2>' in (shown["page"])
    )
    assert (
        "likely cause (inference: inferred, to be confirmed): its worker stopped beating "
        "(stopped, hung, or cut off from the broker); seen in heartbeat"
    ) in shown["explain"], shown["explain"]
    assert (
        "confirm with: whether its worker process runs, and whether it reaches the broker"
        in shown["explain"]
    )


def heartbeat_patrol(url: str, hosts: list[str], check: Any = None) -> dict[str | None, Any]:
    """One patrol of the worked example alone (imported, not installed): its rows by host."""
    from fleetcheck.config import BrokerConfig, FleetConfig, HostConfig, PatrolConfig, SshConfig
    from fleetcheck.core.runner import plan, run_patrol
    from tests.new_check.sample_check import CHECK, HeartbeatConfig

    fleet = FleetConfig(
        path="test.toml",
        broker=BrokerConfig(url=url),
        ssh=SshConfig(),
        patrol=PatrolConfig(deadline=20.0),
        hosts=tuple(HostConfig(name=n) for n in hosts),
        checks={"heartbeat": HeartbeatConfig()},
    )
    report = run_patrol(fleet, plan(fleet, {"heartbeat": check or CHECK}))
    return {r.host: r for r in report.results}


def test_the_worked_examples_rows_come_from_one_round_trip() -> None:
    """The heartbeat check's `probe_all` reads N hosts' keys in one pipelined round trip: the
    server runs one GET per host, but reads (INFO's total_reads_processed) about as many
    requests for 50 hosts as for 2; each row is judged from its own reply."""
    from tests.servers import Server

    with Server() as server:
        r = server.client()
        r.mset({f"arena:hb:w{i}": str(time.time()) for i in range(50)})

        def patrol(n: int) -> tuple[int, int]:
            before = r.info("stats")["total_reads_processed"]
            gets = r.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
            rows = heartbeat_patrol(server.url, [f"w{i}" for i in range(n)])
            assert set(rows) == {f"w{i}" for i in range(n)}
            assert {row.status.label for row in rows.values()} == {"OK"}, rows
            reads = r.info("stats")["total_reads_processed"] - before
            return reads, r.info("commandstats")["cmdstat_get"]["calls"] - gets

        few, many = patrol(2), patrol(50)
        assert (few[1], many[1]) == (2, 50)  # one GET per host ...
        # ... in one round trip however many hosts (a round trip per host would read 48 more;
        # the patrol's connection close is read before or after the INFO that follows it)
        assert abs(many[0] - few[0]) <= 2, (few, many)
        r.close()


def test_the_worked_examples_failures_each_land_on_their_rows() -> None:
    """A refused key and a value that is no time are their own rows' UNKNOWN; a target the
    batch left out is its own UNKNOWN; a batch that failed is every row's, with its reason."""
    from tests.lab import free_port
    from tests.new_check.sample_check import CHECK, HeartbeatCheck
    from tests.servers import Server

    class Forgets(HeartbeatCheck):
        def probe_all(self, ctx: Any, targets: Any, config: Any) -> Any:
            return {k: v for k, v in super().probe_all(ctx, targets, config).items() if k != "w1"}

    with Server() as server:
        r = server.client()
        r.mset({"arena:hb:w0": str(time.time()), "arena:hb:w2": "soon", "arena:hb:w3": "1"})
        # w3's key is outside what the user may read: that GET alone is refused
        r.acl_setuser("hb", enabled=True, passwords=["+pw"], commands=["+@all"],
                      keys=["arena:hb:w0", "arena:hb:w1", "arena:hb:w2"])  # fmt: skip
        url = f"redis://hb:pw@127.0.0.1:{server.port}/0"
        rows = heartbeat_patrol(url, ["w0", "w1", "w2", "w3"])
        assert rows["w0"].status.label == "OK", rows["w0"]
        assert rows["w1"].status.label == "CRIT"  # missing: judged, not failed
        assert rows["w2"].summary == "arena:hb:w2: not an epoch time"
        assert rows["w3"].status.label == "UNKNOWN" and "no permissions" in rows["w3"].summary

        rows = heartbeat_patrol(url, ["w0", "w1"], Forgets())
        assert rows["w0"].status.label == "OK", rows["w0"]
        assert rows["w1"].status.label == "UNKNOWN"
        assert rows["w1"].summary == "check heartbeat measured nothing for this row"
        r.close()

    down = heartbeat_patrol(f"redis://127.0.0.1:{free_port()}/0", ["w0", "w1", "w2"], CHECK)
    assert {row.status.label for row in down.values()} == {"UNKNOWN"}
    assert len({row.summary for row in down.values()}) == 1, down
    assert "refused" in down["w0"].summary, down["w0"]
