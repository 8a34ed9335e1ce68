"""bot/llm/retries.py through the real openai SDK and the loopback server: what is sent again
(a connection never made, a 429 or 503) and what is not (a timeout while the server may still
be working, a gateway's 504, a Retry-After too long to wait), and what the operator is told
about a slow server — once, naming PAM_LLM_TIMEOUT."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import openai
import pytest

from bot.backoff import backoff
from bot.llm.openai_chat import OpenAIChatModel, openai_client
from bot.llm.retries import MAX_RETRY_AFTER, Retrying
from bot.turn.values import ModelUnavailable, TurnRequest
from bot.worker.runtime import Pam
from loopback.openai_server import Fault, OpenAIServer, default_answer
from memory.llm import Completion, Outage
from memory.tokens import TokenCounter
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from webhooks.settings import Settings
from webhooks.wiring import build

PROMPT = [
    {"role": "system", "content": "# Task: reply\nYou are Pam."},
    {"role": "user", "content": "Hola, yo es Lena."},
]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def waits() -> list[float]:
    return []


def model(
    url: str, counter: TokenCounter, waits: list[float], *, timeout: float = 5.0, retries: int = 2
) -> OpenAIChatModel:
    client = openai_client("k", url, timeout, retries)
    return OpenAIChatModel(client, counter, sleep=waits.append)


def complete(chat: OpenAIChatModel) -> Completion:
    return chat.complete(PROMPT, model="qwen", max_tokens=50, purpose="reply")  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_a_server_that_says_later_is_asked_again(
    server: OpenAIServer, counter: TokenCounter, waits: list[float], status: int
) -> None:
    server.fail_next(Fault(status=status))

    completion = complete(model(server.base_url, counter, waits))

    assert completion.text == default_answer("reply", {}, 2)
    assert len(server.requests) == 2
    assert len(waits) == 1


def test_retry_after_is_honoured_and_a_long_one_is_not_waited_for(
    server: OpenAIServer, counter: TokenCounter, waits: list[float]
) -> None:
    server.fail_next(Fault(status=429, headers={"retry-after": "3"}))
    complete(model(server.base_url, counter, waits))
    assert waits == [3.0]

    server.fail_next(Fault(status=429, headers={"retry-after": str(int(MAX_RETRY_AFTER) + 1)}))
    with pytest.raises(Outage):
        complete(model(server.base_url, counter, waits))
    assert len(server.requests) == 3  # the second 429 was not sent again


def test_a_gateway_timeout_is_not_sent_again(
    server: OpenAIServer, counter: TokenCounter, waits: list[float]
) -> None:
    server.fail_next(Fault(status=504))

    with pytest.raises(Outage):
        complete(model(server.base_url, counter, waits))

    assert len(server.requests) == 1


def test_a_timeout_is_not_sent_again_and_told_once_naming_the_setting(
    server: OpenAIServer,
    counter: TokenCounter,
    waits: list[float],
    caplog: pytest.LogCaptureFixture,
) -> None:
    chat = model(server.base_url, counter, waits, timeout=0.3, retries=3)
    server.fail_next(Fault(status=200, delay=1.0), Fault(status=200, delay=1.0))

    with caplog.at_level(logging.WARNING, logger="bot.llm.retries"):
        for _ in range(2):
            with pytest.raises(Outage) as caught:
                complete(chat)

    assert len(server.requests) == 2  # one per call: never a copy behind a busy server
    assert waits == []
    told = [r.getMessage() for r in caplog.records if r.name == "bot.llm.retries"]
    assert len(told) == 1
    assert "PAM_LLM_TIMEOUT" in told[0] and server.base_url in told[0]
    assert caught.value.advice == told[0]


def test_a_connection_never_made_is_tried_again(counter: TokenCounter, waits: list[float]) -> None:
    with OpenAIServer() as gone:
        url = gone.base_url

    with pytest.raises(Outage) as caught:
        complete(model(url, counter, waits, retries=2))

    assert len(waits) == 2  # the server had nothing to work on: asked again, with backoff
    assert caught.value.advice is not None and "OPENAI_BASE_URL" in caught.value.advice


def test_a_slow_server_is_told_once(caplog: pytest.LogCaptureFixture) -> None:
    times = iter([0.0, 70.0, 100.0, 190.0, 200.0, 201.0])
    retrying = Retrying(
        3, 120.0, "http://127.0.0.1:8000/v1", sleep=lambda _: None, clock=lambda: next(times)
    )

    with caplog.at_level(logging.WARNING, logger="bot.llm.retries"):
        for _ in range(3):
            assert retrying.send(lambda: "answer") == "answer"

    told = [r.getMessage() for r in caplog.records]
    assert len(told) == 1  # the second slow answer (90 s) is not said again
    assert "took 70 s" in told[0] and "PAM_LLM_TIMEOUT (120 s)" in told[0]


def test_the_timeout_default_suits_a_slow_local_server() -> None:
    settings = Settings()
    assert settings.llm.timeout_seconds >= 120


def test_the_sdk_itself_never_retries(server: OpenAIServer, counter: TokenCounter) -> None:
    client = openai_client("k", server.base_url, 5.0, 3)
    chat = OpenAIChatModel(client, counter, sleep=lambda _: None)
    assert chat.retrying.max_retries == 3
    server.fail_next(Fault(status=503), Fault(status=503))

    assert complete(chat).text == default_answer("reply", {}, 3)
    assert len(server.requests) == 3  # two retries of Pam's, none of the SDK's own on top
    assert isinstance(client, openai.OpenAI)


def test_a_timed_out_turn_is_tried_again_only_after_the_timeout(
    server: OpenAIServer, counter: TokenCounter, waits: list[float]
) -> None:
    server.fail_next(Fault(status=200, delay=1.0))

    with pytest.raises(Outage) as caught:
        complete(model(server.base_url, counter, waits, timeout=0.3))

    assert caught.value.retry_after == 0.3  # the turn waits at least as long as the server may


def test_the_tutor_hands_the_wait_to_the_worker(pam_with_fake: tuple[Pam, FakeChatModel]) -> None:
    pam, fake = pam_with_fake
    fake.queue("reply", Outage("APITimeoutError: Request timed out.", retry_after=120.0))

    with pytest.raises(ModelUnavailable) as caught:
        pam.tutor.answer(
            TurnRequest(unique_user(), "Hola, ¿qué tal el trabajo hoy?", can_retry=True)
        )

    assert caught.value.retry_after == 120.0
    assert backoff(1, caught.value.retry_after) >= 120.0


@pytest.fixture
def pam_with_fake(database_url: str) -> Iterator[tuple[Pam, FakeChatModel]]:
    fake = FakeChatModel()
    pam = build(Settings(database_url=database_url), model=fake, submit=lambda work: work())
    yield pam, fake
    pam.close(0)
