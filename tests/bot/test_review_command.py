"""/review on real databases with the fake model: a whole session (a "fix" answered right, a
"gap" answered wrong, the score and when the next item is due), chatting on ends it, nothing
due, a stale session, /forget before and during one, PAM_REVIEW=off, and the exercises and
verdicts as pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from bot import phrases
from bot.i18n import words_for
from bot.reply_format import reply_schema
from bot.review.exercises import exercise, exercise_result
from bot.review.prompt import DUE_TAG, EXERCISE_SCHEMA, EXERCISE_TAG
from bot.review.reviewing import (
    NOTHING_YET,
    PAUSED_EARLY,
    REVIEW_OFF,
    STALE,
    ReviewUse,
    when,
)
from memory.clock import ManualClock
from memory.llm import ChatMessage
from memory.review.reads import DueItem, Exercise
from tests.conftest import learner_of, unique_user
from tests.fakes import FakeChatModel, reply_json
from tests.helpers.review import (
    BUEN,
    CHAT,
    SER,
    due_scene,
    grades,
    item_ids,
    review_pam,
    say,
    section,
    system_of,
)
from tests.support import forget
from webhooks.settings import Settings

AGAIN, GOOD = 1, 3  # fsrs.Rating
NOW = datetime(2025, 3, 10, 12, tzinfo=UTC)


def due_item(original: str, corrected: str) -> DueItem:
    return DueItem(7, "a rule", original, corrected, "", "grammar", NOW, 2, 1, 0)


# -- a session -------------------------------------------------------------------------------


def test_a_whole_session_fix_right_then_gap_wrong_then_the_score(
    settings: Settings, engine: Engine
) -> None:
    pam, model, _clock, ana = due_scene(settings, engine, BUEN, SER)
    ids = item_ids(engine, ana.info.id)
    calls = len(model.calls)

    started = say(pam, ana.user, "/review")

    assert len(model.calls) == calls  # a command: no LLM call
    text = started.replies[0]
    assert text.startswith("Let's practise 2 of your mistakes")
    first = pam.store.reviews.session(ana.info.id)
    assert first is not None and first.exercise.kind == "fix"
    assert text.endswith(f"\n\nExercise 1 of 2: {first.exercise.prompt}")
    fix, gap = (BUEN, SER) if first.exercise.item_id == ids[BUEN["rule"]] else (SER, BUEN)
    assert first.exercise.prompt == f"Fix this: «{fix['original']}»"

    # Right, word for word (punctuation and case aside), whatever the model says.
    model.queue("reply", reply_json("¡Muy bien!", exercise="wrong"))
    right = say(pam, ana.user, fix["corrected"].upper() + "!")
    call = model.of("reply")[-1]
    data = section(system_of(call), EXERCISE_TAG)
    assert data == (
        f"asked: {first.exercise.prompt}\nexpected: {fix['corrected']}\nrule: {fix['rule']}"
    )
    assert f"<{DUE_TAG}>" not in system_of(call)
    assert call.schema == reply_schema(EXERCISE_SCHEMA)
    assert right.review == ReviewUse(0, right.review.tokens, exercise=True)
    second = pam.store.reviews.session(ana.info.id)
    assert second is not None and second.exercise.kind == "gap"
    assert right.replies == [f"¡Muy bien!\n\nExercise 2 of 2: {second.exercise.prompt}"]
    assert "___" in second.exercise.prompt
    assert grades(engine, ana.info.id, "review") == [(ids[fix["rule"]], "review", GOOD)]

    # Wrong, as the model says; the last one: the score and when the next item is due.
    model.queue("reply", reply_json("Casi: es «soy».", exercise="wrong"))
    wrong = say(pam, ana.user, "eres")
    assert pam.store.reviews.session(ana.info.id) is None
    assert wrong.replies == [
        "Casi: es «soy».\n\nThat's the review done: 1 of 2 right. "
        "Next review: 1 item in 30 minutes."
    ]
    assert grades(engine, ana.info.id, "review") == [
        (ids[fix["rule"]], "review", GOOD),
        (ids[gap["rule"]], "review", AGAIN),
    ]
    # The session over, the next message is chat again, with no exercise in its prompt.
    say(pam, ana.user, CHAT)
    assert f"<{EXERCISE_TAG}>" not in system_of(model.of("reply")[-1])


def test_chatting_about_something_else_ends_the_session_and_the_reply_stands(
    settings: Settings, engine: Engine
) -> None:
    pam, model, _clock, ana = due_scene(settings, engine, BUEN, SER)
    say(pam, ana.user, "/review")
    model.queue("reply", reply_json("¡Qué bonito! ¿Y luego?", exercise="none"))
    turn = say(pam, ana.user, "Ayer fui al cine con mi hermana.")
    # Never silently: the review is paused in words, once, after the reply.
    assert turn.replies == [f"¡Qué bonito! ¿Y luego?\n\n{PAUSED_EARLY}"]
    assert pam.store.reviews.session(ana.info.id) is None
    assert grades(engine, ana.info.id, "review") == []


def test_chatting_on_after_an_answer_says_the_score_so_far_once(
    settings: Settings, engine: Engine
) -> None:
    pam, model, _clock, ana = due_scene(settings, engine, BUEN, SER)
    say(pam, ana.user, "/review")
    first = pam.store.reviews.session(ana.info.id)
    assert first is not None
    model.queue("reply", reply_json("¡Muy bien!", exercise="right"))
    say(pam, ana.user, first.exercise.expected)
    model.queue("reply", reply_json("¡Qué bonito! ¿Y luego?", exercise="none"))
    turn = say(pam, ana.user, "Ayer fui al cine con mi hermana.")
    assert turn.replies == [
        "¡Qué bonito! ¿Y luego?\n\n"
        "Review paused: 1 of 1 right so far. We'll do the rest later (/review)."
    ]
    assert pam.store.reviews.session(ana.info.id) is None
    # Said once: the next message is chat, with nothing about review.
    model.queue("reply", reply_json("¡Genial!"))
    assert say(pam, ana.user, CHAT).replies == ["¡Genial!"]
    # The item not answered is still due: /review picks the rest up.
    again = say(pam, ana.user, "/review").replies[0]
    assert again.startswith("Let's practise one of your mistakes")


def test_the_review_ends_with_what_is_due_next(settings: Settings, engine: Engine) -> None:
    """Both answered right: their next step is a day away, counted together."""
    pam, model, _clock, ana = due_scene(settings, engine, BUEN, SER)
    say(pam, ana.user, "/review")
    for _ in range(2):
        asked = pam.store.reviews.session(ana.info.id)
        assert asked is not None
        model.queue("reply", reply_json("¡Eso es!", exercise="right"))
        turn = say(pam, ana.user, asked.exercise.expected)
    assert turn.replies == [
        "¡Eso es!\n\nThat's the review done: 2 of 2 right. Next review: 2 items tomorrow."
    ]


def test_review_speaks_the_learners_language(settings: Settings, engine: Engine) -> None:
    """A German speaker learning Spanish: Pam's words about review in German, the exercise's
    Spanish as the learner wrote it, and the model's reply as it is."""
    pam, model, _clock, ana = due_scene(settings, engine, BUEN, SER)
    say(pam, ana.user, "/language Spanish German")
    started = say(pam, ana.user, "/review").replies[0]
    first = pam.store.reviews.session(ana.info.id)
    assert first is not None
    fix = BUEN if first.exercise.item_id == item_ids(engine, ana.info.id)[BUEN["rule"]] else SER
    assert first.exercise.prompt == f"Korrigier das: «{fix['original']}»"
    assert started == (
        "Lass uns 2 deiner Fehler aus unseren Chats üben, einen nach dem anderen. Antworte, "
        f"oder schreib einfach weiter, um aufzuhören.\n\nÜbung 1 von 2: {first.exercise.prompt}"
    )
    model.queue("reply", reply_json("¡Muy bien!", exercise="right"))
    right = say(pam, ana.user, first.exercise.expected).replies[0]
    second = pam.store.reviews.session(ana.info.id)
    assert second is not None and second.exercise.prompt.startswith("Füll die Lücke: «")
    assert right == f"¡Muy bien!\n\nÜbung 2 von 2: {second.exercise.prompt}"
    model.queue("reply", reply_json("¡Vale!", exercise="none"))
    paused = say(pam, ana.user, "Hoy hace sol.").replies[0]
    assert paused == (
        "¡Vale!\n\nWiederholung pausiert: bisher 1 von 1 richtig. Den Rest machen wir später "
        "(/review)."
    )
    assert say(pam, ana.user, "/review").replies[0].startswith("Lass uns einen deiner Fehler")


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="no-verdict"),
        pytest.param({"exercise": "right|wrong|none"}, id="the-format-echoed"),
        pytest.param({"exercise": ["maybe", {"x": 1}]}, id="garbage"),
    ],
)
def test_an_answer_with_no_readable_verdict_is_chat(
    settings: Settings, engine: Engine, fields: dict[str, Any]
) -> None:
    """Never a grade on a guess: the session ends and the reply goes out, saying so."""
    pam, model, _clock, ana = due_scene(settings, engine, BUEN)
    say(pam, ana.user, "/review")
    model.queue("reply", reply_json("Vale.", **fields))
    assert say(pam, ana.user, "no sé").replies == [f"Vale.\n\n{PAUSED_EARLY}"]
    assert pam.store.reviews.session(ana.info.id) is None
    assert grades(engine, ana.info.id, "review") == []


