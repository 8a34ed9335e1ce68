"""The format Pam asks the tutor's answer in: the JSON schema of structured output (a reply,
its corrections, and what a review report adds), the categories a correction may name, and the
format's own example texts (prompts/reply.txt), which a model that copies the format echoes and
bot/corrections.py reads as no answer."""

from __future__ import annotations

from typing import Any

from memory.llm import JsonSchema

CATEGORIES = (
    "grammar",
    "vocabulary",
    "spelling",
    "word-order",
    "gender",
    "conjugation",
    "punctuation",
    "other",
)
# reply.txt's example of a rule: a model that echoes it named none.
RULE_PLACEHOLDER = "stable English name of the pattern"
# reply.txt's placeholder of a category lists them all ("grammar|vocabulary|…"): a category
# naming two or more, or written with a bar, is the format copied, not a category.
CATEGORY_LIST = "|".join(CATEGORIES)
# The reply.txt format's own example text: a model that echoes the format has not answered.
PLACEHOLDERS = ("chat message", "...", "…")


def strict_object(**properties: Any) -> dict[str, Any]:
    """A strict schema object: every property required, no others."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _item_schema() -> dict[str, Any]:
    text = {"type": "string"}
    return strict_object(
        original=text,
        corrected=text,
        explanation=text,
        category={"type": "string", "enum": list(CATEGORIES)},
        rule=text,
    )


def reply_schema(report: dict[str, Any] | None = None) -> JsonSchema:
    """The tutor answer's schema; `report`: the properties a review report adds to it (only
    in a prompt that asks for one: bot/review/prompt.py)."""
    return {
        "name": "tutor_reply",
        "strict": True,
        "schema": strict_object(
            reply={"type": "string"},
            corrections={"type": "array", "items": _item_schema()},
            **(report or {}),
        ),
    }


# Structured output for the tutor's answer, the shape reply.txt asks for. Strict, because only
# strict mode makes OpenAI keep to it; every field is one the answer always has (no
# corrections: an empty list; no rule named: ""), so strict mode's "all required, nothing
# else" costs nothing.
# Caps are Pam's to keep when reading, not the schema's.
REPLY_SCHEMA: JsonSchema = reply_schema()
