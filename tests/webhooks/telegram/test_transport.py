"""SyncBot's event loops: one per calling thread, and every one closed once the client is,
including the loop of a call still running when `close` came (a "typing…" thread's, say),
which its own thread closes when the call returns."""

from __future__ import annotations

import asyncio
import threading

from loopback.telegram_server import TOKEN
from webhooks.telegram.transport import SyncBot


def test_a_call_still_running_when_the_client_closes_closes_its_own_loop() -> None:
    bot = SyncBot(TOKEN, "http://127.0.0.1:9/bot")
    started, release = threading.Event(), threading.Event()
    loops: list[asyncio.AbstractEventLoop] = []
    results: list[str] = []

    async def a_slow_call() -> str:
        loops.append(asyncio.get_running_loop())
        started.set()
        while not release.is_set():
            await asyncio.sleep(0.01)
        return "sent"

    thread = threading.Thread(target=lambda: results.append(bot._run(a_slow_call())))
    thread.start()
    assert started.wait(10)
    bot.close()
    assert not loops[0].is_closed()  # running on its thread: close() cannot close it

    release.set()
    thread.join(10)

    assert results == ["sent"] and loops[0].is_closed()


def test_a_call_after_close_leaves_no_loop_open() -> None:
    bot = SyncBot(TOKEN, "http://127.0.0.1:9/bot")
    bot.close()
    loops: list[asyncio.AbstractEventLoop] = []

    async def a_call() -> None:
        loops.append(asyncio.get_running_loop())

    thread = threading.Thread(target=lambda: bot._run(a_call()))
    thread.start()
    thread.join(10)

    assert loops and loops[0].is_closed()


def test_a_thread_whose_idle_loop_close_closed_calls_again_on_a_fresh_one() -> None:
    bot = SyncBot(TOKEN, "http://127.0.0.1:9/bot")
    loops: list[asyncio.AbstractEventLoop] = []

    async def a_call() -> None:
        loops.append(asyncio.get_running_loop())

    bot._run(a_call())  # this thread's loop, idle when the client closes
    bot.close()
    bot._run(a_call())  # a call that came late, after close

    assert len(loops) == 2 and loops[0] is not loops[1]
    assert all(loop.is_closed() for loop in loops)
