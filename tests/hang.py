"""Hang guards: a test that checks that something ends (at its deadline, after its timeout)
runs it under a limit far above what it needs, 10x or more, and fails saying it hung. The
limit only catches a hang; it is not a timing (those belong in bench/)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Hung(AssertionError):
    """`call` was still running at the hang guard's limit."""


def returns_within(limit: float, call: Callable[[], T], what: str) -> T:
    """What `call()` returns or raises, run in a daemon thread; `Hung` if it is still running
    after `limit` seconds (the thread is then left behind: the test has failed anyway)."""
    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as e:  # handed to the caller's thread
            outcome.append((False, e))

    t = threading.Thread(target=run, daemon=True, name=f"hang-guard: {what}")
    t.start()
    t.join(limit)
    if not outcome:
        raise Hung(f"hung: {what} was still running after {limit:g}s")
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]
