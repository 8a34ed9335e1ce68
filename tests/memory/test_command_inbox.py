"""The commands lane's view of the inbox (memory/queue/inbox.py CommandInbox): slash commands typed
as text, which need no model, each claimed in its learner's order like any message."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import Engine

from bot.turn.commands import parse_command
from memory.messages import clean_text
from memory.queue.inbox import CommandInbox, Inbox
from tests.conftest import unique_user
from tests.support import inbound

COMMANDS = ["/help", "/forget@PamBot", "/Language Spanish English", "/x", "/voice\u00a0on"]
NOT_COMMANDS = ["hola /help", "/ hola", "/\u00a0help", "/", "/1", "//help", "/ñandú", " /help"]


def claim_all(queue: Inbox) -> list[str]:
    claimed = []
    while (claim := queue.claim_next()) is not None:
        claimed.append(claim.text)
    return claimed


def test_only_slash_commands_typed_as_text_are_claimed(engine: Engine) -> None:
    for text in COMMANDS + NOT_COMMANDS:
        assert Inbox(engine, 60).accept(inbound(unique_user(), text))
    caption = replace(inbound(unique_user(), "/help"), kind="photo")
    assert Inbox(engine, 60).accept(caption)

    claimed = claim_all(CommandInbox(engine, 60))

    assert sorted(claimed) == sorted(COMMANDS)
    # Each is a command to the tutor too: none of them calls the model.
    assert all(parse_command(clean_text(text)) is not None for text in claimed)
    assert sorted(claim_all(Inbox(engine, 60))) == sorted([*NOT_COMMANDS, "/help"])


def test_taps_that_ask_the_model_are_left_to_the_inbox_lanes(engine: Engine) -> None:
    """/translate and /explain call the model: the commands lane, there for answers that need
    none, never waits on it. /say needs none."""
    asking = ["/translate", "/Translate@PamBot 41", "/explain 41"]
    for text in [*asking, "/say 41"]:
        assert Inbox(engine, 60).accept(inbound(unique_user(), text))

    assert claim_all(CommandInbox(engine, 60)) == ["/say 41"]
    assert sorted(claim_all(Inbox(engine, 60))) == sorted(asking)


def test_a_command_waits_for_its_learners_older_message(engine: Engine) -> None:
    inbox, commands = Inbox(engine, 60), CommandInbox(engine, 60)
    user = unique_user()
    assert inbox.accept(inbound(user, "Hola"))
    assert inbox.accept(inbound(user, "/forget"))
    assert commands.claim_next() is None

    chat = inbox.claim_next()
    assert chat is not None and chat.text == "Hola"
    assert commands.claim_next() is None, "its message is still being answered"
    assert inbox.complete(chat, ["¡Hola!"])
    forget = commands.claim_next()
    assert forget is not None and forget.text == "/forget"
