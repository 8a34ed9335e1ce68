"""Pam's own words in the learner's language: command answers, review scaffolding, apologies,
chart labels, buttons. The chat itself and its corrections stay in the target language (the
model writes those); everything Pam writes herself is looked up here, in message catalogs a
translator can edit (GNU gettext `.po` files under bot/i18n/locales/, one per concern, read
with Babel), and dates, numbers and lists are formatted by the locale's CLDR rules.

A module that speaks asks for its words once per learner and calls them:

    say = words_for(native_of(learner), "review")
    say("Fill the gap:")
    say.plural("{count} mistake to practise", "{count} mistakes to practise", 3)
    say.date(when)

Texts defined at module level are marked with `N_` (they are looked up when said). The
catalogs are checked by tests/bot/test_i18n.py: every text the code says is translated in
every locale, with the same placeholders. `python3 dev.py i18n` adds new texts to every
catalog (empty, for the translator) and drops those the code no longer says.

Pam is one person in every language: a woman (French "désolée", Italian "confusa", Spanish
"contenta", Polish "zrobiłam", Russian "рада"…), who speaks to the learner informally (tu,
du, ты, tú), as a friend does."""

from __future__ import annotations

from bot.i18n.words import LOCALES, N_, Words, locale_of, native_of, words_for

__all__ = ["LOCALES", "N_", "Words", "locale_of", "native_of", "words_for"]
