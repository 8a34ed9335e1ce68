"""A check-in through the real openai client against the loopback server, with answer shapes
recorded from real servers (tests/llm_shapes.py names the source of each): reasoning in the
content or beside it is never the message, a refusal raises like a reply's, an empty answer is
asked for again, and the draft bills every call as the server counted it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine

from bot.checkins.compose import MemoryComposer
from bot.llm.openai_chat import OpenAIChatModel, openai_client
from loopback.openai_server import OpenAIServer
from memory.clock import ManualClock
from memory.llm import Refused, Unusable, Usage
from memory.tokens import TokenCounter
from tests import llm_shapes as shapes
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.support import handle
from webhooks.settings import Settings
from webhooks.wiring import build

MONDAY = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
FRIDAY = MONDAY + timedelta(days=4)
MESSAGE = "¡Hola Lena! ¿Qué tal te fue la entrevista del jueves?"
ANSWER = json.dumps({"message": MESSAGE, "topic": "job interview"}, ensure_ascii=False)
THINKING = 'The learner had an interview on Thursday. Draft: {"message": "How did it go?"}'


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.fixture
def setup(
    settings: Settings, engine: Engine, server: OpenAIServer, counter: TokenCounter
) -> Iterator[tuple[MemoryComposer, int]]:
    """A learner of Spanish with a plan whose day has passed, and a composer over the real
    client (no waits between unusable answers)."""
    pam = build(
        settings,
        model=FakeChatModel(),
        submit=lambda work: work(),
        engine=engine,
        clock=ManualClock(MONDAY),
    )
    user = unique_user("checkin")
    handle(pam, user, "/language Spanish English")
    handle(pam, user, "El jueves tengo una entrevista de trabajo")
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    state = pam.store.memory.profile(learner.id)
    plan = {"what": "job interview (entrevista)", "when": "2026-03-05", "mentioned": "2026-03-02"}
    assert pam.store.memory.save_profile_data(learner.id, state.version, {"plans": [plan]})
    client = openai_client("test-key", server.base_url, 5.0, 0)
    model = OpenAIChatModel(client, counter, sleep=lambda seconds: None)
    yield MemoryComposer(pam.store, model, settings), learner.id
    client.close()


@pytest.mark.parametrize(
    "body",
    [
        shapes.openai(ANSWER),
        shapes.ollama(f"<think>{THINKING}</think>\n{ANSWER}"),  # thinking left in the content
        shapes.llama_cpp(ANSWER, reasoning=THINKING),  # reasoning_content beside it
        shapes.deepseek(ANSWER),
        shapes.vllm(ANSWER, THINKING),
        shapes.openrouter_reasoning(ANSWER),
    ],
    ids=["openai", "ollama-think", "llama.cpp", "deepseek", "vllm", "openrouter"],
)
def test_the_message_is_the_answer_without_its_reasoning(
    setup: tuple[MemoryComposer, int], server: OpenAIServer, body: dict[str, object]
) -> None:
    composer, learner = setup
    server.answer_next(body)
    draft = composer.compose(learner, FRIDAY)
    assert draft is not None
    assert draft.text == MESSAGE
    assert draft.follows_up == "plan"
    usage = body["usage"]
    assert isinstance(usage, dict)
    assert draft.usage == (
        Usage(str(body["model"]), usage["prompt_tokens"], usage["completion_tokens"]),
    )
    sent = server.of("checkin")[-1]
    assert sent["response_format"]["json_schema"]["name"] == "checkin"


def test_a_refusal_raises_like_a_replys_and_marks_nothing(
    setup: tuple[MemoryComposer, int], server: OpenAIServer
) -> None:
    composer, learner = setup
    server.answer_next(shapes.OPENAI_REFUSAL)
    with pytest.raises(Refused) as raised:
        composer.compose(learner, FRIDAY)
    assert raised.value.billed == (Usage("gpt-4o-2024-08-06", 1117, 46),)
    # The plan was not followed up: the next check-in still may.
    server.answer_next(shapes.openai(ANSWER))
    draft = composer.compose(learner, FRIDAY)
    assert draft is not None and draft.follows_up == "plan"


def test_an_empty_answer_is_asked_again_and_both_calls_are_billed(
    setup: tuple[MemoryComposer, int], server: OpenAIServer
) -> None:
    composer, learner = setup
    server.answer_next(shapes.openai(""), shapes.openai(ANSWER))
    draft = composer.compose(learner, FRIDAY)
    assert draft is not None and draft.text == MESSAGE
    assert draft.usage == (
        Usage("gpt-4o-2024-08-06", 1117, 46),
        Usage("gpt-4o-2024-08-06", 1117, 46),
    )
    assert len(server.of("checkin")) == 2


def test_a_too_long_answer_is_asked_again_not_cut(
    setup: tuple[MemoryComposer, int], server: OpenAIServer
) -> None:
    composer, learner = setup
    long = json.dumps({"message": "¿" + "Qué tal " * 60 + "?", "topic": "x"}, ensure_ascii=False)
    server.answer_next(shapes.openai(long), shapes.openai(ANSWER))
    draft = composer.compose(learner, FRIDAY)
    assert draft is not None and draft.text == MESSAGE
    assert len(draft.usage) == 2


def test_a_checkin_cut_off_at_the_cap_is_no_checkin(
    setup: tuple[MemoryComposer, int], server: OpenAIServer
) -> None:
    composer, learner = setup
    cut = shapes.finished(shapes.openai('{"message": "¡Hola Lena! ¿Qué tal te'), "length")
    server.answer_next(cut, cut)
    with pytest.raises(Unusable):
        composer.compose(learner, FRIDAY)


def test_the_loopback_servers_own_checkin_is_one(
    setup: tuple[MemoryComposer, int], server: OpenAIServer
) -> None:
    """What the loopback server answers a check-in by default (for the processes' tests)."""
    composer, learner = setup
    draft = composer.compose(learner, FRIDAY)
    assert draft is not None and draft.text.startswith("¡Hola!")
