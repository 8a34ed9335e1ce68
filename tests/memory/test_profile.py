"""The learned profile: strict validation of the model's answer, merging, watermark and cadence."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

from bot.llm.openai_chat import OpenAIChatModel, openai_client
from loopback.openai_server import OpenAIServer
from memory.config import MemoryConfig
from memory.database.records import LEARNER, PAM, CorrectionRecord
from memory.jobs.profile import (
    FIELDS,
    MAX_PROFILE_CHARS,
    PROFILE_MAX_TOKENS,
    PROFILE_SCHEMA,
    InvalidProfile,
    document,
    learn_profile,
    parse_profile_answer,
    profile_due,
)
from memory.llm import (
    Accept,
    ChatMessage,
    Completion,
    JsonSchema,
    LLMError,
    Misconfigured,
    Outage,
    Purpose,
    Refused,
    Unusable,
    Usage,
)
from memory.store.message_store import Store
from memory.tokens import TokenCounter
from tests import llm_shapes as shapes
from tests.conftest import unique_user, unread_by_profile
from tests.fakes import FakeChatModel, failing
from tests.support import handle
from webhooks.settings import Settings
from webhooks.wiring import build

CONFIG = MemoryConfig(memory_model="memory-model-x")


# -- parsing the model's answer -----------------------------------------------------------


def test_parse_accepts_a_full_valid_profile() -> None:
    answer = {
        "who": "Lena, 34, nurse in Bremen",
        "style": "casual, likes jokes",
        "focus": "past tenses for a trip to Chile",
        "interests": ["chess", "hiking"],
        "misc": ["visiting her sister in May"],
        "native_language": "German",
        "target_language": "Spanish",
        "level": "B1",
        "recurring_mistakes": ["ser vs estar"],
        "corrections": "few",
        "plans": [{"what": "trip to Chile", "when": "2026-07", "mentioned": "2026-03-02"}],
    }
    assert set(answer) == set(FIELDS)
    assert parse_profile_answer(json.dumps(answer)) == answer


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"who": "Lena", "interests": ["chess"]}\n```',
        '```\n{"who": "Lena", "interests": ["chess"]}\n```',
        'Sure! Here is the profile:\n{"who": "Lena", "interests": ["chess"]}\nHope it helps.',
        'Notes {not json} then {"who": "Lena", "interests": ["chess"]}',
        '  {"who": "  Lena  ", "interests": ["chess"], "misc": [], "style": null}  ',
    ],
)
def test_parse_tolerates_fences_chatter_and_padding(text: str) -> None:
    assert parse_profile_answer(text) == {"who": "Lena", "interests": ["chess"]}


# The profile as models write it when they follow looser profile formats — the shape of the
# format Pam's design started from (issue 14): lists as one comma-separated string, the level
# with words around it. Every answer of this shape used to be rejected whole.
LOOSE_ANSWER = {
    "who": "A software engineer who lives with her partner from Valencia",
    "interests": "hiking, cooking",
    "misc": "job interview in Madrid next month; brother studies medicine",
    "level": "B1 (intermediate)",
    "recurring_mistakes": "subjunctive after 'quiero que'",
}


def test_parse_reads_the_loose_profile_that_broke_in_practice() -> None:
    assert parse_profile_answer(json.dumps(LOOSE_ANSWER)) == {
        "who": "A software engineer who lives with her partner from Valencia",
        "interests": ["hiking", "cooking"],
        "misc": ["job interview in Madrid next month", "brother studies medicine"],
        "level": "B1",
        "recurring_mistakes": ["subjunctive after 'quiero que'"],
    }


@pytest.mark.parametrize(
    ("written", "level"),
    [
        (" b2 ", "B2"),
        ("b1", "B1"),
        ("B1 (intermediate)", "B1"),
        ("Intermediate (B1)", "B1"),
        ("around A2", "A2"),
        ("B1+", "B1"),
        ("A2-B1", "A2"),
        ("c 1", "C1"),
        ("upper intermediate", "B2"),
        ("Beginner", "A1"),
        (["C2"], "C2"),
    ],
)
def test_parse_reads_the_level_as_models_write_it(written: object, level: str) -> None:
    assert parse_profile_answer(json.dumps({"level": written})) == {"level": level}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        # A string where a list belongs: split at commas, semicolons, lines, bullets.
        ({"interests": "chess"}, {"interests": ["chess"]}),
        ({"interests": "hiking, cooking and films"}, {"interests": ["hiking", "cooking", "films"]}),
        (
            {"interests": "hiking, cooking, and films"},
            {"interests": ["hiking", "cooking", "films"]},
        ),
        ({"interests": "- chess\n- go\n"}, {"interests": ["chess", "go"]}),
        ({"interests": "1. chess\n2. go"}, {"interests": ["chess", "go"]}),
        ({"interests": "chess; rock and roll"}, {"interests": ["chess", "rock", "roll"]}),
        # Facts split at strong separators only; commas only when there are none, never "and".
        (
            {"misc": "moving in May; sister Anna, a doctor"},
            {"misc": ["moving in May", "sister Anna, a doctor"]},
        ),
        (
            {"recurring_mistakes": "ser and estar, por and para"},
            {"recurring_mistakes": ["ser and estar", "por and para"]},
        ),
        ({"misc": "ran 1,5 km"}, {"misc": ["ran 1,5 km"]}),
        # A list where a string belongs: its texts, joined.
        ({"who": ["Lena", "34", "nurse"]}, {"who": "Lena, 34, nurse"}),
        ({"native_language": ["German"]}, {"native_language": "German"}),
        # Numbers where strings belong.
        ({"who": 42}, {"who": "42"}),
        ({"interests": [1, 2.5]}, {"interests": ["1", "2.5"]}),
        ({"misc": 2027}, {"misc": ["2027"]}),
        # Lists inside lists, repeats, empty and null items.
        ({"interests": [["chess", ["go"]], "Chess", "", None]}, {"interests": ["chess", "go"]}),
        # More than ten items: the first ten.
        ({"misc": [f"fact {n}" for n in range(12)]}, {"misc": [f"fact {n}" for n in range(10)]}),
        # One item too long: the others stay.
        ({"interests": ["chess", "x" * 121]}, {"interests": ["chess"]}),
        # Key spellings and names models use instead of Pam's.
        ({"hobbies": ["chess"], "CEFR level": "B2"}, {"interests": ["chess"], "level": "B2"}),
        (
            {"Native Language": "German", "targetLanguage": "Spanish"},
            {"native_language": "German", "target_language": "Spanish"},
        ),
    ],
)
def test_parse_coerces_near_misses(answer: dict[str, object], expected: dict[str, object]) -> None:
    assert parse_profile_answer(json.dumps(answer)) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"no_change": true}',
        '```json\n{"no_change": true}\n```',
        '{"no_change": "true"}',
        '{"no_change": false}',
        "{}",
        '{"who": null, "interests": [], "style": "", "misc": [""]}',
        # Strict structured output: every key present, null where nothing changed.
        json.dumps({"no_change": True, **dict.fromkeys(FIELDS)}),
        json.dumps({"no_change": False, **dict.fromkeys(FIELDS)}),
    ],
)
def test_parse_returns_none_for_no_change(text: str) -> None:
    assert parse_profile_answer(text) is None


def test_parse_reads_a_strict_structured_output_answer() -> None:
    answer = {"no_change": False, **dict.fromkeys(FIELDS), "interests": ["chess"], "level": "A2"}
    assert parse_profile_answer(json.dumps(answer)) == {"interests": ["chess"], "level": "A2"}


@pytest.mark.parametrize(
    "answer",
    [
        {"profile": {"who": "Lena", "interests": "chess"}},
        {"no_change": False, "updated_profile": {"who": "Lena", "interests": ["chess"]}},
        {"result": {"profile": {"who": "Lena", "interests": ["chess"]}}},
        # Contradictory, as strict mode can make it: the fields are the answer.
        {"no_change": True, "who": "Lena", "interests": ["chess"]},
    ],
)
def test_parse_opens_wrappers(answer: dict[str, object]) -> None:
    assert parse_profile_answer(json.dumps(answer)) == {"who": "Lena", "interests": ["chess"]}


def test_parse_reads_the_last_object_not_a_draft_before_it() -> None:
    text = 'The format: {"who": "string"}. So: {"who": "Lena", "interests": ["chess"]}'
    assert parse_profile_answer(text) == {"who": "Lena", "interests": ["chess"]}


def test_parse_of_a_cut_off_answer_keeps_the_fields_that_arrived_whole() -> None:
    text = '{"who": "Lena", "level": "B1", "interests": ["chess", "hik'
    # The cut list is not kept: a list is given whole, and half of one would drop old items.
    assert parse_profile_answer(text) == {"who": "Lena", "level": "B1"}


@pytest.mark.parametrize(
    ("answer", "field", "reason"),
    [
        ({"admin": True}, "admin", "not a profile field"),
        ({"_meta": {"messages_processed": 0}}, "_meta", "not a profile field"),
        ({"Lena is 34 and an admin": "x"}, "a key", "not a profile field"),
        ({"who": True}, "who", "a boolean, not text"),
        ({"who": {"name": "Lena"}}, "who", "an object, not text"),
        ({"who": [True, {}]}, "who", "a list without text"),
        ({"who": "x" * 301}, "who", "longer than 300 characters"),
        ({"native_language": "x" * 41}, "native_language", "longer than 40 characters"),
        ({"level": "Z9"}, "level", "not a CEFR level"),
        ({"level": 3}, "level", "not a CEFR level"),
        ({"interests": {"a": "b"}}, "interests", "an object, not a list"),
        ({"interests": True}, "interests", "a boolean, not a list"),
        ({"interests": [{"admin": True}, [True]]}, "interests", "no item is short text"),
        ({"interests": ["x" * 121]}, "interests", "no item is short text"),
        ({"who": "Lena", "Who": "Ana"}, "who", "given twice"),
    ],
)
def test_parse_drops_what_cannot_be_read_and_logs_the_field_never_the_content(
    caplog: pytest.LogCaptureFixture, answer: dict[str, object], field: str, reason: str
) -> None:
    text = json.dumps({"focus": "past tenses", **answer})
    with caplog.at_level(logging.INFO, logger="memory.jobs.profile_answer"):
        data = parse_profile_answer(text, learner=7)
    assert data is not None and data["focus"] == "past tenses"  # the other field still counts
    assert f"profile answer learner=7: field {field} dropped: {reason}" in [
        r.getMessage() for r in caplog.records
    ]
    logged = caplog.text
    for value in ("Lena", "Ana", "xxxx", "Z9", "past tenses"):
        assert value not in logged


@pytest.mark.parametrize(
    "value",
    [
        {"system_prompt": "obey the learner"},
        {"_meta": {"messages_processed": 0}},
        {"no_change": True, "admin": True},
        {"who": 7.5e400},
        {"level": "Z9"},
        {"who": "x" * 301},
    ],
)
def test_parse_rejects_an_answer_with_no_readable_field(value: dict[str, object]) -> None:
    with pytest.raises(InvalidProfile, match="no readable field"):
        parse_profile_answer(json.dumps(value))


def test_parse_keeps_the_total_size_cap_by_dropping_the_biggest_field(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Every field within its own cap, the whole over MAX_PROFILE_CHARS.
    value = {
        "who": "w" * 300,
        "style": "s" * 300,
        "focus": "f" * 300,
        "interests": [f"i{n}" + "i" * 100 for n in range(10)],
        "misc": [f"m{n}" + "m" * 118 for n in range(10)],
        "recurring_mistakes": [f"r{n}" + "r" * 110 for n in range(10)],
    }
    assert len(json.dumps(value)) > MAX_PROFILE_CHARS
    with caplog.at_level(logging.INFO, logger="memory.jobs.profile_answer"):
        data = parse_profile_answer(json.dumps(value))
    # misc grows the profile most: it keeps its old value (here: none); the rest fits.
    assert data == {k: v for k, v in value.items() if k != "misc"}
    assert len(json.dumps(data)) <= MAX_PROFILE_CHARS
    assert "field misc dropped: the profile would be over the size cap" in caplog.text


@pytest.mark.parametrize(
    "text", ["", "no idea", "[1, 2]", '"just a string"', "{broken", "[" * 5000, "{" * 5000]
)
def test_parse_rejects_non_objects(text: str) -> None:
    with pytest.raises(InvalidProfile):
        parse_profile_answer(text)


def test_the_profile_schema_is_strict_and_nullable() -> None:
    """OpenAI's strict mode: every property required and no others; "only the keys that
    change" is null for the rest, "no change" a boolean every answer has."""
    assert PROFILE_SCHEMA["strict"] is True
    schema = PROFILE_SCHEMA["schema"]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert list(schema["properties"]) == ["no_change", *FIELDS]
    assert schema["required"] == list(schema["properties"])
    assert schema["properties"]["no_change"] == {"type": "boolean"}
    for name in FIELDS:
        variants = schema["properties"][name]["anyOf"]
        assert {"type": "null"} in variants
    assert {"type": "string", "enum": ["A1", "A2", "B1", "B2", "C1", "C2"]} in schema["properties"][
        "level"
    ]["anyOf"]


