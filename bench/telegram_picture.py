"""The README's picture of a Telegram chat with Pam's buttons. `pam telegram` — Pam's real
code, words, buttons and flow — long-polls the loopback Telegram server, and the loopback
OpenAI server answers for the model with scripted texts (there is no real model on the build
machine). Lena, a German speaker practising Spanish, sets her languages and level, writes a
message with a mistake, taps Translate under Pam's reply, then Explain. What Pam sent to
Telegram — each text and its inline keyboard — is drawn as a phone's chat
(bench/telegram_drawing.py).

    python3 dev.py bench telegram_picture          # docs/img/telegram-chat.png

Written by hand are only Lena's lines (LINES) and the model's answers (SCRIPT); the run checks
that Pam asked the model for what the script answers (German explanations, German
translations), so the two cannot drift apart.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.telegram_drawing import Message, draw
from loopback.harness import PAM_CMD, processes, progress, service_env, sqlite_url, wait_for
from loopback.openai_server import OpenAIServer, default_answer, task_of
from loopback.telegram_server import TOKEN, Call, TelegramServer

ROOT = Path(__file__).resolve().parent.parent
PICTURE = ROOT / "docs" / "img" / "telegram-chat.png"
WAIT = 60.0  # each wait ends on its answer; the bound is a hang guard

# Lena's Telegram account, her app in German.
LEARNER: dict[str, Any] = {
    "id": 4_815_162_342,
    "is_bot": False,
    "first_name": "Lena",
    "language_code": "de",
}
CHAT: dict[str, Any] = {"id": LEARNER["id"], "first_name": "Lena", "type": "private"}
# What she types, then the buttons she taps (by the command they carry), in order. Her
# message's mistake is a German speaker's: the perfect tense after "ayer", as German has it.
LINES = [
    "/language Spanisch Deutsch",
    "/level A2",
    "¡Hola Pam! Ayer he ido al cine con mi hermana.",
]
TAPS = ["/translate", "/explain"]
CLOCK = "18:40"  # the phone's clock at her first message


@dataclass(frozen=True)
class Script:
    """The scripted model's answers to Pam's tasks, and what each task's prompt must ask for
    (a line of it) for the answer to fit."""

    reply: dict[str, Any]
    translate: str
    explain: str
    asks: dict[str, str]


SCRIPT = Script(
    reply={
        "reply": "¡Qué buen plan! A mí me encanta ir al cine los domingos. ¿Qué película visteis?",
        "corrections": [
            {
                "original": "he ido",
                "corrected": "fui",
                "explanation": "Mit „ayer“ steht das Indefinido, nicht das Perfekt.",
                "category": "conjugation",
                "rule": "preterite with ayer",
            }
        ],
    },
    translate="So ein guter Plan! Ich gehe sonntags total gern ins Kino. "
    "Welchen Film habt ihr gesehen?",
    explain="✏️ he ido → fui\n"
    "Mit „ayer“ erzählst du auf Spanisch im Indefinido: Die Sache ist vorbei und "
    "abgeschlossen. Das Perfekt (he ido) nimmst du nur, wenn der Zeitraum noch andauert, "
    "z. B. „hoy“ oder „esta semana“.\n"
    "Beispiel: Ayer fui a la playa. (Gestern war ich am Strand.)",
    asks={
        "reply": "- explanation language: German",
        "translate": "into the learner's native language: German.",
        "explain": "their native language is German",
    },
)


def scripted_answer(task: str, body: dict[str, Any], count: int) -> str:
    """The scripted model: SCRIPT's answer to a reply, a translation or an explanation; the
    loopback's own to the memory jobs (not in the picture)."""
    if task == "reply":
        return json.dumps(SCRIPT.reply, ensure_ascii=False)
    if task in ("translate", "explain"):
        return str(getattr(SCRIPT, task))
    return default_answer(task, body, count)


@dataclass(frozen=True)
class Sent:
    """One message of the chat: who sent it, its text as sent (Pam's: Telegram HTML), and the
    labels of the inline keyboard under it, by row; or the learner's tap on one of those
    buttons (`tapped`: its label)."""

    learner: bool
    text: str
    keyboard: tuple[tuple[str, ...], ...] = ()
    tapped: str | None = None


@dataclass
class Chat:
    """The chat as it happened, in order, and the tasks Pam asked the model for."""

    sent: list[Sent] = field(default_factory=list)
    model_tasks: list[str] = field(default_factory=list)


def _keyboard(call: Call) -> list[list[dict[str, Any]]]:
    """The inline keyboard of a sendMessage call (no rows: none)."""
    markup = call.params.get("reply_markup")
    return list(markup.get("inline_keyboard") or []) if isinstance(markup, dict) else []


