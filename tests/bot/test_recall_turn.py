"""Recall in a tutor turn, on real databases, with the fake model and a fake Searcher (the
real search is memory/recall's, tested there): the auto path (a message about the past, a
name the prompt does not mention), the tool path and every untrusted answer shape, the
fallback when the provider takes no tools, usage of every call, the token cap, zero extra
tokens for turns that need no recall, and a log line that counts but never quotes."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from sqlalchemy import Engine, select

from bot import phrases
from bot.turn import recall
from bot.turn.recall import RECALL_TOOL, TAG, RecallUse
from bot.turn.values import Turn, TurnRequest
from bot.worker.runtime import Pam
from memory.clock import utcnow
from memory.database.models import Usage
from memory.llm import ToolsRefused
from memory.tokens import TokenCounter
from tests.conftest import unique_user
from tests.fakes import Call, FakeChatModel, FakeSearcher, recall_call, reply_json, tool_calls
from webhooks.settings import Settings
from webhooks.wiring import build

ASKS = "¿Te acuerdas de cómo se llama mi perro?"
FACT = "Mi perro se llama Toby y es muy travieso."
ORDINARY = "Hoy comí paella con mis amigos."


def pam_with(
    settings: Settings,
    engine: Engine,
    model: FakeChatModel,
    searcher: FakeSearcher | None,
    mode: str = "auto",
    **memory: object,
) -> Pam:
    """Pam with inline memory jobs, no rate limit, recall in `mode` over `searcher`."""
    pam = build(
        settings.replace(limits={"rate_limit_per_minute": 0}, memory={"recall": mode, **memory}),
        model=model,
        submit=lambda work: work(),
        engine=engine,
    )
    pam.tutor.asking.searcher = searcher
    return pam


def turn(pam: Pam, user: str, text: str) -> Turn:
    return pam.local_turns().reply(TurnRequest(user, text))


def learner_id(pam: Pam, user: str) -> int:
    found = pam.store.learners.find_learner(user)
    assert found is not None
    return found.id


def with_fact(pam: Pam, user: str, searcher: FakeSearcher, days: int = 21) -> int:
    """`user` known to Pam, with FACT in their searchable past, said `days` ago."""
    turn(pam, user, "/language Spanish English")
    found = learner_id(pam, user)
    searcher.add(found, FACT, utcnow() - timedelta(days=days))
    return found


def system_of(call: Call) -> str:
    return call.messages[0]["content"]


def usage_rows(pam: Pam, user: str) -> list[tuple[str, int, int]]:
    with pam.engine.connect() as connection:
        return [
            tuple(row)  # type: ignore[misc]
            for row in connection.execute(
                select(Usage.purpose, Usage.input_tokens, Usage.output_tokens)
                .where(Usage.learner_id == learner_id(pam, user))
                .order_by(Usage.id)
            )
        ]


# -- the auto path ----------------------------------------------------------------------------


def test_a_question_about_the_past_puts_what_was_found_in_the_prompt(
    settings: Settings, engine: Engine
) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    pam = pam_with(settings, engine, model, searcher)
    user, other = unique_user("ana"), unique_user("bob")
    ana = with_fact(pam, user, searcher)
    bob = with_fact(pam, other, searcher)
    searcher.snippets[bob][0] = searcher.snippets[bob][0].__class__(
        "message", "learner", "Mi perro se llama Rex.", utcnow(), 1.0
    )

    done = turn(pam, user, ASKS)

    (call,) = model.of("reply")
    assert call.tools is None
    assert searcher.searches == [(ana, ASKS, recall.MAX_SNIPPETS)]
    system = system_of(call)
    data = system.split(f"<{TAG}>\n", 1)[1].split(f"\n</{TAG}>", 1)[0]
    assert data == f"- 3 weeks ago, learner: {FACT}"
    assert "Rex" not in "\n".join(m["content"] for m in call.messages)
    assert system.rstrip().endswith(f"</{TAG}>")
    assert done.recall == RecallUse(
        "auto", 1, TokenCounter("gpt-4o-mini").count(recall.section(data))
    )
    assert done.replies and done.reply is not None


def test_a_name_the_prompt_does_not_mention_is_searched_and_one_it_does_is_not(
    settings: Settings, engine: Engine
) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    pam = pam_with(settings, engine, model, searcher)
    user = unique_user()
    with_fact(pam, user, searcher)
    turn(pam, user, "Oye, ¿y qué hacía Toby en el parque?")
    assert len(searcher.searches) == 1
    assert "Toby" in system_of(model.of("reply")[-1])
    # Now "Toby" is in the window: the same words need no search.
    turn(pam, user, "Oye, ¿y qué hacía Toby en el parque?")
    assert len(searcher.searches) == 1
    assert f"<{TAG}>" not in system_of(model.of("reply")[-1])


def test_a_turn_that_needs_no_recall_costs_not_one_token_more(
    settings: Settings, engine: Engine
) -> None:
    counter = TokenCounter("gpt-4o-mini")
    prompts: dict[str, list[Call]] = {}
    for mode in ("auto", "off"):
        model, searcher = FakeChatModel(), FakeSearcher()
        pam = pam_with(settings, engine, model, searcher, mode)
        user = unique_user(mode)
        with_fact(pam, user, searcher)
        turn(pam, user, ORDINARY)
        prompts[mode] = model.of("reply")
        assert searcher.searches == []
    (auto,), (off,) = prompts["auto"], prompts["off"]
    assert auto.messages == off.messages
    assert sum(counter.count_message(m["content"]) for m in auto.messages) == sum(
        counter.count_message(m["content"]) for m in off.messages
    )


def test_a_search_that_finds_nothing_adds_nothing(settings: Settings, engine: Engine) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    pam = pam_with(settings, engine, model, searcher)
    user = unique_user()
    turn(pam, user, "/language Spanish English")
    done = turn(pam, user, ASKS)
    assert len(searcher.searches) == 1
    assert f"<{TAG}>" not in system_of(model.of("reply")[-1])
    assert done.recall == RecallUse("auto", 0, 0)


def test_the_snippets_stay_under_the_token_cap(settings: Settings, engine: Engine) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    pam = pam_with(settings, engine, model, searcher, recall_max_tokens=40)
    user = unique_user()
    found = with_fact(pam, user, searcher)
    for days in (3, 9):
        searcher.add(found, "perro " * 200, utcnow() - timedelta(days=days))
    turn(pam, user, ASKS)
    system = system_of(model.of("reply")[-1])
    data = system.split(f"<{TAG}>\n", 1)[1].split(f"\n</{TAG}>", 1)[0]
    assert TokenCounter("gpt-4o-mini").count(data) <= 40
    assert data.startswith(f"- 3 weeks ago, learner: {FACT}")


def test_a_failing_search_costs_the_learner_nothing(
    settings: Settings, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(FakeSearcher):
        def search(self, learner_id: int, query: str, *, limit: int = 3) -> list:  # type: ignore[type-arg]
            raise RuntimeError(f"database gone while searching {query}")

    model = FakeChatModel()
    pam = pam_with(settings, engine, model, Broken())
    user = unique_user()
    turn(pam, user, "/language Spanish English")
    with caplog.at_level(logging.INFO):
        done = turn(pam, user, ASKS)
    assert done.reply is not None and done.recall == RecallUse("auto", 0, 0)
    assert "recall search failed" in caplog.text and ASKS not in caplog.text


def test_recall_off_or_no_searcher_never_searches(settings: Settings, engine: Engine) -> None:
    for mode, searcher in (("off", FakeSearcher()), ("tool", None), ("auto", None)):
        model = FakeChatModel()
        pam = pam_with(settings, engine, model, searcher, mode)
        user = unique_user(mode)
        done = turn(pam, user, ASKS)
        assert model.of("reply")[-1].tools is None
        assert done.recall == recall.NO_RECALL
        assert searcher is None or searcher.searches == []


def test_the_log_line_says_how_recall_ran_and_never_quotes_it(
    settings: Settings, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    pam = pam_with(settings, engine, model, searcher)
    user = unique_user()
    with_fact(pam, user, searcher)
    with caplog.at_level(logging.DEBUG):
        turn(pam, user, ORDINARY)
        turn(pam, user, ASKS)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("turn learner=")]
    assert "recall=none snippets=0" in lines[0]
    assert "recall=auto snippets=1" in lines[1]
    assert "Toby" not in caplog.text and "perro" not in caplog.text


# -- the tool path ----------------------------------------------------------------------------


def test_a_recall_call_is_run_and_answered_in_one_more_call(
    settings: Settings, engine: Engine
) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    model.queue("reply", recall_call("perro nombre"), reply_json("¡Claro, Toby!"))
    pam = pam_with(settings, engine, model, searcher, "tool")
    user = unique_user()
    found = with_fact(pam, user, searcher)

    done = turn(pam, user, ASKS)

    first, second = model.of("reply")
    assert first.tools == [RECALL_TOOL] and second.tools is None
    assert searcher.searches == [(found, "perro nombre", recall.MAX_SNIPPETS)]
    assert second.messages[: len(first.messages)] == first.messages
    assistant, tool = second.messages[len(first.messages) :]
    assert assistant["role"] == "assistant" and assistant["content"] == ""
    assert assistant["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "recall", "arguments": '{"query": "perro nombre"}'},
        }
    ]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_1"
    assert tool["content"] == f"<{TAG}>\n- 3 weeks ago, learner: {FACT}\n</{TAG}>"
    # The system prompt is the one without recall: the data came as the tool's answer.
    assert f"<{TAG}>" not in system_of(second)
    assert done.replies[0].startswith("¡Claro, Toby!")
    assert done.recall.how == "tool" and done.recall.snippets == 1
    # Both calls billed: the tool call's, then the reply's (stored with the reply).
    rows = usage_rows(pam, user)
    assert len(rows) == 2 and rows[0] == ("reply", 50, 10)
    assert done.reply is not None and rows[1] == ("reply", *done.reply.usage[1:])


def test_a_reply_without_a_tool_call_is_used_as_it_is(settings: Settings, engine: Engine) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    pam = pam_with(settings, engine, model, searcher, "tool")
    user = unique_user()
    with_fact(pam, user, searcher)
    done = turn(pam, user, ASKS)
    (call,) = model.of("reply")
    assert call.tools == [RECALL_TOOL]
    assert searcher.searches == [] and done.recall == recall.NO_RECALL
    assert f"<{TAG}>" not in system_of(call)


@pytest.mark.parametrize("arguments", ['{"query": ', "not json", '{"q": 1}', '{"query": ""}'])
def test_unusable_arguments_search_with_the_learners_message(
    settings: Settings, engine: Engine, arguments: str
) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    model.queue("reply", tool_calls(("recall", arguments)), reply_json("¡Toby!"))
    pam = pam_with(settings, engine, model, searcher, "tool")
    user = unique_user()
    found = with_fact(pam, user, searcher)
    turn(pam, user, ASKS)
    assert searcher.searches == [(found, ASKS, recall.MAX_SNIPPETS)]
    # What is sent back is the call as run, never the garbled arguments.
    sent = model.of("reply")[1].messages[-2]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"query": "' + ASKS.replace("¿", "\\u00bf").replace("ó", "\\u00f3") + '"}'


def test_several_calls_run_the_first_recall_only(settings: Settings, engine: Engine) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    model.queue(
        "reply",
        tool_calls(
            ("weather", '{"city": "Madrid"}'),
            ("recall", '{"query": "perro"}'),
            ("recall", '{"query": "gato"}'),
        ),
        reply_json("¡Toby!"),
    )
    pam = pam_with(settings, engine, model, searcher, "tool")
    user = unique_user()
    found = with_fact(pam, user, searcher)
    turn(pam, user, ASKS)
    assert searcher.searches == [(found, "perro", recall.MAX_SNIPPETS)]
    second = model.of("reply")[1]
    assert [c["id"] for c in second.messages[-2]["tool_calls"]] == ["call_2"]
    assert second.messages[-1]["tool_call_id"] == "call_2"
    assert len(model.of("reply")) == 2


def test_a_recall_call_with_content_runs_the_recall_and_drops_the_content(
    settings: Settings, engine: Engine
) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    model.queue(
        "reply", recall_call("perro", text=reply_json("Creo que Rex")), reply_json("¡Toby!")
    )
    pam = pam_with(settings, engine, model, searcher, "tool")
    user = unique_user()
    with_fact(pam, user, searcher)
    done = turn(pam, user, ASKS)
    assert done.replies[0].startswith("¡Toby!")
    assert "Rex" not in "\n".join(m["content"] for m in model.of("reply")[1].messages)


def test_an_unknown_tool_with_a_reply_beside_it_is_answered_with_that_reply(
    settings: Settings, engine: Engine
) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    model.queue("reply", tool_calls(("search_web", "{}"), text=reply_json("¡Hola!")))
    pam = pam_with(settings, engine, model, searcher, "tool")
    user = unique_user()
    done = turn(pam, user, ASKS)
    assert len(model.of("reply")) == 1 and done.replies[0].startswith("¡Hola!")
    assert searcher.searches == [] and done.recall == recall.NO_RECALL


def test_an_unknown_tool_alone_is_asked_again_without_tools(
    settings: Settings, engine: Engine
) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    model.queue("reply", tool_calls(("search_web", "{}")), reply_json("¡Hola!"))
    pam = pam_with(settings, engine, model, searcher, "tool")
    user = unique_user()
    done = turn(pam, user, ASKS)
    first, second = model.of("reply")
    assert second.tools is None and second.messages == first.messages
    assert done.replies[0].startswith("¡Hola!")
    rows = usage_rows(pam, user)
    assert len(rows) == 2 and rows[0] == ("reply", 50, 10)


def test_a_model_that_calls_the_tool_again_gets_no_third_call(
    settings: Settings, engine: Engine
) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    model.queue("reply", recall_call("perro"), recall_call("perro otra vez"))
    pam = pam_with(settings, engine, model, searcher, "tool")
    user = unique_user()
    with_fact(pam, user, searcher)
    done = turn(pam, user, ASKS)
    assert len(model.of("reply")) == 2
    assert done.replies == [phrases.APOLOGY]
    # Both calls are billed all the same.
    assert [row[0] for row in usage_rows(pam, user)] == ["reply", "reply"]


def test_a_provider_that_takes_no_tools_gets_the_auto_path(
    settings: Settings, engine: Engine
) -> None:
    model, searcher = FakeChatModel(), FakeSearcher()
    model.queue("reply", ToolsRefused("no tools here"))
    pam = pam_with(settings, engine, model, searcher, "tool")
    user = unique_user()
    found = with_fact(pam, user, searcher)
    done = turn(pam, user, ASKS)
    first, second = model.of("reply")
    assert first.tools == [RECALL_TOOL] and second.tools is None
    assert searcher.searches == [(found, ASKS, recall.MAX_SNIPPETS)]
    assert FACT in system_of(second)
    assert done.recall.how == "auto" and done.reply is not None
