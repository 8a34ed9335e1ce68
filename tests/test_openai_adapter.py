"""The real openai SDK against a local OpenAI-compatible server: answers, usage, retries and
failures of OpenAIChatModel, and whole tutor turns through the assembled runtime."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from bot import phrases
from bot.corrections import parse_answer, render
from bot.llm import ChatMessage, Completion, LLMError, OpenAIChatModel, Purpose, openai_client
from bot.runtime import Pam, build
from bot.settings import Settings
from memory.store import LEARNER, PAM, CorrectionRecord
from memory.tokens import TokenCounter
from tests.conftest import unique_user
from tests.openai_server import Fault, OpenAIServer, default_answer

MODEL = "gpt-4o-mini"
PROMPT: list[ChatMessage] = [
    {"role": "system", "content": "# Task: reply\nYou are Pam, a friend who speaks Spanish."},
    {"role": "user", "content": "Hola, yo es Lena y trabajo en un hospital."},
]
# Tells the SDK to retry after 20 ms instead of its 0.5 s backoff: keeps retry tests quick.
FAST_RETRY = {"retry-after-ms": "20"}

ModelFactory = Callable[..., OpenAIChatModel]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def counter() -> TokenCounter:
    return TokenCounter(MODEL)


@pytest.fixture
def make_model(server: OpenAIServer, counter: TokenCounter) -> Iterator[ModelFactory]:
    """Build OpenAIChatModels on the real SDK client, pointed at `server` by default."""
    clients: list[openai.OpenAI] = []

    def make(
        *, timeout: float = 5.0, max_retries: int = 0, base_url: str | None = None
    ) -> OpenAIChatModel:
        client = openai_client("test-key", base_url or server.base_url, timeout, max_retries)
        clients.append(client)
        return OpenAIChatModel(client, counter)

    yield make
    for client in clients:
        client.close()


def complete(model: OpenAIChatModel, purpose: Purpose = "reply") -> Completion:
    return model.complete(PROMPT, model=MODEL, max_tokens=120, purpose=purpose)


def server_usage(body: dict[str, Any], content: str) -> tuple[int, int]:
    """The usage OpenAIServer reports for a request body and its answer."""
    prompt_chars = sum(len(m["content"]) for m in body["messages"])
    return prompt_chars // 4, len(content) // 4


# -- OpenAIChatModel -----------------------------------------------------------------------


def test_a_completion_returns_text_model_and_usage(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    completion = complete(make_model())

    expected = default_answer("reply", {}, 1)
    assert completion.text == expected
    assert completion.model == MODEL
    [body] = server.requests
    assert (completion.input_tokens, completion.output_tokens) == server_usage(body, expected)
    assert body["model"] == MODEL
    assert body["messages"] == PROMPT
    assert body["max_tokens"] == 120
    assert body["temperature"] == 0.7


def test_memory_jobs_ask_for_a_cooler_temperature(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    complete(make_model(), purpose="summary")
    assert server.requests[0]["temperature"] == 0.2


def test_usage_is_counted_with_tiktoken_when_the_server_omits_it(
    counter: TokenCounter,
) -> None:
    with OpenAIServer(usage=False) as server:
        client = openai_client("test-key", server.base_url, 5.0, 0)
        try:
            completion = complete(OpenAIChatModel(client, counter))
        finally:
            client.close()

    assert not counter.approximate, "tiktoken should load from TIKTOKEN_CACHE_DIR"
    expected_input = sum(counter.count_message(m["content"]) for m in PROMPT)
    assert completion.input_tokens == expected_input
    assert completion.output_tokens == counter.count(default_answer("reply", {}, 1))
    assert completion.output_tokens > 0


def test_a_server_error_is_retried_by_the_sdk(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.fail_next(Fault(status=500))  # no Retry-After: the SDK's own backoff (~0.5 s)

    completion = complete(make_model(max_retries=2))

    assert completion.text == default_answer("reply", {}, 2)
    assert len(server.requests) == 2
    assert server.requests[0] == server.requests[1]


def test_a_rate_limit_is_retried_after_the_servers_delay(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.fail_next(Fault(status=429, headers={"retry-after": "1", **FAST_RETRY}))

    completion = complete(make_model(max_retries=2))

    assert completion.text == default_answer("reply", {}, 2)
    assert len(server.requests) == 2


def test_a_persistent_server_error_becomes_llm_error(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.fail_next(*[Fault(status=500, headers=FAST_RETRY)] * 3)

    with pytest.raises(LLMError, match="InternalServerError"):
        complete(make_model(max_retries=2))
    assert len(server.requests) == 3  # the first try and two retries


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_retried(
    server: OpenAIServer, make_model: ModelFactory, status: int
) -> None:
    server.fail_next(Fault(status=status))

    with pytest.raises(LLMError):
        complete(make_model(max_retries=2))
    assert len(server.requests) == 1


def test_a_timeout_becomes_llm_error(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.fail_next(Fault(status=200, delay=2.0))

    with pytest.raises(LLMError, match="Timeout"):
        complete(make_model(timeout=0.5, max_retries=0))


def test_a_timeout_is_retried(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.fail_next(Fault(status=200, delay=2.0))

    completion = complete(make_model(timeout=0.5, max_retries=1))

    assert completion.text == default_answer("reply", {}, 2)
    assert len(server.requests) == 2


def test_an_unreachable_server_becomes_llm_error(make_model: ModelFactory) -> None:
    with OpenAIServer() as gone:
        url = gone.base_url
    with pytest.raises(LLMError, match="APIConnectionError"):
        complete(make_model(base_url=url, max_retries=0))


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"garbage", id="not-json"),
        pytest.param(b'{"choices": [{"message": {"content": "Hola', id="cut-off-json"),
        pytest.param(b"<html><body>502 Bad Gateway</body></html>", id="html-as-json"),
        pytest.param(b'{"choices": "none"}', id="choices-not-a-list"),
        pytest.param(b'{"choices": [{"message": {"content": 42}}]}', id="content-not-text"),
    ],
)
def test_a_malformed_response_becomes_llm_error(
    server: OpenAIServer, make_model: ModelFactory, body: bytes
) -> None:
    # A proxy or a broken local server answering 200 with something that is not a completion.
    server.fail_next(Fault(status=200, body=body))

    with pytest.raises(LLMError):
        complete(make_model())


def test_a_malformed_response_is_retried_like_an_error(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    # The SDK retries what it sees as errors, not a 200 with a broken body: Pam does.
    server.fail_next(
        Fault(status=200, body=b'{"choices": [{"message": {"conte'),
        Fault(status=200, body=b'{"choices": [{"message": {"content": ""}}]}'),
    )

    completion = complete(make_model(max_retries=2))

    assert "Respuesta 3" in completion.text
    assert len(server.of("reply")) == 3


def test_malformed_responses_beyond_the_retries_become_llm_error(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.fail_next(Fault(status=200, body=b"garbage"), Fault(status=200, body=b"garbage"))

    with pytest.raises(LLMError):
        complete(make_model(max_retries=1))
    assert len(server.of("reply")) == 2


@pytest.mark.parametrize("content", ["", "   \n "])
def test_empty_content_becomes_llm_error(counter: TokenCounter, content: str) -> None:
    with OpenAIServer(answer=lambda task, body, count: content) as server:
        client = openai_client("test-key", server.base_url, 5.0, 0)
        try:
            with pytest.raises(LLMError, match="no text"):
                complete(OpenAIChatModel(client, counter))
        finally:
            client.close()


def test_null_content_becomes_llm_error(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.fail_next(Fault(status=200, body=b'{"choices": [{"message": {"content": null}}]}'))

    with pytest.raises(LLMError, match="no text"):
        complete(make_model())


# -- the tutor through the real SDK --------------------------------------------------------


@pytest.fixture
def live_pam(database_url: str, server: OpenAIServer) -> Iterator[Pam]:
    """Pam as production builds it (real OpenAI client), memory jobs inline, no SDK retries."""
    settings = Settings(
        database_url=database_url,
        openai_base_url=server.base_url,
        openai_api_key="k",
        llm_max_retries=0,
        llm_timeout_seconds=1.0,
    )
    pam = build(settings, submit=lambda work: work())
    yield pam
    pam.close(0)


def shown_reply(count: int) -> str:
    """What the learner sees for the server's `count`-th reply: reply plus correction lines."""
    return render(parse_answer(default_answer("reply", {}, count)))


