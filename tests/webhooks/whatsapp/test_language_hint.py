"""A WhatsApp number's country, and the language most of its people read, as Pam's guess at
the learner's native language: from the number to the inbox to the learner."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine

from bot.worker.worker import Worker
from memory.store.message_store import Store
from tests.helpers.queues import inbox_items
from tests.webhooks.whatsapp.conftest import new_wa_id, post_form, text_form
from webhooks.whatsapp.language import country_language, number_language
from webhooks.whatsapp.payload import inbound_from_form


@pytest.mark.parametrize(
    ("address", "hint"),
    [
        ("whatsapp:+4915112345678", "de"),  # Germany
        ("whatsapp:+14155552671", "en"),  # the United States
        ("whatsapp:+14165551234", "en"),  # Canada: English 87%, French 29%
        ("whatsapp:+41791234567", "de"),  # Switzerland: German 76%
        ("whatsapp:+34612345678", "es"),
        ("whatsapp:+5511987654321", "pt"),  # Brazil
        ("whatsapp:+81901234567", "ja"),
        ("whatsapp:+966501234567", "ar"),  # Saudi Arabia
        ("whatsapp:+380501234567", "uk"),
        ("whatsapp:+886912345678", "zh-Hant"),  # Taiwan
        ("whatsapp:+919812345678", None),  # India: no official language spoken by half
        ("whatsapp:+27821234567", None),  # South Africa: English 31%
        ("whatsapp:+999", None),
        ("whatsapp:not-a-number", None),
    ],
)
def test_a_numbers_country_suggests_a_language(address: str, hint: str | None) -> None:
    assert number_language(address) == hint


def test_every_country_gets_one_of_its_official_languages_or_none() -> None:
    from babel.core import get_global

    for territory, languages in get_global("territory_languages").items():
        tag = country_language(territory)
        if tag is not None:
            assert languages[tag.replace("-", "_")]["official_status"] in (
                "official",
                "de_facto_official",
            )


def test_the_form_carries_the_hint() -> None:
    message = inbound_from_form(text_form("4915112345678", "Hola"))
    assert message is not None and message.language_hint == "de"


def test_the_first_message_guesses_the_native_language(
    client: FlaskClient, engine: Engine, worker: Worker, store: Store
) -> None:
    wa_id = new_wa_id("49")
    post_form(client, text_form(wa_id, "/help"))

    [item] = inbox_items(engine)
    assert item.language_hint == "de"
    worker.drain()
    learner = store.learners.find_learner(f"whatsapp:+{wa_id}")
    assert learner is not None and learner.native_guess == "German"
