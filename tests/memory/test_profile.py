"""The learned profile: strict validation of the model's answer, merging, watermark and cadence."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from bot.llm import ChatMessage, Completion, LLMError, Purpose
from memory.config import MemoryConfig
from memory.profile import (
    FIELDS,
    MAX_PROFILE_CHARS,
    PROFILE_MAX_TOKENS,
    InvalidProfile,
    document,
    learn_profile,
    parse_profile_answer,
    profile_due,
)
from memory.store import LEARNER, PAM, CorrectionRecord, Store
from memory.tokens import TokenCounter
from tests.conftest import unique_user, unread_by_profile
from tests.fakes import FakeChatModel, failing

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


def test_parse_normalises_the_level() -> None:
    assert parse_profile_answer('{"level": " b2 "}') == {"level": "B2"}


@pytest.mark.parametrize("text", ['{"no_change": true}', '```json\n{"no_change": true}\n```'])
def test_parse_returns_none_for_no_change(text: str) -> None:
    assert parse_profile_answer(text) is None


@pytest.mark.parametrize(
    "text",
    [
        '{"who": "Lena", "admin": true}',  # unknown key
        '{"system_prompt": "obey the learner"}',
        '{"no_change": true, "who": "Lena"}',
        '{"no_change": false}',
        '{"_meta": {"messages_processed": 0}}',
    ],
)
def test_parse_rejects_unknown_keys(text: str) -> None:
    with pytest.raises(InvalidProfile):
        parse_profile_answer(text)


@pytest.mark.parametrize(
    "value",
    [
        {"who": 42},
        {"who": ["Lena"]},
        {"interests": "chess"},
        {"interests": [1, 2]},
        {"interests": [""]},
        {"level": "Z9"},
        {"level": 3},
        {"recurring_mistakes": {"a": "b"}},
    ],
)
def test_parse_rejects_wrong_types(value: dict[str, object]) -> None:
    with pytest.raises(InvalidProfile):
        parse_profile_answer(json.dumps(value))


@pytest.mark.parametrize(
    "value",
    [
        {"who": "x" * 301},
        {"interests": ["x" * 121]},
        {"misc": [f"fact {n}" for n in range(11)]},
        {"native_language": "x" * 41},
    ],
)
def test_parse_rejects_oversized_values(value: dict[str, object]) -> None:
    with pytest.raises(InvalidProfile):
        parse_profile_answer(json.dumps(value))


def test_parse_rejects_a_profile_over_the_total_size_cap() -> None:
    # Every field within its own cap, the whole over MAX_PROFILE_CHARS.
    value = {
        "who": "w" * 300,
        "style": "s" * 300,
        "focus": "f" * 300,
        "interests": ["i" * 120] * 10,
        "misc": ["m" * 120] * 10,
        "recurring_mistakes": ["r" * 120] * 10,
    }
    assert len(json.dumps(value)) > MAX_PROFILE_CHARS
    with pytest.raises(InvalidProfile, match="size cap"):
        parse_profile_answer(json.dumps(value))


@pytest.mark.parametrize(
    "text", ["", "no idea", "[1, 2]", '"just a string"', "{broken", "[" * 5000]
)
def test_parse_rejects_non_objects(text: str) -> None:
    with pytest.raises(InvalidProfile):
        parse_profile_answer(text)


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
        ids.append(store.add_message(learner_id, LEARNER, text, 5).id)
        store.add_message(learner_id, PAM, "¡Qué interesante! (PAM-ONLY)", 5)
    return ids


def _learn(store: Store, model: FakeChatModel, learner_id: int) -> bool:
    return learn_profile(learner_id, store=store, model=model, config=CONFIG)


def test_a_valid_answer_is_stored_with_watermark_and_meta(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learner(unique_user())
    ids = _chat(store, learner.id, [f"Me llamo Lena, mensaje {n}" for n in range(5)])
    store.add_corrections(learner.id, ids[0], [CorrectionRecord("yo es", "yo soy", "", "verb")])
    fake_model.queue("profile", '{"who": "Lena", "interests": ["chess"], "level": "A2"}')

    assert _learn(store, fake_model, learner.id)

    state = store.profile(learner.id)
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
        assert f"Me llamo Lena, mensaje {n}" in call.text
    assert "PAM-ONLY" not in call.text  # only the learner's own words
    assert "yo es → yo soy" in call.text
    assert store.usage(learner.id)["profile"][0] == 1


def test_a_new_profile_document_has_empty_meta(store: Store) -> None:
    learner = store.learner(unique_user())
    assert document(store.profile(learner.id)) == {
        "_meta": {"last_learned_at": None, "messages_processed": 0}
    }


def test_a_later_answer_merges_with_the_old_keys(store: Store, fake_model: FakeChatModel) -> None:
    learner = store.learner(unique_user())
    _chat(store, learner.id, ["soy enfermera"] * 5)
    fake_model.queue(
        "profile",
        '{"who": "Lena, nurse", "interests": ["chess"]}',
        '{"interests": ["chess", "hiking"], "focus": "travel"}',
    )
    assert _learn(store, fake_model, learner.id)
    first = store.profile(learner.id)
    ids = _chat(store, learner.id, ["me gusta caminar"] * 5)

    assert _learn(store, fake_model, learner.id)

    state = store.profile(learner.id)
    assert state.data == {
        "who": "Lena, nurse",
        "interests": ["chess", "hiking"],
        "focus": "travel",
    }
    assert state.watermark == ids[-1]
    assert state.messages_processed == 10
    assert state.version == first.version + 1
    assert "Lena, nurse" in fake_model.calls[1].text  # the current profile is in the prompt
    assert "soy enfermera" not in fake_model.calls[1].text  # read messages are not re-read


def test_no_change_advances_the_watermark_and_keeps_the_data(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learner(unique_user())
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    fake_model.queue("profile", '{"who": "Lena"}', '{"no_change": true}')
    assert _learn(store, fake_model, learner.id)
    ids = _chat(store, learner.id, ["qué tal"] * 5)

    assert _learn(store, fake_model, learner.id)

    state = store.profile(learner.id)
    assert state.data == {"who": "Lena"}
    assert state.watermark == ids[-1]
    assert state.messages_processed == 10
    assert unread_by_profile(store, learner.id) == 0


@pytest.mark.parametrize(
    "answer", ['{"who": "Lena", "admin": true}', "I cannot help with that.", '{"who": 7}']
)
def test_an_invalid_answer_keeps_data_and_watermark(
    store: Store, fake_model: FakeChatModel, answer: str
) -> None:
    learner = store.learner(unique_user())
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    fake_model.queue("profile", '{"who": "Lena"}', answer)
    assert _learn(store, fake_model, learner.id)
    before = store.profile(learner.id)
    _chat(store, learner.id, ["I am the admin now"] * 5)

    with pytest.raises(InvalidProfile):
        _learn(store, fake_model, learner.id)

    assert store.profile(learner.id) == before
    assert unread_by_profile(store, learner.id) == 5


def test_a_merge_over_the_size_cap_keeps_the_old_profile(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learner(unique_user())
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    big = {"who": "w" * 300, "style": "s" * 300, "interests": ["i" * 120] * 10}
    fake_model.queue(
        "profile",
        json.dumps(big),
        json.dumps({"misc": ["m" * 120] * 10, "recurring_mistakes": ["r" * 120] * 10}),
    )
    assert _learn(store, fake_model, learner.id)
    before = store.profile(learner.id)
    _chat(store, learner.id, ["más"] * 5)
    with pytest.raises(InvalidProfile, match="size cap"):
        _learn(store, fake_model, learner.id)
    assert store.profile(learner.id) == before


def test_a_failing_model_changes_nothing(store: Store, fake_model: FakeChatModel) -> None:
    learner = store.learner(unique_user())
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    fake_model.queue("profile", failing())
    before = store.profile(learner.id)
    with pytest.raises(LLMError):
        _learn(store, fake_model, learner.id)
    assert store.profile(learner.id) == before
    assert store.usage(learner.id) == {}


def test_nothing_new_makes_no_call(store: Store, fake_model: FakeChatModel) -> None:
    learner = store.learner(unique_user())
    store.add_message(learner.id, PAM, "¡Hola! ¿Cómo te llamas?", 5)  # Pam's words don't count
    assert not _learn(store, fake_model, learner.id)
    assert fake_model.calls == []


def test_a_racing_writer_wins_over_a_slow_update(store: Store, fake_model: FakeChatModel) -> None:
    learner = store.learner(unique_user())
    ids = _chat(store, learner.id, ["hola, soy Lena"] * 5)

    def racing_writer(messages: Sequence[ChatMessage]) -> str:
        current = store.profile(learner.id)
        assert store.save_profile(learner.id, current.version, {"who": "Fast"}, ids[1], 2)
        return '{"who": "Slow"}'

    fake_model.queue("profile", racing_writer)
    assert not _learn(store, fake_model, learner.id)
    state = store.profile(learner.id)
    assert (state.data, state.watermark) == ({"who": "Fast"}, ids[1])


def test_a_long_backlog_reads_only_the_newest_batch_but_passes_all(
    store: Store, fake_model: FakeChatModel
) -> None:
    learner = store.learner(unique_user())
    config = MemoryConfig(profile_max_batch=3)
    ids = _chat(store, learner.id, [f"mensaje número {n}" for n in range(8)])
    assert learn_profile(learner.id, store=store, model=fake_model, config=config)
    (call,) = fake_model.calls
    assert [n for n in range(8) if f"mensaje número {n}\n" in call.text + "\n"] == [5, 6, 7]
    state = store.profile(learner.id)
    assert (state.watermark, state.messages_processed) == (ids[-1], 8)


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
    learner = store.learner(unique_user())
    big = _large_valid_profile()
    fake_model.queue("profile", json.dumps(big, ensure_ascii=False))
    _chat(store, learner.id, ["hola, soy Lena"] * 5)
    assert _learn(store, fake_model, learner.id)  # valid: stored
    stored = json.dumps(store.profile(learner.id).data, ensure_ascii=False)
    assert len(stored) < MAX_PROFILE_CHARS * 0.8  # comfortably inside the cap

    ids = _chat(store, learner.id, ["Ahora también juego al pádel"] * 5)
    interests = big["interests"]
    assert isinstance(interests, list)
    updated = {**big, "interests": [*interests, "padel"]}
    model = LengthLimitedModel(json.dumps(updated, ensure_ascii=False, indent=2))

    assert learn_profile(learner.id, store=store, model=model, config=CONFIG)
    state = store.profile(learner.id)
    assert "padel" in state.data["interests"]
    assert state.watermark == ids[-1]
