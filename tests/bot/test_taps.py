"""Translate, Explain, Say it: the commands behind the buttons under a reply, with the fake model
at Pam's own interface and a real database. Each costs at most one LLM call, answers in the
learner's native language, looks only at the tapping learner's own messages, and leaves the
conversation as it was."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

import prompts
from bot.i18n import words_for
from bot.turn import taps
from bot.turn.taps import read_answer, read_tap
from bot.turn.values import ModelUnavailable, Turn, TurnRequest
from bot.voice.speaking import SLOWER
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from memory.database.records import LearnerInfo
from memory.llm import Outage, Refused
from memory.messages import Inbound
from tests.bot.test_spoken_replies import OrderedChannel, ScriptedSpeaker
from tests.bot.test_voice_turn import FakeSpeaker, FakeTranscriber, voice_pam
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, reply_json
from tests.support import handle
from webhooks.settings import Settings
from webhooks.wiring import build

GERMAN = words_for("German", "taps")
JAPANESE = words_for("Japanese", "taps")
REPLY = "¡Qué bien! ¿Y qué hiciste después?"
MISTAKE = {"original": "yo es", "corrected": "yo soy", "explanation": "ser: soy"}
TRANSLATION = "Wie schön! Und was hast du danach gemacht?"


@pytest.fixture
def speaker() -> FakeSpeaker:
    return FakeSpeaker()


@pytest.fixture
def pam_with(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, speaker: FakeSpeaker
) -> Callable[..., Pam]:
    """Pam with the fake model and speaker, some settings changed (`settings.replace`)."""
    return lambda **knobs: voice_pam(
        settings, engine, fake_model, FakeTranscriber(), speaker, **knobs
    )


@pytest.fixture
def pam(pam_with: Callable[..., Pam]) -> Pam:
    return pam_with()


def learner(pam: Pam, native: str | None = "German", **settings: object) -> LearnerInfo:
    """A new learner practising Spanish, native in `native`."""
    found = pam.store.learners.learner(unique_user())
    return pam.store.learners.update_settings(
        found.id, target_language="Spanish", native_language=native, **settings
    )


def turn(pam: Pam, who: LearnerInfo, text: str, **request: object) -> Turn:
    """The whole turn for `text` as the terminal takes it (the reply stored)."""
    return pam.local_turns().take(TurnRequest(who.external_id, text, **request))  # type: ignore[arg-type]


def chatted(
    pam: Pam, fake: FakeChatModel, who: LearnerInfo, reply: str = REPLY, corrected: bool = False
) -> Turn:
    """One message and Pam's reply to it (with a correction if `corrected`)."""
    fake.queue("reply", reply_json(reply, [MISTAKE] if corrected else []))
    return turn(pam, who, "Hola, yo es Lena" if corrected else "Hola, soy Lena", can_speak=True)


def command(done: Turn, label: str) -> str:
    """The command of the button labelled `label` under `done`."""
    return next(b.command for b in done.buttons if b.label == label)


