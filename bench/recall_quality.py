"""The recall check's report (issue 17): the scripted 300-message conversation of
bench/recall_script.py stored for one learner through the real store, dated over eight weeks
and folded, then its 30 questions asked of the search alone (deterministic, no LLM). A hit is
the fact's current message among the top 3. Prints the score per fact type, for the updated
facts as a cross-cut, and overall, on SQLite and on Postgres when it is reachable, for the
questions and for their held-out second phrasings (which the search was not tuned on);
writes bench/results/recall_quality.json.

    python3 dev.py bench recall_quality [--backends sqlite,postgres] [--database-url URL]

tests/memory/test_recall_quality.py runs the same check and asserts the target."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.recall_script import (
    FACT_TYPES,
    HELD_OUT_QUESTIONS,
    MESSAGES,
    OTHER_LEARNER,
    QUESTIONS,
    SAID_ON_DAY,
    UPDATED,
    Question,
)
from bot.turn.recall import RECALL_TOOL, wants_recall
from loopback.harness import ROOT, postgres_problem, postgres_schema, sqlite_url
from memory.clock import ManualClock
from memory.database import db
from memory.recall.search import Searcher
from memory.store.message_store import Store
from memory.tokens import TokenCounter

DEFAULT_DATABASE = "postgresql://postgres@127.0.0.1:5432/test"
# What the reply prompt carries when the questions are asked: the summary and the window (the
# last 10 messages), against which the auto path decides whether to search.
WINDOW = 10
BACKENDS = ("sqlite", "postgres")
OUT = ROOT / "bench" / "results"
LIMIT = 3  # what recall gives the prompt at most, and so what a hit must be within
TARGET = 27  # of 30 (the check)
# Monday 12 January 2026, 19:00 UTC: the first session; the last is 55 days later.
START = datetime(2026, 1, 12, 19, 0, tzinfo=UTC)
# Where the questions are asked: the evening after the last session.
ASKED_AT = START + timedelta(days=SAID_ON_DAY[-1] + 1)
SUMMARY = (
    "Tom, an English nurse who practises Spanish (A2–B1), chats about his work, family, "
    "plans and tastes; he moved from Madrid to Sevilla and changed jobs."
)
_COUNTER = TokenCounter("gpt-4o-mini")


def said_at(index: int) -> datetime:
    """When message `index` of the script was said: its session's day, Tom writing every
    three minutes from 19:00 and Pam answering 20 seconds after him."""
    first = SAID_ON_DAY.index(SAID_ON_DAY[index])
    exchange, answer = divmod(index - first, 2)
    return START + timedelta(days=SAID_ON_DAY[index], minutes=3 * exchange, seconds=20 * answer)


def store_folded(
    store: Store,
    clock: ManualClock,
    external_id: str,
    messages: Sequence[tuple[str, str]],
    times: Sequence[datetime],
) -> int:
    """A new Spanish learner with `messages` stored at `times`, all of them then folded (a
    summary whose watermark covers the last); the learner's id."""
    learner = store.learners.learner(external_id, "Tom")
    store.learners.update_settings(
        learner.id, target_language="Spanish", native_language="English", level="A2"
    )
    last = 0
    for (role, text), when in zip(messages, times, strict=True):
        clock.now = when
        last = store.conversation.add_message(learner.id, role, text, _COUNTER.count(text)).id
    summary = store.memory.summary(learner.id)
    if not store.memory.save_summary(
        learner.id, summary.version, SUMMARY, _COUNTER.count(SUMMARY), last
    ):
        raise RuntimeError("the fold's summary was not written")
    return learner.id


@dataclass(frozen=True)
class Answer:
    """What the search made of one question: the fact's rank in the results (1-based; None
    if not among them), the superseded message's rank for an updated fact, and the texts
    returned, best first."""

    key: str
    fact_type: str
    question: str
    rank: int | None
    superseded_rank: int | None
    found: tuple[str, ...]

    @property
    def hit(self) -> bool:
        """The fact, as it stands now, is among the top LIMIT."""
        return self.rank is not None and self.rank <= LIMIT


def _rank(found: Sequence[str], text: str) -> int | None:
    return found.index(text) + 1 if text in found else None


