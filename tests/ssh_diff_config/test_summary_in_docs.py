"""docs/ssh.md holds the harness's summary between its markers, with the corpus's counts as
they are now (the ssh version line may differ from machine to machine)."""

from __future__ import annotations

from pathlib import Path

from tests.ssh_diff_config.summary import BEGIN, END, counts_table, section

DOC = Path(__file__).resolve().parents[2] / "docs" / "ssh.md"


def _between_markers() -> str:
    text = DOC.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    return text[text.index(BEGIN) : text.index(END) + len(END)]


def test_docs_hold_the_corpus_counts() -> None:
    region = _between_markers()
    for row in counts_table():
        assert row in region.splitlines(), f"docs/ssh.md misses {row!r}: rerun the summary"


def test_docs_section_is_the_summary_apart_from_the_version() -> None:
    def without_version(text: str) -> list[str]:
        return [line for line in text.splitlines() if "oracle:" not in line]

    assert without_version(_between_markers()) == without_version(section("any"))
