"""/corrections few|normal|all: how many of a learner's mistakes a reply points out (their
correction density), said in their native language, and which of a reply's corrections they see.

At FEW the reply shows only the most important correction (`shown`); the model is asked as at
NORMAL, and every correction it finds is stored as today, so review drills the rest without a
word about them. That is done on the parsed answer, not by the prompt: a weak model told to
name one mistake names one anyway, or three, or drops the ones review needs; a list cut to one
after it is read is cut every time, and the prompt stays the same bytes as at NORMAL (its
cached prefix too). At ALL the prompt's rule asks for minor slips as well (bot/turn/prompt.py).

The density is the learner's own (learners.corrections, set here and by the Fewer corrections
button, which sends "/corrections few"); until they choose, the one the profile learned they
prefer (memory.jobs.profile_facts.density)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.i18n import N_, native_of, words_for
from memory.database.records import ALL, FEW, NORMAL, CorrectionRecord, LearnerInfo
from memory.jobs.profile_facts import chosen_density, density
from memory.store.memory_state import MemoryState
from memory.store.message_store import Store

DOMAIN = "density"
LEARNED = "corrections"  # the profile's field for the density Pam learned the learner prefers
# What the learner may type after /corrections, and the density each word names.
WORDS = {
    FEW: FEW,
    "fewer": FEW,
    "less": FEW,
    "minimal": FEW,
    NORMAL: NORMAL,
    "default": NORMAL,
    "usual": NORMAL,
    ALL: ALL,
    "every": ALL,
    "everything": ALL,
    "more": ALL,
}
# Slips a learner can live with: at FEW a mistake of another kind comes first.
MINOR = ("spelling", "punctuation")

USAGE = N_(
    "Tell me how much to correct: /corrections few (only your most important mistake in each "
    "message), /corrections normal (up to three) or /corrections all (every little slip too)."
)
CHOSEN = {
    FEW: N_(
        "Got it! From now on I'll point out only your most important mistake in each message, "
        "and keep the others for /review."
    ),
    NORMAL: N_(
        "Got it! I'll point out up to three mistakes in each message, the most useful first."
    ),
    ALL: N_("Got it! From now on I'll point out every mistake, even the little slips."),
}
LINES = {
    FEW: N_(
        "Corrections: only your most important mistake in each message (/corrections to change it)."
    ),
    NORMAL: N_("Corrections: up to three mistakes in each message (/corrections to change it)."),
    ALL: N_("Corrections: every mistake, little slips too (/corrections to change it)."),
}
# The density Pam learned from what the learner said in the chat, not by the command.
LEARNED_LINES = {
    FEW: N_(
        "Corrections: only your most important mistake in each message, as you asked me "
        "(/corrections to change it)."
    ),
    ALL: N_(
        "Corrections: every mistake, little slips too, as you asked me (/corrections to change it)."
    ),
}


def read_density(args: Sequence[str]) -> str | None:
    """The density `/corrections <args>` names ("few", "Fewer", "all"), None for anything
    else."""
    return WORDS.get(args[0].casefold()) if len(args) == 1 else None


def density_line(learner: LearnerInfo, learned: dict[str, Any]) -> str:
    """The learner's correction density in a sentence, in their native language, for /start
    and /profile: the one they chose, or the one Pam learned (saying so), or NORMAL."""
    say = words_for(native_of(learner), DOMAIN)
    found = density(learner, learned)
    if chosen_density(learner) is None and found in LEARNED_LINES:
        return say(LEARNED_LINES[found])
    return say(LINES[found])


def set_density(store: Store, learner: LearnerInfo, args: Sequence[str]) -> str:
    """/corrections few|normal|all: the learner's choice, which wins over what Pam learned
    (forgotten, so that /corrections normal holds as the others do). Anything else: how to
    say it, and the density now."""
    say = words_for(native_of(learner), DOMAIN)
    chosen = read_density(args)
    if chosen is None:
        learned = store.memory.profile(learner.id).data
        return f"{say(USAGE)}\n{density_line(learner, learned)}"
    store.learners.update_settings(learner.id, corrections=chosen)
    _forget_learned(store.memory, learner.id)
    return say(CHOSEN[chosen])


def _forget_learned(memory: MemoryState, learner_id: int, attempts: int = 3) -> None:
    """The density the profile learned, dropped from it (compare-and-set: a profile update
    that lands first is read again)."""
    for _ in range(attempts):
        state = memory.profile(learner_id)
        if LEARNED not in state.data:
            return
        data = {key: value for key, value in state.data.items() if key != LEARNED}
        if memory.save_profile(learner_id, state.version, data, state.watermark, 0):
            return


def most_important(found: Sequence[CorrectionRecord]) -> CorrectionRecord:
    """The correction to show when only one is: the model's first (it lists the most useful
    first), unless that is a minor slip and a mistake of another kind follows."""
    return next((c for c in found if c.category not in MINOR), found[0])


def shown(found: Sequence[CorrectionRecord], at: str) -> list[CorrectionRecord]:
    """The corrections a reply shows at density `at`: at FEW the most important one, else
    every one (the prompt decided how many there are)."""
    if at == FEW and found:
        return [most_important(found)]
    return list(found)
