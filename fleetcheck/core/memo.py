"""Facts fetched at most once per patrol, however many checks (on however many lanes) ask.

A fetch that fails is remembered too: every caller gets the same error, so one unreachable
broker or host is one reason on every row that needed it, paid for once. Each key has its
own lock, so callers of one key wait for its fetch, never for another key's."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Memo:
    def __init__(self) -> None:
        # guards the values, and the state of whoever forgets a key together with its own
        # (fleetcheck.core.sessions drops a host's shell and its memo entry in one step)
        self.lock = threading.Lock()
        self._values: dict[Any, tuple[bool, Any]] = {}
        self._locks: dict[Any, threading.Lock] = {}

    def once(self, key: Any, fetch: Callable[[], T]) -> T:
        """`fetch()` at most once per patrol; later callers get its value or its error."""
        with self.lock:
            known = self._values.get(key)
            lock = self._locks.setdefault(key, threading.Lock())
        if known is None:
            with lock:  # one fetch per key; other callers wait for it, not for each other
                with self.lock:
                    known = self._values.get(key)
                if known is None:
                    known = self._fetch(key, fetch)
        ok, value = known
        if ok:
            return value
        raise value

    def _fetch(self, key: Any, fetch: Callable[[], Any]) -> tuple[bool, Any]:
        try:
            outcome: tuple[bool, Any] = (True, fetch())
        except Exception as e:
            outcome = (False, e)
        with self.lock:
            self._values[key] = outcome
        return outcome

    def forget(self, key: Any) -> None:
        """The next `once(key, ...)` fetches anew. The caller holds `lock`."""
        self._values.pop(key, None)
