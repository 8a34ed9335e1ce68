"""The real openai SDK against a local OpenAI-compatible server: answers, usage, retries and
failures of OpenAIChatModel, what it learns about reasoning models and structured output,
how it reads the recorded answer shapes of real servers, the unusable budget, billed usage
on every path, and whole tutor turns through the assembled runtime."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from bot import phrases
from bot.corrections import parse_answer, render
from bot.llm.openai_chat import MAX_UNUSABLE_CALLS, OpenAIChatModel, openai_client
from bot.llm.requests import REASONING_ROOM, THINKING_ROOM
from bot.turn.values import TurnRequest
from bot.worker.runtime import Pam
from loopback.llm_shapes import encoded
from loopback.local_server import Answer
from loopback.openai_server import Fault, OpenAIServer, default_answer, refuse_like_openai_reasoning
from memory.database.records import LEARNER, PAM, CorrectionRecord
from memory.llm import (
    ChatMessage,
    Completion,
    JsonSchema,
    Misconfigured,
    Outage,
    Purpose,
    Refused,
    Unusable,
    Usage,
)
from memory.tokens import TokenCounter
from tests import error_shapes as errors
from tests import llm_shapes as shapes
from tests.conftest import unique_user
from tests.llm_shapes import REASONING, REPLY
from tests.support import handle
from webhooks.settings import Settings
from webhooks.wiring import build

MODEL = "gpt-4o-mini"
PROMPT: list[ChatMessage] = [
    {"role": "system", "content": "# Task: reply\nYou are Pam, a friend who speaks Spanish."},
    {"role": "user", "content": "Hola, yo es Lena y trabajo en un hospital."},
]
SCHEMA: JsonSchema = {
    "name": "reply",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {"reply": {"type": "string"}},
        "required": ["reply"],
        "additionalProperties": False,
    },
}
# Tells the SDK to retry after 20 ms instead of its 0.5 s backoff: keeps retry tests quick.
FAST_RETRY = {"retry-after-ms": "20"}

ModelFactory = Callable[..., OpenAIChatModel]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def waits() -> list[float]:
    """The pauses OpenAIChatModel took between unusable answers (it does not really sleep)."""
    return []


@pytest.fixture
def make_model(
    server: OpenAIServer, counter: TokenCounter, waits: list[float]
) -> Iterator[ModelFactory]:
    """Build OpenAIChatModels on the real SDK client, pointed at `server` by default."""
    clients: list[openai.OpenAI] = []

    def make(
        *,
        timeout: float = 5.0,
        max_retries: int = 0,
        base_url: str | None = None,
        **options: Any,
    ) -> OpenAIChatModel:
        client = openai_client("test-key", base_url or server.base_url, timeout, max_retries)
        clients.append(client)
        return OpenAIChatModel(client, counter, sleep=waits.append, **options)

    yield make
    for client in clients:
        client.close()


def complete(
    model: OpenAIChatModel,
    purpose: Purpose = "reply",
    *,
    name: str = MODEL,
    schema: JsonSchema | None = None,
) -> Completion:
    return model.complete(PROMPT, model=name, max_tokens=120, purpose=purpose, schema=schema)


def server_usage(body: dict[str, Any], content: str) -> tuple[int, int]:
    """The usage OpenAIServer reports for a request body and its answer."""
    prompt_chars = sum(len(m["content"]) for m in body["messages"])
    return prompt_chars // 4, len(content) // 4


def prompt_tokens(counter: TokenCounter) -> int:
    """The prompt's input tokens, counted here."""
    return sum(counter.count_message(m["content"]) for m in PROMPT)


def billed_locally(counter: TokenCounter, calls: int, output: str = "") -> tuple[Usage, ...]:
    """`calls` billed calls whose usage the server did not report: counted here."""
    return (Usage(MODEL, prompt_tokens(counter), counter.count(output)),) * calls


# -- OpenAIChatModel -----------------------------------------------------------------------


