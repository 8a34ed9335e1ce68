"""Review inside a tutor turn, on real databases (the store's real Reviews) with the fake model,
and with the real OpenAI client against the local server for the recorded answer shapes: due
items reach the prompt only once their mistake has left it, labelled, never as ids; the
reply's report grades them (and a turn run again grades nothing twice); the rule field;
PAM_REVIEW=off; a turn with nothing due costs nothing more; and every untrusted report."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

import prompts
from bot import corrections
from bot.corrections import parse_answer
from bot.llm.answers import read_answer
from bot.reply_format import REPLY_SCHEMA, RULE_PLACEHOLDER, reply_schema
from bot.review.prompt import DUE_REPORT, DUE_RULE, DUE_SCHEMA, DUE_TAG, report
from bot.review.reviewing import NO_REVIEW
from bot.turn.prompt import reply_prompt
from bot.turn.storing import store_turn
from bot.turn.values import TurnRequest
from bot.worker.runtime import Pam
from loopback.openai_server import OpenAIServer
from memory.clock import ManualClock
from memory.jobs.coordinator import RETRY_AFTER_FAILURE, REVIEW
from memory.llm import ChatMessage
from memory.review.reads import DueItem
from memory.tokens import TokenCounter
from tests import llm_shapes as shapes
from tests.conftest import learner_of, unique_user
from tests.fakes import FakeChatModel, reply_json
from tests.helpers.review import (
    BUEN,
    CHAT,
    MISTAKE,
    SER,
    due_scene,
    grades,
    item_ids,
    offers,
    review_pam,
    say,
    section,
    system_of,
)
from webhooks.settings import Settings
from webhooks.wiring import build

AGAIN, GOOD = 1, 3  # fsrs.Rating
Served = tuple[Pam, OpenAIServer, ManualClock]
NOW = datetime(2025, 3, 10, 12, tzinfo=UTC)


def due_item(item_id: int, original: str, corrected: str, rule: str) -> DueItem:
    return DueItem(item_id, rule, original, corrected, "", "grammar", NOW, 2, 1, 0)


ITEMS = (
    due_item(41, "un bueno amigo", "un buen amigo", "bueno → buen before a masculine noun"),
    due_item(42, "yo es", "yo soy", "ser, first person singular"),
)


def label_of(system: str, corrected: str) -> int:
    """The label the prompt's review section gave the item corrected as `corrected`."""
    for line in section(system, DUE_TAG).splitlines():
        if f"→ {corrected}" in line:
            return int(line.split(".", 1)[0])
    raise AssertionError(f"no review line for {corrected}")


# -- the rule of each correction -------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "rule"),
    [
        ({"rule": "ser, first person"}, "ser, first person"),
        ({"pattern": "ser, first person"}, "ser, first person"),
        ({"Rule Name": "  ser,\n first   person "}, "ser, first person"),
        ({"rule": ["ser", "first person"]}, "ser; first person"),
        ({"rule": 42}, "42"),
        ({"rule": {"name": "ser"}}, ""),
        ({"rule": None}, ""),
        ({}, ""),
        ({"rule": "x" * 500}, "x" * corrections.RULE_CHARS),
    ],
)
def test_the_rule_is_read_leniently_and_capped(item: dict[str, Any], rule: str) -> None:
    fix = {"original": "yo es", "corrected": "yo soy", **item}
    answer = parse_answer(json.dumps({"reply": "Vale", "corrections": [fix]}))
    assert answer.corrections[0].rule == rule


def test_the_rule_is_in_the_schema_and_the_report_only_where_review_asks_for_it() -> None:
    item = REPLY_SCHEMA["schema"]["properties"]["corrections"]["items"]
    assert item["properties"]["rule"] == {"type": "string"}
    assert "rule" in item["required"]
    assert set(REPLY_SCHEMA["schema"]["properties"]) == {"reply", "corrections"}
    with_report = reply_schema(DUE_SCHEMA)["schema"]
    assert with_report["required"] == ["reply", "corrections", "review"]
    review = with_report["properties"]["review"]
    assert review["required"] == list(review["properties"]) == ["used", "missed"]
    assert review["additionalProperties"] is False


