"""Parsed files by path, reparsed when the file's inode, size or mtime changes.

known_hosts, ssh_config and private keys are read once per patrol (not once per host), yet an
accept-new append or an operator's fix must be seen at once: the stat signature decides."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class ParsedFiles(Generic[T]):
    """`get(path)` is the parsed file, or None when it does not exist (OpenSSH reads nothing
    from a missing file; with `missing_ok=False` FileNotFoundError propagates). OSError from
    reading an existing file propagates."""

    def __init__(self, parse: Callable[[str], T], missing_ok: bool = True) -> None:
        self._parse = parse
        self._missing_ok = missing_ok
        self._lock = threading.Lock()
        self._parsing = threading.Lock()  # a patrol's lanes all miss at once: parse once
        self._files: dict[str, tuple[tuple[int, int, int], T]] = {}

    def _hit(self, path: str, sig: tuple[int, int, int]) -> tuple[bool, T | None]:
        with self._lock:
            hit = self._files.get(path)
        return (True, hit[1]) if hit is not None and hit[0] == sig else (False, None)

    def get(self, path: str) -> T | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if self._missing_ok:
                return None
            raise
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        found, parsed = self._hit(path, sig)
        if found:
            return parsed
        with self._parsing:
            found, parsed = self._hit(path, sig)
            if found:
                return parsed
            parsed = self._parse(path)
            with self._lock:
                self._files[path] = (sig, parsed)
        return parsed
