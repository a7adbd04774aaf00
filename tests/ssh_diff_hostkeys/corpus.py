"""The harness's corpus: every case (see case.py for what a case holds and where the
scenarios come from), by family."""

from __future__ import annotations

from tests.ssh_diff_hostkeys.case import CONNECT, REFUSE, Case
from tests.ssh_diff_hostkeys.cases_files import FILE_CASES
from tests.ssh_diff_hostkeys.cases_keys import KEY_CASES
from tests.ssh_diff_hostkeys.cases_names import NAME_CASES

__all__ = ["BY_ID", "CASES", "CONNECT", "REFUSE", "Case"]

CASES: list[Case] = [*NAME_CASES, *KEY_CASES, *FILE_CASES]
BY_ID = {c.id: c for c in CASES}
assert len(BY_ID) == len(CASES), "duplicate case ids"