def test_the_rule_is_asked_for_in_few_tokens_and_an_echo_of_the_example_is_none() -> None:
    counter = TokenCounter("gpt-4o-mini")
    text = prompts.template("reply").template
    example = f', "rule": "{RULE_PLACEHOLDER}"'
    assert example in text
    assert counter.count(example) <= 12  # every reply prompt pays for it
    fix = {"original": "yo es", "corrected": "yo soy", "rule": RULE_PLACEHOLDER}
    answer = parse_answer(json.dumps({"reply": "Vale", "corrections": [fix]}))
    assert answer.corrections[0].rule == ""


# -- due items in the prompt ---------------------------------------------------------------


def test_a_mistake_comes_back_only_once_its_message_has_left_the_prompt(
    settings: Settings, engine: Engine
) -> None:
    model, clock = FakeChatModel(), ManualClock()
    pam = review_pam(settings, engine, model, clock)
    user = unique_user("ana")
    say(pam, user, "/language Spanish English")
    model.queue("reply", reply_json("¡Qué bien!", [BUEN]))
    first = say(pam, user, MISTAKE)
    assert first.review == NO_REVIEW  # nothing due yet
    clock.advance(timedelta(hours=1))
    seen = []
    for _ in range(3):
        turn = say(pam, user, CHAT)
        call = model.of("reply")[-1]
        in_prompt = any(m["content"] == MISTAKE for m in call.messages[1:])
        assert (f"<{DUE_TAG}>" in system_of(call)) is not in_prompt
        seen.append(in_prompt)
        if not in_prompt:
            break
    assert seen == [True, False]
    system = system_of(call)
    assert section(system, DUE_TAG) == (
        "1. un bueno amigo → un buen amigo (bueno → buen before a masculine singular noun)"
    )
    assert DUE_RULE.strip() in system and DUE_REPORT in system
    assert system.endswith(f"</{DUE_TAG}>{DUE_RULE}{DUE_REPORT}")  # after every stable part
    assert call.schema == reply_schema(DUE_SCHEMA)
    counter = TokenCounter(settings.llm.model)
    added = counter.count(system) - counter.count(system_without_review(system))
    assert turn.review.items == 1
    assert abs(turn.review.tokens - added) <= 4  # the pieces counted apart


def system_without_review(system: str) -> str:
    return system[: system.index(f"\n\n<{DUE_TAG}>")]


def test_a_turn_with_nothing_due_has_the_prompt_and_schema_of_before(
    settings: Settings, engine: Engine
) -> None:
    model, clock = FakeChatModel(), ManualClock()
    pam = review_pam(settings, engine, model, clock)
    user = unique_user()
    say(pam, user, "/language Spanish English")
    turn = say(pam, user, CHAT)
    (call,) = model.of("reply")
    assert "review" not in system_of(call).casefold()
    assert call.schema == REPLY_SCHEMA
    assert turn.review == NO_REVIEW
    context = pam.store.conversation.context(learner_of(pam, user).id)
    before = replace(context, messages=context.messages[:-1])  # without the reply
    assert call.messages == reply_prompt(before, pam.settings.memory.summary_max_tokens * 8)


def test_review_is_asked_for_its_items_only_when_the_context_saw_one_due(
    settings: Settings, engine: Engine
) -> None:
    """The context's read says whether anything is due (or a /review under way): most turns
    skip review's own read, which would find nothing; once an item falls due it is read, and
    offered, as before."""
    model, clock = FakeChatModel(), ManualClock()
    pam = review_pam(settings, engine, model, clock)
    reads = []
    for_prompt = pam.store.reviews.for_prompt

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(args)
        return for_prompt(*args, **kwargs)

    pam.store.reviews.for_prompt = counted  # type: ignore[method-assign]
    user = unique_user("ana")
    say(pam, user, "/language Spanish English")
    model.queue("reply", reply_json("¡Qué bien!", [BUEN]))
    say(pam, user, MISTAKE)
    say(pam, user, CHAT)
    assert reads == []  # an item, due in a while: nothing to read yet
    clock.advance(timedelta(hours=1))
    turn = say(pam, user, CHAT)
    assert len(reads) == 1
    assert turn.review.items == 1


def test_pam_review_off_offers_nothing_but_still_records_the_patterns(
    settings: Settings, engine: Engine
) -> None:
    pam, model, _clock, ana = due_scene(settings, engine, BUEN, review=False)
    model.queue("reply", reply_json("¡Bien!", review={"used": [1], "missed": []}))
    turn = say(pam, ana.user, "Tengo un buen amigo.")
    call = model.of("reply")[-1]
    assert "review" not in system_of(call).casefold()
    assert call.schema == REPLY_SCHEMA
    assert turn.review == NO_REVIEW
    (item,) = item_ids(engine, ana.info.id).values()
    assert grades(engine, ana.info.id) == [(item, "mistake", AGAIN)]
    assert pam.store.reviews.due(ana.info.id)  # scheduled all the same


