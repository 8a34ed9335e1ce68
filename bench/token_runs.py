"""Running the scripted conversations: through Pam's real code (SQLite file, Store, Tutor, fold
and profile jobs run inline), and as the two baselines — full replay of the whole history and a
window of the last 20 messages — built with the same reply prompt and the same token counter."""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.conversations import LOW_INFO_CHAT, Learner, learner_messages
from bench.token_model import Call, ScriptedModel
from bot.settings import LimitSettings, LLMSettings
from bot.turn.prompt import reply_prompt
from bot.turn.values import TurnRequest
from bot.worker.runtime import Pam
from memory.clock import Clock, ManualClock
from memory.config import MemoryConfig
from memory.database import db
from memory.database.records import (
    NORMAL,
    Context,
    LearnerInfo,
    ProfileState,
    StoredMessage,
    SummaryState,
)
from memory.jobs.profile import PROFILE_MAX_TOKENS
from memory.jobs.summary import SUMMARY_ROOM
from memory.llm import ChatMessage
from memory.tokens import TokenCounter
from webhooks.settings import Settings
from webhooks.wiring import build

REPLY_MODEL = "gpt-4o"
MEMORY_MODEL = "gpt-4o-mini"
BASELINE_WINDOW = 20
# The scripted learners write 20 messages a day, as the month's cost assumes, on a clock of
# the benchmark's own: review items fall due by it, and the run is the same on any day.
START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
BETWEEN_MESSAGES = timedelta(days=1) / 20

Progress = Callable[[str], None]


@dataclass
class Series:
    """One strategy's cost for one learner, turn by turn (index 0 is turn 1)."""

    prompts: list[int] = field(default_factory=list)  # input tokens of the reply call
    tokens: list[int] = field(default_factory=list)  # every call of the turn, input + output
    calls: list[int] = field(default_factory=list)  # LLM calls made on the turn
    outputs: list[int] = field(default_factory=list)  # output tokens of the reply call
    messages: list[list[ChatMessage]] = field(default_factory=list)  # each reply prompt
    folds: list[int] = field(default_factory=list)  # summary calls made on the turn
    memory_inputs: list[int] = field(default_factory=list)  # summary and profile input tokens
    memory_outputs: list[int] = field(default_factory=list)  # and their output tokens
    stored: list[int] = field(default_factory=list)  # corrections the turn stored
    shown: list[int] = field(default_factory=list)  # correction lines its reply showed
    buttons: list[int] = field(default_factory=list)  # buttons under its reply

    def head(self, turns: int) -> Series:
        """The first `turns` turns of this series."""
        return Series(**{f.name: getattr(self, f.name)[:turns] for f in fields(self)})


@dataclass
class PamRun:
    """Everything one run of Pam over the scripted learners produced."""

    memory: MemoryConfig
    calls: list[Call]
    series: dict[str, Series]  # by learner's target language
    conversations: dict[str, list[StoredMessage]]
    learners: dict[str, LearnerInfo]
    density: str = NORMAL  # every learner's /corrections
    # Every button's label and command under a reply, to look for in the prompts.
    button_texts: frozenset[str] = frozenset()
    # The calls a Translate and an Explain tap made after the run, per learner (`taps`).
    taps: dict[str, list[Call]] = field(default_factory=dict)


def bench_settings(database_url: str, memory: MemoryConfig) -> Settings:
    """Settings for a benchmark run: the memory knobs given, no rate or budget limits (they
    would answer without calling the model), every value passed so the environment counts not."""
    return Settings(
        database_url=database_url,
        llm=LLMSettings(api_key="bench-offline", model=REPLY_MODEL),
        memory=memory.model_copy(update={"memory_model": MEMORY_MODEL}),
        limits=LimitSettings(rate_limit_per_minute=0, learner_daily_tokens=0, daily_tokens=0),
    )


