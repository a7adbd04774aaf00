"""The adaptive limit on hosts in flight (pure: fed handshake times, no network)."""

from __future__ import annotations

import threading

from fleetcheck.transport.limiter import AdaptiveLimiter


def finish(lim: AdaptiveLimiter, n: int, handshake: float | None, timed_out: bool = False) -> None:
    for _ in range(n):
        assert lim.acquire(1.0)
        lim.release(handshake, timed_out)


def test_slow_start_doubles_while_handshakes_stay_fast() -> None:
    lim = AdaptiveLimiter(max_limit=128, start=16)
    finish(lim, 16, 0.02)
    assert lim.current == 32
    finish(lim, 32, 0.02)
    assert lim.current == 64
    assert not lim.congested and lim.notes() == []


def test_never_above_the_bound() -> None:
    lim = AdaptiveLimiter(max_limit=20, start=16)
    finish(lim, 200, 0.02)
    assert lim.current == 20


def test_slow_handshakes_cut_the_limit_once_per_window() -> None:
    lim = AdaptiveLimiter(max_limit=128, start=16)
    finish(lim, 16, 0.02)  # 32 now, baseline 20 ms
    # a burst of hosts in flight all finishing slow: one cut, not one per host
    held = [lim.acquire(1.0) for _ in range(20)]
    assert all(held)
    for _ in range(20):
        lim.release(0.5)
    assert lim.cuts == 1 and lim.current == int(32 * 0.7)
    assert lim.congested
    assert lim.notes() == []  # cut, but no host has waited behind the cut yet
    held = [lim.acquire(1.0) for _ in range(lim.current)]
    assert all(held) and not lim.acquire(0.0)  # one more host waits: now it slowed the patrol
    (note,) = lim.notes()
    assert "patrol slowed down" in note and "500 ms" in note and "fastest 20 ms" in note
    assert note.endswith("and 1 host(s) waited for a slot")


def test_a_cut_no_host_waited_behind_is_not_said() -> None:
    """Issue 28: 3 hosts, two of which time out: cut twice, yet all 3 were in flight at
    once, so nothing was slowed and nothing is said."""
    lim = AdaptiveLimiter(max_limit=128, start=16)
    held = [lim.acquire(1.0) for _ in range(3)]
    assert all(held)
    lim.release(0.023)
    lim.release(None, timed_out=True)
    lim.release(None, timed_out=True)
    assert lim.cuts >= 1
    assert lim.notes() == []


def test_a_cut_by_timeouts_says_so() -> None:
    lim = AdaptiveLimiter(max_limit=4, start=4, min_limit=1)
    held = [lim.acquire(1.0) for _ in range(4)]
    assert all(held)
    for _ in range(4):
        lim.release(None, timed_out=True)
    assert lim.current < 4
    held = [lim.acquire(1.0) for _ in range(lim.current)]
    assert not lim.acquire(0.0)
    (note,) = lim.notes()
    assert note.startswith("patrol slowed down: 4 host(s) ran out of time, so hosts in flight")


def test_a_time_out_is_saturation_too() -> None:
    lim = AdaptiveLimiter(max_limit=128, start=16)
    finish(lim, 1, None, timed_out=True)
    assert lim.cuts == 1 and lim.current == int(16 * 0.7)


def test_a_handshake_slower_by_less_than_the_slack_is_not_saturation() -> None:
    lim = AdaptiveLimiter(max_limit=128, start=16)
    finish(lim, 1, 0.005)
    finish(lim, 1, 0.04)  # 8x the baseline, but only 35 ms slower: noise
    assert lim.cuts == 0


def test_never_below_the_floor() -> None:
    lim = AdaptiveLimiter(max_limit=128, start=16, min_limit=2)
    for _ in range(30):
        finish(lim, 1, None, timed_out=True)
    assert lim.current == 2


def test_fixed_mode_keeps_the_bound() -> None:
    lim = AdaptiveLimiter(max_limit=24, adaptive=False)
    assert lim.current == 24
    finish(lim, 5, None, timed_out=True)
    finish(lim, 5, 9.0)
    assert lim.current == 24 and lim.cuts == 0


def test_acquire_waits_for_a_slot_and_gives_up_at_its_timeout() -> None:
    lim = AdaptiveLimiter(max_limit=1, start=1, min_limit=1)
    assert lim.acquire(1.0)
    assert not lim.acquire(0.05)  # full: no slot within the timeout
    got = threading.Event()

    def waiter() -> None:
        if lim.acquire(5.0):
            got.set()

    t = threading.Thread(target=waiter)
    t.start()
    lim.release(0.01)
    t.join(5.0)
    assert got.is_set()
