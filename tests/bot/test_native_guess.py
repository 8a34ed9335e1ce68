"""The native-language guess in the turn: set from the channel's hint when the learner has
not said their native language, written only when it changes."""

from __future__ import annotations

from typing import Any

import pytest

from bot.turn.native_guess import guessed_language
from bot.worker.runtime import Pam
from tests.conftest import learner_of, unique_user
from tests.support import handle


@pytest.mark.parametrize(
    ("hint", "guess"),
    [
        ("de", "German"),
        ("pt-br", "Portuguese (Brazil)"),
        ("zh-hans", "Chinese (Simplified)"),
        ("zh-Hant", "Chinese (Traditional)"),
        ("en", "English"),
        (None, None),
        ("", None),
        ("xx-nonsense", None),
    ],
)
def test_a_hint_names_a_language(hint: str | None, guess: str | None) -> None:
    assert guessed_language(hint) == guess


def test_the_guess_follows_the_hint_until_the_learner_says(pam: Pam) -> None:
    user = unique_user()
    handle(pam, user, "/help", language_hint="fr")
    assert learner_of(pam, user).native_guess == "French"

    handle(pam, user, "/help", language_hint="it")  # the app's language changed
    assert learner_of(pam, user).native_guess == "Italian"

    handle(pam, user, "/language Spanish German", language_hint="it")
    handle(pam, user, "/help", language_hint="ja")
    info = learner_of(pam, user)
    assert (info.native_language, info.native_guess) == ("German", "Italian")


def test_the_guess_is_written_only_when_it_changes(
    pam: Pam, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = unique_user()
    learners = pam.store.learners
    writes: list[dict[str, Any]] = []
    update = learners.update_settings

    def counted(learner_id: int, **values: Any) -> Any:
        writes.append(values)
        return update(learner_id, **values)

    monkeypatch.setattr(learners, "update_settings", counted)
    for _ in range(3):
        handle(pam, user, "/help", language_hint="de")
    handle(pam, user, "/help")  # no hint: the guess stays

    assert writes == [{"native_guess": "German"}]
    assert learner_of(pam, user).native_guess == "German"


def test_pam_speaks_the_guessed_language(pam: Pam) -> None:
    user = unique_user()
    [answer] = handle(pam, user, "/language Spansh", language_hint="de")
    assert answer.startswith("Die Sprache „Spansh“ kenne ich nicht.")
