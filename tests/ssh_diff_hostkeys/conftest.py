"""One lab for the whole harness (its sshds are reused by every case)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.lab import Lab, missing_prerequisites
from tests.ssh_diff_hostkeys.corpus import CASES, Case
from tests.ssh_diff_hostkeys.fleet import Fleet, Outcome, run_case

WORKERS = 4  # cases at once: each waits mostly on its handshakes


@pytest.fixture(scope="package")
def fleet() -> Iterator[Fleet]:
    missing = missing_prerequisites()
    if missing:
        message = "lab prerequisites missing: " + ", ".join(missing)
        if os.environ.get("FLEETCHECK_REQUIRE_LAB") == "1":
            pytest.fail(message)
        pytest.skip(message)
    with Lab() as lab:
        yield Fleet(lab)


@pytest.fixture(scope="package")
def outcomes(fleet: Fleet) -> dict[str, Outcome | BaseException]:
    """Every case run once, a few at a time (the harness stays well under two minutes)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(WORKERS) as pool:
        done = pool.map(lambda c: (c.id, _guarded(fleet, c)), CASES)
        return dict(done)


def _guarded(fleet: Fleet, case: Case) -> Outcome | BaseException:
    """A case that broke (a timeout, a harness bug) fails alone, not the fixture."""
    try:
        return run_case(fleet, case)
    except Exception as e:
        return e
