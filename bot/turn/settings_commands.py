"""/language and /level: the languages a learner practises and explains in, and their level,
as they type them ("/language Castellano Deutsch", "/level upper intermediate"), answered in
their native language (the one just set, when they set it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bot.i18n import N_, Words, native_of, words_for
from bot.language_choice import EXAMPLES, Choice, choose, split_names
from bot.languages import MAX_NAME_CHARS
from bot.levels import LEVELS, read_level
from memory.database.records import LearnerInfo
from memory.store.learners import Learners

# The learner's settings in a sentence, as /start and /profile say them (bot/turn/commands.py).
SettingsLine = Callable[[LearnerInfo], str]

MAX_SAID_CHARS = 40  # of what the learner typed, said back to them
MAX_WORDS = 8  # in /language's two names ("Português do Brasil", "Chinese Traditional")

LANGUAGE_USAGE = N_(
    "Which language do you want to practise? Write it like this: /language Spanish — or "
    "with your native language too: /language Spanish English"
)
LEVEL_USAGE = N_(
    "Tell me your level as one of {levels} — e.g. /level A2 — or in words: /level beginner. "
    "A1–A2 beginner, B1–B2 intermediate, C1–C2 advanced."
)


def _language_name(say: Words, choice: Choice) -> str:
    """The language `choice` names, as the learner's language calls it ("Klingonisch")."""
    own = say.cldr.languages.get(choice.code) if choice.code else None
    return own or choice.name or ""


def _examples(say: Words) -> str:
    """Some languages Pam teaches, named in the learner's language."""
    return say.list(say.cldr.languages.get(code, code) for code in EXAMPLES)


def _refusal(say: Words, typed: str, choice: Choice, args: Sequence[str], at: int) -> str:
    """Why `typed` (the `at`th of `args`) is no language Pam takes, and what to write
    instead."""
    if choice.verdict == "constructed":
        language = _language_name(say, choice)[:MAX_SAID_CHARS]
        if at == 1:
            usage = say(LANGUAGE_USAGE)
            return say(
                "I can't explain things in {language}. {usage}", language=language, usage=usage
            )
        return say(
            "I can't teach {language} — it's a made-up language, and I teach languages "
            "people speak. I can help you with lots of others, like {examples}.",
            language=language,
            examples=_examples(say),
        )
    if choice.verdict == "not taught":
        return say(
            "I don't know {language} well enough to teach it, sorry. I can help you with "
            "lots of others, like {examples}.",
            language=_language_name(say, choice)[:MAX_SAID_CHARS],
            examples=_examples(say),
        )
    if choice.suggestion is not None:
        corrected = [*args]
        corrected[at] = choice.suggestion  # English: every name in English is understood
        return say(
            "I don't know the language “{typed}”. Did you mean {language}? Then write {command}",
            typed=typed[:MAX_SAID_CHARS],
            language=_language_name(say, choose(choice.suggestion)),
            command="/language " + " ".join(corrected),
        )
    typed = typed[:MAX_SAID_CHARS]
    return say(
        "I don't know the language “{typed}”. {usage}", typed=typed, usage=say(LANGUAGE_USAGE)
    )


def set_languages(
    learners: Learners, learner: LearnerInfo, args: Sequence[str], settings_of: SettingsLine
) -> str:
    """/language <target> [native]: the language to practise, and the one the learner speaks
    (Pam's own words follow it at once)."""
    say = words_for(native_of(learner), "settings")
    names_typed = split_names(args[:MAX_WORDS]) if args else None
    if not names_typed or len(args) > MAX_WORDS:
        return say(LANGUAGE_USAGE)
    args = names_typed
    choices = [choose(arg) for arg in args]
    for at, (typed, choice) in enumerate(zip(args, choices, strict=True)):
        # The native language may be any real language; the target one Pam must teach.
        fine = ("taught",) if at == 0 else ("taught", "not taught")
        if choice.verdict not in fine or choice.name is None:
            return _refusal(say, typed, choice, args, at)
    names = [choice.name for choice in choices if choice.name]
    if any(len(name) > MAX_NAME_CHARS for name in names):
        return say(LANGUAGE_USAGE)
    target = names[0]
    native = names[1] if len(names) == 2 else learner.native_language
    if native == target:
        usage = say(LANGUAGE_USAGE)
        return say(
            "Your native language and the one you practise are the same — {usage}", usage=usage
        )
    updated = learners.update_settings(learner.id, target_language=target, native_language=native)
    say = words_for(native_of(updated), "settings")
    return say("Great! {settings} Say hi whenever you're ready!", settings=settings_of(updated))


def set_level(
    learners: Learners, learner: LearnerInfo, args: Sequence[str], settings_of: SettingsLine
) -> str:
    """/level <A1…C2, or a word, or a range>: the learner's CEFR level."""
    say = words_for(native_of(learner), "settings")
    found = read_level(" ".join(args)) if args else None
    if found is None:
        return say(LEVEL_USAGE, levels=", ".join(LEVELS))
    updated = learners.update_settings(learner.id, level=found.level)
    if found.upper is not None:
        taken = say(
            "Got it: I'll take {level}, the lower end of {level}–{upper} (say /level {upper} "
            "if that's too easy).",
            level=found.level,
            upper=found.upper,
        )
    elif found.word is not None:
        word = found.word[:MAX_SAID_CHARS]
        taken = say("Got it: “{word}” is level {level}.", word=word, level=found.level)
    elif updated.target_language:
        taken = say("Got it.")
    else:
        taken = say("Got it: level {level}.", level=found.level)
    if updated.target_language:
        return f"{taken} {settings_of(updated)}"
    return (
        taken
        + " "
        + say("Now tell me which language you want to practise, e.g. /language Spanish English.")
    )