def ask(searcher: Searcher, learner_id: int, question: Question) -> Answer:
    """Ask `question` of `learner_id`'s recall, top LIMIT."""
    found = tuple(s.text for s in searcher.search(learner_id, question.text, limit=LIMIT))
    superseded = question.superseded_index
    return Answer(
        question.key,
        question.fact_type,
        question.text,
        _rank(found, MESSAGES[question.fact_index][1]),
        None if superseded is None else _rank(found, MESSAGES[superseded][1]),
        found,
    )


@dataclass(frozen=True)
class Setup:
    """The script stored and folded: Tom's id and the other learner's."""

    tom: int
    other: int


def set_up(store: Store, clock: ManualClock, tag: str) -> Setup:
    """Tom's conversation, and the other learner's few messages (same words, other facts)
    stored in the same weeks, both folded; external ids end in `tag`."""
    tom = store_folded(
        store, clock, f"recall:tom-{tag}", MESSAGES, [said_at(i) for i in range(len(MESSAGES))]
    )
    times = [START + timedelta(days=20, minutes=n) for n in range(len(OTHER_LEARNER))]
    other = store_folded(store, clock, f"recall:other-{tag}", OTHER_LEARNER, times)
    clock.now = ASKED_AT
    return Setup(tom, other)


def score(answers: Sequence[Answer]) -> dict[str, dict[str, int]]:
    """Hits and questions per fact type, for the updated facts, and overall (of QUESTIONS or
    HELD_OUT_QUESTIONS: the same keys)."""
    groups: dict[str, list[Answer]] = {kind: [] for kind in (*FACT_TYPES, UPDATED, "overall")}
    for answer in answers:
        groups[answer.fact_type].append(answer)
        groups["overall"].append(answer)
    updated = {q.key for q in QUESTIONS if q.superseded_index is not None}
    groups[UPDATED] = [a for a in answers if a.key in updated]
    return {
        kind: {"hits": sum(a.hit for a in group), "questions": len(group)}
        for kind, group in groups.items()
    }


def paths(answers: Sequence[Answer]) -> dict[str, Any]:
    """The two ways into recall on these questions. auto: Pam searches on its own when
    bot.turn.recall.wants_recall says so (against the summary and the window), so a question is
    answered from the past when it fires and the fact is in the top 3; a turn that does not
    fire costs nothing. tool: the model decides; with no model here, the upper bound is a
    model that calls the tool on every question with the question as its query (the search
    score), paid for by the tool's definition on every reply request (its JSON's tokens: each
    provider renders tools into the prompt its own way, OpenAI's close to that) and one more
    call whenever it recalls."""
    known = "\n".join([SUMMARY, *(text for _, text in MESSAGES[-WINDOW:])])
    fired = [wants_recall(a.question, known) for a in answers]
    return {
        "auto": {
            "fired": sum(fired),
            "hits": sum(f and a.hit for f, a in zip(fired, answers, strict=True)),
            "questions": len(answers),
            "tokens_without_recall": 0,
        },
        "tool": {
            "hits_at_most": sum(a.hit for a in answers),
            "questions": len(answers),
            "tokens_every_request": _COUNTER.count(json.dumps(RECALL_TOOL)),
            "extra_calls_per_recall": 1,
        },
    }


def _scored(store: Store, setup: Setup, questions: Sequence[Question]) -> dict[str, Any]:
    answers = [ask(store.recall, setup.tom, q) for q in questions]
    theirs = {text for _, text in OTHER_LEARNER}
    return {
        "score": score(answers),
        "paths": paths(answers),
        "superseded_first": sum(
            a.superseded_rank is not None and (a.rank is None or a.superseded_rank < a.rank)
            for a in answers
        ),
        "other_learner_rows": sum(text in theirs for a in answers for text in a.found),
        "answers": [asdict(a) | {"hit": a.hit} for a in answers],
    }


def run(store: Store, clock: ManualClock, tag: str) -> dict[str, Any]:
    """The whole check on `store`'s database: scores, each answer, how often a superseded
    statement came before the current one, and how many of the other learner's rows came
    back; and the same for the held-out phrasings under "held_out"."""
    setup = set_up(store, clock, tag)
    return _scored(store, setup, QUESTIONS) | {
        "held_out": _scored(store, setup, HELD_OUT_QUESTIONS)
    }


