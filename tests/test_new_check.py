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
