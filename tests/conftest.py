"""Shared fixtures. Lab tests skip where the lab cannot run, unless FLEETCHECK_REQUIRE_LAB=1
(set by .ci/run), where a missing prerequisite fails them: CI must never go green on skips."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleetcheck import lab as product_lab
from fleetcheck.core.context import TEST_CLOCK_ENV
from tests.lab import Lab, missing_prerequisites

# The instants FLEETCHECK_TEST_NOW may name: mid-month, far from any DST change, one on each
# side of it in the zones the tests use (America/New_York, Europe/*; Asia/Kolkata has none).
SEASONS = {
    "summer": datetime(2027, 7, 15, 16, 0, tzinfo=UTC),
    "winter": datetime(2027, 1, 15, 16, 0, tzinfo=UTC),
}


_running: dict[str, pytest.Item] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _running["item"] = item


def check_lab_marker(what: str) -> None:
    """A test that starts a lab or a broker carries the `lab` marker, so `-m "not lab"` runs
    where there is no redis-server, sshd or root: a test that forgets it fails here."""
    item = _running.get("item")
    if item is not None and item.get_closest_marker("lab") is None:
        pytest.fail(f"{item.nodeid} starts {what} but is not marked @pytest.mark.lab")


_lab_init = product_lab.Lab.__init__


def _marked_lab_init(self: product_lab.Lab, *args: Any, **kwargs: Any) -> None:
    check_lab_marker("a lab")
    _lab_init(self, *args, **kwargs)


# the product's Lab: the demo's labs and tests.lab.Lab (its subclass) both start through it
product_lab.Lab.__init__ = _marked_lab_init  # type: ignore[method-assign]


def _require_lab() -> None:
    check_lab_marker("a lab")
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


class ShiftedClock:
    """The test clock: the wall clock moved by a fixed offset, so it still advances. The
    patrol under test (in-process or a `fleetcheck` subprocess) reads the same offset from
    $FLEETCHECK_TEST_CLOCK_OFFSET_S, which the `clock` fixture sets for the test."""

    def __init__(self, offset_s: float) -> None:
        self.offset_s = offset_s

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self.offset_s)


def _instants() -> list[tuple[str, datetime | None]]:
    """$FLEETCHECK_TEST_NOW: comma-separated `summer`, `winter` or ISO instants with an offset
    (e.g. 2027-03-20T12:00:00Z). Unset: the wall clock itself."""
    raw = os.environ.get("FLEETCHECK_TEST_NOW", "").strip()
    if not raw:
        return [("wallclock", None)]
    out: list[tuple[str, datetime | None]] = []
    for part in (p.strip() for p in raw.split(",") if p.strip()):
        if part in SEASONS:
            out.append((part, SEASONS[part]))
            continue
        instant = datetime.fromisoformat(part.replace("Z", "+00:00"))
        if instant.tzinfo is None:
            raise pytest.UsageError(f"FLEETCHECK_TEST_NOW: {part!r} has no UTC offset")
        out.append((part, instant))
    return out


@pytest.fixture
def clock(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> ShiftedClock:
    """The instant a DST-sensitive test runs at (a parameter: see `_instants`). The test
    derives every expectation from `clock.now()`; the patrol it starts judges by the same
    clock. Taking this fixture marks the test `dst`."""
    instant: datetime | None = request.param
    offset = 0.0 if instant is None else (instant - datetime.now(UTC)).total_seconds()
    monkeypatch.setenv(TEST_CLOCK_ENV, repr(offset))
    return ShiftedClock(offset)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "clock" in metafunc.fixturenames:
        instants = _instants()
        metafunc.parametrize(
            "clock", [i for _, i in instants], ids=[n for n, _ in instants], indirect=True
        )


def pytest_collection_modifyitems(items: list[Any]) -> None:
    for item in items:
        if "clock" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.dst)


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