class Phone:
    """Lena's Telegram app, on the loopback server: what she types is queued as an update for
    Pam's long polling, a tap as the callback query Telegram sends; each waits for Pam's
    answer and records it."""

    def __init__(self, telegram: TelegramServer) -> None:
        self.telegram = telegram
        self.chat = Chat()
        # Pam's newest message with buttons: its id and its keyboard's rows.
        self.buttons: tuple[int, list[list[dict[str, Any]]]] = (0, [])

    def type(self, text: str) -> None:
        """Send `text` and wait for Pam's answer."""
        message: dict[str, Any] = {"from": LEARNER, "chat": CHAT, "date": int(time.time())}
        message["text"] = text
        if text.startswith("/"):
            length = len(text.split()[0])
            message["entities"] = [{"offset": 0, "length": length, "type": "bot_command"}]
        with self.telegram.lock:
            # Numbered as the server numbers a tap's update, so that the updates keep order.
            self.telegram.message_ids += 1
            message["message_id"] = self.telegram.message_ids
            update = {"update_id": 500_000 + self.telegram.message_ids, "message": message}
            self.telegram.updates.append(update)
            queued = self.telegram.message_ids
        self.chat.sent.append(Sent(True, text))
        self._answered(text, queued + 1)

    def tap(self, command: str) -> None:
        """Tap the button whose command starts with `command` under Pam's newest message with
        buttons, and wait for her answer."""
        message_id, rows = self.buttons
        found = [b for row in rows for b in row if b["callback_data"].startswith(command)]
        if not found:
            raise RuntimeError(f"Pam's newest buttons have none for {command}")
        update = self.telegram.tap(LEARNER, CHAT, message_id, found[0]["callback_data"])
        queued = update["update_id"] - 500_000  # the server numbers a tap as a message
        self.chat.sent.append(Sent(True, "", tapped=found[0]["text"]))
        self._answered(found[0]["text"], queued + 1)

    def _answered(self, what: str, message_id: int) -> None:
        """Wait for Pam's one answer to `what`, and record it; the server gives it
        `message_id`, the next after the learner's (Pam sends nothing else meanwhile)."""
        answered = sum(1 for s in self.chat.sent if not s.learner)
        wait_for(
            lambda: len(self.telegram.of("sendMessage")) > answered, WAIT, f"an answer to {what}"
        )
        call = self.telegram.of("sendMessage")[answered]
        rows = _keyboard(call)
        if rows:
            self.buttons = (message_id, rows)
        keyboard = tuple(tuple(b["text"] for b in row) for row in rows)
        self.chat.sent.append(Sent(False, call.params["text"], keyboard))


def check_prompts(requests: list[dict[str, Any]]) -> None:
    """Raise unless each prompt Pam sent the model asks for what SCRIPT answers."""
    for body in requests:
        task = task_of(body)
        wanted = SCRIPT.asks.get(task)
        prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
        if wanted is not None and wanted not in prompt:
            raise RuntimeError(f"Pam's {task} prompt no longer asks for {wanted!r}: rewrite SCRIPT")


def collect(folder: Path) -> Chat:
    """Run `pam telegram` (its database and log in `folder`) against the loopback Telegram
    and the scripted model, put LINES and TAPS through it, and return the chat as Pam sent
    it."""
    with (
        OpenAIServer(scripted_answer) as llm,
        TelegramServer() as telegram,
        processes(folder, "telegram picture") as group,
    ):
        env = service_env(
            sqlite_url(folder),
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="scripted",
            PAM_POLL_SECONDS="0.05",
            TELEGRAM_BOT_TOKEN=TOKEN,
            TELEGRAM_API_URL=telegram.base_url,
        )
        pam = group.start("pam-telegram", [*PAM_CMD, "telegram"], env)
        wait_for(lambda: "polling Telegram" in pam.tail(), WAIT, "pam telegram to poll")
        phone = Phone(telegram)
        for line in LINES:
            phone.type(line)
        for command in TAPS:
            phone.tap(command)
        group.assert_alive()
        with llm.lock:
            requests = list(llm.requests)
    check_prompts(requests)
    phone.chat.model_tasks = [task_of(r) for r in requests]
    return phone.chat


def pictured(chat: Chat, start: str = CLOCK) -> list[Message]:
    """The chat as the picture shows it: each message with a time on a phone's clock, a
    minute on for each thing the learner does (the run itself takes seconds)."""
    hours, minutes = (int(part) for part in start.split(":"))
    shown: list[Message] = []
    for sent in chat.sent:
        if sent.learner and shown:
            minutes += 1
        clock = f"{(hours + minutes // 60) % 24:02d}:{minutes % 60:02d}"
        shown.append(Message(sent.learner, sent.text, sent.keyboard, sent.tapped, clock))
    return shown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.telegram_picture", description=__doc__)
    parser.add_argument("--picture", type=Path, default=PICTURE, help="where the PNG goes")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="pam-telegram-picture-"))
    progress(f"the run's logs and database go to {folder}", "telegram picture")
    chat = collect(folder)
    progress(f"{len(chat.sent)} messages; the model was asked for {chat.model_tasks}")
    draw(pictured(chat), args.picture.resolve(), learner=LEARNER["first_name"])
    progress(f"drew {args.picture}", "telegram picture")
    return 0


if __name__ == "__main__":
    sys.exit(main())
