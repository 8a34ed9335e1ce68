"""What a turn does with each kind of model failure (through the fake model): an outage is
tried again later, an unusable answer is not asked for again, a refusal gets a friendly word,
a misconfiguration tells the operator; every billed call is in usage either way."""

from __future__ import annotations

import pytest

from bot import phrases
from bot.turn.values import ModelUnavailable, TurnRequest
from bot.worker.runtime import Pam
from memory.database.records import LEARNER, PAM
from memory.llm import Misconfigured, Outage, Refused, Unusable, Usage
from tests.conftest import unique_user
from tests.fakes import FakeChatModel, reply_json
from tests.support import handle

BILLED = (Usage("test-model", 900, 40), Usage("test-model", 900, 35))


def spanish_learner(pam: Pam) -> str:
    user = unique_user("ana")
    handle(pam, user, "/language Spanish English")
    return user


def stored(pam: Pam, user: str) -> list[tuple[str, str]]:
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    return [(m.role, m.content) for m in pam.store.conversation.messages(learner.id)]


def usage_of(pam: Pam, user: str) -> dict[str, tuple[int, int, int]]:
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    return pam.store.ledger.usage(learner.id)


def test_an_outage_is_tried_again_later_when_the_caller_can(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = spanish_learner(pam)
    fake_model.queue("reply", Outage("timed out"))

    with pytest.raises(ModelUnavailable):
        pam.tutor.answer(TurnRequest(user, "Hola, ¿qué tal?", inbox_id=7001, can_retry=True))

    assert stored(pam, user) == [(LEARNER, "Hola, ¿qué tal?")]


def test_unusable_answers_get_an_apology_at_once_and_their_calls_are_billed(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = spanish_learner(pam)
    fake_model.queue("reply", Unusable("four empty answers", billed=BILLED))

    # Even where the turn could be tried again: each try would cost billed calls again.
    answer = pam.tutor.answer(TurnRequest(user, "Hola, ¿qué tal?", inbox_id=7002, can_retry=True))

    assert answer.replies == [phrases.APOLOGY]
    assert answer.problem is None
    assert stored(pam, user) == [(LEARNER, "Hola, ¿qué tal?")]
    assert usage_of(pam, user) == {"reply": (2, 1800, 75)}


def test_a_refusal_gets_a_friendly_change_of_subject_and_is_not_retried(
    pam: Pam, fake_model: FakeChatModel, caplog: pytest.LogCaptureFixture
) -> None:
    user = spanish_learner(pam)
    fake_model.queue("reply", Refused("refused", reason="content_filter", billed=BILLED[:1]))

    answer = pam.tutor.answer(
        TurnRequest(user, "Cuéntame algo prohibido", inbox_id=7003, can_retry=True)
    )

    assert answer.replies == [phrases.REFUSED]
    assert len(fake_model.of("reply")) == 1
    assert usage_of(pam, user) == {"reply": (1, 900, 40)}
    assert "reason=content_filter" in caplog.text
    assert "prohibido" not in caplog.text  # the learner's words never reach the log


def test_a_misconfigured_model_tells_the_operator_what_to_do(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = spanish_learner(pam)
    advice = "The server at http://127.0.0.1:9/v1 rejected the API key: check OPENAI_API_KEY."
    fake_model.queue("reply", Misconfigured("401", advice=advice))

    answer = pam.tutor.answer(TurnRequest(user, "Hola"))

    assert answer.replies == [phrases.APOLOGY]
    assert answer.problem == advice
    assert stored(pam, user) == [(LEARNER, "Hola")]


def test_a_misconfigured_model_is_tried_again_later_when_the_caller_can(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    # In the services the operator fixes the key or model and restarts: the message waits.
    user = spanish_learner(pam)
    fake_model.queue("reply", Misconfigured("404", advice="unknown model"))

    with pytest.raises(ModelUnavailable):
        pam.tutor.answer(TurnRequest(user, "Hola", inbox_id=7004, can_retry=True))


def test_a_misconfiguration_after_unusable_answers_is_not_tried_again(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    # A retried turn would get a fresh budget of unusable calls for the same message.
    user = spanish_learner(pam)
    advice = "The LLM server at http://127.0.0.1:9/v1 rejected the API key (401)."
    fake_model.queue("reply", Misconfigured("401", advice=advice, billed=BILLED))

    answer = pam.tutor.answer(TurnRequest(user, "Hola", inbox_id=7005, can_retry=True))

    assert answer.replies == [phrases.APOLOGY]
    assert answer.problem == advice
    assert usage_of(pam, user) == {"reply": (2, 1800, 75)}


def test_an_outage_after_unusable_answers_is_tried_again_with_their_calls_billed(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    # A body cut off mid-answer (billed), then a timeout (the adapter keeps that an Outage):
    # the message gets another try (the fault run's apology, once in each of three runs), and what
    # was billed is on record however the message ends.
    user = spanish_learner(pam)
    fake_model.queue("reply", Outage("timed out", billed=BILLED))

    with pytest.raises(ModelUnavailable):
        pam.tutor.answer(TurnRequest(user, "Hola", inbox_id=7006, can_retry=True))
    assert usage_of(pam, user) == {"reply": (2, 1800, 75)}

    fake_model.queue("reply", Outage("timed out", billed=BILLED))
    last = pam.tutor.answer(TurnRequest(user, "Hola", inbox_id=7006, can_retry=False))
    assert last.replies == [phrases.APOLOGY]
    assert usage_of(pam, user) == {"reply": (4, 3600, 150)}


def test_calls_billed_before_a_usable_answer_are_recorded_with_it(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = spanish_learner(pam)

    class BilledOnce(FakeChatModel):
        def complete(self, messages, *, model, max_tokens, purpose, schema=None, accept=None):  # type: ignore[no-untyped-def]
            completion = super().complete(
                messages,
                model=model,
                max_tokens=max_tokens,
                purpose=purpose,
                schema=schema,
                accept=accept,
            )
            if purpose != "reply":
                return completion
            return type(completion)(
                completion.text,
                completion.model,
                completion.input_tokens,
                completion.output_tokens,
                billed=BILLED,
            )

    pam.tutor.asking.model = BilledOnce()
    handle(pam, user, "Hola")

    calls, _, _ = usage_of(pam, user)["reply"]
    assert calls == 3  # the answer's own call and the two unusable ones before it


def test_the_reply_asks_for_structured_output(pam: Pam, fake_model: FakeChatModel) -> None:
    handle(pam, spanish_learner(pam), "Hola")

    [call] = fake_model.of("reply")
    assert call.schema is not None
    assert "reply" in call.schema["schema"]["properties"]


def test_a_photo_with_a_caption_is_answered_after_the_friendly_note(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = spanish_learner(pam)
    fake_model.queue("reply", reply_json("¡Qué playa tan bonita!"))

    answer = pam.local_turns().reply(TurnRequest(user, "Mi playa favorita en Cádiz", kind="media"))

    [reply] = answer.replies
    assert reply.startswith(phrases.NOT_MEDIA + "\n\n")
    assert reply.endswith("¡Qué playa tan bonita!")
    [call] = fake_model.of("reply")
    assert call.messages[-1] == {"role": "user", "content": "Mi playa favorita en Cádiz"}
    assert stored(pam, user)[-2] == (LEARNER, "Mi playa favorita en Cádiz")
    assert stored(pam, user)[-1][0] == PAM


def test_a_photo_without_a_caption_gets_the_friendly_note_only(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = spanish_learner(pam)

    answer = pam.tutor.answer(TurnRequest(user, "  ", kind="media"))

    assert answer.replies == [phrases.NOT_MEDIA]
    assert fake_model.of("reply") == []
