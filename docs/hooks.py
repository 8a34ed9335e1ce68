"""mkdocs hooks: the configuration reference, generated from the settings models (so no
hand-written table can drift from what Pam reads), and the benchmarks' plots, published from
bench/results/ where the benchmarks write them."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

from annotated_types import Ge, Gt, Le, Lt
from mkdocs.structure.files import File, Files
from pydantic import BaseModel
from pydantic.fields import FieldInfo

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- settings-reference -->"


def on_files(files: Files, config: Any) -> Files:
    """bench/results/*.png, served at bench/results/ beside the pages."""
    for png in sorted((ROOT / "bench" / "results").glob("*.png")):
        files.append(
            File(
                f"bench/results/{png.name}",
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, settings_reference())


# Each section's heading and a sentence for the operator (the classes' docstrings are for
# developers), in the reference's order. They must be the sections of the settings
# (webhooks/settings.py's `Settings.SECTIONS`: the core's, the web's, the channels'): one
# missing here, or a heading no section has, fails the build.
SECTIONS = {
    "": ("General", "Where the database is, and how much Pam logs."),
    "llm": (
        "The model",
        "Which OpenAI-compatible server answers, with which model, and how Pam asks it.",
    ),
    "memory": (
        "Memory",
        "How much of a conversation stays verbatim, when it folds, what Pam recalls and reviews, "
        "how long /forget waits for a yes.",
    ),
    "limits": ("Limits", "What a learner, and everyone together, may spend; 0 disables each."),
    "service": (
        "Worker and queue",
        "The long-running processes: connections, lanes, leases, retries, retention and shutdown.",
    ),
    "web": (
        "Web",
        "The web process: its port, public address, operator token and trusted proxies.",
    ),
    "charts": (
        "Charts and links",
        "`/progress` charts and the signed links that serve charts and spoken replies.",
    ),
    "voice": (
        "Voice",
        "Voice notes in, spoken replies out, through an OpenAI-compatible audio API.",
    ),
    "checkin": (
        "Check-ins",
        "Pam writing first to learners who said `/checkins on`: off until you turn it on; "
        "quiet hours, back-off and the sending rate (see [Check-ins](how/checkins.md)).",
    ),
    "api": ("HTTP API channel", "The HTTP API channel, for front-ends of your own."),
    "telegram": ("Telegram", "The Telegram channel."),
    "whatsapp": ("WhatsApp (Twilio)", "The WhatsApp channel, through Twilio."),
}


def settings_reference() -> str:
    """One table per section of the settings: each variable, its default and range, and what
    it does (the field's docstring)."""
    from webhooks.settings import Settings

    models = Settings.SECTIONS
    headings = set(SECTIONS) - {""}
    if headings != set(models):
        raise ValueError(
            f"docs/hooks.py's headings {sorted(headings)} are not the settings sections "
            f"{sorted(models)}"
        )
    parts = []
    for name, (title, intro) in SECTIONS.items():
        if name:
            fields = [(str(f.validation_alias), f) for f in models[name].model_fields.values()]
        else:
            fields = _top_fields(Settings, models)
        parts.append(_table(title, intro, fields))
    return "\n".join(parts)


def _top_fields(settings: type[BaseModel], sections: dict[str, Any]) -> list[tuple[str, FieldInfo]]:
    return [
        (str(field.validation_alias), field)
        for name, field in settings.model_fields.items()
        if name not in sections
    ]


def _table(title: str, doc: str, fields: list[tuple[str, FieldInfo]]) -> str:
    rows = [f"## {title}", "", doc, "", "| variable | default | meaning |"]
    rows.append("|---|---|---|")
    for variable, field in fields:
        if field.description is None:
            raise ValueError(f"{variable} has no docstring in its settings model")
        meaning = " ".join(field.description.split()).replace("|", "\\|")
        rows.append(f"| `{variable}` | {_default(field)} | {meaning} |")
    return "\n".join(rows) + "\n"


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=False)
    if value is None:
        text = "—"
    elif isinstance(value, bool):
        text = "`on`" if value else "`off`"
    elif isinstance(value, float) and value.is_integer():
        text = f"`{int(value)}`"
    else:
        text = f"`{value}`"
    bounds = _bounds(field)
    choices = _choices(field.annotation)
    if choices:
        text += " (" + ", ".join(f"`{c}`" for c in choices) + ")"
    elif bounds:
        text += f" ({bounds})"
    return text


def _bounds(field: FieldInfo) -> str:
    low = high = ""
    for item in field.metadata:
        if isinstance(item, Ge):
            low = f"≥ {_number(item.ge)}"
        elif isinstance(item, Gt):
            low = f"> {_number(item.gt)}"
        elif isinstance(item, Le):
            high = f"≤ {_number(item.le)}"
        elif isinstance(item, Lt):
            high = f"< {_number(item.lt)}"
    return ", ".join(part for part in (low, high) if part)


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _choices(annotation: Any) -> list[str]:
    """The values a Literal (or an optional Literal) allows."""
    if typing.get_origin(annotation) is typing.Literal:
        return [str(arg) for arg in typing.get_args(annotation)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if typing.get_origin(arg) is typing.Literal:
                return [str(a) for a in typing.get_args(arg)]
    return []