@contextmanager
def temporary_pam(
    memory: MemoryConfig, model: ScriptedModel, clock: Clock | None = None
) -> Iterator[Pam]:
    """Pam on a fresh SQLite file with `memory` and `model`, memory jobs inline, time by
    `clock` (a benchmark clock at START by default); the file is removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="pam-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        engine = db.make_engine(url)
        db.upgrade(engine)
        pam = build(
            bench_settings(url, memory),
            model=model,
            submit=lambda w: w(),
            engine=engine,
            clock=clock or ManualClock(START),
        )
        try:
            yield pam
        finally:
            pam.close(0)


def run_pam(
    learners: Sequence[Learner],
    turns: int,
    memory: MemoryConfig,
    progress: Progress | None = None,
    every: int = 50,
    *,
    density: str = NORMAL,
    taps: bool = False,
) -> PamRun:
    """Pam answering `turns` messages of each learner (taking turns), with memory jobs running
    inline as soon as a turn triggers them; every learner at correction `density`. With
    `taps`, each learner then taps Translate and Explain under their last corrected reply."""
    counter = TokenCounter(REPLY_MODEL)
    model = ScriptedModel(counter, learners)
    scripts = {learner.target: learner_messages(learner, turns) for learner in learners}
    series = {learner.target: Series() for learner in learners}
    clock = ManualClock(START)
    button_texts: set[str] = set()
    corrected: dict[str, int] = {}  # each learner's last corrected message
    with temporary_pam(memory, model, clock) as pam:
        turns_of = pam.local_turns()
        for learner in learners:
            say = f"/language {learner.target} {learner.native}"
            turns_of.take(TurnRequest(learner.external_id, say))
            turns_of.take(TurnRequest(learner.external_id, f"/level {learner.level}"))
            if density != NORMAL:
                turns_of.take(TurnRequest(learner.external_id, f"/corrections {density}"))
        for turn in range(turns):
            clock.advance(BETWEEN_MESSAGES)
            for learner in learners:
                first = len(model.calls)
                said = scripts[learner.target][turn]
                done = turns_of.take(TurnRequest(learner.external_id, said, learner.name))
                made = model.calls[first:]
                reply = made[0]
                assert reply.purpose == "reply", "every turn starts with its reply call"
                s = series[learner.target]
                s.prompts.append(reply.input_tokens)
                s.tokens.append(sum(c.tokens for c in made))
                s.calls.append(len(made))
                s.outputs.append(reply.output_tokens)
                s.messages.append(reply.messages)
                s.folds.append(sum(c.purpose == "summary" for c in made))
                s.memory_inputs.append(sum(c.input_tokens for c in made[1:]))
                s.memory_outputs.append(sum(c.output_tokens for c in made[1:]))
                stored = done.reply.corrections if done.reply else ()
                s.stored.append(len(stored))
                s.shown.append(done.replies[0].count("\n✏️ ") if done.replies else 0)
                s.buttons.append(len(done.buttons))
                button_texts.update(t for b in done.buttons for t in (b.label, b.command))
                if stored and done.reply:
                    corrected[learner.target] = done.reply.reply_to
            if progress and ((turn + 1) % every == 0 or turn + 1 == turns):
                progress(
                    f"pam trigger={memory.summary_trigger_tokens} cap="
                    f"{memory.summary_max_tokens}: turn {turn + 1}/{turns}"
                )
        conversations, infos = {}, {}
        for learner in learners:
            info = pam.store.learners.learner(learner.external_id)
            infos[learner.target] = info
            conversations[learner.target] = pam.store.conversation.messages(info.id)
        tapped: dict[str, list[Call]] = {}
        for learner in learners if taps else ():
            first = len(model.calls)
            for command in ("/translate", f"/explain {corrected.get(learner.target, '')}"):
                turns_of.take(TurnRequest(learner.external_id, command.strip()))
            tapped[learner.target] = model.calls[first:]
    return PamRun(
        memory,
        model.calls,
        series,
        conversations,
        infos,
        density,
        frozenset(button_texts),
        tapped,
    )


def baseline(run: PamRun, target: str, window: int | None) -> Series:
    """The reply prompts of a tutor that keeps no memory but the conversation itself: the same
    system prompt (no profile, no summary) and every message (`window` None) or the last
    `window` ones. Replies are the same as Pam's, so each turn's output is Pam's reply output."""
    info = run.learners[target]
    conversation = run.conversations[target]
    # Full replay counts every message again on every turn: count each text once.
    count = functools.cache(TokenCounter(REPLY_MODEL).count_message)
    no_profile = ProfileState({}, 0, 0, 0, None)
    no_summary = SummaryState("", 0, 0, 0, 0, None)
    cap = run.memory.summary_max_tokens * 8
    pam = run.series[target]
    out = Series()
    for turn in range(len(pam.prompts)):
        upto = 2 * turn + 1  # learner, Pam, learner, …: this turn's learner message included
        shown = (
            conversation[:upto] if window is None else conversation[max(0, upto - window) : upto]
        )
        messages = reply_prompt(Context(info, no_profile, no_summary, shown), cap)
        prompt = sum(count(m["content"]) for m in messages)
        out.prompts.append(prompt)
        out.tokens.append(prompt + pam.outputs[turn])
        out.calls.append(1)
        out.outputs.append(pam.outputs[turn])
        out.messages.append(messages)
        out.folds.append(0)
        out.memory_inputs.append(0)
        out.memory_outputs.append(0)
    return out


