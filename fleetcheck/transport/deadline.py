"""An overall deadline for a command's network work.

A socket timeout bounds one `recv`, not a conversation: a broker that drips one byte every
few seconds, or answers AUTH and then says nothing more, keeps every single read inside its
timeout forever. Commands that talk to the broker outside a patrol (`reap-live`,
`config discover`) therefore run that talk in a worker thread and wait for it with one
deadline; at the deadline the caller's `abandon` closes the connections (the blocked read
fails at once) and the command answers with one line. The thread is a daemon: whatever it
still does cannot keep the process alive.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class DeadlineExpired(Exception):
    """The work did not finish within `seconds`; it was abandoned."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"did not finish within {seconds:g}s")
        self.seconds = seconds


def run_within(
    seconds: float, work: Callable[[], T], abandon: Callable[[], None] | None = None
) -> T:
    """`work()`'s value (or its exception) when it finishes within `seconds`; else
    `abandon()` runs (its own errors ignored) and DeadlineExpired is raised."""
    box: dict[str, object] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as e:  # handed to the caller's thread, re-raised there
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=target, name="fleetcheck-deadline", daemon=True).start()
    if not done.wait(max(0.0, seconds)):
        if abandon is not None:
            try:
                abandon()
            except Exception:
                pass
        raise DeadlineExpired(seconds)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
