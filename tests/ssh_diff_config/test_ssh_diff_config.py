"""Every case of the corpus agrees with the real `ssh -G` (or is a documented refusal).

The cases run on a few threads at once (each is mostly waiting for `ssh -G` subprocesses),
once per session; each case is still its own test, with its own failure message."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.ssh_diff_config.cases import CASES, Case
from tests.ssh_diff_config.harness import SSH, case_home, compare, oracles

pytestmark = [
    pytest.mark.skipif(SSH is None, reason="needs the OpenSSH client as the oracle"),
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None,
        reason="needs root and unshare(1): ssh -G runs in a private mount/network namespace",
    ),
]


def run_case(case: Case) -> list[str]:
    """The disagreements of one case, one line per host argument that disagrees."""
    with case_home(case) as home:
        wanted = oracles(home, case)
        return [
            f"{' '.join(argv)}: {why}"
            for argv, want in zip(case.argvs, wanted, strict=True)
            if (why := compare(case, home, list(argv), want)) is not None
        ]


@pytest.fixture(scope="session")
def results() -> dict[str, list[str]]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip([c.id for c in CASES], pool.map(run_case, CASES), strict=True))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_agrees_with_ssh(case: Case, results: dict[str, list[str]]) -> None:
    assert not results[case.id], results[case.id]


def test_corpus_size_and_ids() -> None:
    assert len(CASES) >= 90
    assert len({c.id for c in CASES}) == len(CASES)
    assert all(c.why for c in CASES if c.refusal is not None)
