"""Pam's guess at a learner's native language, until they say it (/language <target> <native>):
the language their app is set to (Telegram's language_code) or their number's country's
(WhatsApp), as the channel hints it with each message. Pam's own words follow the guess
(bot.i18n.native_of); corrections are never explained in a guessed language."""

from __future__ import annotations

from bot.languages import language_name
from memory.database.records import LearnerGone, LearnerInfo
from memory.store.learners import Learners


def guessed_language(hint: str | None) -> str | None:
    """The language a channel's `hint` names, as Pam names languages ("pt-br" → "Portuguese
    (Brazil)"), or None (no hint, or none Pam knows)."""
    return language_name(hint) if hint else None


def with_guess(learners: Learners, learner: LearnerInfo, hint: str | None) -> LearnerInfo:
    """`learner` with their native language guessed from `hint`: written only when the guess
    changes and they have not said their native language (a write per new guess, not per
    message)."""
    if learner.native_language:
        return learner
    guess = guessed_language(hint)
    if guess is None or guess == learner.native_guess:
        return learner
    try:
        return learners.update_settings(learner.id, native_guess=guess)
    except LearnerGone:  # forgotten meanwhile: the turn finds out as it would have
        return learner
