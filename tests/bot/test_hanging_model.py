"""A hanging model takes only the turns that need it (issue 27: a model that accepted requests
and never answered held all four lanes, /help and /forget included). The real openai client
talks to a fake OpenAI server on 127.0.0.1 that takes each reply request and answers it only
when the test says so; while every inbox lane waits on it, other learners' /help and /forget
are answered, and a learner's own command still waits for their message before it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from bot import phrases
from bot.turn import forgetting
from bot.worker.worker import Worker
from loopback.openai_server import OpenAIServer, default_answer
from memory.queue.inbox import Inbox
from tests.conftest import unique_user
from tests.support import WAIT, RecordingSender, inbound, wait_until
from webhooks.settings import Settings
from webhooks.wiring import build

LANES = 2


class HangingReplies:
    """The fake server's answers: each reply request is counted, then held until `release`."""

    def __init__(self) -> None:
        self.arrived = threading.Semaphore(0)
        self.release = threading.Event()
        self.answered = 0
        self.lock = threading.Lock()

    def __call__(self, task: str, body: dict[str, Any], count: int) -> str | dict[str, Any]:
        if task == "reply":
            self.arrived.release()
            assert self.release.wait(WAIT * 3), "the test never released the model"
            with self.lock:
                self.answered += 1
        return default_answer(task, body, count)

    def wait_for(self, requests: int) -> None:
        for _ in range(requests):
            assert self.arrived.acquire(timeout=WAIT), "the lanes never called the model"


@pytest.fixture
def hanging() -> Iterator[tuple[HangingReplies, OpenAIServer]]:
    replies = HangingReplies()
    with OpenAIServer(replies) as server:
        try:
            yield replies, server
        finally:
            replies.release.set()


def texts_to(sender: RecordingSender, user: str) -> list[str]:
    return [call.text for call in sender.calls if call.chat_id == user]


def test_commands_are_answered_while_every_lane_waits_on_the_model(
    settings: Settings,
    engine: Engine,
    sender: RecordingSender,
    hanging: tuple[HangingReplies, OpenAIServer],
) -> None:
    replies, server = hanging
    hung = settings.replace(
        llm={"base_url": server.base_url, "api_key": "test", "max_retries": 0},
        service={"poll_seconds": 0.05},
        limits={"rate_limit_per_minute": 0},
    )
    pam = build(hung, engine=engine, submit=lambda work: work())
    worker = Worker(pam, {"test": sender})
    inbox = Inbox(engine, 60)
    chatting = [unique_user("chat") for _ in range(LANES)]
    helped, leaving = unique_user("help"), unique_user("forget")
    worker.start(inbox_lanes=LANES, delivery_lanes=1)
    try:
        for user in chatting:
            assert inbox.accept(inbound(user, "Hola, ¿qué tal?"))
        worker.wake()
        replies.wait_for(LANES)  # every inbox lane is inside a model call now
        # One more chat message, and a command from a learner whose message is in the model.
        assert inbox.accept(inbound(unique_user("queued"), "Buenas tardes"))
        assert inbox.accept(inbound(chatting[0], "/help"))
        assert inbox.accept(inbound(helped, "/help"))
        # /forget, asked and confirmed (typed: "/forget yes" confirms the open question).
        for command in ("/language Spanish English", "/forget", "/forget yes"):
            assert inbox.accept(inbound(leaving, command))
        worker.wake_inbox()

        wait_until(
            lambda: (
                texts_to(sender, helped.split(":", 1)[-1])
                and len(texts_to(sender, leaving.split(":", 1)[-1])) == 3
            ),
            "/help and /forget answered",
        )
        assert not replies.release.is_set() and replies.answered == 0, "the model still hangs"
        assert texts_to(sender, helped.split(":", 1)[-1]) == [phrases.help_text(None)]
        _, asked, done = texts_to(sender, leaving.split(":", 1)[-1])
        assert asked.startswith(forgetting.ASK) and done == phrases.FORGOTTEN
        # A learner's own command waits for their message before it, as it always did.
        assert texts_to(sender, chatting[0].split(":", 1)[-1]) == []
        assert len(server.of("reply")) == LANES

        replies.release.set()
        first = chatting[0].split(":", 1)[-1]
        wait_until(lambda: len(texts_to(sender, first)) == 2, "the chat and its /help answered")
        assert texts_to(sender, first)[1] == phrases.help_text(None)
    finally:
        replies.release.set()
        worker.stop(5)
        pam.close(5)
