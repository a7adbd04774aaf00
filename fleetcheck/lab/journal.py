"""Journal files for the log tests: entries in systemd's export format, written into a real
journal file by systemd-journal-remote."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterable
from pathlib import Path

JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"


def journal_export(entries: Iterable[dict[str, str | bytes | int]]) -> bytes:
    """systemd's journal export format for `entries` (field -> value): `KEY=VALUE` lines,
    values with a newline in the binary form (KEY, newline, 64-bit LE length, bytes), a
    blank line after each entry. `__REALTIME_TIMESTAMP` (µs since the epoch) sets the entry's
    time; a boot id and monotonic time are added when missing."""
    import struct

    out = bytearray()
    for i, entry in enumerate(entries):
        fields: dict[str, str | bytes | int] = {
            "__MONOTONIC_TIMESTAMP": i + 1,
            "_BOOT_ID": "0123456789abcdef0123456789abcdef",
            **entry,
        }
        for key, value in fields.items():
            raw = value if isinstance(value, bytes) else str(value).encode()
            if b"\n" in raw:
                out += key.encode() + b"\n" + struct.pack("<Q", len(raw)) + raw + b"\n"
            else:
                out += key.encode() + b"=" + raw + b"\n"
        out += b"\n"
    return bytes(out)


def write_journal(directory: Path, entries: Iterable[dict[str, str | bytes | int]]) -> Path:
    """A real journal file in `directory`, written by systemd-journal-remote from export
    format, for the real journalctl to read (`journalctl --directory`)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"lab-{secrets.token_hex(3)}.journal"
    proc = subprocess.run(
        [JOURNAL_REMOTE, f"--output={target}", "-"],
        input=journal_export(entries),
        capture_output=True,
    )
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"systemd-journal-remote failed ({proc.returncode}): {err}")
    return target
