"""Buttons under a reply, through the worker: the turn's buttons are queued with its last text
part and handed to a sender that shows them (`ButtonSender`); a sender without buttons gets
the text alone, and a long reply's earlier parts none."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest
from sqlalchemy import Engine

from bot.channels import Button, ButtonSender
from bot.turn.values import Turn, TurnRequest
from bot.worker.worker import Worker
from memory.messages import Sent
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, reply_json
from tests.helpers.queues import outbox_rows
from tests.support import RecordingSender, inbound
from webhooks.settings import Settings
from webhooks.wiring import build

CHANNEL = "test"
BUTTONS = (Button("Translate", "/translate 41"), Button("🔊 Say it", "/say 41"))


@dataclass(frozen=True)
class ButtonCall:
    chat_id: str
    text: str
    buttons: tuple[Button, ...]
    idempotency_key: str


@dataclass
class ButtonRecordingSender(RecordingSender):
    """A RecordingSender that shows buttons too (queued failures apply to both)."""

    with_buttons: list[ButtonCall] = field(default_factory=list)
    button_lock: threading.Lock = field(default_factory=threading.Lock)

    def send_buttons(
        self, chat_id: str, text: str, buttons: Sequence[Button], *, idempotency_key: str
    ) -> Sent:
        with self.button_lock:
            self.with_buttons.append(ButtonCall(chat_id, text, tuple(buttons), idempotency_key))
        return Sent(platform_id=f"p-{idempotency_key}")


def worker_with_buttons(
    settings: Settings,
    engine: Engine,
    fake: FakeChatModel,
    sender: RecordingSender,
    monkeypatch: pytest.MonkeyPatch,
) -> Worker:
    """A worker whose every turn comes with BUTTONS (as Translate and /forget's confirmation
    will make them)."""
    pam = build(settings, model=fake, submit=lambda w: w(), engine=engine)
    answer = pam.tutor.answer

    def with_buttons(request: TurnRequest) -> Turn:
        return replace(answer(request), buttons=BUTTONS)

    monkeypatch.setattr(pam.tutor, "answer", with_buttons)
    return Worker(pam, {CHANNEL: sender})


def test_a_reply_goes_out_with_its_buttons(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(ButtonRecordingSender(), ButtonSender)
    sender = ButtonRecordingSender()
    worker = worker_with_buttons(settings, engine, fake_model, sender, monkeypatch)
    fake_model.queue("reply", reply_json("¡Hola! ¿Qué tal?"))
    user = unique_user()
    assert worker.inbox.accept(inbound(user, "hola", channel=CHANNEL))
    worker.drain()
    (call,) = sender.with_buttons
    assert (call.text, call.buttons) == ("¡Hola! ¿Qué tal?", BUTTONS)
    assert sender.calls == []
    (row,) = outbox_rows(engine, user)
    assert row.status == "sent"


def test_only_the_last_part_of_a_long_reply_has_the_buttons(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    sender = ButtonRecordingSender(max_chars=40)
    worker = worker_with_buttons(settings, engine, fake_model, sender, monkeypatch)
    long = "Esta es una frase bastante larga. " * 4
    fake_model.queue("reply", reply_json(long.strip()))
    user = unique_user()
    assert worker.inbox.accept(inbound(user, "hola", channel=CHANNEL))
    worker.drain()
    assert len(sender.calls) >= 2  # the earlier parts, as plain texts
    (last,) = sender.with_buttons
    assert last.buttons == BUTTONS
    assert "".join([c.text for c in sender.calls] + [last.text]) == long.strip()


def test_a_sender_without_buttons_sends_the_text_alone(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    sender = RecordingSender()
    assert not isinstance(sender, ButtonSender)
    worker = worker_with_buttons(settings, engine, fake_model, sender, monkeypatch)
    fake_model.queue("reply", reply_json("¡Hola!"))
    user = unique_user()
    assert worker.inbox.accept(inbound(user, "hola", channel=CHANNEL))
    worker.drain()
    assert [c.text for c in sender.calls] == ["¡Hola!"]
