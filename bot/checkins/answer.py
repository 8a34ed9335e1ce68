"""Reading the model's check-in: the message and its topic, read by the reply's own reader
(bot/corrections.py: the final JSON object, a prose answer as it is, a reply cut off salvaged),
and what makes one no check-in to send — empty, the format's placeholder, longer than
MAX_CHARS, not in the target language's script, or a repeat of Pam's last message. A message
turned down is asked for again by the LLM edge within its fixed budget (bot/llm/openai_chat.py),
never cut: a check-in cut short loses its question."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import cache

import langcodes

from bot.corrections import NoReply, parse_answer
from bot.languages import iso_code
from bot.reply_format import PLACEHOLDERS, strict_object
from memory.grounding import dropped, echoes
from memory.llm import JsonSchema
from memory.model_output import scalar_text

MAX_CHARS = 300  # a check-in, at most: a short message on a phone's lock screen
TOPIC_CHARS = 60
# The format's own example texts (prompts/checkin.txt): a model that copies them has not answered.
FORMAT_TEXTS = ("your message to them", "what it follows up, in 2 to 5 English words")
# At least this share of a message's letters in the target language's script: a name or a
# borrowed word in Latin letters is fine in a Russian message; a Japanese message to a learner
# of Spanish is not. Languages in the same script are the prompt's to keep apart.
SCRIPT_SHARE = 0.5
# The Unicode character names' first words of each script (ISO 15924) a language is written in.
SCRIPT_WORDS = {
    "Latn": ("LATIN",),
    "Cyrl": ("CYRILLIC",),
    "Grek": ("GREEK",),
    "Arab": ("ARABIC",),
    "Hebr": ("HEBREW",),
    "Deva": ("DEVANAGARI",),
    "Beng": ("BENGALI",),
    "Thai": ("THAI",),
    "Geor": ("GEORGIAN",),
    "Armn": ("ARMENIAN",),
    "Hang": ("HANGUL",),
    "Kore": ("HANGUL", "CJK"),
    "Jpan": ("HIRAGANA", "KATAKANA", "CJK"),
    "Hans": ("CJK",),
    "Hant": ("CJK",),
}

CHECKIN_SCHEMA: JsonSchema = {
    "name": "checkin",
    "strict": True,
    "schema": strict_object(message={"type": "string"}, topic={"type": "string"}),
}


@dataclass(frozen=True)
class Written:
    """A check-in as read: the message to send, and the model's topic ("" for none)."""

    message: str
    topic: str


def read(text: str) -> Written:
    """The message and topic in the model's answer. Raises NoReply when there is none."""
    answer = parse_answer(text)
    message = answer.reply.strip()
    topic = scalar_text(answer.rest.get("topic")) or ""
    topic = " ".join(topic.split())
    return Written(message, topic[:TOPIC_CHARS] if topic.casefold() not in _formats() else "")


@cache
def _formats() -> frozenset[str]:
    return frozenset(t.casefold() for t in (*FORMAT_TEXTS, *PLACEHOLDERS))


@cache
def script_of(language: str | None) -> str | None:
    """The script (ISO 15924) `language` (a name Pam keeps: "Spanish") is usually written in;
    None when Pam cannot tell or has no letters for it."""
    code = iso_code(language)
    if code is None:
        return None
    script = langcodes.Language.get(code).maximize().script
    return script if script in SCRIPT_WORDS else None


def in_script(text: str, script: str) -> bool:
    """Whether at least SCRIPT_SHARE of `text`'s letters are in `script` (SCRIPT_WORDS'); a
    text without letters (emoji) is in none."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return False
    words = SCRIPT_WORDS[script]
    inside = sum(unicodedata.name(ch, "").startswith(words) for ch in letters)
    return inside >= SCRIPT_SHARE * len(letters)


def problem(text: str, target: str | None, previous: str, learner: int | None) -> str | None:
    """Why the answer `text` is no check-in to send to a learner of `target` (Pam's last
    message was `previous`, "" for none), or None. Logged once each, by a stable reason."""
    try:
        written = read(text)
    except NoReply:
        written = Written("", "")
    script = script_of(target)
    reason = None
    if not written.message or written.message.casefold() in _formats():
        reason = "no_message"
    elif len(written.message) > MAX_CHARS:
        reason = "too_long"
    elif script is not None and not in_script(written.message, script):
        reason = "wrong_script"
    elif previous and echoes(written.message, previous):
        reason = "echo_pam"
    if reason is None:
        return None
    dropped("checkin", reason, learner)
    return {
        "no_message": "no check-in message in the answer",
        "too_long": f"the check-in is longer than {MAX_CHARS} characters",
        "wrong_script": f"the check-in is not in {target}'s script",
        "echo_pam": "the check-in repeats Pam's last message",
    }[reason]