def memory_calls_bounded(run: PamRun) -> tuple[bool, str]:
    """Whether every summary and profile call used the memory model and a bounded output."""
    memory = [c for c in run.calls if c.purpose in ("summary", "profile")]
    wrong_model = [c for c in memory if c.model != MEMORY_MODEL]
    # The summary request leaves room above the cap to end its sentence (memory/jobs/summary.py).
    summary_limit = int(run.memory.summary_max_tokens * SUMMARY_ROOM)
    limits = {"summary": summary_limit, "profile": PROFILE_MAX_TOKENS}
    unbounded = [c for c in memory if c.max_tokens > limits[c.purpose]]
    ok = bool(memory) and not wrong_model and not unbounded
    detail = (
        f"{len(memory)} memory calls, all on {MEMORY_MODEL}: {not wrong_model}; max_tokens "
        f"summary ≤ {limits['summary']}, profile ≤ {limits['profile']}: {not unbounded}"
    )
    return ok, detail


@dataclass(frozen=True)
class DensityResult:
    """The 50-message chat: profile calls with the density filter vs learning every N."""

    messages: int
    rich: int
    profile_triggers: int  # what learning every `profile_every` messages would cost
    profile_calls: int
    rich_seen: int

    @property
    def reduction(self) -> float:
        """The share of profile triggers that cost no call."""
        return 1 - self.profile_calls / self.profile_triggers


def run_density(
    learner: Learner, memory: MemoryConfig, chat: Sequence[tuple[bool, str]] = LOW_INFO_CHAT
) -> DensityResult:
    """The 50-message chat through Pam's real code: how many profile calls it made against
    learning every N messages, and whether every information-rich message was in one."""
    counter = TokenCounter(REPLY_MODEL)
    model = ScriptedModel(counter, [learner])
    external_id = "bench:low-info"
    with temporary_pam(memory, model) as pam:
        turns = pam.local_turns()
        turns.take(TurnRequest(external_id, f"/language {learner.target} {learner.native}"))
        for _, text in chat:
            turns.take(TurnRequest(external_id, text, "Marta"))
    profile_calls = [c for c in model.calls if c.purpose == "profile"]
    rich = [text for is_rich, text in chat if is_rich]
    seen = [t for t in rich if any(t in m["content"] for c in profile_calls for m in c.messages)]
    # Learning every `profile_every` messages, whatever they say, is the baseline.
    every_n = len(chat) // memory.profile_every
    return DensityResult(len(chat), len(rich), every_n, len(profile_calls), len(seen))