def test_a_completion_returns_text_model_and_usage(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    completion = complete(make_model())

    expected = default_answer("reply", {}, 1)
    assert completion.text == expected
    assert completion.model == MODEL
    assert (completion.truncated, completion.billed) == (False, ())
    [body] = server.requests
    assert (completion.input_tokens, completion.output_tokens) == server_usage(body, expected)
    assert body["model"] == MODEL
    assert body["messages"] == PROMPT
    assert body["max_tokens"] == 120
    assert body["temperature"] == 0.7
    assert "response_format" not in body
    assert "reasoning_effort" not in body


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
    assert completion.input_tokens == prompt_tokens(counter)
    assert completion.output_tokens == counter.count(default_answer("reply", {}, 1))
    assert completion.output_tokens > 0


def test_all_zero_usage_is_counted_locally(
    server: OpenAIServer, make_model: ModelFactory, counter: TokenCounter
) -> None:
    server.answer_next(shapes.with_usage(shapes.openai(), 0, 0))

    completion = complete(make_model())

    assert (completion.input_tokens, completion.output_tokens) == (
        prompt_tokens(counter),
        counter.count(REPLY),
    )


def test_missing_usage_counts_the_reasoning_the_model_wrote(
    server: OpenAIServer, make_model: ModelFactory, counter: TokenCounter
) -> None:
    body = shapes.deepseek()
    del body["usage"]
    server.answer_next(body)

    completion = complete(make_model())

    assert completion.text == REPLY
    assert completion.output_tokens == counter.count(REPLY + REASONING)


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


def test_a_persistent_server_error_is_an_outage(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.fail_next(*[Fault(status=500, headers=FAST_RETRY)] * 3)

    with pytest.raises(Outage, match="InternalServerError") as caught:
        complete(make_model(max_retries=2))
    assert len(server.requests) == 3  # the first try and two retries
    assert (caught.value.advice, caught.value.billed) == (None, ())


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_retried(
    server: OpenAIServer, make_model: ModelFactory, status: int
) -> None:
    server.fail_next(Fault(status=status))

    with pytest.raises(Misconfigured):
        complete(make_model(max_retries=2))
    assert len(server.requests) == 1


def test_a_timeout_is_an_outage(server: OpenAIServer, make_model: ModelFactory) -> None:
    server.fail_next(Fault(status=200, delay=2.0))

    with pytest.raises(Outage, match="Timeout") as caught:
        complete(make_model(timeout=0.5, max_retries=0))
    # The server is there, only slow: the operator is told which setting gives it more time.
    assert caught.value.advice is not None
    assert "PAM_LLM_TIMEOUT" in caught.value.advice


def test_a_timeout_is_not_sent_again(server: OpenAIServer, make_model: ModelFactory) -> None:
    # Issue 32: the server may still be working on it; a copy would queue behind it.
    server.fail_next(Fault(status=200, delay=2.0))

    with pytest.raises(Outage, match="Timeout"):
        complete(make_model(timeout=0.5, max_retries=1))

    assert len(server.requests) == 1


def test_a_timeout_after_unusable_answers_is_tried_again_later_not_apologised_for(
    server: OpenAIServer, make_model: ModelFactory, counter: TokenCounter
) -> None:
    # The fault run: a garbled answer, then a server too slow to answer. The slow server is
    # no sign of a model that cannot answer: the turn goes back to the inbox (Outage, after
    # the timeout), carrying the unusable answer's bill.
    server.fail_next(Fault(status=200, body=b"garbage"), Fault(status=200, delay=2.0))

    with pytest.raises(Outage, match="Timeout") as caught:
        complete(make_model(timeout=0.5, max_retries=1))

    assert len(server.requests) == 2
    assert caught.value.billed == billed_locally(counter, 1)
    assert caught.value.retry_after == pytest.approx(0.5)


def test_an_unreachable_server_is_an_outage_with_advice_naming_the_url(
    make_model: ModelFactory,
) -> None:
    with OpenAIServer() as gone:
        url = gone.base_url

    with pytest.raises(Outage, match="APIConnectionError") as caught:
        complete(make_model(base_url=url, max_retries=0))
    assert caught.value.advice is not None
    assert url in caught.value.advice
    assert "OPENAI_BASE_URL" in caught.value.advice


# -- OpenAI's reasoning models ---------------------------------------------------------------


@pytest.fixture
def openai_reasoning_server() -> Iterator[OpenAIServer]:
    """A server that refuses `max_tokens` and temperatures but 1 exactly as OpenAI does for
    o1/o3/o4-mini/gpt-5*, whatever the model's name."""
    with OpenAIServer(reject=refuse_like_openai_reasoning) as server:
        yield server


@pytest.mark.parametrize("name", ["o4-mini", "gpt-5-mini", "openai/o3-mini"])
@pytest.mark.parametrize("purpose", ["reply", "summary"])
def test_a_reasoning_model_by_name_is_never_sent_a_refused_parameter(
    openai_reasoning_server: OpenAIServer,
    make_model: ModelFactory,
    name: str,
    purpose: Purpose,
) -> None:
    model = make_model(base_url=openai_reasoning_server.base_url)

    completion = complete(model, purpose, name=name)

    assert completion.text == default_answer("reply", {}, 1)  # PROMPT is a reply's prompt
    [body] = openai_reasoning_server.requests  # no 400 on the way
    assert "max_tokens" not in body
    assert "temperature" not in body
    assert body["max_completion_tokens"] == 120 + REASONING_ROOM["low"]
    assert body["reasoning_effort"] == "low"


def test_an_unknown_model_learns_what_it_refuses_once_per_process(
    openai_reasoning_server: OpenAIServer,
    make_model: ModelFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = make_model(base_url=openai_reasoning_server.base_url)
    caplog.set_level(logging.WARNING, logger="bot.llm.openai_chat")

    first = complete(model, name="my-reasoning-deployment")

    assert first.text == default_answer("reply", {}, 3)
    refused_max, refused_temperature, accepted = openai_reasoning_server.requests
    assert refused_max["max_tokens"] == 120 and refused_max["temperature"] == 0.7
    assert "max_tokens" not in refused_temperature and refused_temperature["temperature"] == 0.7
    assert "max_tokens" not in accepted and "temperature" not in accepted
    assert first.billed == ()  # a 400 is not billed
    learned = [r.getMessage() for r in caplog.records if "learned" in r.getMessage()]
    at = openai_reasoning_server.base_url
    assert learned == [
        f"LLM model my-reasoning-deployment at {at} refuses max_tokens; sending "
        "max_completion_tokens (learned once per process; the server said (400): "
        "unsupported_parameter Unsupported parameter: 'max_tokens' is not supported with this "
        "model. Use 'max_completion_tokens' instead.)",
        f"LLM model my-reasoning-deployment at {at} refuses temperature; leaving it out "
        "(learned once per process; the server said (400): unsupported_value Unsupported "
        "value: 'temperature' does not support 0.7 with this model. Only the default (1) "
        "value is supported.)",
    ]
    assert all(r.levelno == logging.WARNING for r in caplog.records if "learned" in r.message)

    second = complete(model, "summary", name="my-reasoning-deployment")

    assert second.text == default_answer("reply", {}, 4)
    [body] = openai_reasoning_server.requests[3:]  # the second call sends nothing refused
    assert "max_tokens" not in body and "temperature" not in body
    assert body["max_completion_tokens"] == 120 + REASONING_ROOM["low"]


def test_a_reasoning_models_turn_through_the_runtime_is_answered(
    database_url: str, openai_reasoning_server: OpenAIServer
) -> None:
    settings = Settings(
        database_url=database_url,
        llm={
            "base_url": openai_reasoning_server.base_url,
            "api_key": "k",
            "model": "o4-mini",
            "max_retries": 0,
            "reasoning_effort": "medium",
        },
    )
    pam = build(settings, submit=lambda work: work())
    try:
        answers = handle(pam, unique_user("lena"), "Hola, yo es Lena")
    finally:
        pam.close(0)

    assert answers == [render(parse_answer(default_answer("reply", {}, 1)))]
    [body] = openai_reasoning_server.of("reply")
    assert body["reasoning_effort"] == "medium"
    assert body["max_completion_tokens"] == settings.llm.reply_max_tokens + REASONING_ROOM["medium"]


# -- structured output -----------------------------------------------------------------------


def mode_of(body: dict[str, Any]) -> str | None:
    """The structured-output mode a request asked in, by Pam's names: JSON mode with a schema
    beside its type is json_object_schema; None without a response_format."""
    asked = body.get("response_format")
    if asked is None:
        return None
    if asked["type"] == "json_object" and "schema" in asked:
        return "json_object_schema"
    return str(asked["type"])


def refuse_mode(
    mode: str, error: dict[str, Any] | str, status: int = 400
) -> Callable[[dict[str, Any]], Answer | None]:
    """A server that answers `status` with `error` to requests asking in structured-output
    `mode`."""

    def reject(body: dict[str, Any]) -> Answer | None:
        if mode_of(body) == mode:
            return status, {}, encoded(error)
        return None

    return reject


def test_structured_output_asks_with_the_json_schema(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    complete(make_model(), schema=SCHEMA)

    [body] = server.requests
    assert body["response_format"] == {"type": "json_schema", "json_schema": SCHEMA}


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(shapes.OPENAI_NO_JSON_SCHEMA, id="openai"),
        pytest.param(shapes.GROQ_NO_JSON_SCHEMA, id="groq"),
    ],
)
def test_a_model_without_json_schema_steps_down_to_the_schema_in_json_mode_once(
    make_model: ModelFactory, error: dict[str, Any]
) -> None:
    with OpenAIServer(reject=refuse_mode("json_schema", error)) as server:
        model = make_model(base_url=server.base_url)

        first = complete(model, schema=SCHEMA)
        second = complete(model, "profile", schema=SCHEMA)

        modes = [mode_of(r) for r in server.requests]
        stepped = server.requests[1]["response_format"]
    assert modes == ["json_schema", "json_object_schema", "json_object_schema"]
    assert stepped == {"type": "json_object", "schema": SCHEMA["schema"]}
    assert first.text == default_answer("reply", {}, 2)
    assert second.text == default_answer("reply", {}, 3)


def test_a_server_with_neither_mode_gets_plain_instructions(make_model: ModelFactory) -> None:
    def reject(body: dict[str, Any]) -> Answer | None:
        kind = body.get("response_format", {}).get("type")  # LM Studio reads the type alone
        if kind == "json_schema":
            return 400, {}, encoded(shapes.OPENAI_NO_JSON_SCHEMA)
        if kind == "json_object":
            return 400, {}, encoded(shapes.LM_STUDIO_NO_JSON_OBJECT)
        return None

    with OpenAIServer(reject=reject) as server:
        model = make_model(base_url=server.base_url)
        complete(model, schema=SCHEMA)
        complete(model, schema=SCHEMA)
        modes = [mode_of(r) for r in server.requests]

    assert modes == ["json_schema", "json_object_schema", "json_object", None, None]


def test_a_server_refusing_the_schema_in_json_mode_gets_plain_json_mode(
    make_model: ModelFactory,
) -> None:
    refuse_schema = refuse_mode(
        "json_object_schema", errors.FASTAPI_EXTRA_RESPONSE_FORMAT_SCHEMA, 422
    )

    def reject(body: dict[str, Any]) -> Answer | None:
        return refuse_like_llama_cpp_python(body) or refuse_schema(body)

    with OpenAIServer(reject=reject) as server:
        model = make_model(base_url=server.base_url, max_retries=0)
        first = complete(model, schema=SCHEMA)
        second = complete(model, schema=SCHEMA)
        modes = [mode_of(r) for r in server.requests]
        last = server.requests[-1]["response_format"]

    assert modes == ["json_schema", "json_object_schema", "json_object", "json_object"]
    assert last == {"type": "json_object"}
    assert [first.text, second.text] == [default_answer("reply", {}, n) for n in (3, 4)]


def test_a_server_that_takes_json_schema_never_sees_the_steps_below_it(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    model = make_model()
    for purpose in ("reply", "summary", "profile", "reply"):
        complete(model, purpose, schema=SCHEMA)

    assert [mode_of(r) for r in server.requests] == ["json_schema"] * 4


def test_the_schema_in_json_mode_can_be_pinned(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    complete(make_model(structured_output="json_object_schema"), schema=SCHEMA)

    [body] = server.requests
    assert body["response_format"] == {"type": "json_object", "schema": SCHEMA["schema"]}


def test_a_pinned_mode_the_server_refuses_tells_the_operator(make_model: ModelFactory) -> None:
    with OpenAIServer(reject=refuse_mode("json_object", shapes.LM_STUDIO_NO_JSON_OBJECT)) as server:
        model = make_model(base_url=server.base_url, structured_output="json_object")

        with pytest.raises(Misconfigured) as caught:
            complete(model, schema=SCHEMA)
        assert len(server.requests) == 1
    assert "PAM_STRUCTURED_OUTPUT" in caught.value.advice


def refuse_like_llama_cpp_python(body: dict[str, Any]) -> Answer | None:
    """llama-cpp-python's server: json_schema fails its request validation, which
    llama_cpp/server/errors.py wraps into an OpenAI-style 500 (tests/error_shapes.py)."""
    if mode_of(body) == "json_schema":
        return 500, FAST_RETRY, encoded(errors.LLAMA_CPP_PYTHON_NO_JSON_SCHEMA)
    return None


def test_a_refusal_in_a_500_steps_down_once_and_tells_the_operator_once(
    make_model: ModelFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 26: every learner message got an apology, the operator nothing.
    caplog.set_level(logging.WARNING)
    with OpenAIServer(reject=refuse_like_llama_cpp_python) as server:
        model = make_model(base_url=server.base_url, max_retries=2)

        first = complete(model, schema=SCHEMA)
        second = complete(model, "profile", schema=SCHEMA)
        third = complete(model, "summary", schema=SCHEMA)

        modes = [mode_of(r) for r in server.requests]
    # The SDK retries a 500 on its own (twice here); then one step down, for good.
    assert modes == ["json_schema"] * 3 + ["json_object_schema"] * 3
    assert [first.text, second.text, third.text] == [
        default_answer("reply", {}, n) for n in (4, 5, 6)
    ]
    [told] = [r for r in caplog.records if r.levelno >= logging.WARNING and "learned" in r.message]
    assert told.levelno == logging.WARNING
    assert server.base_url in told.message
    assert "cannot do json_schema; asking in json_object_schema mode" in told.message
    assert "PAM_STRUCTURED_OUTPUT=json_object_schema starts there" in told.message
    assert "Input should be 'text' or 'json_object' (response_format.type)" in told.message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_llama_cpp_python_server_answers_the_learner_through_the_runtime(
    database_url: str,
) -> None:
    # Issue 26: every learner message got "Perdona, ahora mismo estoy un poco espeso".
    with OpenAIServer(reject=refuse_like_llama_cpp_python) as server:
        settings = Settings(
            database_url=database_url,
            llm={"base_url": server.base_url, "api_key": "k", "max_retries": 0},
        )
        pam = build(settings, submit=lambda work: work())
        try:
            user = unique_user("lena")
            first = handle(pam, user, "Hola, yo es Lena")
            # (With the server's "yo es" mistake: a correction quotes the latest message.)
            second = handle(pam, user, "Trabajo en un hospital, yo es enfermera")
        finally:
            pam.close(0)
        modes = [mode_of(r) for r in server.of("reply")]

    assert first == [shown_reply(2)] and second == [shown_reply(3, after=first[0])]
    assert modes == ["json_schema", "json_object_schema", "json_object_schema"]


def test_a_500_without_a_refusal_is_still_an_outage_and_teaches_nothing(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    body = encoded(errors.LLAMA_CPP_PYTHON_DECODE_FAILED)
    server.fail_next(*[Fault(status=500, headers=FAST_RETRY, body=body)] * 3)
    model = make_model(max_retries=2)

    with pytest.raises(Outage):
        complete(model, schema=SCHEMA)
    complete(model, schema=SCHEMA)

    modes = [mode_of(r) for r in server.requests]
    assert modes == ["json_schema"] * 4  # no step down, and no loop of them


def test_a_pinned_mode_refused_in_a_500_is_advice_not_an_outage(
    make_model: ModelFactory,
) -> None:
    with OpenAIServer(reject=refuse_like_llama_cpp_python) as server:
        model = make_model(base_url=server.base_url, structured_output="json_schema")

        with pytest.raises(Misconfigured) as caught:
            complete(model, schema=SCHEMA)
        assert len(server.requests) == 1
    assert "PAM_STRUCTURED_OUTPUT" in caught.value.advice


def test_a_parameter_refused_by_a_fastapi_validation_error_is_learned(
    make_model: ModelFactory,
) -> None:
    def reject(body: dict[str, Any]) -> Answer | None:
        if "max_completion_tokens" in body:
            return 422, {}, encoded(errors.FASTAPI_EXTRA_MAX_COMPLETION_TOKENS)
        return None

    with OpenAIServer(reject=reject) as server:
        model = make_model(base_url=server.base_url)
        complete(model, name="o4-mini")
        complete(model, name="o4-mini")
        sent = [("max_completion_tokens" in r, "max_tokens" in r) for r in server.requests]
    assert sent == [(True, False), (False, True), (False, True)]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(400, errors.LLAMA_CPP_PYTHON_NO_SUCH_MODEL, id="llama-cpp-python"),
        pytest.param(404, shapes.VLLM_NO_SUCH_MODEL, id="vllm"),
        pytest.param(404, shapes.OLLAMA_NO_SUCH_MODEL, id="ollama"),
        pytest.param(500, {"detail": "unknown model: gpt-4o-mini"}, id="fastapi-500"),
    ],
)
def test_a_wrong_model_name_is_advice_naming_the_settings_whatever_the_status(
    server: OpenAIServer, make_model: ModelFactory, status: int, body: dict[str, Any]
) -> None:
    server.fail_next(Fault(status=status, body=encoded(body)))

    with pytest.raises(Misconfigured) as caught:
        complete(make_model(), schema=SCHEMA)
    assert len(server.requests) == 1
    assert "PAM_MODEL" in caught.value.advice and "gpt-4o-mini" in caught.value.advice


def test_structured_output_off_sends_no_response_format(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    complete(make_model(structured_output="off"), schema=SCHEMA)

    assert "response_format" not in server.requests[0]


# -- the recorded shapes of real servers, through the SDK -----------------------------------


@pytest.mark.parametrize(
    "body", [pytest.param(body, id=name) for name, body in shapes.answers().items()]
)
def test_only_the_answer_after_the_reasoning_comes_back(
    server: OpenAIServer, make_model: ModelFactory, body: dict[str, Any]
) -> None:
    server.answer_next(body)

    completion = complete(make_model())

    assert completion.text == REPLY
    assert (completion.input_tokens, completion.output_tokens) == (
        body["usage"]["prompt_tokens"],
        body["usage"]["completion_tokens"],
    )
    assert completion.model == body["model"]


def test_a_model_seen_thinking_aloud_gets_room_for_it_from_then_on(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    model = make_model()
    server.answer_next(shapes.ollama(f"<think>{REASONING}</think>{REPLY}"))

    complete(model, name="deepseek-r1:8b")
    complete(model, name="deepseek-r1:8b")
    complete(model)

    assert [r["max_tokens"] for r in server.requests] == [120, 120 + THINKING_ROOM, 120]


# -- refusals and content filters: not asked again ------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(shapes.OPENAI_REFUSAL, "refusal", id="openai-refusal"),
        pytest.param(shapes.AZURE_FILTERED_ANSWER, "content_filter (violence)", id="azure-200"),
    ],
)
def test_a_refused_answer_is_refused_at_once_and_billed(
    server: OpenAIServer,
    make_model: ModelFactory,
    caplog: pytest.LogCaptureFixture,
    body: dict[str, Any],
    reason: str,
) -> None:
    server.answer_next(body)

    with pytest.raises(Refused) as caught:
        complete(make_model(max_retries=3))

    assert len(server.requests) == 1
    assert caught.value.reason == reason
    usage = body["usage"]
    assert caught.value.billed == (
        Usage(body["model"], usage["prompt_tokens"], usage["completion_tokens"]),
    )
    assert reason in caplog.text
    assert "cannot assist" not in caplog.text  # the model's words stay out of the log


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        pytest.param(400, shapes.AZURE_FILTERED_PROMPT, "content_filter (self_harm)", id="azure"),
        pytest.param(
            403, shapes.OPENROUTER_FLAGGED, "content_filter (harassment)", id="openrouter"
        ),
        pytest.param(400, shapes.OPENAI_FLAGGED_PROMPT, "invalid_prompt", id="openai-o-series"),
    ],
)
def test_a_filtered_prompt_is_refused_at_once(
    server: OpenAIServer, make_model: ModelFactory, status: int, body: dict[str, Any], reason: str
) -> None:
    server.fail_next(Fault(status=status, body=encoded(body)))

    with pytest.raises(Refused) as caught:
        complete(make_model(max_retries=3))

    assert len(server.requests) == 1
    assert (caught.value.reason, caught.value.billed) == (reason, ())


# -- unusable answers: asked again, four calls at most, every one billed ---------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"garbage", id="not-json"),
        pytest.param(b'{"choices": [{"message": {"content": "Hola', id="cut-off-json"),
        pytest.param(b"<html><body>502 Bad Gateway</body></html>", id="html-200"),
        pytest.param(b'{"choices": "none"}', id="choices-not-a-list"),
        pytest.param(encoded(shapes.OPENROUTER_ERROR_200), id="openrouter-error-200"),
        pytest.param(b'{"choices": [{"message": {"content": 42}}]}', id="content-not-text"),
        pytest.param(b'{"choices": [{"message": {"content": null}}]}', id="content-null"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested-too-deep"),
    ],
)
def test_an_unusable_answer_is_asked_again_and_billed(
    server: OpenAIServer,
    make_model: ModelFactory,
    counter: TokenCounter,
    waits: list[float],
    body: bytes,
) -> None:
    server.fail_next(Fault(status=200, body=body))

    completion = complete(make_model())

    assert completion.text == default_answer("reply", {}, 2)
    assert len(server.requests) == 2
    # No usage in the answer: the prompt is counted here, and the nothing it wrote.
    assert completion.billed == billed_locally(counter, 1)
    assert waits == [0.25]


def test_json_the_server_found_invalid_is_an_unusable_answer_asked_again(
    server: OpenAIServer, make_model: ModelFactory, counter: TokenCounter, waits: list[float]
) -> None:
    # Groq answers 400 for it, but the model did write it: no misconfiguration, billed.
    body = shapes.GROQ_JSON_VALIDATE_FAILED
    server.fail_next(Fault(status=400, body=encoded(body)))

    completion = complete(make_model(), schema=SCHEMA)

    assert completion.text == default_answer("reply", {}, 2)
    assert len(server.requests) == 2
    assert completion.billed == billed_locally(counter, 1, body["error"]["failed_generation"])
    assert waits == [0.25]


def test_an_empty_answers_usage_is_the_providers(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.answer_next(shapes.openai(""))

    completion = complete(make_model())

    assert completion.billed == (Usage("gpt-4o-2024-08-06", 1117, 46),)


@pytest.mark.parametrize("max_retries", [0, 10])
def test_unusable_answers_cost_four_calls_at_most_whatever_the_retries(
    make_model: ModelFactory, counter: TokenCounter, waits: list[float], max_retries: int
) -> None:
    with OpenAIServer(answer=lambda task, body, count: "") as server:
        model = make_model(base_url=server.base_url, max_retries=max_retries)

        with pytest.raises(Unusable) as caught:
            complete(model)

        assert len(server.requests) == MAX_UNUSABLE_CALLS == 4
        body = server.requests[0]
    assert caught.value.billed == (Usage(MODEL, *server_usage(body, "")),) * 4
    assert waits == [0.25, 0.5, 1.0]


def test_an_outage_after_unusable_answers_is_unusable_so_the_turn_is_not_run_again(
    server: OpenAIServer, make_model: ModelFactory, counter: TokenCounter
) -> None:
    server.fail_next(
        Fault(status=200, body=b"garbage"),
        Fault(status=200, body=b"garbage"),
        *[Fault(status=503, headers=FAST_RETRY)] * 2,
    )

    with pytest.raises(Unusable) as caught:
        complete(make_model(max_retries=1))

    assert len(server.requests) == 4  # two unusable answers, then a 503 and its retry
    assert caught.value.billed == billed_locally(counter, 2)


def test_a_refusal_after_unusable_answers_carries_them_all(
    server: OpenAIServer, make_model: ModelFactory, counter: TokenCounter
) -> None:
    server.fail_next(Fault(status=200, body=b"garbage"))
    server.answer_next(shapes.OPENAI_REFUSAL)

    with pytest.raises(Refused) as caught:
        complete(make_model())

    assert caught.value.billed == (
        *billed_locally(counter, 1),
        Usage("gpt-4o-2024-08-06", 1117, 46),
    )


def test_a_misconfiguration_after_unusable_answers_carries_them(
    server: OpenAIServer, make_model: ModelFactory, counter: TokenCounter
) -> None:
    server.fail_next(
        Fault(status=200, body=b"garbage"), Fault(status=401, body=encoded(shapes.OPENAI_BAD_KEY))
    )

    with pytest.raises(Misconfigured) as caught:
        complete(make_model())

    assert caught.value.billed == billed_locally(counter, 1)


# -- answers cut off at the output cap -------------------------------------------------------


def test_a_cut_off_answer_without_a_schema_comes_back_truncated_at_once(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.answer_next(shapes.finished(shapes.openai("¡Qué bien! Y luego, ¿qué"), "length"))

    completion = complete(make_model())

    assert (completion.text, completion.truncated) == ("¡Qué bien! Y luego, ¿qué", True)
    assert len(server.requests) == 1


def test_cut_off_json_is_asked_again_with_twice_the_room(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    server.answer_next(shapes.finished(shapes.openai('{"reply": "¡Qué bien! Y lu'), "length"))

    completion = complete(make_model(), schema=SCHEMA)

    assert completion.text == default_answer("reply", {}, 2)
    assert not completion.truncated
    assert [r["max_tokens"] for r in server.requests] == [120, 240]
    assert completion.billed == (Usage("gpt-4o-2024-08-06", 1117, 46),)


def test_cut_off_json_the_prompt_asked_for_is_asked_again_too(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    # No schema (structured output is the caller's choice), but the answer began as JSON.
    server.answer_next(shapes.finished(shapes.openai('```json\n{"reply": "¡Qué'), "length"))

    completion = complete(make_model())

    assert completion.text == default_answer("reply", {}, 2)
    assert [r["max_tokens"] for r in server.requests] == [120, 240]


def test_json_still_cut_off_with_twice_the_room_comes_back_truncated(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    cut = shapes.finished(shapes.openai('{"reply": "¡Qué bien! Y lu'), "length")
    longer = shapes.finished(shapes.openai('{"reply": "¡Qué bien! Y luego, ¿qué'), "length")
    server.answer_next(cut, longer)

    completion = complete(make_model(), schema=SCHEMA)

    assert (completion.text, completion.truncated) == ('{"reply": "¡Qué bien! Y luego, ¿qué', True)
    assert len(server.requests) == 2
    assert completion.billed == (Usage("gpt-4o-2024-08-06", 1117, 46),)


def test_reasoning_that_fills_twice_the_room_is_unusable(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    thinking = shapes.llama_cpp(f"<think>\n{REASONING}", finish="length")
    server.answer_next(thinking, thinking)

    with pytest.raises(Unusable) as caught:
        complete(make_model())

    # The first answer showed it thinks aloud: room for that, then twice the whole cap.
    assert [r["max_tokens"] for r in server.requests] == [120, 2 * (120 + THINKING_ROOM)]
    assert caught.value.billed == (Usage("gpt-3.5-turbo", 1021, 412),) * 2


def test_a_template_opened_thinker_cut_off_in_its_reasoning_is_asked_again(
    server: OpenAIServer, make_model: ModelFactory
) -> None:
    # DeepSeek-R1 on llama.cpp (--reasoning-format none): the template opened <think>, so
    # once the model is known for it, an answer cut off before </think> is reasoning only,
    # draft and all, and never the reply.
    whole = shapes.llama_cpp(f"{REASONING}\n</think>\n\n{REPLY}")
    cut_in_reasoning = shapes.llama_cpp(REASONING, finish="length")
    server.answer_next(whole, cut_in_reasoning)
    model = make_model()

    assert complete(model, name="deepseek-r1").text == REPLY
    completion = complete(model, name="deepseek-r1", schema=SCHEMA)

    assert completion.text == default_answer("reply", {}, 3)
    assert "chat message" not in completion.text
    assert [r["max_tokens"] for r in server.requests] == [
        120,
        120 + THINKING_ROOM,
        2 * (120 + THINKING_ROOM),
    ]
    assert completion.billed == (Usage("gpt-3.5-turbo", 1021, 412),)


# -- misconfiguration: advice for the operator, logged once ---------------------------------


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        pytest.param(401, shapes.OPENAI_BAD_KEY, "OPENAI_API_KEY", id="bad-key"),
        pytest.param(404, shapes.OPENAI_NO_SUCH_MODEL, "PAM_MODEL", id="openai-no-model"),
        pytest.param(400, shapes.OPENAI_NO_SUCH_MODEL, "PAM_MODEL", id="openai-400-no-model"),
        pytest.param(404, shapes.OLLAMA_NO_SUCH_MODEL, "ollama pull", id="ollama-no-model"),
        pytest.param(404, shapes.VLLM_NO_SUCH_MODEL, "PAM_MODEL", id="vllm-no-model"),
        pytest.param(404, {"error": {"message": "not found"}}, "/v1", id="not-an-api"),
        pytest.param(429, shapes.OPENAI_NO_QUOTA, "credit", id="no-quota"),
        pytest.param(402, shapes.OPENROUTER_NO_CREDITS, "credit", id="openrouter-no-credits"),
        pytest.param(
            403, {"error": {"code": 403, "message": "Forbidden"}}, "permissions", id="403"
        ),
    ],
)
def test_a_rejected_configuration_says_what_to_do(
    server: OpenAIServer,
    make_model: ModelFactory,
    caplog: pytest.LogCaptureFixture,
    status: int,
    body: dict[str, Any],
    says: str,
) -> None:
    server.fail_next(*[Fault(status=status, body=encoded(body))] * 2)
    model = make_model()

    with pytest.raises(Misconfigured) as first:
        complete(model)
    with pytest.raises(Misconfigured):
        complete(model)

    advice = first.value.advice
    assert says in advice
    assert server.base_url in advice
    assert "sk-proj" not in str(first.value) + advice + caplog.text  # never the key
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1  # once per cause and process, not per message
    assert advice in errors[0].getMessage()


# -- the tutor through the real SDK --------------------------------------------------------


@pytest.fixture
def live_pam(database_url: str, server: OpenAIServer) -> Iterator[Pam]:
    """Pam as production builds it (real OpenAI client), memory jobs inline, no SDK retries."""
    settings = Settings(
        database_url=database_url,
        llm={"base_url": server.base_url, "api_key": "k", "max_retries": 0, "timeout_seconds": 1.0},
    )
    pam = build(settings, submit=lambda work: work())
    yield pam
    pam.close(0)


def shown_reply(count: int, after: str = "") -> str:
    """What the learner sees for the server's `count`-th reply: reply plus correction lines;
    `after`: Pam's previous reply, whose ending the server's does not repeat."""
    said = {"messages": [{"role": "assistant", "content": after}]} if after else {}
    return render(parse_answer(default_answer("reply", said, count)))


def test_a_tutor_turn_through_the_real_sdk(live_pam: Pam, server: OpenAIServer) -> None:
    user = unique_user("lena")

    answers = handle(live_pam, user, "Hola, yo es Lena", display_name="Lena")

    assert answers == [shown_reply(1)]
    assert answers[0].startswith("Respuesta 1: ¡qué interesante!")
    assert "✏️ yo es → yo soy — 'ser' in first person is 'soy'" in answers[0]
    [body] = server.of("reply")
    assert body["model"] == MODEL
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][1:] == [{"role": "user", "content": "Hola, yo es Lena"}]

    store = live_pam.store
    learner = store.learners.find_learner(user)
    assert learner is not None
    messages = store.conversation.messages(learner.id)
    assert [(m.role, m.content) for m in messages] == [
        (LEARNER, "Hola, yo es Lena"),
        (PAM, shown_reply(1)),
    ]
    assert store.ledger.corrections(learner.id) == [
        CorrectionRecord("yo es", "yo soy", "'ser' in first person is 'soy'", "conjugation")
    ]
    usage = server_usage(body, default_answer("reply", {}, 1))
    assert store.ledger.usage(learner.id) == {"reply": (1, *usage)}


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(Fault(status=500), id="server-error"),
        pytest.param(Fault(status=429, headers={"retry-after": "0"}), id="rate-limited"),
        pytest.param(Fault(status=200, delay=2.0), id="timeout"),
    ],
)
def test_when_the_llm_fails_the_learner_gets_an_apology_and_the_message_stays(
    live_pam: Pam, server: OpenAIServer, fault: Fault
) -> None:
    user = unique_user("lena")
    handle(live_pam, user, "/language Spanish English")
    server.fail_next(fault)

    answers = handle(live_pam, user, "Ayer yo es muy cansada")

    assert answers == [phrases.APOLOGY]
    store = live_pam.store
    learner = store.learners.find_learner(user)
    assert learner is not None
    assert [(m.role, m.content) for m in store.conversation.messages(learner.id)] == [
        (LEARNER, "Ayer yo es muy cansada")
    ]
    assert store.ledger.corrections(learner.id) == []
    assert "reply" not in store.ledger.usage(learner.id)

    # Once the LLM is back, the unanswered message is still part of the conversation.
    # (With the server's "yo es" mistake in it: a correction quotes the latest message.)
    answers = handle(live_pam, user, "¿Estás ahí? Yo es aquí.")

    assert answers == [shown_reply(2)]
    last = server.of("reply")[-1]
    assert last["messages"][1:] == [
        {"role": "user", "content": "Ayer yo es muy cansada"},
        {"role": "user", "content": "¿Estás ahí? Yo es aquí."},
    ]


def test_an_unusable_answer_is_asked_again_and_both_calls_are_recorded(
    live_pam: Pam, server: OpenAIServer
) -> None:
    user = unique_user("lena")
    server.fail_next(Fault(status=200, body=b"<html><body>502 Bad Gateway</body></html>"))

    answers = handle(live_pam, user, "Ayer yo es muy cansada")

    assert answers == [shown_reply(2)]
    learner = live_pam.store.learners.find_learner(user)
    assert learner is not None
    unusable, answered = server.of("reply")
    counted = sum(live_pam.tutor.counter.count_message(m["content"]) for m in unusable["messages"])
    input_tokens, output_tokens = server_usage(answered, default_answer("reply", {}, 2))
    assert live_pam.store.ledger.usage(learner.id) == {
        "reply": (2, counted + input_tokens, output_tokens)
    }


def test_the_llm_edges_logs_name_reasons_never_message_content(
    server: OpenAIServer, make_model: ModelFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot")
    model = make_model()
    server.answer_next(
        shapes.ollama(f"<think>{REASONING}</think>"),  # unusable: reasoning and no answer
        shapes.finished(shapes.openai('{"reply": "¡Qué bien! Y lu'), "length"),
        shapes.OPENAI_REFUSAL,
    )
    server.fail_next(Fault(status=401, body=encoded(shapes.OPENAI_BAD_KEY)))

    with pytest.raises(Refused):
        complete(model, name="deepseek-r1:8b", schema=SCHEMA)
    with pytest.raises(Misconfigured):
        complete(model)

    said = caplog.text
    assert "no text in the answer" in said and "refusal" in said and "OPENAI_API_KEY" in said
    for content in (PROMPT[1]["content"], REASONING, "¡Qué bien!", "cannot assist", "sk-proj"):
        assert content not in said


# -- an answer without a chat message, through the real SDK ----------------------------------

NO_CHAT_MESSAGE = '{"corrections": []}'  # valid JSON of the wrong shape


def test_json_without_a_chat_message_is_asked_again_within_the_budget(
    live_pam: Pam, server: OpenAIServer
) -> None:
    user = unique_user("lena")
    handle(live_pam, user, "/language Spanish English")
    live_pam.model.sleep = lambda seconds: None  # type: ignore[attr-defined]
    server.answer_next(shapes.openai(NO_CHAT_MESSAGE), shapes.openai('{"reply": "chat message"}'))

    answers = handle(live_pam, user, "Ayer yo es muy cansada")

    assert answers == [shown_reply(3)]  # the server's own answer to the third call
    assert len(server.of("reply")) == 3
    learner = live_pam.store.learners.find_learner(user)
    assert learner is not None
    calls, _, _ = live_pam.store.ledger.usage(learner.id)["reply"]
    assert calls == 3  # the two answers without a reply were billed too


def test_json_without_a_chat_message_every_time_gets_an_apology_after_four_calls(
    live_pam: Pam, server: OpenAIServer
) -> None:
    user = unique_user("lena")
    handle(live_pam, user, "/language Spanish English")
    live_pam.model.sleep = lambda seconds: None  # type: ignore[attr-defined]
    server.answer_next(*[shapes.openai(NO_CHAT_MESSAGE)] * (MAX_UNUSABLE_CALLS + 2))

    answer = live_pam.tutor.answer(
        TurnRequest(user, "Ayer yo es muy cansada", inbox_id=4242, can_retry=True)
    )

    assert answer.replies == [phrases.APOLOGY]  # at once: not tried again later
    assert len(server.of("reply")) == MAX_UNUSABLE_CALLS
    learner = live_pam.store.learners.find_learner(user)
    assert learner is not None
    assert live_pam.store.ledger.usage(learner.id)["reply"][0] == MAX_UNUSABLE_CALLS