def test_translate_answers_in_the_native_language_with_one_call(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    lena = learner(pam)
    chatted(pam, fake_model, lena, corrected=True)
    kept = pam.store.conversation.messages(lena.id)
    fake_model.queue("translate", TRANSLATION)

    assert handle(pam, lena.external_id, "/translate") == [TRANSLATION]

    (call,) = fake_model.of("translate")
    system, user = call.messages
    assert "German" in system["content"]
    # Pam's chat message, as data in the user message, without its correction lines.
    assert f"<message>\n{REPLY}\n</message>" == user["content"]
    assert len(fake_model.calls) == 2  # the reply's and the translation's
    # Counted like a reply's, under its own purpose; the conversation is as it was.
    assert pam.store.ledger.usage(lena.id)["translate"][0] == 1
    assert pam.store.conversation.messages(lena.id) == kept


def test_the_translate_button_names_its_own_reply(pam: Pam, fake_model: FakeChatModel) -> None:
    lena = learner(pam)
    first = chatted(pam, fake_model, lena)
    chatted(pam, fake_model, lena, reply="¿Y mañana qué haces?")
    fake_model.queue("translate", TRANSLATION)

    tap = command(first, GERMAN("Translate"))
    assert handle(pam, lena.external_id, tap) == [TRANSLATION]
    assert REPLY in fake_model.of("translate")[0].text


def test_another_learners_reply_is_not_found(pam: Pam, fake_model: FakeChatModel) -> None:
    lena, kenji = learner(pam), learner(pam, native="Japanese")
    tap = command(chatted(pam, fake_model, lena), GERMAN("Translate"))
    calls = len(fake_model.calls)

    for name in ("translate", "explain", "say"):
        said = handle(pam, kenji.external_id, f"/{name} {tap.split()[1]}")
        assert said == [JAPANESE(taps.NOT_FOUND)]
    # Nor anything Pam cannot have written: no id, a negative one, words.
    for args in ("0", "-3", "abc", "1 2", "99999999999999999999999", "²", "4²"):
        assert handle(pam, lena.external_id, f"/translate {args}") == [GERMAN(taps.NOT_FOUND)]
    assert len(fake_model.calls) == calls


def test_nothing_said_yet_is_not_found(pam: Pam, fake_model: FakeChatModel) -> None:
    lena = learner(pam)
    assert handle(pam, lena.external_id, "/translate") == [GERMAN(taps.NOT_FOUND)]
    assert not fake_model.calls


def test_without_a_native_language_pam_asks_for_it_without_a_call(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    someone = learner(pam, native=None)
    chatted(pam, fake_model, someone, corrected=True)
    for name in ("translate", "explain"):
        assert handle(pam, someone.external_id, f"/{name}") == [taps.NO_NATIVE]
    assert not fake_model.of("translate") and not fake_model.of("explain")


def test_a_guessed_native_language_is_enough(pam: Pam, fake_model: FakeChatModel) -> None:
    someone = learner(pam, native=None, native_guess="Japanese")
    chatted(pam, fake_model, someone)
    fake_model.queue("translate", "いいね！そのあと何をしたの？")
    assert handle(pam, someone.external_id, "/translate") == ["いいね！そのあと何をしたの？"]
    assert "Japanese" in fake_model.of("translate")[0].messages[0]["content"]


def test_explain_with_no_corrections_says_so_without_a_call(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    lena = learner(pam)
    chatted(pam, fake_model, lena)
    assert handle(pam, lena.external_id, "/explain") == [GERMAN(taps.NOTHING_TO_EXPLAIN)]
    assert not fake_model.of("explain")


def test_explain_explains_that_turns_corrections_in_one_call(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    lena = learner(pam)
    first = chatted(pam, fake_model, lena, corrected=True)
    chatted(pam, fake_model, lena, reply="¿Y mañana?")  # a newer one without corrections
    explained = "✏️ yo es → yo soy: „ser“ heißt in der ersten Person „soy“. Yo soy médica."
    fake_model.queue("explain", explained)

    assert handle(pam, lena.external_id, command(first, GERMAN("Explain"))) == [explained]

    (call,) = fake_model.of("explain")
    system, user = call.messages
    assert "German" in system["content"] and "Spanish" in system["content"]
    assert "<learner_message>\nHola, yo es Lena\n</learner_message>" in user["content"]
    assert "- yo es → yo soy (ser: soy)" in user["content"]
    assert pam.store.ledger.usage(lena.id)["explain"][0] == 1


def test_a_reply_carries_the_buttons_its_turn_calls_for(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    lena = learner(pam)
    corrected = chatted(pam, fake_model, lena, corrected=True)
    plain = chatted(pam, fake_model, lena, reply="¿Y mañana qué haces?")
    answers = corrected.reply.reply_to if corrected.reply else None

    assert [(b.label, b.command) for b in corrected.buttons] == [
        ("Übersetzen", f"/translate {answers}"),
        ("Erklären", f"/explain {answers}"),
        ("🔊 Anhören", f"/say {answers}"),
        ("Weniger Korrekturen", "/corrections few"),
    ]
    assert [b.label for b in plain.buttons] == ["Übersetzen", "🔊 Anhören"]
    # Telegram's callback_data holds 64 bytes.
    assert all(len(b.command.encode()) <= 64 for b in corrected.buttons)


def test_fewer_corrections_is_not_offered_at_few_nor_say_it_without_voice(
    pam_with: Callable[..., Pam], fake_model: FakeChatModel
) -> None:
    pam = pam_with(voice={"voice_notes": False})
    few = learner(pam, corrections="few")
    done = chatted(pam, fake_model, few, corrected=True)
    assert [b.label for b in done.buttons] == ["Übersetzen", "Erklären"]


def test_command_answers_and_apologies_carry_no_reply_buttons(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    lena = learner(pam)
    assert turn(pam, lena, "/help").buttons == ()
    fake_model.queue("reply", Refused("no", "content_filter"))
    assert turn(pam, lena, "Hola").buttons == ()


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        (f"```\n{TRANSLATION}\n```", TRANSLATION),  # a code fence around it all
        (f"“{TRANSLATION}”", TRANSLATION),  # quotes around it all
        (f"  {TRANSLATION}\n", TRANSLATION),
        ('Sag "hallo" zu ihr', 'Sag "hallo" zu ihr'),  # quotes inside are kept
    ],
)
def test_the_models_answer_is_read_leniently(answer: str, shown: str) -> None:
    assert read_answer(answer) == shown


def test_a_long_answer_is_capped_at_a_word() -> None:
    shown = read_answer("Wort " * 2000)
    assert len(shown) <= taps.ANSWER_CHARS and shown.endswith("Wort…")


def test_an_empty_answer_gets_an_apology_and_its_call_is_counted(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    lena = learner(pam)
    chatted(pam, fake_model, lena)
    fake_model.queue("translate", "  \n ")
    assert handle(pam, lena.external_id, "/translate") == [GERMAN(taps.COULD_NOT)]
    assert pam.store.ledger.usage(lena.id)["translate"][0] == 1


def test_an_outage_is_tried_again_from_the_inbox(pam: Pam, fake_model: FakeChatModel) -> None:
    lena = learner(pam)
    chatted(pam, fake_model, lena)
    fake_model.queue("translate", Outage("down"))
    with pytest.raises(ModelUnavailable):
        pam.tutor.answer(TurnRequest(lena.external_id, "/translate", can_retry=True))
    fake_model.queue("translate", Outage("down"))
    assert handle(pam, lena.external_id, "/translate") == [GERMAN(taps.COULD_NOT)]


def test_a_spent_budget_stops_a_tap_before_its_call(
    pam_with: Callable[..., Pam], fake_model: FakeChatModel
) -> None:
    pam = pam_with(limits={"learner_daily_tokens": 50})
    lena = learner(pam)
    chatted(pam, fake_model, lena)  # the reply's tokens spend the day's budget
    said = handle(pam, lena.external_id, "/translate")
    assert said and said != [TRANSLATION]
    assert not fake_model.of("translate")


def test_say_speaks_the_reply_and_slower_when_asked_again(
    pam: Pam, fake_model: FakeChatModel, speaker: FakeSpeaker
) -> None:
    lena = learner(pam)  # voice replies off: /say speaks all the same
    chatted(pam, fake_model, lena, corrected=True)
    turns = pam.local_turns()
    calls = len(fake_model.calls)

    said = turns.reply(TurnRequest(lena.external_id, "/say", can_speak=True))
    assert said.replies == [GERMAN(taps.SPOKEN)]
    assert turns.speak(said).clip_id is not None
    (slower,) = said.buttons
    assert slower.label == GERMAN(taps.SLOWER_LABEL)

    again = turns.reply(TurnRequest(lena.external_id, slower.command, can_speak=True))
    assert again.replies == [GERMAN(taps.SPOKEN_SLOWER)]
    assert turns.speak(again).clip_id is not None
    assert speaker.texts == [REPLY, REPLY]  # the chat part only, never the correction lines
    assert speaker.speeds == [1.0, SLOWER]
    assert len(fake_model.calls) == calls  # no chat-model call


def test_with_voice_replies_on_say_is_hearing_it_again_so_slower(
    pam: Pam, fake_model: FakeChatModel, speaker: FakeSpeaker
) -> None:
    lena = learner(pam, voice_replies=True)
    chatted(pam, fake_model, lena)
    turns = pam.local_turns()
    said = turns.reply(TurnRequest(lena.external_id, "/say", can_speak=True))
    assert said.replies == [GERMAN(taps.SPOKEN_SLOWER)] and not said.buttons
    turns.speak(said)
    assert speaker.speeds == [SLOWER]


def test_say_with_voice_off_by_the_operator_is_a_kind_note(
    pam_with: Callable[..., Pam], fake_model: FakeChatModel, speaker: FakeSpeaker
) -> None:
    pam = pam_with(voice={"voice_notes": False})
    lena = learner(pam)
    chatted(pam, fake_model, lena)
    said = turn(pam, lena, "/say", can_speak=True)
    assert said.replies == [GERMAN(taps.NO_VOICE)] and said.speech is None
    assert not speaker.texts


def test_the_tap_prompts_keep_the_data_in_the_user_message() -> None:
    for task, data in (("translate", ("message",)), ("explain", ("message", "corrections"))):
        values = {name: f"«{name}»" for name in prompts.placeholders(task)}
        system, user = prompts.render(task, **values)
        assert all(values[name] in user["content"] for name in data)
        assert not any(values[name] in system["content"] for name in data)


@given(st.integers(min_value=1, max_value=taps.MAX_REFERENCE), st.booleans())
def test_a_button_command_reads_back_as_its_reply(answers: int, slower: bool) -> None:
    args = [str(answers), "slower"] if slower else [str(answers)]
    assert read_tap(args) == taps.Tap(answers, slower=slower)


def test_taps_through_the_inbox_are_deduplicated_and_say_it_speaks_with_voice_off(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    """The worker's path: a tap is an inbox message like any other (a platform's retry of it
    is not answered twice), and the spoken copy /say queues is spoken by a speech lane even
    though the learner's replies are not (/voice off), after its text."""
    log: list[tuple[str, str]] = []
    pam = build(
        settings,
        model=fake_model,
        submit=lambda work: work(),
        engine=engine,
        transcriber=FakeTranscriber(),
        speaker=ScriptedSpeaker(log),
    )
    worker = Worker(pam, {"test": OrderedChannel(log=log)})
    lena = learner(pam)
    user = lena.external_id

    def tap(pid: str, text: str) -> bool:
        return worker.inbox.accept(Inbound("test", pid, user, user, text))

    fake_model.queue("reply", reply_json(REPLY))
    fake_model.queue("translate", TRANSLATION)
    assert tap("m1", "Hola, soy Lena")
    assert tap("m2", "/translate") and not tap("m2", "/translate")
    assert tap("m3", "/say")
    worker.drain()

    assert log == [
        ("text", REPLY),
        ("text", TRANSLATION),
        ("text", GERMAN(taps.SPOKEN)),
        ("speak", REPLY),
        ("voice", user),
    ]
    assert len(fake_model.of("translate")) == 1


@given(st.lists(st.text(max_size=30), max_size=4))
def test_any_typed_arguments_read_as_a_reply_or_none(args: list[str]) -> None:
    tap = read_tap(args)
    assert tap.answering is None or 0 < tap.answering <= taps.MAX_REFERENCE
