"""Property tests of the fold invariant: folding never loses, repeats or reorders a message, the
window always holds the newest messages, and folds come in batches — for any learner, at most
one summary rewrite every three turns at the default settings."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memory.config import MemoryConfig
from memory.database import db
from memory.database.records import LEARNER, PAM, StoredMessage
from memory.jobs import summary as summary_module
from memory.jobs.summary import fold, fold_due, plan_fold
from memory.llm import ChatMessage, LLMError
from memory.store.message_store import Store
from memory.tokens import TokenCounter
from tests.conftest import sqlite_url, unique_user
from tests.fakes import FakeChatModel, failing

WINDOW = 10
CONFIG = MemoryConfig(window_messages=WINDOW, summary_trigger_tokens=400, summary_max_tokens=60)
BATCHES = st.integers(1, 8)
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

    def __init__(self, store: Store, batch: int) -> None:
        self.store = store
        self.config = CONFIG.model_copy(update={"fold_batch_messages": batch})
        self.learner = store.learners.learner(unique_user("prop")).id
        self.sent = 0
        self.mark_to_id: dict[int, int] = {}
        self.folded_marks: list[int] = []  # every landed fold's messages, in fold order
        self.watermark = 0
        self.landed = 0
        # Messages said since the last landed fold that left nothing beyond the window (None:
        # no such fold yet): the next fold needs a whole batch of them.
        self.since_clean_fold: int | None = None

    def say(self, role: str, tokens: int) -> None:
        mark = self.sent
        self.sent += 1
        if self.since_clean_fold is not None:
            self.since_clean_fold += 1
        message = self.store.conversation.add_message(
            self.learner, role, f"m{mark:04d} {'bla ' * 3}", tokens
        )
        self.mark_to_id[mark] = message.id

    def fold(self, model: FakeChatModel) -> bool:
        return fold(
            self.learner, store=self.store, model=model, counter=COUNTER, config=self.config
        )

    def due(self) -> bool:
        return fold_due(*self.store.conversation.unfolded_tokens(self.learner), self.config)

    def landed_fold(self, marks: list[int]) -> None:
        """Account for a fold that landed with the messages `marks`, checking the batch rule."""
        unfolded = self.store.conversation.messages(self.learner, after=self.watermark)
        beyond = unfolded[: len(unfolded) - WINDOW]
        assert len(beyond) >= self.config.fold_batch_messages, "a fold takes a whole batch"
        if self.since_clean_fold is not None:
            assert self.since_clean_fold >= self.config.fold_batch_messages
        taken = [m for m in beyond if int(MARK.findall(m.content)[0]) in marks]
        assert taken == beyond[: len(marks)], "the oldest messages, in order"
        # All of it beyond the window, unless the next one would pass the chunk budget.
        clean = len(taken) == len(beyond)
        if not clean:
            budget = CHUNK_TOKENS - sum(m.tokens for m in taken)
            assert beyond[len(taken)].tokens > budget
        self.since_clean_fold = 0 if clean else None
        self.landed += 1
        self.folded_marks += marks

    def run(self, op: Op) -> None:
        before = self.store.memory.summary(self.learner)
        due = self.due()
        model = FakeChatModel()
        if op[0] == "say":
            _, role, tokens = op  # type: ignore[misc]
            self.say(role, tokens)
        elif op[0] == "fold":
            model.queue("summary", f"summary after {self.sent} messages")
            if due:
                assert self.fold(model)
                self.landed_fold(_marks(model.calls[-1].text))
            else:
                assert not self.fold(model)
                assert model.calls == []
        elif op[0] == "fold_fails":
            model.queue("summary", failing())
            if due:
                with pytest.raises(LLMError):
                    self.fold(model)
            else:
                assert not self.fold(model)
            assert self.store.memory.summary(self.learner) == before
        elif op[0] == "fold_loses_race":
            rival = FakeChatModel()

            def rival_folds_first(messages: Sequence[ChatMessage]) -> str:
                # Another runner (e.g. after a lease takeover) folds while this one waits.
                assert self.fold(rival)
                self.landed_fold(_marks(rival.calls[-1].text))
                return "the slow fold's summary"

            model.queue("summary", rival_folds_first)
            assert not self.fold(model)
            assert len(model.calls) == (1 if due else 0)
            assert self.store.memory.summary(self.learner).text != "the slow fold's summary"
        self.check()

    def check(self) -> None:
        messages = self.store.conversation.messages(self.learner)
        ids = [m.id for m in messages]
        assert ids == sorted(set(ids)), "order kept, no duplicates"
        assert ids == [self.mark_to_id[n] for n in range(self.sent)], "every message stored"

        state = self.store.memory.summary(self.learner)
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
        assert self.store.conversation.context(self.learner).messages == unfolded
        assert self.store.conversation.unfolded_tokens(self.learner) == (
            len(unfolded),
            sum(m.tokens for m in unfolded),
        )


def _fold_invariant_holds(store: Store, ops: list[Op], batch: int) -> None:
    conversation = Conversation(store, batch)
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
@given(ops=OPS, batch=BATCHES)
def test_folding_keeps_every_message_exactly_once(
    sqlite_store: Store, ops: list[Op], batch: int
) -> None:
    _fold_invariant_holds(sqlite_store, ops, batch)


@settings(max_examples=15, deadline=None, suppress_health_check=SHARED_DB)
@given(ops=OPS, batch=BATCHES)
def test_folding_keeps_every_message_exactly_once_on_postgres(
    postgres_store: Store, ops: list[Op], batch: int
) -> None:
    _fold_invariant_holds(postgres_store, ops, batch)


# Any learner: each turn a learner message of any length and a reply of any length.
TURNS = st.lists(st.tuples(st.integers(1, 1000), st.integers(1, 300)), min_size=1, max_size=120)


@settings(max_examples=200, deadline=None)
@given(turns=TURNS)
def test_for_any_learner_the_summary_is_rewritten_at_most_once_every_three_turns(
    turns: list[tuple[int, int]],
) -> None:
    config = MemoryConfig()  # the defaults, whatever they are
    unfolded: list[StoredMessage] = []
    folded: list[StoredMessage] = []
    said: list[StoredMessage] = []
    folds = 0
    for learner_tokens, reply_tokens in turns:
        for role, tokens in ((LEARNER, learner_tokens), (PAM, reply_tokens)):
            said.append(StoredMessage(len(said) + 1, role, f"m{len(said):04d}", tokens))
            unfolded.append(said[-1])
        # As the tutor does: after the turn, a fold if one is due, landing before the next.
        plan = plan_fold(unfolded, config)
        if plan is not None:
            folds += 1
            assert plan.messages == unfolded[: len(plan.messages)]
            folded += plan.messages
            unfolded = unfolded[len(plan.messages) :]
        assert folded + unfolded == said, "every message folded or in the prompt, once, in order"
        assert unfolded[-config.window_messages :] == said[-config.window_messages :]
    event(f"folds: {folds}")
    assert 3 * folds <= len(turns)