# -- the report grades -------------------------------------------------------------------------


def test_the_report_grades_used_good_and_missed_again(settings: Settings, engine: Engine) -> None:
    pam, model, _clock, ana = due_scene(settings, engine, BUEN, SER)
    ids = item_ids(engine, ana.info.id)

    def answer(messages: Sequence[ChatMessage]) -> str:
        system = messages[0]["content"]
        used, missed = label_of(system, "un buen amigo"), label_of(system, "yo soy")
        return reply_json("¡Qué bien!", review={"used": [used], "missed": [missed]})

    model.queue("reply", answer)
    turn = say(pam, ana.user, "Tengo un buen amigo, pero yo es cansado.")
    assert turn.review.items == 2
    assert sorted(grades(engine, ana.info.id, "used", "missed")) == sorted(
        [(ids[BUEN["rule"]], "used", GOOD), (ids[SER["rule"]], "missed", AGAIN)]
    )
    buen = pam.store.reviews.item(ana.info.id, ids[BUEN["rule"]])
    assert buen is not None and buen.successes == 1


def test_a_turn_run_again_after_a_crash_grades_once(settings: Settings, engine: Engine) -> None:
    """The model answered but the worker died before the reply was written: nothing was
    graded (grades are left with the reply, for the review job). The turn runs again for the
    same inbox item, is answered and written, and its grades land once, however often the
    review job runs."""
    pam, model, _clock, ana = due_scene(settings, engine, BUEN)
    inbox_id = uuid.uuid4().int % 2**62
    used = reply_json("¡Bien!", review={"used": [1], "missed": []})
    model.queue("reply", used, used)
    pam.tutor.answer(
        TurnRequest(ana.user, "Tengo un buen amigo.", inbox_id=inbox_id)
    )  # never written
    assert grades(engine, ana.info.id, "used") == []
    turn = pam.tutor.answer(TurnRequest(ana.user, "Tengo un buen amigo.", inbox_id=inbox_id))
    assert turn.reply is not None and turn.reply.review is not None
    stored = store_turn(pam.writer, None, turn)
    assert stored.written.marked == (REVIEW,)
    turn = replace(turn, after_send=turn.after_send.and_written(stored.written))
    pam.after_sending.run(turn)
    pam.after_sending.run(turn)  # the job started twice
    assert pam.store.reviews.record_pending(ana.info.id) == 0  # and once more: nothing left
    (item,) = item_ids(engine, ana.info.id).values()
    assert grades(engine, ana.info.id, "used") == [(item, "used", GOOD)]


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({}, id="no-report"),
        pytest.param({"review": "she did well"}, id="prose"),
        pytest.param({"review": {"used": ["x", 7, None, True], "missed": {}}}, id="garbage"),
        pytest.param({"review": {"used": [3], "missed": [0, -1]}}, id="labels-not-offered"),
    ],
)
def test_an_answer_without_a_readable_report_grades_nothing_and_counts_the_offer(
    settings: Settings, engine: Engine, fields: dict[str, Any]
) -> None:
    pam, model, _clock, ana = due_scene(settings, engine, BUEN)
    model.queue("reply", reply_json("¡Genial!", **fields))
    assert say(pam, ana.user, CHAT).replies[0].startswith("¡Genial!")
    (item,) = item_ids(engine, ana.info.id).values()
    assert grades(engine, ana.info.id, "used", "missed") == []
    assert offers(engine, item) == 1


