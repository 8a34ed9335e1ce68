"""Heartbeats: many leases renewed on one thread, each only while its `with` block runs."""

from __future__ import annotations

import threading

from memory.queue.heartbeat import Heartbeats
from tests.support import wait_until

WAIT = 10.0


class Beats:
    """A `renew` that counts its calls, signals each one, and answers `alive`."""

    def __init__(self, alive: bool = True, fail: bool = False) -> None:
        self.calls = 0
        self.alive = alive
        self.fail = fail
        self.counted = threading.Condition()
        self.release = threading.Event()
        self.release.set()

    def __call__(self) -> bool:
        with self.counted:
            self.calls += 1
            self.counted.notify_all()
        self.release.wait(WAIT)
        if self.fail:
            raise ConnectionError("the database went away")
        return self.alive

    def wait_calls(self, n: int) -> None:
        with self.counted:
            assert self.counted.wait_for(lambda: self.calls >= n, WAIT), "renew was not called"


def test_each_beat_renews_while_its_block_runs_and_never_after() -> None:
    beats = Heartbeats("test-beats")
    first, second = Beats(), Beats()
    with beats.beat(0.01, first), beats.beat(0.01, second, first=0.0):
        first.wait_calls(2)
        second.wait_calls(1)
    calls = (first.calls, second.calls)
    threading.Event().wait(0.05)
    assert (first.calls, second.calls) == calls, "renewed after the block ended"
    assert [t.name for t in threading.enumerate()].count("test-beats") == 1


def test_leaving_the_block_waits_for_a_renewal_in_flight() -> None:
    beats = Heartbeats("test-beats")
    typing = Beats()
    typing.release.clear()
    left = threading.Event()

    def turn() -> None:
        with beats.beat(10.0, typing, first=0.0):
            typing.wait_calls(1)
        left.set()

    thread = threading.Thread(target=turn)
    thread.start()
    typing.wait_calls(1)
    assert not left.wait(0.05), "left while its renew still ran"
    typing.release.set()
    thread.join(WAIT)
    assert left.is_set()


def test_a_lost_claim_stops_its_beat_and_a_failure_does_not() -> None:
    beats = Heartbeats("test-beats")
    lost, flaky = Beats(alive=False), Beats(fail=True)
    with beats.beat(0.01, lost, first=0.0), beats.beat(0.01, flaky, first=0.0):
        lost.wait_calls(1)
        flaky.wait_calls(3)  # a database hiccup: tried again next beat
    threading.Event().wait(0.05)
    assert lost.calls == 1


def test_a_beat_due_at_once_has_started_its_first_call_when_the_block_starts() -> None:
    """`first=0` ("typing…" at the start of every turn): even a block that ends at once got
    its first call, and the block did not wait for that call to end."""
    beats = Heartbeats("test-beats")
    for _ in range(20):
        renew = Beats()
        renew.release.clear()  # the call blocks until released
        with beats.beat(60.0, renew, first=0.0):
            assert renew.calls == 1
            renew.release.set()


def test_the_thread_ends_once_idle_and_the_next_beat_starts_another() -> None:
    """A worker that is dropped (every test builds some) or goes quiet keeps no thread."""
    beats = Heartbeats("test-idle-beats", idle_seconds=0.01)
    for _ in range(2):
        renew = Beats()
        with beats.beat(0.01, renew, first=0.0):
            renew.wait_calls(2)
        wait_until(lambda: "test-idle-beats" not in _names(), "the idle beat thread to end")


def _names() -> list[str]:
    return [thread.name for thread in threading.enumerate()]


def test_a_beat_that_is_not_waited_for_never_holds_up_its_block() -> None:
    """ "typing…" against a slow platform: the turn leaves its block at once, while the
    call still runs, and the call is not made again."""
    beats = Heartbeats("test-beats")
    typing = Beats()
    typing.release.clear()
    left = threading.Event()

    def turn() -> None:
        with beats.beat(0.01, typing, first=0.0, wait_on_exit=False):
            typing.wait_calls(1)
        left.set()

    thread = threading.Thread(target=turn)
    thread.start()
    assert left.wait(WAIT), "the block waited for its renew"
    typing.release.set()
    thread.join(WAIT)
    wait_until(lambda: beats._renewing is None, "the call ended")
    assert typing.calls == 1
