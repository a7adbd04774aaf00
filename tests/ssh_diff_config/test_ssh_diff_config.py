"""Every case of the corpus agrees with the real `ssh -G` (or is a documented refusal)."""

from __future__ import annotations

import pytest

from tests.ssh_diff_config.cases import CASES, Case
from tests.ssh_diff_config.harness import SSH, case_home, compare

pytestmark = pytest.mark.skipif(SSH is None, reason="needs the OpenSSH client as the oracle")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_agrees_with_ssh(case: Case) -> None:
    with case_home(case) as home:
        problems = [
            f"{' '.join(argv)}: {why}"
            for argv in case.argvs
            if (why := compare(case, home, list(argv))) is not None
        ]
    assert not problems, problems


def test_corpus_size_and_ids() -> None:
    assert len(CASES) >= 90
    assert len({c.id for c in CASES}) == len(CASES)
    assert all(c.why for c in CASES if c.refusal is not None)
