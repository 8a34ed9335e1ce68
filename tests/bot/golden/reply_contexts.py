"""The reply prompts a learner at the default correction density gets, stored byte for byte
(reply_prompts.json) from the code before /corrections existed: at `normal`, the density adds
not one token (tests/bot/test_density.py rebuilds each and compares).

    python -m tests.bot.golden.reply_contexts     # rewrite reply_prompts.json (only on purpose)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.review.prompt import Asked
from bot.turn.prompt import reply_prompt
from memory.database.records import (
    LEARNER,
    PAM,
    Context,
    LearnerInfo,
    ProfileState,
    StoredMessage,
    SummaryState,
)

GOLDEN = Path(__file__).with_name("reply_prompts.json")
CAP = 800  # summary chars


def _messages(spoken: bool = False) -> list[StoredMessage]:
    return [
        StoredMessage(4, LEARNER, "Hola, yo es Lena y trabajo de enfermera", 12),
        StoredMessage(5, PAM, "¡Hola Lena! ¿Dónde trabajas?\n\n✏️ yo es → yo soy — ser: soy", 20),
        StoredMessage(6, LEARNER, "Trabajo en un hospital grande", 8, 3.5 if spoken else None),
    ]


def cases() -> dict[str, dict[str, Any]]:
    """Each case: a learner, a profile, a summary, the conversation, and reply_prompt's
    keyword arguments."""
    lena = LearnerInfo(1, "test:golden", "Lena", "Spanish", "German", "A2")
    new = LearnerInfo(2, "test:golden-new", None, None, None, None)
    profile = {
        "who": "Lena, a nurse in Berlin (enfermera)",
        "interests": ["climbing (escalada)", "cooking"],
        "recurring_mistakes": ["ser vs estar"],
    }
    review = Asked(
        section="\n\n<due_review_items>\n1. yo es → yo soy (ser in the first person)\n"
        "</due_review_items>",
        rule="\nGive them a natural chance to use one due item.",
        report=' Add "review": {"used": [...], "missed": [...]}.',
        schema={},
    )
    return {
        "plain": {"learner": lena, "profile": {}, "summary": "", "kwargs": {}},
        "profile_and_summary": {
            "learner": lena,
            "profile": profile,
            "summary": "They talked about Lena's night shifts and a trip to Valencia.",
            "kwargs": {},
        },
        "no_settings": {"learner": new, "profile": {}, "summary": "", "kwargs": {}},
        "spoken": {"learner": lena, "profile": profile, "summary": "", "kwargs": {}, "spoken": 1},
        "recall_and_review": {
            "learner": lena,
            "profile": profile,
            "summary": "Earlier: Valencia.",
            "kwargs": {
                "recalled": "<recalled_conversation>\n[3 May] Lena: fui a Valencia\n"
                "</recalled_conversation>",
                "tool": True,
                "review": review,
            },
        },
    }


def build(case: dict[str, Any], learner: LearnerInfo | None = None) -> list[dict[str, str]]:
    """The reply prompt of `case` (for `learner` instead of the case's, when given)."""
    context = Context(
        learner or case["learner"],
        ProfileState(dict(case["profile"]), 5, 1, 5, None),
        SummaryState(case["summary"], 10, 3, 1, 1, None),
        _messages(spoken=bool(case.get("spoken"))),
    )
    return [dict(m) for m in reply_prompt(context, CAP, **case["kwargs"])]


def main() -> None:
    golden = {name: build(case) for name, case in cases().items()}
    GOLDEN.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
