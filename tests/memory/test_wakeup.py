"""On Postgres a stored message wakes the workers at once (NOTIFY → LISTEN), and the listener
survives its connection being cut; elsewhere nothing is sent and workers poll."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from bot.worker.worker import Worker
from memory.database import db
from memory.queue.inbox import Inbox
from memory.wakeup import CHANNEL, InboxListener
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.support import WAIT, RecordingSender, inbound, wait_until
from webhooks.settings import Settings
from webhooks.wiring import build


@pytest.fixture
def postgres_engine(engine: Engine) -> Iterator[Engine]:
    """The test Postgres, on connections named for this test alone: the LISTENing
    connections it counts and cuts are its own, never those of a test running beside it
    (pytest-xdist) on the same server."""
    if engine.dialect.name != "postgresql":
        pytest.skip("LISTEN/NOTIFY is Postgres'; SQLite workers poll")
    named = engine.url.update_query_dict({"application_name": f"pam-wakeup-{uuid.uuid4().hex}"})
    tagged = db.make_engine(named.render_as_string(hide_password=False))
    yield tagged
    tagged.dispose()


LISTENING = "FROM pg_stat_activity WHERE query = :q AND application_name = :name"


def listening(engine: Engine) -> dict[str, str]:
    """The parameters of LISTENING for `engine`'s connections."""
    return {"q": f"LISTEN {CHANNEL}", "name": str(engine.url.query["application_name"])}


def listeners(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(
            connection.execute(text(f"SELECT count(*) {LISTENING}"), listening(engine)).scalar_one()
        )


def test_a_stored_message_wakes_a_listening_worker(postgres_engine: Engine) -> None:
    woken = threading.Event()
    listener = InboxListener(postgres_engine, woken.set)
    listener.start()
    try:
        wait_until(woken.is_set, "the listener's first wake-up (catching up)")
        wait_until(lambda: listeners(postgres_engine) >= 1, "the listener to LISTEN")
        woken.clear()
        assert Inbox(postgres_engine, 30).accept(inbound(unique_user(), "Hola"))
        assert woken.wait(WAIT), "NOTIFY did not wake the listener"
    finally:
        listener.stop()


def test_the_listener_reconnects_after_its_connection_is_cut(postgres_engine: Engine) -> None:
    woken = threading.Event()
    listener = InboxListener(postgres_engine, woken.set)
    listener.start()
    try:
        # Its first wake-up comes once it LISTENs.
        wait_until(woken.is_set, "the listener to LISTEN")
        woken.clear()
        with postgres_engine.begin() as connection:
            connection.execute(
                text(f"SELECT pg_terminate_backend(pid) {LISTENING}"), listening(postgres_engine)
            )
        wait_until(woken.is_set, "the listener to reconnect (it wakes the lanes on reconnect)")
        wait_until(lambda: listeners(postgres_engine) >= 1, "the listener to LISTEN again")
        woken.clear()
        assert Inbox(postgres_engine, 30).accept(inbound(unique_user(), "¿Sigues ahí?"))
        assert woken.wait(WAIT), "no wake-up after the reconnect"
    finally:
        listener.stop()


def test_a_worker_in_another_process_answers_without_waiting_for_its_poll(
    postgres_engine: Engine, settings: Settings, sender: RecordingSender
) -> None:
    """The web process (here: a bare Inbox on its own engine) stores a message; the worker,
    polling only every 60 s, is woken by the notification and answers it."""
    slow_poll = settings.replace(service={"poll_seconds": 60.0})
    pam = build(slow_poll, model=FakeChatModel(), engine=postgres_engine)
    assert pam.scheduler is not None
    worker = Worker(pam, {"test": sender})
    worker.start(inbox_lanes=1, delivery_lanes=1)
    pam.scheduler.start()
    web = db.make_engine(str(postgres_engine.url.render_as_string(hide_password=False)))
    try:
        user = unique_user()
        wait_until(lambda: listeners(postgres_engine) >= 1, "the worker to LISTEN")
        time.sleep(0.2)  # the lanes' first (immediate) run is over: they wait for the poll
        assert Inbox(web, 30).accept(inbound(user, "Hola"))
        wait_until(lambda: len(sender.calls) == 1, "the reply, long before the next poll")
        assert sender.calls[0].text == "¡Qué bien! ¿Y qué más hiciste?"
    finally:
        worker.stop(5)
        pam.close(5)
        web.dispose()
