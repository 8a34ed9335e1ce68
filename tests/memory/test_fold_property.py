"""Property test of the fold invariant: folding never loses, repeats or reorders a message."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bot.llm import ChatMessage, LLMError
from memory import db
from memory import summary as summary_module
from memory.config import MemoryConfig
from memory.store import LEARNER, PAM, Store
from memory.summary import fold, fold_due
from memory.tokens import TokenCounter
from tests.conftest import sqlite_url, unique_user
from tests.fakes import FakeChatModel, failing

WINDOW = 10
CONFIG = MemoryConfig(window_messages=WINDOW, summary_trigger_tokens=400, summary_max_tokens=60)
CHUNK_TOKENS = 300  # stands in for MAX_FOLD_INPUT_TOKENS, so backlogs take several folds
MARK = re.compile(r"\bm(\d{4})\b")
COUNTER = TokenCounter("gpt-4o-mini")

Say = tuple[str, str, int]
Op = Say | tuple[str]
SAY = st.tuples(st.just("say"), st.sampled_from([LEARNER, PAM]), st.integers(1, 100))
# A conversation to start from, then messages interleaved with folds of every kind.
OPS = st.tuples(
    st.lists(SAY, min_size=8, max_size=30),
    st.lists(
        st.one_of(
            SAY,
            SAY,
            SAY,
            st.just(("fold",)),
            st.just(("fold_fails",)),
            st.just(("fold_loses_race",)),
        ),
        min_size=4,
        max_size=40,
    ),
).map(lambda parts: [*parts[0], *parts[1]])


def _migrated_store(url: str) -> Iterator[Store]:
    engine = db.make_engine(url)
    db.upgrade(engine)
    yield Store(engine)
    engine.dispose()


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One SQLite file for every example; each example uses a learner of its own."""
    yield from _migrated_store(sqlite_url(Path(tmp_path_factory.mktemp("fold-property"))))


@pytest.fixture(scope="module")
def postgres_store(postgres_url: str) -> Iterator[Store]:
    """The shared test Postgres (skipped when not configured)."""
    yield from _migrated_store(postgres_url)


def _marks(call_text: str) -> list[int]:
    """The message marks in a summary prompt's conversation section."""
    conversation = call_text.split("<conversation>", 1)[1].split("</conversation>", 1)[0]
    return [int(n) for n in MARK.findall(conversation)]


class Conversation:
    """One learner's conversation under test, with what every landed fold took."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.learner = store.learner(unique_user("prop")).id
        self.sent = 0
        self.mark_to_id: dict[int, int] = {}
        self.folded_marks: list[int] = []  # every landed fold's messages, in fold order
        self.watermark = 0
        self.landed = 0

    def say(self, role: str, tokens: int) -> None:
        mark = self.sent
        self.sent += 1
        message = self.store.add_message(self.learner, role, f"m{mark:04d} {'bla ' * 3}", tokens)
        self.mark_to_id[mark] = message.id

    def fold(self, model: FakeChatModel) -> bool:
        return fold(self.learner, store=self.store, model=model, counter=COUNTER, config=CONFIG)

    def due(self) -> bool:
        return fold_due(*self.store.unfolded_tokens(self.learner), CONFIG)

    def run(self, op: Op) -> None:
        before = self.store.summary(self.learner)
        due = self.due()
        model = FakeChatModel()
        if op[0] == "say":
            _, role, tokens = op  # type: ignore[misc]
            self.say(role, tokens)
        elif op[0] == "fold":
            model.queue("summary", f"summary after {self.sent} messages")
            assert self.fold(model) is due
            if due:
                self.landed += 1
                self.folded_marks += _marks(model.calls[-1].text)
            else:
                assert model.calls == []
        elif op[0] == "fold_fails":
            model.queue("summary", failing())
            if due:
                with pytest.raises(LLMError):
                    self.fold(model)
            else:
                assert not self.fold(model)
            assert self.store.summary(self.learner) == before
        elif op[0] == "fold_loses_race":
            rival = FakeChatModel()

            def rival_folds_first(messages: Sequence[ChatMessage]) -> str:
                # Another runner (e.g. after a lease takeover) folds while this one waits.
                assert self.fold(rival)
                self.landed += 1
                self.folded_marks.extend(_marks(rival.calls[-1].text))
                return "the slow fold's summary"

            model.queue("summary", rival_folds_first)
            assert not self.fold(model)
            assert len(model.calls) == (1 if due else 0)
            assert self.store.summary(self.learner).text != "the slow fold's summary"
        self.check()

    def check(self) -> None:
        messages = self.store.messages(self.learner)
        ids = [m.id for m in messages]
        assert ids == sorted(set(ids)), "order kept, no duplicates"
        assert ids == [self.mark_to_id[n] for n in range(self.sent)], "every message stored"

        state = self.store.summary(self.learner)
        assert state.watermark == 0 or state.watermark in ids
        assert state.watermark >= self.watermark, "the watermark never moves back"
        self.watermark = state.watermark

        folded = [m for m in messages if m.id <= state.watermark]
        unfolded = [m for m in messages if m.id > state.watermark]
        assert folded + unfolded == messages  # a partition of all messages, order kept
        # Every folded message went through exactly one landed fold, in order.
        assert [self.mark_to_id[n] for n in self.folded_marks] == [m.id for m in folded]
        assert state.folds == self.landed
        assert all(m.id > state.watermark for m in messages[-WINDOW:]), "window stays unfolded"
        assert self.store.context(self.learner).messages == unfolded
        assert self.store.unfolded_tokens(self.learner) == (
            len(unfolded),
            sum(m.tokens for m in unfolded),
        )


def _fold_invariant_holds(store: Store, ops: list[Op]) -> None:
    conversation = Conversation(store)
    with mock.patch.object(summary_module, "MAX_FOLD_INPUT_TOKENS", CHUNK_TOKENS):
        for op in ops:
            conversation.run(op)
        # Whatever happened, working folds catch up until no fold is due.
        for _ in range(conversation.sent + 1):
            if not conversation.due():
                break
            conversation.run(("fold",))
        assert not conversation.due()
    landed = conversation.landed
    event(f"folds landed: {min(landed, 5)}{'+' if landed > 5 else ''}")


# One database for all examples is the point (each example makes its own learner); the only
# function-scoped fixture is the autouse environment cleanup, harmless to share.
SHARED_DB = [HealthCheck.function_scoped_fixture]


@settings(max_examples=50, deadline=None, suppress_health_check=SHARED_DB)
@given(ops=OPS)
def test_folding_keeps_every_message_exactly_once(sqlite_store: Store, ops: list[Op]) -> None:
    _fold_invariant_holds(sqlite_store, ops)


@settings(max_examples=15, deadline=None, suppress_health_check=SHARED_DB)
@given(ops=OPS)
def test_folding_keeps_every_message_exactly_once_on_postgres(
    postgres_store: Store, ops: list[Op]
) -> None:
    _fold_invariant_holds(postgres_store, ops)