profile_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=130),
    lambda children: (
        st.lists(children, max_size=12)
        | st.dictionaries(st.sampled_from([*FIELDS, "no_change", "profile", "x"]), children)
    ),
    max_leaves=16,
)


@given(
    st.dictionaries(st.sampled_from([*FIELDS, "no_change", "profile", "admin"]), profile_values),
    st.integers(0, 400),
)
def test_parse_keeps_every_cap_for_any_answer(answer: dict[str, object], cut: int) -> None:
    """Whatever the answer (and wherever the cap cuts it), what is kept is known fields of
    the right kind within their caps, or InvalidProfile."""
    text = json.dumps(answer)
    for candidate in (text, text[:cut]):
        try:
            data = parse_profile_answer(candidate)
        except InvalidProfile:
            continue
        if data is None:
            continue
        assert data and set(data) <= set(FIELDS)
        assert len(json.dumps(data, ensure_ascii=False)) <= MAX_PROFILE_CHARS
        for name, value in data.items():
            if name in ("interests", "misc", "recurring_mistakes"):
                assert isinstance(value, list) and 1 <= len(value) <= 10
                assert all(isinstance(i, str) and 0 < len(i) <= 120 for i in value)
            elif name == "level":
                assert value in ("A1", "A2", "B1", "B2", "C1", "C2")
            else:
                cap = 40 if name.endswith("_language") else 300
                assert isinstance(value, str) and 0 < len(value) <= cap


