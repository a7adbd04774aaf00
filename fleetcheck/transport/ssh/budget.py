"""One deadline for every stage of a connect, and the one thread that enforces deadlines.

A frozen sshd must cost exactly the connect timeout, whatever stage it freezes in (TCP,
banner, key exchange, authentication, the agent): when the budget runs out, the watchdog
closes what the stages opened, and the stage in progress names itself in the error."""

from __future__ import annotations

import threading
import time
from typing import Any

from fleetcheck.core.errors import TransportError
from fleetcheck.transport.ssh.util import quiet_close


class Watchdog:
    """One process-wide thread for every deadline (connect budgets, command deadlines): a
    thread per host per deadline costs more CPU than the rest of the host's bookkeeping.
    A deadline that fires runs its action in a thread of its own (closing a paramiko
    Transport joins its thread), so one slow close never delays another deadline."""

    def __init__(self) -> None:
        import heapq

        self._heapq = heapq
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, list[Any]]] = []
        self._seq = 0
        self._thread: threading.Thread | None = None

    def schedule(self, at: float, action: Any) -> list[Any]:
        """Run `action()` at monotonic time `at` unless the returned handle is cancelled."""
        handle = [action]
        with self._cond:
            self._seq += 1
            self._heapq.heappush(self._heap, (at, self._seq, handle))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="fleetcheck-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return handle

    @staticmethod
    def cancel(handle: list[Any]) -> None:
        handle[0] = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    if self._heap and self._heap[0][2][0] is None:
                        self._heapq.heappop(self._heap)  # cancelled: drop it early
                        continue
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(wait)
                _, _, handle = self._heapq.heappop(self._heap)
            action = handle[0]
            if action is not None:
                threading.Thread(target=action, daemon=True).start()


watchdog = Watchdog()


class Budget:
    """One deadline for all stages of a connect; a watchdog closes what is open when it ends."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.stage = "starting"
        self.expired = False
        self._closers: list[Any] = []
        self._lock = threading.Lock()
        self._timer = watchdog.schedule(self.deadline, self._expire)

    def left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)

    def guard(self, closable: Any) -> None:
        with self._lock:
            self._closers.append(closable)
            expired = self.expired
        if expired:
            quiet_close(closable)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            closers = list(reversed(self._closers))  # newest (transport) before its socket
        for c in closers:
            quiet_close(c)

    def done(self) -> None:
        watchdog.cancel(self._timer)

    def timeout_error(self) -> TransportError:
        return TransportError(f"timed out after {self.seconds:g}s {self.stage}")
