"""`collector.paused`: the cycle collector off for one bulk step (a patrol's state step, the
console reading the newest round), back as it was after; overlapping pauses on several
threads (the console serves pages on several) bring it back only when the last one ends."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from fleetcheck import collector


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_off_inside_and_back_after() -> None:
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_back_after_an_exception() -> None:
    with pytest.raises(RuntimeError), collector.paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with collector.paused():
        pass
    assert not gc.isenabled()


def test_overlapping_pauses_on_two_threads() -> None:
    entered, leave = threading.Event(), threading.Event()

    def other() -> None:
        with collector.paused():
            entered.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    t.start()
    assert entered.wait(10)
    with collector.paused():
        leave.set()
        t.join(10)
        assert not t.is_alive()
        assert not gc.isenabled()  # the other thread's pause ended; this one has not
    assert gc.isenabled()