def test_review_again_during_a_session_repeats_the_exercise(
    settings: Settings, engine: Engine
) -> None:
    pam, _model, _clock, ana = due_scene(settings, engine, BUEN)
    say(pam, ana.user, "/review")
    session = pam.store.reviews.session(ana.info.id)
    assert session is not None
    again = say(pam, ana.user, "/review").replies[0]
    assert again == f"We're in the middle of a review — {session.exercise.prompt}"


def test_review_again_says_where_the_learner_is(settings: Settings, engine: Engine) -> None:
    pam, _model, _clock, ana = due_scene(settings, engine, BUEN, SER)
    say(pam, ana.user, "/review")
    session = pam.store.reviews.session(ana.info.id)
    assert session is not None
    again = say(pam, ana.user, "/review").replies[0]
    assert again == (
        f"We're in the middle of a review — Exercise 1 of 2: {session.exercise.prompt}"
    )


def test_a_session_left_for_a_day_is_over(settings: Settings, engine: Engine) -> None:
    pam, model, clock, ana = due_scene(settings, engine, BUEN)
    say(pam, ana.user, "/review")
    clock.advance(STALE + timedelta(minutes=1))
    model.queue("reply", reply_json("¡Hola de nuevo!"))
    assert say(pam, ana.user, "un buen amigo").replies == ["¡Hola de nuevo!"]
    assert f"<{EXERCISE_TAG}>" not in system_of(model.of("reply")[-1])
    assert pam.store.reviews.session(ana.info.id) is None
    assert grades(engine, ana.info.id, "review") == []