def test_a_failing_grade_never_costs_the_learner_the_reply(
    settings: Settings, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """The review job fails: the reply went out all the same, the log quotes nothing, and
    the grades wait for the job's next run."""
    pam, model, clock, ana = due_scene(settings, engine, BUEN)
    record_pending = pam.store.reviews.record_pending

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("database on fire: Tengo un buen amigo")

    pam.store.reviews.record_pending = broken  # type: ignore[method-assign]
    model.queue("reply", reply_json("¡Genial!", review={"used": [1], "missed": []}))
    with caplog.at_level(logging.INFO):
        turn = say(pam, ana.user, "Tengo un buen amigo.")
    assert turn.replies == ["¡Genial!"]
    assert "memory job review failed" in caplog.text
    assert "Tengo un buen amigo" not in caplog.text and "on fire" not in caplog.text
    assert grades(engine, ana.info.id, "used") == []
    pam.store.reviews.record_pending = record_pending  # type: ignore[method-assign]
    clock.advance(RETRY_AFTER_FAILURE + timedelta(seconds=1))
    # The failed job is still asked for; the sweep runs it (other tests' learners in a shared
    # database may have jobs of their own for it to start too).
    assert (ana.info.id, REVIEW) in pam.runner.coordinator.claimable()
    assert pam.runner.recover() >= 1
    assert (ana.info.id, REVIEW) not in pam.runner.coordinator.claimable()
    (item,) = item_ids(engine, ana.info.id).values()
    assert grades(engine, ana.info.id, "used") == [(item, "used", GOOD)]


def test_the_turn_log_line_counts_the_review_and_quotes_nothing(
    settings: Settings, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    pam, _model, _clock, ana = due_scene(settings, engine, BUEN)
    with caplog.at_level(logging.INFO, logger="bot.turn.conversing"):
        turn = say(pam, ana.user, CHAT)
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("turn ")]
    assert f"review_items=1 review_tokens={turn.review.tokens} exercise=False" in line
    assert turn.review.tokens > 0
    assert "bueno" not in line and "buen" not in line


# -- reading the report --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rest", "used", "missed"),
    [
        ({"review": {"used": [1], "missed": [2]}}, [41], [42]),
        ({"review": {"used": ["#1"], "missed": "2"}}, [41], [42]),
        ({"review": {"used": [1.0], "missed": ["item 2"]}}, [41], [42]),
        ({"review": {"used": "un buen amigo"}}, [41], []),
        ({"review": {"used": ["1. un buen amigo"]}}, [41], []),
        ({"review": {"Used Correctly": [2], "wrong_again": [1]}}, [42], [41]),
        ({"review": {"1": "used", "2": "missed"}}, [41], [42]),
        ({"review": {"1": True, "2": False}}, [41], [42]),
        ({"review": [{"label": 1, "result": "used"}, {"item": "2", "used": False}]}, [41], [42]),
        ({"used": [1], "missed": []}, [41], []),  # beside "reply", no wrapper
        ({"review": {"used": [1], "missed": [1]}}, [], [41]),  # both ways: missed
        ({"review": {"used": [3, 0, -1], "missed": [99]}}, [], []),  # not offered
        ({"review": {"used": [], "missed": []}}, [], []),
        ({"review": None}, [], []),
        ({"review": [1, 2]}, [], []),  # which way is not said
        ({"review": {"used": [[1], [[2]]]}}, [41, 42], []),
        ({"review": {"used": list(range(1, 500))}}, [41, 42], []),
    ],
)
def test_the_report_is_read_leniently(
    rest: dict[str, Any], used: list[int], missed: list[int]
) -> None:
    assert report(rest, ITEMS) == (used, missed)


REPORTED = json.dumps(
    {"reply": "¡Qué bien!", "corrections": [], "review": {"used": [1], "missed": []}},
    ensure_ascii=False,
)


@pytest.mark.parametrize(
    "body",
    [
        # Ollama's <think> block left in the content (openai/openai.go, see tests/llm_shapes.py)
        pytest.param(
            shapes.ollama(f"<think>\n{shapes.REASONING}\n</think>\n\n{REPORTED}"), id="ollama-raw"
        ),
        # vLLM with a reasoning parser: the thinking in `reasoning` (vLLM docs, reasoning_outputs)
        pytest.param(shapes.vllm(REPORTED, shapes.REASONING), id="vllm-reasoning"),
        # llama.cpp, DeepSeek-R1's template opened <think>: only the closing tag (server README)
        pytest.param(
            shapes.llama_cpp(f"{shapes.REASONING}\n</think>\n\n{REPORTED}"),
            id="llama.cpp-template-opened-think",
        ),
        # Groq, reasoning_format "raw" (console.groq.com/docs/reasoning)
        pytest.param(shapes.groq(f"<think>{shapes.REASONING}</think>\n{REPORTED}"), id="groq-raw"),
        # Fenced JSON, as Groq's json_validate_failed quotes what the model wrote
        # (GROQ_JSON_VALIDATE_FAILED's failed_generation in tests/llm_shapes.py)
        pytest.param(shapes.groq(f"```json\n{REPORTED}\n```"), id="groq-fenced"),
        # OpenRouter's reasoning tokens beside the answer (openrouter.ai reasoning-tokens docs)
        pytest.param(shapes.openrouter_reasoning(REPORTED), id="openrouter-reasoning"),
        # OpenAI's chat completion object (platform.openai.com chat/object)
        pytest.param(shapes.openai(REPORTED), id="openai"),
    ],
)
def test_the_report_survives_every_server_shape(body: dict[str, Any]) -> None:
    reading = read_answer(body)
    assert report(parse_answer(reading.text).rest, ITEMS) == ([41], [])


