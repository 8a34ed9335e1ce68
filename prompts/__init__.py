"""Prompt templates, one text file per task, rendered strictly: a missing value is an error."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from string import Template

HERE = Path(__file__).parent
USER_SEPARATOR = "=== user ==="
TASKS = ("reply", "summary", "profile", "translate", "explain", "checkin")


@cache
def template(task: str) -> Template:
    """The template for `task` (one of TASKS)."""
    if task not in TASKS:
        raise KeyError(f"no prompt template for task {task!r}")
    return Template((HERE / f"{task}.txt").read_text(encoding="utf-8"))


@cache
def _parts(task: str) -> tuple[Template, Template | None]:
    # Split before substituting: a value that contains the separator line stays inside its
    # own message instead of cutting the system prompt short.
    system, separator, user = template(task).template.partition(f"\n{USER_SEPARATOR}\n")
    return Template(system), Template(user) if separator else None


def placeholders(task: str) -> set[str]:
    """The names of the values `task`'s template needs."""
    return set(template(task).get_identifiers())


def render(task: str, **values: str) -> list[dict[str, str]]:
    """The chat messages for `task`: a system message, and a user message where the template
    has a `=== user ===` part. Raises KeyError if a value is missing, ValueError if extra."""
    extra = set(values) - placeholders(task)
    if extra:
        raise ValueError(f"values not used by the {task} template: {sorted(extra)}")
    missing = placeholders(task) - set(values)
    if missing:
        raise KeyError(f"values missing for the {task} template: {sorted(missing)}")
    system_part, user_part = _parts(task)
    messages = [{"role": "system", "content": system_part.substitute(values).strip()}]
    user = user_part.substitute(values).strip() if user_part is not None else ""
    if user:
        messages.append({"role": "user", "content": user})
    return messages


_TAG = re.compile(r"<\s*/?\s*[a-z_]+\s*>", re.IGNORECASE)


def as_data(text: str, max_chars: int) -> str:
    """`text` made safe to sit between the templates' data tags: tag-like sequences that
    could close a data section early are neutralised, and the length is capped."""
    cleaned = _TAG.sub(lambda m: m.group(0).replace("<", "‹").replace(">", "›"), text)
    if len(cleaned) > max_chars:
        cleaned = cleaned[: max_chars - 1] + "…"
    return cleaned