# -- nothing to review ---------------------------------------------------------------------------


def test_nothing_corrected_yet(settings: Settings, engine: Engine) -> None:
    model, clock = FakeChatModel(), ManualClock()
    pam = review_pam(settings, engine, model, clock)
    assert say(pam, unique_user(), "/review").replies == [NOTHING_YET]


def test_nothing_due_says_when_the_next_item_is(settings: Settings, engine: Engine) -> None:
    model, clock = FakeChatModel(), ManualClock()
    pam = review_pam(settings, engine, model, clock)
    user = unique_user()
    say(pam, user, "/language Spanish English")
    model.queue("reply", reply_json("¡Vale!", [BUEN]))
    say(pam, user, "Tengo un bueno amigo.")
    clock.advance(timedelta(minutes=10))
    assert say(pam, user, "/review").replies == [
        "Nothing to review right now. Next review: 1 item in 20 minutes."
    ]
    assert pam.store.reviews.session(learner_of(pam, user).id) is None


def test_review_off(settings: Settings, engine: Engine) -> None:
    pam, _model, _clock, ana = due_scene(settings, engine, BUEN, review=False)
    assert say(pam, ana.user, "/review").replies == [REVIEW_OFF]
    assert pam.store.reviews.session(ana.info.id) is None


def test_help_lists_review() -> None:
    assert "/review" in phrases.help_text(None)


# -- /forget -------------------------------------------------------------------------------------


def test_forget_during_a_session_ends_it_with_everything_else(
    settings: Settings, engine: Engine
) -> None:
    pam, model, _clock, ana = due_scene(settings, engine, BUEN)
    say(pam, ana.user, "/review")
    assert forget(pam, ana.user) == [phrases.FORGOTTEN]
    assert pam.store.reviews.session(ana.info.id) is None
    say(pam, ana.user, "un buen amigo")  # a new learner now: plain chat
    system = system_of(model.of("reply")[-1])
    assert f"<{EXERCISE_TAG}>" not in system and f"<{DUE_TAG}>" not in system


def test_forget_while_the_answer_is_with_the_model_drops_the_turn(
    settings: Settings, engine: Engine
) -> None:
    pam, model, _clock, ana = due_scene(settings, engine, BUEN)
    say(pam, ana.user, "/review")

    def forgotten_meanwhile(messages: Sequence[ChatMessage]) -> str:
        pam.store.learners.forget(ana.info.id)
        return reply_json("¡Bien!", exercise="right")

    model.queue("reply", forgotten_meanwhile)
    turn = say(pam, ana.user, "un buen amigo")
    assert turn.replies == [] and turn.reply is None
    assert grades(engine, ana.info.id) == []


