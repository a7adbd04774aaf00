"""Parsed files by path, reparsed when the file's inode, size or mtime changes.

known_hosts and ssh_config are read once per patrol (not once per host), yet an accept-new
append or an operator's fix must be seen at once: the stat signature decides."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class ParsedFiles(Generic[T]):
    """`get(path)` is the parsed file, or None when it does not exist (OpenSSH reads nothing
    from a missing file). OSError from reading an existing file propagates."""

    def __init__(self, parse: Callable[[str], T]) -> None:
        self._parse = parse
        self._lock = threading.Lock()
        self._files: dict[str, tuple[tuple[int, int, int], T]] = {}

    def get(self, path: str) -> T | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            hit = self._files.get(path)
        if hit is not None and hit[0] == sig:
            return hit[1]
        parsed = self._parse(path)
        with self._lock:
            self._files[path] = (sig, parsed)
        return parsed