def test_a_report_cut_off_at_the_cap_grades_nothing_and_keeps_the_reply() -> None:
    # OpenAI's finish_reason "length" (platform.openai.com chat/object) mid-report
    cut = REPORTED[: REPORTED.index('"used"') + 9]
    reading = read_answer(shapes.finished(shapes.openai(cut), "length"))
    answer = parse_answer(reading.text)
    assert reading.truncated and answer.reply == "¡Qué bien!"
    assert report(answer.rest, ITEMS) == ([], [])


# -- through the real client and the local OpenAI server ------------------------------------------


@pytest.fixture
def served(settings: Settings, engine: Engine) -> Iterator[Served]:
    """Pam on the real OpenAI client against the local server, folding every turn."""
    with OpenAIServer() as llm:
        clock = ManualClock()
        config = settings.replace(
            llm={"api_key": "test-key", "base_url": llm.base_url, "max_retries": 0},
            limits={"rate_limit_per_minute": 0},
            memory={"window_messages": 2, "summary_trigger_tokens": 1, "fold_batch_messages": 1},
        )
        pam = build(config, submit=lambda work: work(), engine=engine, clock=clock)
        yield pam, llm, clock


def mistake_on_server(pam: Pam, llm: OpenAIServer, clock: ManualClock) -> tuple[str, int]:
    user = unique_user("served")
    say(pam, user, "/language Spanish English")
    llm.answer_next(shapes.openai(json.dumps({"reply": "¡Vale!", "corrections": [BUEN]})))
    say(pam, user, MISTAKE)
    say(pam, user, "Hoy hace sol.")
    clock.advance(timedelta(hours=1))
    return user, learner_of(pam, user).id


CUT = shapes.finished(shapes.openai(REPORTED[: REPORTED.index('"used"') + 9]), "length")


@pytest.mark.parametrize(
    ("body", "graded"),
    [
        # Ollama's <think> block left in the content (openai/openai.go in ollama/ollama)
        pytest.param(
            shapes.ollama(f"<think>\n{shapes.REASONING}\n</think>\n\n{REPORTED}"),
            True,
            id="ollama-raw",
        ),
        # Fenced JSON (Groq's failed_generation shows models writing it)
        pytest.param(shapes.groq(f"```json\n{REPORTED}\n```"), True, id="groq-fenced"),
        # Cut off at the output cap mid-report: finish_reason "length" (OpenAI chat object),
        # again when the client asks with twice the room; the reply is salvaged.
        pytest.param(CUT, False, id="cut-off"),
    ],
)
def test_a_served_report_grades_through_the_real_client(
    served: Served, engine: Engine, body: dict[str, Any], graded: bool
) -> None:
    pam, llm, clock = served
    user, learner_id = mistake_on_server(pam, llm, clock)
    llm.answer_next(*([body, body] if body is CUT else [body]))
    turn = say(pam, user, "Tengo un buen amigo.")
    assert turn.replies[0].startswith("¡Qué bien!")
    item = item_ids(engine, learner_id)[BUEN["rule"]]
    assert grades(engine, learner_id, "used") == ([(item, "used", GOOD)] if graded else [])
    request = llm.of("reply")[-1]
    assert request["response_format"]["json_schema"]["schema"]["required"][-1] == "review"


def test_a_refusal_grades_nothing_and_the_learner_hears_a_friendly_word(
    served: Served, engine: Engine
) -> None:
    # OpenAI's structured-output refusal (platform.openai.com structured-outputs#refusals)
    pam, llm, clock = served
    user, learner_id = mistake_on_server(pam, llm, clock)
    llm.answer_next(shapes.OPENAI_REFUSAL)
    turn = say(pam, user, "Tengo un buen amigo.")
    assert turn.replies and turn.reply is None
    assert grades(engine, learner_id, "used", "missed") == []
