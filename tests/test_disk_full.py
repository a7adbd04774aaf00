"""Issue 22 item 9: a full disk on a real (small) tmpfs. A history append cut short loses only
that round (one transaction of the history's database; a JSONL history from before it, torn,
loses only the fragment); a state save that fails leaves no empty temp file behind.

Both tests fail on the code before the fix: the round after the torn line was lost (2 rounds
read, not 3; the glued line counted bad), and `.state.json.<pid>.tmp` stayed behind at 0 bytes.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetcheck.core.model import Report, Result, Status
from fleetcheck.rounds import history
from fleetcheck.rounds.state import SCHEMA, Memory, StateFile, remember
from tests.history_util import jsonl_append

PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs mounted for this test (unmounted also when it fails)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(mnt)], check=True
    )
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(disk: Path) -> Path:
    """Take every free page of the tmpfs; returns the filler (delete it to free the disk)."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        while True:
            try:
                f.write(b"\0" * PAGE)
            except OSError as e:
                assert e.errno == errno.ENOSPC
                break
    return filler


def rep(minute: int, summary: str = "s") -> Report:
    return Report(
        f"2026-11-29T10:{minute:02d}:00.000Z",
        0.2,
        (Result("clients", "mini", Status.CRIT, summary), Result("broker", None, Status.OK, "ok")),
    )


def test_item9_a_history_append_on_a_full_disk_loses_only_that_round(small_disk: Path) -> None:
    """The database takes the round in one transaction: on a full disk the append fails
    with a one-line OSError (the patrol warns), the rounds before stay readable, and the
    next round after the disk is freed is recorded whole."""
    path = small_disk / "history.jsonl"
    history.append(rep(0), path)
    filler = fill(small_disk)
    with pytest.raises(OSError, match=r"history\.db: (database or disk is full|disk I/O error)"):
        for minute in range(1, 30):  # until the pages the database had in hand run out
            history.append(rep(minute, "x" * 4000), path)
    filler.unlink()  # the operator frees the disk; the next round is complete
    rounds, bad = history.load(path)
    assert rounds and rounds[0].started_at.minute == 0 and bad == 0
    written = len(rounds)
    history.append(rep(59), path)
    rounds, bad = history.load(path)
    assert len(rounds) == written + 1 and rounds[-1].started_at.minute == 59
    assert bad == 0


def test_item9_reading_recovers_a_round_glued_to_a_torn_fragment(tmp_path: Path) -> None:
    """A JSONL history an older fleetcheck wrote (no repair on append): the fragment and the
    complete round share one line; the round is read, the fragment counted bad, before and
    after the history is migrated into the database."""
    path = tmp_path / "h.jsonl"
    jsonl_append(rep(0), path)
    full = json.dumps(
        {"started_at": "2026-11-29T10:02:00.000Z", "duration_s": 0.1, "status": "OK", "rows": []},
        separators=(",", ":"),
    )
    with open(path, "a") as f:
        f.write('{"started_at":"2026-11-29T10:01:00.000Z","dura' + full + "\n")
    rounds, bad = history.load(path)
    assert [r.started_at.minute for r in rounds] == [0, 2]
    assert bad == 1
    history.append(rep(3), path)  # migrates
    rounds, bad = history.load(path)
    assert [r.started_at.minute for r in rounds] == [0, 2, 3]
    assert bad == 1


def test_item9_failed_state_save_leaves_no_empty_temp_file(small_disk: Path) -> None:
    path = small_disk / "state.json"
    memory = Memory()
    remember(rep(0), path, memory)
    before = path.read_text()
    assert json.loads(before)["schema"] == SCHEMA
    filler = fill(small_disk)
    with pytest.raises(OSError) as failed:
        remember(rep(1), path, memory)  # its temp file needs a page the disk has not got
    assert failed.value.errno == errno.ENOSPC
    assert sorted(p.name for p in small_disk.iterdir()) == [
        "filler",
        "state.json",
        "state.json.lock",
    ]
    assert path.read_text() == before  # the old state is intact
    filler.unlink()
    assert StateFile(path).read()  # and still readable
