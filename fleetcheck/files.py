"""Files only their owner may read (state, history, their locks): they hold hostnames,
addresses and broker details."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

FILE_MODE = 0o600


def private_open(path: Path, mode: str = "a") -> Any:
    """Open (creating it 0600 when absent) a file only its owner may read."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    fd = os.open(path, flags, FILE_MODE)
    return os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8")


def replace_private(path: Path, text: str | bytes) -> None:
    """Write `text` (or bytes) to `path` atomically, private (0600): a temp file beside it,
    then a rename.
    A failed write (a full disk fails the write or its flush at close) leaves the old file as
    it was and no temp file behind for every later round to trip over. The one way state,
    history's side files, the notify ledger, silences and inventory caches are saved."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        with private_open(tmp, "w" if isinstance(text, str) else "wb") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
