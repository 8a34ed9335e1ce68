"""The density filter: low-information learner messages cost no profile call."""

from __future__ import annotations

import json

import pytest

from memory.config import MemoryConfig
from memory.database.records import LEARNER
from memory.jobs.density import is_low_information
from memory.jobs.profile import learn_profile
from memory.store.message_store import Store
from tests.conftest import unique_user
from tests.fakes import FakeChatModel

LOW = [
    "ok",
    "OK!!",
    "thanks 🙏",
    "jajaja",
    "hahaha",
    "kkkk",
    "👍",
    "",
    "Muchas gracias!",
    "d'accord",
    "Hola!",
    "merci beaucoup",
    "okay cool",
    "haha yes",
    "ありがとう",
    "谢谢",
    "Vale, genial",
]
RICH = [
    "I work as a nurse",
    "Me gusta cocinar",
    "Ayer fui a Madrid",
    "ok, tomorrow I fly to Rome",
    "Tengo dos hijos",
    "Ich heiße Lena",
    "no, I don't have kids",
    "Je suis de Lyon",
]


@pytest.mark.parametrize("text", LOW)
def test_greetings_thanks_laughter_and_emoji_are_low_information(text: str) -> None:
    assert is_low_information(text)


@pytest.mark.parametrize("text", RICH)
def test_anything_about_the_learner_is_not(text: str) -> None:
    assert not is_low_information(text)


def test_a_batch_of_only_low_information_messages_advances_the_profile_without_a_call(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learners.learner(unique_user())
    for text in ["ok", "jaja", "👍", "gracias", "vale"]:
        last = store.conversation.add_message(learner.id, LEARNER, text, 3)

    assert learn_profile(learner.id, store=store, model=fake_model, config=MemoryConfig())

    assert fake_model.of("profile") == []
    profile = store.memory.profile(learner.id)
    assert (profile.watermark, profile.messages_processed, profile.data) == (last.id, 5, {})


def test_one_information_rich_message_sends_the_whole_batch_to_the_model(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learners.learner(unique_user())
    for text in ["ok", "jaja", "Soy enfermera en Berlín", "gracias", "vale"]:
        store.conversation.add_message(learner.id, LEARNER, text, 3)
    fake_model.queue("profile", json.dumps({"who": "a nurse in Berlin"}))

    learn_profile(learner.id, store=store, model=fake_model, config=MemoryConfig())

    [call] = fake_model.of("profile")
    assert "Soy enfermera en Berlín" in call.text
    assert store.memory.profile(learner.id).data == {"who": "a nurse in Berlin"}
