"""The issue's "done when": a new check written as ONE file in `checks/` by docs/CONTRIBUTING.md
passes the suite's tests that cover every check (contract, example config, start-up imports,
read-only guarantees, docs, import cycles) with no other file touched.

tests/new_check/sample_check.py (a broker-scope check with one per-host key) is copied into
`checks/` of a copy of this repository (its tracked files as they are in the working tree) and
those tests run there in a subprocess. The copy is importable as itself: its directory comes
first on PYTHONPATH, and a meta-path finder (a sitecustomize beside it) maps
`fleetcheck.checks` to the copy's `checks/`, as [tool.setuptools.package-dir] does for an
install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import _require_lab

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "tests" / "new_check" / "sample_check.py"
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
    return repo


def test_a_new_check_in_one_file_passes_the_suite_with_no_other_file_touched(
    tmp_path: Path,
) -> None:
    _require_lab()
    repo = copy_with_the_new_check(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(repo), str(site)]),
        "FLEETCHECK_COPY": str(repo),
        "FLEETCHECK_REQUIRE_LAB": "1",  # in the copy a test that would skip fails instead
    }
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
    ):
        assert test in out, out[-6000:]
    # and nothing but the new file differs from this tree
    changed = {
        str(p.relative_to(repo))
        for p in repo.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    } - set(tracked_files())
    assert changed == {"checks/sample_check.py"}, changed


# Run in the copy: the sample's rows over three rounds, drawn by the console and explained
SHOWN = """
import json
from datetime import UTC, datetime, timedelta
from fleetcheck.console import html, source as console
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
drawn = console.charts(rounds, {})
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

    repo = copy_with_the_new_check(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(repo), str(site)]),
        "FLEETCHECK_COPY": str(repo),
    }
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
