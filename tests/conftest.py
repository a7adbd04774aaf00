"""Shared fixtures. Lab tests skip where the lab cannot run, unless FLEETCHECK_REQUIRE_LAB=1
(set by .ci/run), where a missing prerequisite fails them: CI must never go green on skips."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.lab import Lab, missing_prerequisites


def _require_lab() -> None:
    missing = missing_prerequisites()
    if missing:
        message = "lab prerequisites missing: " + ", ".join(missing)
        if os.environ.get("FLEETCHECK_REQUIRE_LAB") == "1":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(autouse=True, scope="session")
def _private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """fleetcheck keeps state and history in the XDG state dir: never the real one in tests."""
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    yield
    if old is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = old


@pytest.fixture
def lab() -> Iterator[Lab]:
    """A fresh lab (bridge + redis-server); tests add the hosts they need."""
    _require_lab()
    with Lab() as the_lab:
        yield the_lab


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under FLEETCHECK_REQUIRE_LAB=1 (CI) a skipped test fails the run: a lab test that did
    not run proves nothing, and CI must not go green on it."""
    if os.environ.get("FLEETCHECK_REQUIRE_LAB") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter is not None else 0
    if skipped and session.exitstatus == 0:
        print(f"\nFLEETCHECK_REQUIRE_LAB=1: {skipped} test(s) skipped; failing the run")
        session.exitstatus = 1