# -- the exercises and verdicts ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("original", "corrected", "asked", "prompt", "expected"),
    [
        ("Tengo un bueno amigo", "Tengo un buen amigo", "gap",
         "Fill the gap: «Tengo un ___ amigo» (you wrote «bueno»; a rule)", "buen"),
        ("Voy cine", "Voy al cine", "gap", "Fill the gap: «Voy ___ cine» (a rule)", "al"),
        ("yo es", "yo soy", "fix", "Fix this: «yo es»", "yo soy"),
        # Two places changed, the whole form, or only a word left out: no gap, a fix.
        ("el casa es bonito", "la casa es bonita", "gap",
         "Fix this: «el casa es bonito»", "la casa es bonita"),
        ("es", "soy", "gap", "Fix this: «es»", "soy"),
        ("Voy al el cine", "Voy al cine", "gap", "Fix this: «Voy al el cine»", "Voy al cine"),
    ],
)  # fmt: skip
def test_exercises_are_templated_from_the_item(
    original: str, corrected: str, asked: str, prompt: str, expected: str
) -> None:
    made = exercise(due_item(original, corrected), asked)
    assert (made.prompt, made.expected) == (prompt, expected)
    assert made.kind == ("gap" if prompt.startswith("Fill") else "fix")


def test_a_long_original_is_shortened_in_the_exercise() -> None:
    made = exercise(due_item("a " * 400, "b " * 400), "fix")
    assert len(made.prompt) < 230 and made.prompt.endswith("…»")


GAP = Exercise(7, "gap", "Fill the gap: «Tengo un ___ amigo» (bueno)", "buen")


@pytest.mark.parametrize(
    ("rest", "answer", "result"),
    [
        ({"exercise": "wrong"}, "BUEN", True),  # the expected form, whatever the model says
        ({"exercise": "none"}, "Tengo un buen amigo.", True),  # the whole sentence filled in
        ({}, "buén", True),  # accents aside
        ({"exercise": "Right"}, "bien", True),
        ({"exercise": True}, "bien", True),
        ({"exercise": {"result": "correct"}}, "bien", True),
        ({"result": "incorrect"}, "bueno", False),
        ({"exercise": "wrong."}, "bueno", False),
        ({"exercise": "none"}, "hola", None),
        ({"exercise": "right|wrong|none"}, "hola", None),
        ({"exercise": 3}, "hola", None),
        ({}, "hola", None),
        ({}, "", None),
    ],
)
def test_the_verdict(rest: dict[str, Any], answer: str, result: bool | None) -> None:
    assert exercise_result(rest, answer, GAP) is result


@pytest.mark.parametrize(
    ("due", "said"),
    [
        (NOW - timedelta(minutes=5), "now"),
        (NOW + timedelta(seconds=20), "in 1 minute"),
        (NOW + timedelta(minutes=20), "in 20 minutes"),
        (NOW + timedelta(minutes=59, seconds=50), "in 1 hour"),
        (NOW + timedelta(hours=1), "in 1 hour"),
        (NOW + timedelta(hours=23, minutes=50), "tomorrow"),
        (NOW + timedelta(hours=5, minutes=10), "in 5 hours"),
        (NOW + timedelta(hours=30), "tomorrow"),
        (NOW + timedelta(days=4), "on March 14"),
        (NOW + timedelta(days=365), "on March 10, 2026"),
    ],
)
def test_when_the_next_item_is_due_in_words(due: datetime, said: str) -> None:
    assert when(due, NOW) == said


@pytest.mark.parametrize(
    ("native", "said"),
    [
        ("German", ["in 3 Minuten", "in 2 Stunden", "morgen", "am 14. März", "am 10. März 2026"]),
        ("Japanese", ["3分後", "2時間後", "明日", "3月14日", "2026年3月10日"]),
        # Arabic's plural forms: 3 is "few", 2 has a form of its own.
        ("Arabic", ["بعد 3 دقائق", "بعد ساعتين", "غدًا", "في 14 مارس", "في 10 مارس 2026"]),
    ],
)
def test_when_is_said_in_the_learners_language(native: str, said: list[str]) -> None:
    waits = [timedelta(minutes=3), timedelta(hours=2), timedelta(hours=30)]
    waits += [timedelta(days=4), timedelta(days=365)]
    say = words_for(native, "review")
    assert [when(NOW + wait, NOW, say) for wait in waits] == said
