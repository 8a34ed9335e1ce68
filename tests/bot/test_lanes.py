"""The worker's lanes: threads that drain a queue, then wait for a wake-up or the poll."""

from __future__ import annotations

import threading
import time

from bot.worker.lanes import Lanes, idle_wait

WAIT = 20.0
NEVER = 3600.0  # a poll interval no test waits for


class Steps:
    """A lane's step that finds no work; the first call blocks until released."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()
        self.busy = threading.Event()
        self.release = threading.Event()
        self.called = threading.Condition()

    def __call__(self) -> bool:
        with self.lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            self.busy.set()
            assert self.release.wait(WAIT)
        with self.called:
            self.called.notify_all()
        return False

    def wait_for(self, calls: int) -> bool:
        with self.called:
            return self.called.wait_for(lambda: self.calls >= calls, WAIT)


def test_an_idle_lane_runs_at_once_when_woken() -> None:
    steps = Steps()
    steps.release.set()
    lanes = Lanes("test", 1, steps, NEVER)
    lanes.start()
    try:
        assert steps.wait_for(1)  # the first look, at start
        lanes.wake(1)
        assert steps.wait_for(2), "woken, the lane looked again without waiting for the poll"
    finally:
        assert lanes.stop(time.monotonic() + WAIT)


def test_a_wake_up_while_every_lane_is_busy_is_not_lost() -> None:
    """A message stored while the only lane is inside a turn: once the turn ends, the lane
    looks again at once, instead of sleeping until the poll."""
    steps = Steps()
    lanes = Lanes("test", 1, steps, NEVER)
    lanes.start()
    try:
        assert steps.busy.wait(WAIT)
        lanes.wake(1)
        steps.release.set()
        assert steps.wait_for(2)
    finally:
        steps.release.set()
        assert lanes.stop(time.monotonic() + WAIT)


def test_a_wake_up_says_whether_an_idle_lane_takes_it() -> None:
    """The worker wakes its commands lane only when no idle inbox lane takes a message's
    wake-up: each idle lane takes one, and with every lane busy none does."""
    gate = threading.Event()
    calls: list[int] = []
    lock = threading.Lock()

    def step() -> bool:  # every look but the second stays inside its item until the end
        with lock:
            calls.append(1)
            second = len(calls) == 2
        if not second:
            assert gate.wait(WAIT)
        return False

    lanes = Lanes("test", 2, step, NEVER)
    lanes.start()
    try:
        deadline = time.monotonic() + WAIT
        while lanes._idle < 1 and time.monotonic() < deadline:  # one busy, one waiting
            time.sleep(0.01)
        assert lanes.wake(1), "the idle lane takes the first wake-up"
        assert not lanes.wake(1), "the second finds no idle lane that no wake-up spoke for"
    finally:
        gate.set()
        assert lanes.stop(time.monotonic() + WAIT)


def test_stopping_lets_a_lane_finish_its_item() -> None:
    steps = Steps()
    lanes = Lanes("test", 2, steps, NEVER)
    lanes.start()
    assert steps.busy.wait(WAIT)
    assert not lanes.stop(time.monotonic() + 0.05), "one lane is still inside its item"
    steps.release.set()
    assert lanes.stop(time.monotonic() + WAIT), "it ends once the item is done"


def test_idle_lanes_look_as_often_together_however_many_there_are() -> None:
    """128 lanes polling every 0.25 s each would send 512 claims a second to an empty queue:
    each waits its share instead, drifting apart by up to a half."""
    for count in (1, 4, 128):
        waits = [idle_wait(0.25, count) for _ in range(2000)]
        assert all(0.125 * count <= wait <= 0.375 * count for wait in waits)
        looks_a_second = count / (sum(waits) / len(waits))
        assert 3.6 < looks_a_second < 4.4