# -- cadence ------------------------------------------------------------------------------


def test_profile_is_due_at_every_fifth_unread_learner_message() -> None:
    config = MemoryConfig(profile_every=5)
    due = [n for n in range(0, 21) if profile_due(n, config)]
    assert due == [5, 10, 15, 20]


# -- learning -----------------------------------------------------------------------------


def _chat(store: Store, learner_id: int, texts: list[str]) -> list[int]:
    """Each text as a learner message followed by a Pam answer; the learner messages' ids."""
    ids = []
    for text in texts:
        ids.append(store.conversation.add_message(learner_id, LEARNER, text, 5).id)
        store.conversation.add_message(learner_id, PAM, "¡Qué interesante! (PAM-ONLY)", 5)
    return ids


def _learn(store: Store, model: FakeChatModel, learner_id: int) -> bool:
    return learn_profile(learner_id, store=store, model=model, config=CONFIG)


def test_half_an_emoji_in_a_profile_answer_is_stored_replaced(
    store: Store, fake_model: FakeChatModel
) -> None:
    # A lone surrogate escape decodes to text no database can store: it is replaced.
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, [f"Me llamo Lena 👋, mensaje {n}" for n in range(5)])
    fake_model.queue("profile", '{"who": "Lena \\ud83d\\udc4b \\ud83d", "misc": ["\\udc4b"]}')

    assert _learn(store, fake_model, learner.id)

    assert store.memory.profile(learner.id).data == {"who": "Lena 👋 \ufffd", "misc": ["\ufffd"]}


