"""How many hosts a patrol works on at once, found while it runs (AIMD on handshake latency).

A fixed concurrency turns a slow resource into blindness (600 lab sshds on two cores: 90 %
UNKNOWN at 128 at once, none at 16). So: slow start from 16 while handshakes stay as fast as
the fastest seen, then +1 per window; a handshake several times slower or a timeout cuts the
limit by 30 %, at most once per window. `[patrol] concurrency` and RLIMIT_NOFILE bound it.
Handshakes are the signal because they cost the same on every host."""

from __future__ import annotations

import threading
import time

START = 16
TOLERANCE = 4.0  # a handshake this many times the baseline means saturation
SLACK_S = 0.05  # ... and at least this much slower (a 5 ms baseline is noise-prone)
DECREASE = 0.7


class AdaptiveLimiter:
    def __init__(
        self, max_limit: int, start: int = START, min_limit: int = 2, adaptive: bool = True
    ) -> None:
        self.max_limit = max(1, max_limit)
        self.min_limit = min(min_limit, self.max_limit)
        self.adaptive = adaptive  # False: always max_limit in flight ([patrol] adaptive)
        self.limit = float(min(start if adaptive else max_limit, self.max_limit))
        self.ssthresh = float(self.max_limit)
        self.in_flight = 0
        self.baseline: float | None = None
        self.slowest = 0.0
        self.peak = self.limit
        self.cuts = 0
        self.lowest_after_cut: float | None = None
        self.timeouts = 0
        self.cut_by_timeouts = 0  # cuts whose cause was a host running out of time
        # hosts that had to wait for a slot after a cut: only then did the cuts slow anything
        self.held_back = 0
        self._done = 0
        self._cut_at = 0
        self._cut_window = 0  # hosts that were in flight at the last cut
        self._cond = threading.Condition()

    @property
    def current(self) -> int:
        return max(1, int(self.limit))

    def acquire(self, timeout: float) -> bool:
        """Wait for a slot (up to `timeout` seconds); False when none came in time."""
        end = time.monotonic() + timeout
        with self._cond:
            if self.in_flight >= self.current and self.cuts:
                self.held_back += 1
            while self.in_flight >= self.current:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            self.in_flight += 1
            return True

    def release(self, handshake_s: float | None, timed_out: bool = False) -> None:
        """Give the slot back with what was observed: the host's handshake time (None when
        it never got that far) and whether it ran out of time."""
        with self._cond:
            self.in_flight -= 1
            self._done += 1
            congested = timed_out
            slow = False
            if timed_out:
                self.timeouts += 1
            if handshake_s is not None:
                self.slowest = max(self.slowest, handshake_s)
                if self.baseline is None or handshake_s < self.baseline:
                    self.baseline = handshake_s
                elif handshake_s > max(self.baseline * TOLERANCE, self.baseline + SLACK_S):
                    congested = slow = True
            if not self.adaptive:
                pass
            elif congested:
                # one cut per window: the hosts in flight when we cut finish slow too
                if self._done - self._cut_at > self._cut_window:
                    self.limit = max(float(self.min_limit), self.limit * DECREASE)
                    self.ssthresh = self.limit
                    self._cut_at = self._done
                    self._cut_window = self.in_flight
                    self.cuts += 1
                    if timed_out and not slow:
                        self.cut_by_timeouts += 1
                    low = self.lowest_after_cut
                    self.lowest_after_cut = self.limit if low is None else min(low, self.limit)
            elif handshake_s is not None:
                if self.limit < self.ssthresh:
                    self.limit += 1.0  # slow start: doubles per window
                else:
                    self.limit += 1.0 / self.limit
                self.limit = min(self.limit, float(self.max_limit))
                self.peak = max(self.peak, self.limit)
            # wake only as many waiters as there are free slots (a patrol has up to
            # [patrol] concurrency lanes waiting: waking all of them per host is a herd)
            free = self.current - self.in_flight
            if free > 0:
                self._cond.notify(free)

    @property
    def congested(self) -> bool:
        return self.cuts > 0

    def notes(self) -> list[str]:
        """What the operator should know: that (and how far) the patrol slowed down, said only
        when it did: a cut that no host ever waited behind slowed nothing (a 3-host patrol
        whose hosts time out is cut, yet every host was in flight at once). The cause is the
        one that cut: slow handshakes, or hosts that ran out of time."""
        out: list[str] = []
        if self.cuts and self.held_back:
            base = (self.baseline or 0) * 1000
            if self.cut_by_timeouts == self.cuts:
                why = f"{self.timeouts} host(s) ran out of time"
            else:
                why = (
                    f"SSH handshakes took up to {self.slowest * 1000:.0f} ms (fastest "
                    f"{base:.0f} ms)"
                )
            out.append(
                f"patrol slowed down: {why}, so hosts in flight were cut {self.cuts} time(s) "
                f"from up to {int(self.peak)} to as few as {int(self.lowest_after_cut or 1)} "
                f"(bound {self.max_limit}) and {self.held_back} host(s) waited for a slot"
            )
        return out


def fd_bound(per_host: int = 4, reserve: int = 48) -> int:
    """How many hosts may be in flight under RLIMIT_NOFILE: each holds a socket, and a
    channel's poll pipe (two fds); jump connections and the broker need a few more."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1024
    return max(1, (soft - min(reserve, soft // 2)) // per_host)