def run_backend(url: str, tag: str) -> dict[str, Any]:
    """`run` on a migrated database at `url`."""
    engine = db.make_engine(url)
    try:
        db.upgrade(engine)
        clock = ManualClock(START)
        return run(Store(engine, clock), clock, tag)
    finally:
        engine.dispose()


def table(results: dict[str, dict[str, Any]]) -> str:
    """The markdown table for the docs: one row per fact type; per backend a column for the
    questions and one for their held-out phrasings."""
    columns = [(f"{backend}", found["score"]) for backend, found in results.items()] + [
        (f"{backend}, held-out", found["held_out"]["score"]) for backend, found in results.items()
    ]
    head = f"| Facts (top {LIMIT}) | " + " | ".join(name for name, _ in columns) + " |"
    lines = [head, "|---" * (len(columns) + 1) + "|"]
    for kind in (*FACT_TYPES, UPDATED, "overall"):
        cells = [f"{found[kind]['hits']}/{found[kind]['questions']}" for _, found in columns]
        name = "**overall**" if kind == "overall" else kind
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paths_table(results: dict[str, dict[str, Any]]) -> str:
    """The markdown table of the two ways into recall, per backend: how many questions each
    answers from the past, and what a turn costs that needs no recall."""
    lines = [
        "| Path | Backend | Questions answered from the past (top 3) | held-out | "
        "Cost of a turn without recall |",
        "|---|---|---|---|---|",
    ]
    for backend, found in results.items():
        auto, held = found["paths"]["auto"], found["held_out"]["paths"]["auto"]
        lines.append(
            f"| auto (Pam searches) | {backend} | {auto['hits']}/{auto['questions']} "
            f"(fires on {auto['fired']}) | {held['hits']}/{held['questions']} "
            f"(fires on {held['fired']}) | 0 tokens |"
        )
    for backend, found in results.items():
        tool, held = found["paths"]["tool"], found["held_out"]["paths"]["tool"]
        lines.append(
            f"| tool (the model calls) | {backend} | at most {tool['hits_at_most']}/"
            f"{tool['questions']} | at most {held['hits_at_most']}/{held['questions']} | "
            f"~{tool['tokens_every_request']} tokens (the tool's definition), and one more "
            "call per recall |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run the check on each backend asked for; print the table, write the JSON."""
    parser = argparse.ArgumentParser(prog="bench.recall_quality", description=__doc__)
    parser.add_argument("--backends", default=",".join(BACKENDS), help="sqlite,postgres")
    parser.add_argument("--database-url", default=DEFAULT_DATABASE)
    parser.add_argument("--out", type=Path, default=OUT, help="recall_quality.json goes here")
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or set(backends) - set(BACKENDS):
        parser.error(f"--backends takes sqlite and/or postgres, not {args.backends!r}")
    results: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    with ExitStack() as stack:
        for backend in backends:
            if backend == "sqlite":
                folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
                results[backend] = run_backend(sqlite_url(folder), "sqlite")
                continue
            problem = postgres_problem(args.database_url)
            if problem:
                print(f"postgres skipped: {problem}", file=sys.stderr)
                skipped[backend] = problem
                continue
            url = stack.enter_context(postgres_schema(args.database_url, prefix="pam_recall"))
            results[backend] = run_backend(url, "postgres")
    if not results:
        return 1
    report = table(results)
    print(report)
    ways = paths_table(results)
    print()
    print(ways)
    for backend, found in results.items():
        for name, part in (("", found), (" (held-out)", found["held_out"])):
            for answer in part["answers"]:
                if not answer["hit"]:
                    print(f"{backend}{name} missed {answer['key']}: {answer['question']}")
    args.out.mkdir(parents=True, exist_ok=True)
    document = {
        "limit": LIMIT,
        "target": f"{TARGET}/{len(QUESTIONS)}",
        "backends": results,
        "skipped": skipped,
        "table": report,
        "paths_table": ways,
    }
    path = args.out / "recall_quality.json"
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    met = all(found["score"]["overall"]["hits"] >= TARGET for found in results.values())
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
