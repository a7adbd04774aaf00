"""docs/ssh.md holds the harness's summary as summary.py renders it from the corpus (the
OpenSSH version line aside: the docs name the client the counts were last seen with)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.ssh_diff_hostkeys.summary import BEGIN, END, render

DOC = Path(__file__).resolve().parents[2] / "docs" / "ssh.md"


def test_docs_hold_the_summary_of_the_corpus() -> None:
    text = DOC.read_text()
    assert BEGIN in text and END in text, "docs/ssh.md lacks the harness summary markers"
    section = text[text.index(BEGIN) : text.index(END) + len(END)]
    m = re.search(r"Oracle: `([^`]*)`", section)
    assert m, "the summary names no OpenSSH version"
    assert section == render(m.group(1)), (
        "docs/ssh.md's harness summary is stale: run python -m tests.ssh_diff_hostkeys.summary"
    )
