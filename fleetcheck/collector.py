"""The cycle collector during start-up.

Importing typer, redis-py and our modules and reading the config allocate some 40,000 objects
that live until the process ends; the collector would walk them again and again for cycles
they are not part of (tens of milliseconds of a ~0.3 s patrol: docs/performance.md,
"Start-up"), and the interpreter walks them once more at exit. So start-up runs with the
collector off (`starting`), then `settled` freezes what it made (`gc.freeze()`: out of the
collector's reach, still freed as usual) and turns it back on: the entry point around the
CLI's imports, `run` around its own start-up (the config, the checks' modules, redis-py),
ending before any check runs: a patrol, `run --every` and `serve` collect what they make. At
exit (`exiting`) what is left is frozen too: objects are still freed, atexit handlers and
finalizers still run; only cycles among them are not collected (Python never promises that).

All of this only in the fleetcheck process itself (the entry point calls `take_over`): a
program that runs the CLI in-process (the tests) keeps its collector as it is.

`paused` is the same reasoning for one bulk step in any process: a patrol's state step, the
history's append or the console reading the newest round makes ~100,000 dicts, tuples and
Results that all live until the step ends (none is garbage), and each collection their
allocation triggers walks them all again. At 10,000 hosts that is about a third of the state
step's CPU and a sixth of the append's, which its 0.5 s target needs (docs/performance.md).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_ours = {"process": False}
_pauses = {"count": 0, "was_enabled": False}
_pause_lock = threading.Lock()


def take_over() -> None:
    """This is the fleetcheck process (its entry point): the policy above applies."""
    _ours["process"] = True


def starting() -> None:
    """A start-up begins: the cycle collector off."""
    if _ours["process"]:
        gc.disable()


def settled() -> None:
    """Start-up is over: what it made is frozen, the cycle collector on again."""
    if _ours["process"]:
        gc.freeze()
        gc.enable()


def exiting() -> None:
    """The process ends: what is left is frozen, out of the interpreter's final passes."""
    if _ours["process"]:
        gc.freeze()


@contextmanager
def paused() -> Iterator[None]:
    """The cycle collector held off while the block runs (reference counting still frees
    everything as usual). Threads may overlap their pauses (the console serves pages on
    several): the collector comes back, if it was on, when the last one ends."""
    with _pause_lock:
        if _pauses["count"] == 0:
            _pauses["was_enabled"] = gc.isenabled()
            gc.disable()
        _pauses["count"] += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses["count"] -= 1
            if _pauses["count"] == 0 and _pauses["was_enabled"]:
                gc.enable()