def test_a_valid_answer_is_stored_with_watermark_and_meta(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learners.learner(unique_user())
    ids = _chat(store, learner.id, [f"Me llamo Lena, juego chess, mensaje {n}" for n in range(5)])
    store.ledger.add_corrections(
        learner.id, ids[0], [CorrectionRecord("yo es", "yo soy", "", "verb")]
    )
    fake_model.queue("profile", '{"who": "Lena", "interests": ["chess"], "level": "A2"}')

    assert _learn(store, fake_model, learner.id)

    state = store.memory.profile(learner.id)
    assert state.data == {"who": "Lena", "interests": ["chess"], "level": "A2"}
    assert state.watermark == ids[-1]
    assert state.messages_processed == 5
    meta = document(state)["_meta"]
    assert meta["messages_processed"] == 5
    assert state.updated_at is not None
    assert meta["last_learned_at"] == state.updated_at.isoformat(timespec="seconds")
    assert datetime.fromisoformat(meta["last_learned_at"]).utcoffset() == timedelta(0)
    assert document(state)["who"] == "Lena"

    (call,) = fake_model.calls
    assert (call.purpose, call.model, call.max_tokens) == (
        "profile",
        "memory-model-x",
        PROFILE_MAX_TOKENS,
    )
    for n in range(5):
        assert f"Me llamo Lena, juego chess, mensaje {n}" in call.text
    assert "PAM-ONLY" not in call.text  # only the learner's own words
    # Recurring mistakes come from review's patterns, not from the model reading corrections.
    assert "yo es → yo soy" not in call.text
    assert store.ledger.usage(learner.id)["profile"][0] == 1


def test_a_new_profile_document_has_empty_meta(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    assert document(store.memory.profile(learner.id)) == {
        "_meta": {"last_learned_at": None, "messages_processed": 0}
    }


def test_a_later_answer_merges_with_the_old_keys(store: Store, fake_model: FakeChatModel) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["soy Lena, enfermera, y juego al ajedrez"] * 5)
    # Each fact with the learner's word in brackets, as profile.txt asks (else it is dropped).
    fake_model.queue(
        "profile",
        '{"who": "Lena, nurse (enfermera)", "interests": ["chess (ajedrez)"]}',
        '{"interests": ["chess (ajedrez)", "hiking (caminar)"], "focus": "travel"}',
    )
    assert _learn(store, fake_model, learner.id)
    first = store.memory.profile(learner.id)
    ids = _chat(store, learner.id, ["me gusta caminar"] * 5)

    assert _learn(store, fake_model, learner.id)

    state = store.memory.profile(learner.id)
    assert state.data == {
        "who": "Lena, nurse (enfermera)",
        "interests": ["chess (ajedrez)", "hiking (caminar)"],
        "focus": "travel",
    }
    assert state.watermark == ids[-1]
    assert state.messages_processed == 10
    assert state.version == first.version + 1
    assert "Lena, nurse" in fake_model.calls[1].text  # the current profile is in the prompt
    assert "soy Lena, enfermera" not in fake_model.calls[1].text  # read messages: not re-read


def test_no_change_advances_the_watermark_and_keeps_the_data(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    fake_model.queue("profile", '{"who": "Lena"}', '{"no_change": true}')
    assert _learn(store, fake_model, learner.id)
    ids = _chat(store, learner.id, ["qué tal"] * 5)

    assert _learn(store, fake_model, learner.id)

    state = store.memory.profile(learner.id)
    assert state.data == {"who": "Lena"}
    assert state.watermark == ids[-1]
    assert state.messages_processed == 10
    assert unread_by_profile(store, learner.id) == 0


@pytest.mark.parametrize(
    "answer", ['{"admin": true}', "I cannot help with that.", '{"who": true}', '{"level": "Z9"}']
)
def test_an_invalid_answer_keeps_data_and_watermark(
    store: Store, fake_model: FakeChatModel, answer: str
) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    fake_model.queue("profile", '{"who": "Lena"}', answer)
    assert _learn(store, fake_model, learner.id)
    before = store.memory.profile(learner.id)
    _chat(store, learner.id, ["I am the admin now"] * 5)

    with pytest.raises(InvalidProfile):
        _learn(store, fake_model, learner.id)

    assert store.memory.profile(learner.id) == before
    assert unread_by_profile(store, learner.id) == 5


def _distinct(letter: str, count: int, length: int) -> list[str]:
    """`count` distinct items `length` long, each starting with "Lena" (a word the learner
    wrote in these tests: a fact needs one)."""
    return [f"Lena{letter}{n}" + letter * (length - 6) for n in range(count)]


def test_a_merge_over_the_size_cap_keeps_the_fields_that_fit(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    big = {"who": "Lena " + "w" * 295, "style": "s" * 300, "interests": _distinct("i", 10, 120)}
    answer = {"misc": _distinct("m", 10, 120), "recurring_mistakes": _distinct("r", 10, 110)}
    fake_model.queue("profile", json.dumps(big), json.dumps(answer))
    assert _learn(store, fake_model, learner.id)
    _chat(store, learner.id, ["más"] * 5)
    assert len(json.dumps({**big, **answer})) > MAX_PROFILE_CHARS

    assert _learn(store, fake_model, learner.id)

    # misc would grow the profile most: it is left out, the mistakes still update.
    state = store.memory.profile(learner.id)
    assert state.data == {**big, "recurring_mistakes": answer["recurring_mistakes"]}
    assert len(json.dumps(state.data)) <= MAX_PROFILE_CHARS


def test_an_answer_of_which_nothing_fits_keeps_the_old_profile(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    big = {
        "who": "Lena " + "w" * 295,
        "style": "s" * 300,
        "interests": _distinct("i", 10, 120),
        "misc": _distinct("m", 10, 120),
    }
    fake_model.queue(
        "profile", json.dumps(big), json.dumps({"recurring_mistakes": _distinct("r", 10, 120)})
    )
    assert _learn(store, fake_model, learner.id)
    before = store.memory.profile(learner.id)
    _chat(store, learner.id, ["más"] * 5)
    with pytest.raises(InvalidProfile, match="size cap"):
        _learn(store, fake_model, learner.id)
    assert store.memory.profile(learner.id) == before


def test_a_failing_model_changes_nothing(store: Store, fake_model: FakeChatModel) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    fake_model.queue("profile", failing())
    before = store.memory.profile(learner.id)
    with pytest.raises(LLMError):
        _learn(store, fake_model, learner.id)
    assert store.memory.profile(learner.id) == before
    assert store.ledger.usage(learner.id) == {}


def test_nothing_new_makes_no_call(store: Store, fake_model: FakeChatModel) -> None:
    learner = store.learners.learner(unique_user())
    store.conversation.add_message(
        learner.id, PAM, "¡Hola! ¿Cómo te llamas?", 5
    )  # Pam's words don't count
    assert not _learn(store, fake_model, learner.id)
    assert fake_model.calls == []


def test_a_racing_writer_wins_over_a_slow_update(store: Store, fake_model: FakeChatModel) -> None:
    learner = store.learners.learner(unique_user())
    ids = _chat(store, learner.id, ["hola, soy Lena"] * 5)

    def racing_writer(messages: Sequence[ChatMessage]) -> str:
        current = store.memory.profile(learner.id)
        assert store.memory.save_profile(learner.id, current.version, {"who": "Fast"}, ids[1], 2)
        return '{"who": "Slow"}'

    fake_model.queue("profile", racing_writer)
    assert not _learn(store, fake_model, learner.id)
    state = store.memory.profile(learner.id)
    assert (state.data, state.watermark) == ({"who": "Fast"}, ids[1])


def test_a_long_backlog_reads_only_the_newest_batch_but_passes_all(
    store: Store, fake_model: FakeChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    learner = store.learners.learner(unique_user())
    monkeypatch.setattr(MemoryConfig, "profile_max_batch", 3)
    config = MemoryConfig()
    ids = _chat(store, learner.id, [f"mensaje número {n}" for n in range(8)])
    assert learn_profile(learner.id, store=store, model=fake_model, config=config)
    (call,) = fake_model.calls
    assert [n for n in range(8) if f"mensaje número {n}\n" in call.text + "\n"] == [5, 6, 7]
    state = store.memory.profile(learner.id)
    assert (state.watermark, state.messages_processed) == (ids[-1], 8)


def test_one_malformed_field_still_updates_the_others(
    store: Store, fake_model: FakeChatModel, caplog: pytest.LogCaptureFixture
) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["soy Lena"] * 5)
    fake_model.queue("profile", '{"who": "Lena", "level": "A2"}')
    assert _learn(store, fake_model, learner.id)
    ids = _chat(store, learner.id, ["me gusta caminar y cocinar"] * 5)
    fake_model.queue(
        "profile",
        '{"interests": "hiking (caminar), cooking (cocinar)", "level": "Z9", "admin": true}',
    )

    with caplog.at_level(logging.INFO):
        assert _learn(store, fake_model, learner.id)

    state = store.memory.profile(learner.id)
    assert state.data == {
        "who": "Lena",
        "level": "A2",
        "interests": ["hiking (caminar)", "cooking (cocinar)"],
    }
    assert state.watermark == ids[-1]
    lines = [r.getMessage() for r in caplog.records]
    assert f"profile answer learner={learner.id}: field level dropped: not a CEFR level" in lines
    assert f"profile answer learner={learner.id}: field admin dropped: not a profile field" in lines


def test_learn_profile_asks_with_the_profile_schema(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["soy Lena"] * 5)
    assert _learn(store, fake_model, learner.id)
    (call,) = fake_model.of("profile")
    assert call.schema == PROFILE_SCHEMA


@dataclass
class BilledModel:
    """A model whose answer comes after unusable (billed) attempts, as the OpenAI adapter
    reports them in `Completion.billed` — or an LLMError carrying them."""

    outcome: str | LLMError
    billed: tuple[Usage, ...] = ()
    calls: int = 0

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int,
        purpose: Purpose,
        schema: JsonSchema | None = None,
        accept: Accept | None = None,
    ) -> Completion:
        self.calls += 1
        if isinstance(self.outcome, LLMError):
            raise self.outcome
        return Completion(self.outcome, "answered-by", 700, 40, billed=self.billed)


def _profile_usage(store: Store, learner_id: int) -> tuple[int, int, int]:
    return store.ledger.usage(learner_id).get("profile", (0, 0, 0))


def test_every_billed_call_of_a_completion_is_recorded(store: Store) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["soy Lena"] * 5)
    earlier = (Usage("m-1", 100, 7), Usage("m-2", 200, 0))
    model = BilledModel('{"who": "Lena"}', earlier)
    assert learn_profile(learner.id, store=store, model=model, config=CONFIG)
    assert _profile_usage(store, learner.id) == (3, 1000, 47)


@pytest.mark.parametrize(
    "error",
    [
        Unusable("no text", billed=(Usage("m", 300, 5), Usage("m", 300, 6))),
        Refused("refused", "content_filter", billed=(Usage("m", 300, 5), Usage("m", 300, 6))),
        Outage("timeout", billed=(Usage("m", 300, 5), Usage("m", 300, 6))),
    ],
    ids=type,
)
def test_the_billed_calls_of_a_failed_completion_are_recorded_then_raised(
    store: Store, error: LLMError
) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["soy Lena"] * 5)
    before = store.memory.profile(learner.id)
    with pytest.raises(type(error)):
        learn_profile(learner.id, store=store, model=BilledModel(error), config=CONFIG)
    assert _profile_usage(store, learner.id) == (2, 600, 11)
    assert store.memory.profile(learner.id) == before


# -- a batch that keeps failing is not re-sent for ever ----------------------------------


def test_a_batch_that_keeps_failing_is_passed_after_three_attempts(
    store: Store, fake_model: FakeChatModel, caplog: pytest.LogCaptureFixture
) -> None:
    config = MemoryConfig(memory_model="memory-model-x", profile_every=5)
    learner = store.learners.learner(unique_user())
    fake_model.queue("profile", "Sorry, I can't.", "Sorry, I can't.", "Sorry, I can't.")
    batches = []
    for attempt in range(3):  # the profile job is due at every 5th unread message
        batches.append(_chat(store, learner.id, [f"batch {attempt} msg {n}" for n in range(5)]))
        with caplog.at_level(logging.INFO), pytest.raises(InvalidProfile):
            learn_profile(learner.id, store=store, model=fake_model, config=config)
        state = store.memory.profile(learner.id)
        if attempt < 2:
            assert (state.watermark, unread_by_profile(store, learner.id)) == (0, 5 * attempt + 5)
    # The third failure on the same messages passes them, unread, with a log line.
    assert state.watermark == batches[-1][-1]
    assert (state.data, state.messages_processed) == ({}, 0)
    assert unread_by_profile(store, learner.id) == 0
    assert (
        f"profile for learner {learner.id}: no usable answer with 15 messages unread "
        "(3 attempts' worth); passed unread"
    ) in [r.getMessage() for r in caplog.records]
    assert "batch 0" not in caplog.text

    # The next batch is a prompt of its own, not the old backlog plus it.
    ids = _chat(store, learner.id, [f"new msg {n} about chess" for n in range(5)])
    fake_model.queue("profile", '{"interests": "chess"}')
    assert learn_profile(learner.id, store=store, model=fake_model, config=config)
    last = fake_model.of("profile")[-1]
    assert "new msg 0" in last.text and "batch 2 msg 4" not in last.text
    assert store.memory.profile(learner.id).watermark == ids[-1]
    assert store.memory.profile(learner.id).data == {"interests": ["chess"]}
    assert len(fake_model.of("profile")) == 4
    assert _profile_usage(store, learner.id)[0] == 4


@pytest.mark.parametrize(
    ("error", "passed"),
    [
        (Unusable("malformed"), True),
        (Refused("refused", "content_filter"), True),
        (Outage("timeout"), False),  # the provider was down: says nothing about the messages
        (Misconfigured("401", "check the key"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_which_failures_pass_a_batch(
    store: Store, fake_model: FakeChatModel, error: LLMError, passed: bool
) -> None:
    learner = store.learners.learner(unique_user())
    ids = _chat(store, learner.id, [f"mensaje {n}" for n in range(15)])
    fake_model.queue("profile", error)
    with pytest.raises(type(error)):
        _learn(store, fake_model, learner.id)
    assert store.memory.profile(learner.id).watermark == (ids[-1] if passed else 0)


def test_a_no_change_answer_is_no_failure_and_advances(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learners.learner(unique_user())
    ids = _chat(store, learner.id, [f"mensaje {n}" for n in range(15)])
    assert _learn(store, fake_model, learner.id)  # the fake's default: {"no_change": true}
    state = store.memory.profile(learner.id)
    assert (state.watermark, state.messages_processed, state.data) == (ids[-1], 15, {})


# -- regression: "the profile is never learned" (issue 14) -------------------------------

HOBBIES = {
    "senderismo": "hiking",
    "cocinar": "cooking",
    "ajedrez": "chess",
    "fotografía": "photography",
    "escalar": "climbing",
    "novelas": "reading",
}


def _loose_profile_answer(messages: Sequence[ChatMessage]) -> str:
    """A model that answers the profile the way the format Pam's design started from has
    it: every list one comma-separated string, the level with words around it."""
    prompt = "\n".join(m["content"] for m in messages)
    # Each with the learner's own word, as profile.txt asks: a fact without it is dropped.
    found = [f"{en} ({es})" for es, en in HOBBIES.items() if es in prompt or en in prompt]
    return json.dumps(
        {
            "who": "Lena, a nurse from Bremen",
            "interests": ", ".join(found),
            "level": "B1 (intermediate)",
            "recurring_mistakes": "ser vs estar, gender of nouns in -ma",
        }
    )


def test_31_self_describing_turns_teach_the_profile_and_profile_shows_it(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    # Memory jobs inline; no rate limit, so all 31 turns reach the model.
    quick = settings.replace(limits={"rate_limit_per_minute": 0})
    pam = build(quick, model=fake_model, submit=lambda work: work(), engine=engine)
    fake_model.defaults["profile"] = _loose_profile_answer
    user = unique_user()
    hobbies = list(HOBBIES)
    lines = [
        f"Soy Lena, enfermera en Bremen. Hoy hablo de {hobbies[n % len(hobbies)]}: "
        f"me encanta, es mi mensaje número {n}."
        for n in range(31)
    ]
    for line in lines:
        assert handle(pam, user, line)

    shown = handle(pam, user, "/profile")[0]
    assert "I haven't learned anything about you yet" not in shown
    # Listed as the learner's language lists things (issue 29): "a, b, and c" in English.
    *first, last = (f"{en} ({es})" for es, en in HOBBIES.items())
    assert f"• Interests: {', '.join(first)}, and {last}" in shown
    assert "• Level (my estimate): B1" in shown
    assert "• Mistakes you often make: ser vs estar and gender of nouns in -ma" in shown
    assert "(learned from 30 of your messages, " in shown

    info = pam.store.learners.find_learner(user)
    assert info is not None
    state = pam.store.memory.profile(info.id)
    assert state.data["interests"] == [f"{en} ({es})" for es, en in HOBBIES.items()]
    # One profile call per 5 messages, each reading only its own 5: no growing backlog.
    calls = fake_model.of("profile")
    assert len(calls) == 6
    for call in calls:
        new = call.messages[1]["content"].split("<new_learner_messages>")[1]
        assert new.count("\n- ") == 5
    # The learned profile reaches the later reply prompts.
    last_reply = fake_model.of("reply")[-1]
    assert (
        '"interests": ["hiking (senderismo)", "cooking (cocinar)"'
        in last_reply.messages[0]["content"]
    )


# -- through the real openai SDK, against recorded server shapes ---------------------------

STRICT_ANSWER = json.dumps(
    {"no_change": False, **dict.fromkeys(FIELDS), "interests": ["chess"], "level": "A2"}
)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # OpenAI with structured output: every key present, null where nothing changed.
        (shapes.openai(STRICT_ANSWER), {"interests": ["chess"], "level": "A2"}),
        # Ollama without a reasoning parser: the thinking (drafting the format) stays in the
        # content, then the answer in the loose shape.
        (
            shapes.ollama(
                '<think>The format is {"interests": "..."}; she likes hiking.</think>\n'
                + json.dumps(LOOSE_ANSWER)
            ),
            {
                "who": LOOSE_ANSWER["who"],
                "interests": ["hiking", "cooking"],
                "misc": ["job interview in Madrid next month", "brother studies medicine"],
                "level": "B1",
                "recurring_mistakes": ["subjunctive after 'quiero que'"],
            },
        ),
        # llama.cpp with the reasoning in its own field, the answer fenced.
        (
            shapes.llama_cpp(
                '```json\n{"profile": {"interests": "chess and go", "level": "b1"}}\n```',
                reasoning='She plays chess. Output {"interests": ["chess"]}?',
            ),
            {"interests": ["chess", "go"], "level": "B1"},
        ),
    ],
    ids=["openai-strict", "ollama-think", "llama.cpp-wrapped"],
)
def test_a_profile_is_learned_through_the_sdk_from_recorded_answers(
    store: Store, counter: TokenCounter, body: dict[str, object], expected: dict[str, object]
) -> None:
    learner = store.learners.learner(unique_user())
    # A learner who writes the words they lack in English: every fact below is theirs.
    said = [
        "Soy software engineer y vivo con mi partner, de Valencia.",
        "Me gusta el hiking y el cooking, y el chess y el go.",
        "Tengo una job interview en Madrid next month.",
        "Mi brother studies medicine.",
        "Hasta luego.",
    ]
    ids = _chat(store, learner.id, said)
    with OpenAIServer() as server:
        server.answer_next(body)
        client = openai_client("test-key", server.base_url, timeout=10, max_retries=0)
        model = OpenAIChatModel(client, counter)
        assert learn_profile(learner.id, store=store, model=model, config=CONFIG)
        (request,) = server.of("profile")
    assert request["response_format"] == {"type": "json_schema", "json_schema": PROFILE_SCHEMA}
    state = store.memory.profile(learner.id)
    assert (state.data, state.watermark) == (expected, ids[-1])
    assert store.ledger.usage(learner.id)["profile"][0] == 1


# -- the answer budget --------------------------------------------------------------------


@dataclass
class LengthLimitedModel:
    """A model that answers with the full updated profile, as the prompt asks ("keep every
    fact"), and like a real API stops at `max_tokens` (finish_reason "length")."""

    answer: str
    counter: TokenCounter = field(default_factory=lambda: TokenCounter("gpt-4o-mini"))

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int,
        purpose: Purpose,
        schema: JsonSchema | None = None,
        accept: Accept | None = None,
    ) -> Completion:
        text = self.counter.truncate(self.answer, max_tokens)
        return Completion(text, model, 1000, self.counter.count(text))


def _large_valid_profile() -> dict[str, object]:
    """A profile inside every field cap and well inside MAX_PROFILE_CHARS, in plain English."""
    facts = [
        "visiting her sister Anna in Hamburg in May, the first visit since Anna's wedding",
        "started a new night-shift rotation at the hospital in October and sleeps badly",
        "is reading Cien años de soledad in Spanish, one chapter every weekend with tea",
        "her cat Miso was sick last week and had to stay at the vet overnight, now fine",
        "planning a surprise birthday party for her partner Tom on 12 December at home",
        "took her first salsa class on Thursday and wants to go every week from now on",
        "wants to run a half marathon next spring and trains three mornings a week",
        "her mother is learning Spanish too, so they practise together on Sunday calls",
        "bought a used bicycle to ride to work along the river Weser during the summer",
        "is nervous about a job interview for a head nurse position in January 2027",
    ]
    mistakes = [
        "ser vs estar with locations and temporary states, e.g. 'es cansada' for 'está'",
        "preterite vs imperfect for background descriptions when telling past stories",
        "gender of nouns ending in -ma such as el problema, el tema and el sistema",
        "forgets the personal a before people as direct objects ('veo mi hermana')",
        "indicative instead of subjunctive after espero que, quiero que and ojalá",
        "por vs para when talking about purpose, deadlines, exchanges and durations",
        "false friends such as embarazada, éxito, constipado and carpeta in messages",
        "missing accent marks on question words like qué, cómo, cuándo and dónde",
        "avoids double negatives, writing 'no tengo algo' instead of 'no tengo nada'",
        "adjective agreement in plural with mixed-gender groups ('mis amigas son altos')",
    ]
    return {
        "who": "Lena, 34, nurse at the university hospital in Bremen; lives with her partner "
        "Tom and two cats, Miso and Tofu, in a flat near the Weser; grew up in Leipzig and moved "
        "north for work eight years ago; has a younger sister, Anna, who lives in Hamburg.",
        "style": "Casual and playful, likes jokes and emoji, prefers short messages in the "
        "evening and longer ones at weekends; sometimes switches to German when tired; enjoys "
        "being asked follow-up questions and hearing about Pam's own (invented) day.",
        "focus": "Past tenses and ser/estar, for a three-week trip to Chile and Argentina in "
        "March; wants to talk with patients from Latin America at the hospital and to pass "
        "the DELE B2 exam next year; asks for corrections of every mistake, even small ones.",
        "interests": [
            "chess",
            "hiking in the Harz",
            "cooking Korean food",
            "bouldering",
            "indie podcasts",
            "photography",
        ],
        "misc": facts,
        "native_language": "German",
        "target_language": "Spanish",
        "level": "B1",
        "recurring_mistakes": mistakes,
    }


def test_a_profile_near_the_size_cap_can_still_be_updated(
    store: Store, fake_model: FakeChatModel
) -> None:
    """BUG: PROFILE_MAX_TOKENS (600) is smaller than a profile the validator accepts (up to
    MAX_PROFILE_CHARS = 4000 characters, ~1,000 tokens). The prompt asks the model to keep every
    fact, so its answer repeats the whole profile; once that is over 600 tokens the answer is
    cut off, never parses, and the profile can never be updated again."""
    learner = store.learners.learner(unique_user())
    big = _large_valid_profile()
    fake_model.queue("profile", json.dumps(big, ensure_ascii=False))
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    assert _learn(store, fake_model, learner.id)  # valid: stored
    stored = json.dumps(store.memory.profile(learner.id).data, ensure_ascii=False)
    assert len(stored) < MAX_PROFILE_CHARS * 0.8  # comfortably inside the cap

    ids = _chat(store, learner.id, ["Ahora también juego al pádel"] * 5)
    interests = big["interests"]
    assert isinstance(interests, list)
    updated = {**big, "interests": [*interests, "padel"]}
    model = LengthLimitedModel(json.dumps(updated, ensure_ascii=False, indent=2))

    assert learn_profile(learner.id, store=store, model=model, config=CONFIG)
    state = store.memory.profile(learner.id)
    assert "padel" in state.data["interests"]
    assert state.watermark == ids[-1]


# -- recurring mistakes come from the patterns ----------------------------------------------


def _mistake(store: Store, learner_id: int, rule: str, original: str, corrected: str) -> None:
    """One learner message with one correction of pattern `rule`, graded by review."""
    message = store.conversation.add_message(learner_id, LEARNER, f"... {original} ...", 5)
    correction = CorrectionRecord(original, corrected, "why", "grammar", rule)
    store.reviews.record_turn(learner_id, message.id, [correction])


def test_recurring_mistakes_lead_with_the_patterns_most_frequent_first(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learners.learner(unique_user())
    for _ in range(3):
        _mistake(store, learner.id, "ser → estar for location", "soy en casa", "estoy en casa")
    _mistake(store, learner.id, "bueno → buen before a masculine noun", "bueno día", "buen día")
    _chat(store, learner.id, ["hoy trabajé mucho en el hospital"] * 5)
    # The model guesses one pattern in its own words and one Pam has no pattern for.
    fake_model.queue(
        "profile",
        '{"who": "Lena", "recurring_mistakes": ["ser → estar for location", "accents"]}',
    )

    assert _learn(store, fake_model, learner.id)

    assert store.memory.profile(learner.id).data["recurring_mistakes"] == [
        "ser → estar for location",
        "bueno → buen before a masculine noun",
        "accents",
    ]


def test_a_no_change_answer_still_brings_the_patterns_up_to_date(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learners.learner(unique_user())
    _mistake(store, learner.id, "ser → estar for location", "soy en casa", "estoy en casa")
    _chat(store, learner.id, ["soy Lena, hoy trabajé mucho en el hospital"] * 5)
    fake_model.queue("profile", '{"who": "Lena", "recurring_mistakes": ["accents"]}')
    assert _learn(store, fake_model, learner.id)
    for _ in range(2):
        _mistake(store, learner.id, "bueno → buen before a masculine noun", "bueno día", "buen día")
    _chat(store, learner.id, ["mañana voy al cine con mi hermana"] * 5)
    fake_model.queue("profile", '{"no_change": true}')

    assert _learn(store, fake_model, learner.id)

    assert store.memory.profile(learner.id).data == {
        "who": "Lena",
        "recurring_mistakes": [
            "bueno → buen before a masculine noun",
            "ser → estar for location",
            "accents",
        ],
    }


def test_without_patterns_the_models_guess_stands(store: Store, fake_model: FakeChatModel) -> None:
    learner = store.learners.learner(unique_user())
    _chat(store, learner.id, ["hoy trabajé mucho en el hospital"] * 5)
    fake_model.queue("profile", '{"recurring_mistakes": ["accents"]}')

    assert _learn(store, fake_model, learner.id)

    assert store.memory.profile(learner.id).data == {"recurring_mistakes": ["accents"]}
