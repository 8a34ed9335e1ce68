"""A deterministic chat model for the token benchmark: fixed-size answers for each purpose,
every call recorded and counted with real tiktoken."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bench.conversations import Learner, corrections_for
from bot.review.prompt import DUE_TAG
from memory.llm import Accept, ChatMessage, Completion, JsonSchema, Purpose, Tool
from memory.tokens import TokenCounter

# A chat message of two or three sentences, as the reply prompt asks for.
REPLY_WORDS = 30
# An Explain tap's answer for one correction: its line, a sentence on why, an example.
EXPLAIN_WORDS = 40
# The first profile answer is a whole profile of this fixed shape; later ones change two lists.
INTERESTS = ("running", "cooking", "travel", "films", "reading", "music", "yoga", "football")
NOTES = (
    "The learner works long shifts and is often tired in the evening.",
    "They visit family once a month and talk about them warmly.",
    "Plans a summer trip and asked about places to see.",
    "Cooks for friends at weekends; likes simple traditional dishes.",
    "Started a new sport this month and tracks their progress.",
    "Keeps mixing up past tenses after time words like yesterday.",
    "Prefers warm weather; mentioned the beach several times.",
    "Reads history books about the cities they want to visit.",
    "Open question: who they will travel with next month.",
    "Practises every day and says the language feels easier now.",
)

_PRACTISING = re.compile(r"^- practising: (.+)$", re.MULTILINE)
# A due review item's line in the reply prompt (bot/review/prompt.py):
# "1. original → corrected (rule)".
_DUE_ITEM = re.compile(r"^(\d+)\. (.+?) → (.+?)(?: \(.*\))?$", re.MULTILINE)
_MAX_WORDS = re.compile(r"at most (\d+) words")


@dataclass(frozen=True)
class Call:
    """One call to the model, as the benchmark accounts for it."""

    purpose: Purpose
    model: str
    max_tokens: int
    messages: list[ChatMessage]
    input_tokens: int
    output_tokens: int
    text: str

    @property
    def tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


class ScriptedModel:
    """A ChatModel that answers replies in the learner's target language (with the corrections
    their script knows), summaries of exactly the length the prompt allows, and whole profiles,
    the same every run."""

    def __init__(self, counter: TokenCounter, learners: Sequence[Learner], seed: int = 7) -> None:
        self.counter = counter
        self.learners = {learner.target: learner for learner in learners}
        self.rng = random.Random(seed)
        self.calls: list[Call] = []

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int,
        purpose: Purpose,
        schema: JsonSchema | None = None,
        accept: Accept | None = None,
        tools: Sequence[Tool] | None = None,
    ) -> Completion:
        """Answer deterministically and record the call (its answers always pass `accept`;
        it never calls the `tools` offered)."""
        if purpose == "reply":
            text = self._reply(messages)
        elif purpose == "summary":
            text = self._summary(messages)
        elif purpose == "translate":
            text = self._translation(messages)
        elif purpose == "explain":
            text = self._explanation(messages)
        else:
            text = self._profile(messages)
        text = self.counter.truncate(text, max_tokens)  # a real model stops at max_tokens
        # Input as OpenAI bills it (content plus per-message framing); output as generated.
        input_tokens = sum(self.counter.count_message(m["content"]) for m in messages)
        output_tokens = self.counter.count(text)
        self.calls.append(
            Call(purpose, model, max_tokens, list(messages), input_tokens, output_tokens, text)
        )
        return Completion(text, model, input_tokens, output_tokens)

    def _reply(self, messages: Sequence[ChatMessage]) -> str:
        match = _PRACTISING.search(messages[0]["content"])
        learner = self.learners[match.group(1).strip() if match else ""]
        latest = next(m["content"] for m in reversed(messages) if m["role"] == "user")
        statements = [s for s in learner.replies if not s.endswith("?")]
        question = self.rng.choice([s for s in learner.replies if s.endswith("?")])
        self.rng.shuffle(statements)
        words = " ".join(statements).split()[: REPLY_WORDS - len(question.split())]
        body = " ".join(words).rstrip(",;:")
        if not body.endswith((".", "!")):
            body += "."
        reply = f"{body} {question}"
        answer: dict[str, object] = {
            "reply": reply,
            "corrections": corrections_for(learner, latest),
        }
        system = messages[0]["content"]
        if f"<{DUE_TAG}>" in system:
            answer["review"] = _graded(system.split(f"<{DUE_TAG}>", 1)[1], latest)
        return json.dumps(answer, ensure_ascii=False)

    def _summary(self, messages: Sequence[ChatMessage]) -> str:
        match = _MAX_WORDS.search(messages[0]["content"])
        budget = int(match.group(1)) if match else 100
        notes = list(NOTES)
        self.rng.shuffle(notes)
        words: list[str] = []
        while len(words) < budget:
            words += " ".join(notes).split()
        return " ".join(words[:budget])

    def _translation(self, messages: Sequence[ChatMessage]) -> str:
        """A translation with as many words as the message it translates."""
        message = messages[-1]["content"].split("<message>\n", 1)[-1].split("\n</message>")[0]
        words = " ".join(NOTES).split()
        return " ".join(words[: len(message.split())])

    def _explanation(self, messages: Sequence[ChatMessage]) -> str:
        """EXPLAIN_WORDS words for each correction (a line, why, an example), within the
        prompt's word limit."""
        section = messages[-1]["content"].split("<corrections>", 1)[-1]
        corrections = max(1, section.count("\n- "))
        match = _MAX_WORDS.search(messages[0]["content"])
        budget = min(EXPLAIN_WORDS * corrections, int(match.group(1)) if match else 60)
        words: list[str] = []
        while len(words) < budget:
            words += " ".join(NOTES).split()
        return " ".join(words[:budget])

    def _profile(self, messages: Sequence[ChatMessage]) -> str:
        interests = self.rng.sample(INTERESTS, 5)
        misc = [self.rng.choice(NOTES)[:100], "Has a pet and a busy week ahead"]
        if "<current_profile>\n{}\n" not in messages[-1]["content"]:
            # The prompt asks for the keys that change only; lists are given whole.
            return json.dumps({"interests": interests, "misc": misc}, ensure_ascii=False)
        profile = {
            "who": "Works in health care, lives with a partner, has a sister in another city",
            "style": "Casual and friendly, medium-length messages, likes a joke",
            "focus": "Wants to talk easily when travelling and at work; past tenses",
            "interests": interests,
            "misc": misc,
            "recurring_mistakes": ["past tense after time words", "noun gender"],
        }
        return json.dumps(profile, ensure_ascii=False)


def _graded(due: str, latest: str) -> dict[str, list[int]]:
    """The review report a careful model gives for the due items listed in `due`: the labels
    whose corrected form the learner's latest message uses, and those whose mistake it makes
    again."""
    used, missed = [], []
    text = latest.casefold()
    for label, original, corrected in _DUE_ITEM.findall(due.split(f"</{DUE_TAG}>", 1)[0]):
        if original.casefold() in text:
            missed.append(int(label))
        elif corrected.casefold() in text:
            used.append(int(label))
    return {"used": used, "missed": missed}
