"""The README's commands work as written, and the docs hold together.

The blocks a newcomer runs are marked in README.md with `<!-- readme-test: NAME -->` before
their fence. In a fresh copy of the tracked files (what a clone holds; no `.venv`, no build
output), as root:

- quick-start, first line: `bash .ci/bootstrap && .venv/bin/fleetcheck demo`, run as written by
  bash. The bootstrap is run for real (its apt step finds the packages this machine's bootstrap
  installed; the venv and the editable install are made from nothing: about a minute with pip's
  cache). Its second line, `bash .ci/test`, is the suite this test is part of: running it here
  would recurse, so the test checks that it is the very command CI runs (`.ci/run`).
- first-run: both commands as written, with the fresh venv's `fleetcheck` on PATH, in a
  directory whose `hosts.toml` is the demo fleet's config (`demo --keep`).
- minimal-config: loaded through the real validator (its key and known_hosts name files of
  the patrol machine, which do not exist here).

Also: README stays short, every relative link in README and docs/ resolves, and nothing points
outside the repository but public projects.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import _require_lab
from tests.tree import copy_tracked

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"<!-- readme-test: ([\w-]+) -->\n```(\w*)\n(.*?)```", re.S)


def blocks() -> dict[str, tuple[str, str]]:
    return {name: (lang, body) for name, lang, body in BLOCK.findall(README.read_text())}


def commands(body: str) -> list[str]:
    """A shell block's command lines, as written (comments stay: bash reads them)."""
    return [line for line in body.splitlines() if line.strip() and not line.startswith("#")]


def test_marked_blocks_are_there() -> None:
    found = blocks()
    assert set(found) >= {"quick-start", "first-run", "minimal-config"}, found.keys()
    assert len(commands(found["quick-start"][1])) == 2
    assert len(commands(found["first-run"][1])) == 2


def test_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) <= 200


def test_second_quick_start_command_is_what_ci_runs() -> None:
    second = commands(blocks()["quick-start"][1])[1].split("#")[0].strip()
    assert second == "bash .ci/test"
    ci = (ROOT / ".ci/run").read_text()
    assert re.search(r"^bash \.ci/test$", ci, re.M), "CI no longer runs the README's command"


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, int]]:
    """(fresh tree, output, exit status) of the quick start's first line, run as written."""
    _require_lab()
    tree = tmp_path_factory.mktemp("fresh-clone")
    copy_tracked(tree)
    first = commands(blocks()["quick-start"][1])[0]
    proc = subprocess.run(
        ["bash", "-c", first],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=900,
        env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"NO_COLOR": "1"},
    )
    yield tree, proc.stdout + proc.stderr, proc.returncode


@pytest.mark.lab
def test_quick_start_sets_up_and_runs_the_demo(quick_start: tuple[Path, str, int]) -> None:
    tree, out, code = quick_start
    # the demo's planted incidents: its patrol ends CRIT (exit 2), explained, nothing broken
    assert code == 2, out[-3000:]
    assert "What the rows mean:" in out and "Traceback" not in out, out[-3000:]
    assert (tree / ".venv/bin/fleetcheck").is_file()
    assert "BuildBackendWarning" not in out and "Editable installation" not in out


@pytest.mark.lab
def test_first_run_against_the_demo_fleet(
    quick_start: tuple[Path, str, int], tmp_path: Path
) -> None:
    tree, _, _ = quick_start
    env = {**os.environ, "PATH": f"{tree / '.venv/bin'}:/usr/sbin:/usr/bin:/sbin:/bin"}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    kept = subprocess.run(
        ["fleetcheck", "demo", "--keep", "--format", "plain"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    stop = re.search(r"sh (\S+stop\.sh)", kept.stdout)
    try:
        config = re.search(r" run -c (\S+)", kept.stdout)
        assert kept.returncode == 2 and config, kept.stdout + kept.stderr
        shutil.copy(config.group(1), tmp_path / "hosts.toml")
        check_line, run_line = commands(blocks()["first-run"][1])
        check = subprocess.run(
            ["bash", "-c", check_line], cwd=tmp_path, capture_output=True, text=True, env=env
        )
        assert check.returncode == 0, check.stdout + check.stderr
        patrol = subprocess.run(
            ["bash", "-c", run_line],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        # a verdict (the demo's CRIT rows), never "could not run"
        assert patrol.returncode == 2, patrol.stdout + patrol.stderr
        assert "CRIT" in patrol.stdout and "Traceback" not in patrol.stderr
    finally:
        if stop:
            subprocess.run(["sh", stop.group(1)], timeout=120)


def test_minimal_config_is_valid(tmp_path: Path) -> None:
    from fleetcheck.config import load
    from fleetcheck.core import registry

    lang, body = blocks()["minimal-config"]
    assert lang == "toml"
    path = tmp_path / "hosts.toml"
    path.write_text(body)
    fleet = load(path, registry.config_type, registry.host_config_types)
    assert [h.name for h in fleet.hosts] == ["worker-1"]
    assert set(fleet.checks) == {"clients", "broker", "logs", "routes"}


def test_shell_blocks_parse() -> None:
    """Every sh block of README and docs is valid bash (what is not run is at least read)."""
    for doc in DOCS:
        for body in re.findall(r"```sh\n(.*?)```", doc.read_text(), re.S):
            proc = subprocess.run(["bash", "-n"], input=body, capture_output=True, text=True)
            assert proc.returncode == 0, (doc.name, body, proc.stderr)


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_links_stay_in_the_repository() -> None:
    for doc in DOCS:
        text = doc.read_text()
        assert "FIELD-NOTES" not in text and "../shared" not in text, doc.name
        for target in LINK.findall(text):
            if target.startswith(("http://", "https://")):
                pytest.fail(f"{doc.name}: {target} leaves the repository")
            path = target.split("#", 1)[0]
            if path:
                assert (doc.parent / path).resolve().exists(), f"{doc.name}: {target}"
                assert (doc.parent / path).resolve().is_relative_to(ROOT), f"{doc.name}: {target}"
