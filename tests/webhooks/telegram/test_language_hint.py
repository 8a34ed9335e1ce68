"""Telegram's language_code, the language the learner's app is set to, read from a real
update and carried through the durable inbox into Pam's guess at their native language."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bot.worker.worker import Worker
from loopback.telegram_server import BOT_ID, USERNAME
from memory.store.message_store import Store
from tests.helpers.queues import inbox_items
from tests.webhooks.telegram import updates as u
from tests.webhooks.telegram.conftest import post_update
from webhooks.telegram.payload import inbound_from_update, parse_update


@pytest.mark.parametrize(
    ("language_code", "hint"), [("de", "de"), ("pt-br", "pt-br"), ("", None), (None, None)]
)
def test_the_apps_language_is_the_hint(language_code: str | None, hint: str | None) -> None:
    me = u.learner(language_code=language_code or "")
    if language_code is None:
        del me["language_code"]  # Telegram leaves it out when it does not know
    update = parse_update(u.text(me, "Hola"))  # Update.de_json on the JSON

    message = inbound_from_update(update, BOT_ID, lambda: USERNAME)

    assert message is not None and message.language_hint == hint


def test_the_hint_goes_through_the_inbox_into_the_guess(
    client: FlaskClient, engine: Engine, worker: Worker, store: Store
) -> None:
    me = u.learner(language_code="pt-br")
    address = f"telegram:{me['id']}"

    post_update(client, u.command(me, "/help"))

    [item] = inbox_items(engine)
    assert item.language_hint == "pt-br"
    worker.drain()
    learner = store.learners.find_learner(address)
    assert learner is not None
    assert (learner.native_guess, learner.native_language) == ("Portuguese (Brazil)", None)
    [item] = inbox_items(engine)
    assert item.language_hint is None  # answered: the queue keeps nothing of it


def test_a_native_language_said_is_never_overridden_by_the_app(
    client: FlaskClient, worker: Worker, store: Store
) -> None:
    me = u.learner(language_code="de")
    address = f"telegram:{me['id']}"
    post_update(client, u.command(me, "/language Spanish English"))
    worker.drain()
    post_update(client, u.text(me, "Hola"))
    worker.drain()

    learner = store.learners.find_learner(address)
    assert learner is not None
    assert learner.native_language == "English"
    # The guess made by the first message stays as it was; the learner's word counts.
    assert learner.native_guess == "German"
