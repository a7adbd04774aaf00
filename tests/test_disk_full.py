"""Issue 22 item 9: a full disk on a real (small) tmpfs. A history append cut short leaves a
torn last line; the next complete round must not be glued to it (repair on append, and
reading skips only the fragment); a state save that fails leaves no empty temp file behind.

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

PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted for this test (unmounted also when it fails)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mnt)], check=True
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


def test_item9_torn_history_line_after_disk_full_does_not_swallow_the_next_round(
    small_disk: Path,
) -> None:
    path = small_disk / "history.jsonl"
    history.append(rep(0), path)
    # pad the first round so the file ends 40 bytes short of a page: the next append needs a
    # new page, which the full disk cannot give, so only its first 40 bytes land
    size = path.stat().st_size
    line = json.loads(path.read_text())
    line["rows"][0]["summary"] += "x" * (PAGE - 40 - size)
    path.write_text(json.dumps(line, separators=(",", ":")) + "\n")
    assert path.stat().st_size == PAGE - 40
    history.latest_path(path).unlink()
    filler = fill(small_disk)
    with pytest.raises(OSError) as failed:
        history.append(rep(1), path)
    assert failed.value.errno == errno.ENOSPC
    assert path.stat().st_size == PAGE and not path.read_bytes().endswith(b"\n")  # torn
    filler.unlink()  # the operator frees the disk; the next round is complete
    history.append(rep(2), path)
    rounds, bad = history.load(path)
    assert [r.started_at.minute for r in rounds] == [0, 2]
    assert bad == 1  # only the torn fragment


def test_item9_reading_recovers_a_round_glued_to_a_torn_fragment(tmp_path: Path) -> None:
    """A history an older fleetcheck wrote (no repair on append): the fragment and the
    complete round share one line; the round is read, the fragment counted bad."""
    path = tmp_path / "h.jsonl"
    history.append(rep(0), path)
    full = json.dumps(
        {"started_at": "2026-11-29T10:02:00.000Z", "duration_s": 0.1, "status": "OK", "rows": []},
        separators=(",", ":"),
    )
    with open(path, "a") as f:
        f.write('{"started_at":"2026-11-29T10:01:00.000Z","dura' + full + "\n")
    rounds, bad = history.load(path)
    assert [r.started_at.minute for r in rounds] == [0, 2]
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
