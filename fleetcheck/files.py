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
    return os.fdopen(fd, mode, encoding="utf-8")
