"""A worker keeps up to 128 turns in flight on a pool of 2 + 2 connections
(PAM_DB_POOL_SIZE=2). That holds only if no turn ever checks out a second connection while it
holds one: at 128 lanes such a path would have every lane wait for the pool's timeout. Here
whole inbox turns (a correction graded after the send, a recall search between two model
calls, a /review answer, an /explain tap) run through the worker on a pool of one, with a
short timeout, and a watch on the pool says which thread ever held two."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event

from bot.worker.worker import Worker
from memory.database import db
from tests.fakes import recall_call, reply_json
from tests.helpers.review import BUEN, SER, due_scene
from tests.support import RecordingSender, inbound
from webhooks.settings import Settings

POOL_TIMEOUT = 2.0  # seconds a second checkout would wait before it fails the turn


class Holdings:
    """How many connections each thread holds out of an engine's pool, and the most any
    thread ever held at once."""

    def __init__(self) -> None:
        self.held: dict[int, int] = {}
        self.most = 0
        self.lock = threading.Lock()

    def out(self, *_: Any) -> None:
        with self.lock:
            now = self.held.get(threading.get_ident(), 0) + 1
            self.held[threading.get_ident()] = now
            self.most = max(self.most, now)

    def back(self, *_: Any) -> None:
        with self.lock:
            self.held[threading.get_ident()] = self.held.get(threading.get_ident(), 1) - 1


@pytest.fixture
def one_connection(database_url: str) -> Iterator[tuple[Engine, Holdings]]:
    """An engine whose pool holds one connection (on SQLite, whose pool Pam leaves as it is,
    the watch alone tells), and the watch on it."""
    engine = db.make_engine(database_url, pool_size=1, max_overflow=0, pool_timeout=POOL_TIMEOUT)
    holdings = Holdings()
    event.listen(engine, "checkout", holdings.out)
    event.listen(engine, "checkin", holdings.back)
    yield engine, holdings
    engine.dispose()


def test_whole_inbox_turns_run_on_a_pool_of_one_connection(
    settings: Settings, one_connection: tuple[Engine, Holdings]
) -> None:
    engine, holdings = one_connection
    pam, model, _clock, ana = due_scene(settings, engine, BUEN, SER, recall="tool")
    sender = RecordingSender()
    worker = Worker(pam, {"test": sender})
    chat_id = inbound(ana.user).chat_id

    def turn(text: str) -> str:
        assert worker.inbox.accept(inbound(ana.user, text))
        worker.drain()
        return sender.texts_to(chat_id)[-1]

    model.queue("reply", reply_json("¡Hola, Ana!", [SER]))
    assert turn("Hola, yo es Ana").startswith("¡Hola, Ana!")  # corrected, then graded
    model.queue("explain", "“yo es” → “yo soy”: ser is irregular.")
    assert turn("/explain") == "“yo es” → “yo soy”: ser is irregular."  # a tap
    model.queue("reply", recall_call("perro nombre"), reply_json("¡Claro, Toby!"))
    assert turn("¿Te acuerdas de mi perro?").startswith("¡Claro, Toby!")
    searched = model.of("reply")[-1].messages[-1]
    assert searched["role"] == "tool", "the search ran between the two calls"
    assert turn("/review").endswith("Fix this: «un bueno amigo»")
    model.queue("reply", reply_json("¡Muy bien!", exercise="right"))
    assert turn("un buen amigo").startswith("¡Muy bien!")  # graded with the reply
    assert holdings.most == 1, "a thread held two connections at once"
