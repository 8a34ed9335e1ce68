"""The webhook acknowledges while the (fake) LLM is stalled: a worker running in the scheduler
is stuck inside a reply, and new messages are still persisted and answered 202."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from sqlalchemy import Engine

from bot.worker.worker import Worker
from memory.llm import ChatMessage
from memory.queue.inbox import Inbox
from tests.conftest import unique_user
from tests.fakes import ENDINGS, FakeChatModel, fresh_ending, reply_json
from tests.support import API_TOKEN, WAIT, RecordingSender, wait_until
from webhooks.api.payload import recipient
from webhooks.app import create_app
from webhooks.settings import Settings
from webhooks.wiring import build


class StalledReplies:
    """A reply answer that reports it was called, then blocks until the test releases it."""

    def __init__(self) -> None:
        self.called = threading.Event()
        self.release = threading.Event()

    def __call__(self, messages: Sequence[ChatMessage]) -> str:
        self.called.set()
        assert self.release.wait(WAIT), "the test never released the model"
        return reply_json(answer_to(messages[-1]["content"], fresh_ending(messages)))


def answer_to(text: str, ending: str) -> str:
    """The reply to the learner's `text`: it names the message's last word (which message it
    answers) and not the whole message, which Pam would take for an echo."""
    return f"Te leo: {text.split()[-1]} {ending}"


def test_the_webhook_acknowledges_while_the_llm_is_stalled(
    settings: Settings, engine: Engine, sender: RecordingSender
) -> None:
    stalled = StalledReplies()
    model = FakeChatModel()
    model.defaults["reply"] = stalled
    api = settings.replace(service={"poll_seconds": 0.05}, api={"token": API_TOKEN})
    pam = build(api, model=model, engine=engine)
    assert pam.scheduler is not None
    worker = Worker(pam, {"api": sender})
    worker.start(inbox_lanes=2, delivery_lanes=1)
    pam.scheduler.start()
    client = create_app(api, engine=pam.engine, on_inbound=worker.wake).test_client()
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    user = unique_user().split(":", 1)[1]
    texts = ["Hola, yo es Lena", "Ayer yo va al cine", "¿Y tú?"]

    def post(n: int) -> int:
        body = {"id": f"{user}-{n}", "user": user, "text": texts[n]}
        return client.post("/api/messages", json=body, headers=headers).status_code

    try:
        assert post(0) == 202
        assert stalled.called.wait(WAIT), "the worker never started the first turn"

        # The worker is stuck in the LLM: the webhook still persists and acknowledges.
        assert post(1) == 202
        assert post(2) == 202
        assert post(1) == 200, "a redelivery is still recognised"
        assert len(model.of("reply")) == 1, "the webhook never calls the LLM"
        assert Inbox(engine, 60).counts() == {"claimed": 1, "pending": 2}
        assert sender.calls == []

        stalled.release.set()
        wait_until(lambda: len(sender.calls) >= 3, "three replies")
    finally:
        stalled.release.set()
        worker.stop(5)
        pam.close(5)

    assert [d.text for d in sender.calls] == [
        answer_to(t, ENDINGS[n % 2]) for n, t in enumerate(texts)
    ]
    # Each reply goes to the user, naming the request it answers.
    assert [recipient(d.chat_id) for d in sender.calls] == [(user, f"{user}-{n}") for n in range(3)]
    assert len(model.of("reply")) == 3
