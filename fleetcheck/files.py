"""Files only their owner may read (state, history, their locks): they hold hostnames,
addresses and broker details; written atomically, locked, and read back healing."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FILE_MODE = 0o600


def private_open(path: Path, mode: str = "a", perms: int = FILE_MODE) -> Any:
    """Open (creating it 0600 when absent) a file only its owner may read."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    fd = os.open(path, flags, perms)
    return os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8")


def replace_private(path: Path, text: str | bytes, perms: int = FILE_MODE) -> None:
    """Write `text` (or bytes) to `path` atomically with mode `perms` (whatever the umask): a
    temp file beside it, then a rename. A failed write (a full disk) leaves the old file as it
    was and no temp file behind for every later round to trip over."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        with private_open(tmp, "w" if isinstance(text, str) else "wb", perms) as f:
            f.write(text)
        if perms != FILE_MODE:
            os.chmod(tmp, perms)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def exclusive(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` for the block: on PATH.lock beside it (private), so the
    file itself can be replaced atomically while the lock is held."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with private_open(path.with_name(path.name + ".lock")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def read_document(path: Path, schema: str, what: str, key: str, kind: type) -> Any:
    """The `key` part (of type `kind`) of the JSON document of `schema` at `path`; None when
    there is no file. A file that is not such a document is moved aside (PATH.corrupt-TIME)
    with one warning naming `what`, and reads as None: the round goes on as if it were new."""
    from fleetcheck.core import stderr

    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("schema") != schema:
            raise ValueError(f"not a fleetcheck {what}")
        part = data.get(key)
        if not isinstance(part, kind):
            raise ValueError(f"no {key} {kind.__name__}")
    except ValueError as e:
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        os.replace(path, aside)
        stderr.warn(f"{what} {path} unreadable ({e}); kept as {aside}")
        return None
    return part


class LockedJson:
    """A private JSON file read and written whole under its lock: `locked()` yields what
    `_load` made of it and saves it (`_save`) when the block changed it or there was none."""

    schema: str = ""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _document(self) -> dict[str, Any] | None:
        """The file's document: {} when there is no file, None when it is not one of `schema`."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return None
        return raw if isinstance(raw, dict) and raw.get("schema") == self.schema else None

    @contextmanager
    def locked(self) -> Iterator[dict[str, Any]]:
        with exclusive(self.path):
            data = self._load()
            before = json.dumps(data, sort_keys=True)
            yield data
            if json.dumps(data, sort_keys=True) != before or not self.path.exists():
                self._save(data)

    def _load(self) -> dict[str, Any]:
        raise NotImplementedError

    def _save(self, data: dict[str, Any]) -> None:
        raise NotImplementedError