def test_a_tutor_turn_through_the_real_sdk(live_pam: Pam, server: OpenAIServer) -> None:
    user = unique_user("lena")

    answers = live_pam.tutor.handle(user, "Hola, yo es Lena", display_name="Lena")

    assert answers == [shown_reply(1)]
    assert answers[0].startswith("Respuesta 1: ¡qué interesante!")
    assert "✏️ yo es → yo soy — 'ser' in first person is 'soy'" in answers[0]
    [body] = server.of("reply")
    assert body["model"] == MODEL
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][1:] == [{"role": "user", "content": "Hola, yo es Lena"}]

    store = live_pam.store
    learner = store.find_learner(user)
    assert learner is not None
    messages = store.messages(learner.id)
    assert [(m.role, m.content) for m in messages] == [
        (LEARNER, "Hola, yo es Lena"),
        (PAM, shown_reply(1)),
    ]
    assert store.corrections(learner.id) == [
        CorrectionRecord("yo es", "yo soy", "'ser' in first person is 'soy'", "conjugation")
    ]
    usage = server_usage(body, default_answer("reply", {}, 1))
    assert store.usage(learner.id) == {"reply": (1, *usage)}


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(Fault(status=500), id="server-error"),
        pytest.param(Fault(status=429, headers={"retry-after": "0"}), id="rate-limited"),
        pytest.param(Fault(status=200, delay=2.0), id="timeout"),
        pytest.param(Fault(status=200, body=b"garbage"), id="malformed-body"),
    ],
)
def test_when_the_llm_fails_the_learner_gets_an_apology_and_the_message_stays(
    live_pam: Pam, server: OpenAIServer, fault: Fault
) -> None:
    user = unique_user("lena")
    live_pam.tutor.handle(user, "/language Spanish English")
    server.fail_next(fault)

    answers = live_pam.tutor.handle(user, "Ayer yo es muy cansada")

    assert answers == [phrases.APOLOGIES["Spanish"]]
    store = live_pam.store
    learner = store.find_learner(user)
    assert learner is not None
    assert [(m.role, m.content) for m in store.messages(learner.id)] == [
        (LEARNER, "Ayer yo es muy cansada")
    ]
    assert store.corrections(learner.id) == []
    assert "reply" not in store.usage(learner.id)

    # Once the LLM is back, the unanswered message is still part of the conversation.
    answers = live_pam.tutor.handle(user, "¿Estás ahí?")

    assert answers == [shown_reply(2)]
    last = server.of("reply")[-1]
    assert last["messages"][1:] == [
        {"role": "user", "content": "Ayer yo es muy cansada"},
        {"role": "user", "content": "¿Estás ahí?"},
    ]
