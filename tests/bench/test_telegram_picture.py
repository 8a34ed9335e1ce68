"""The README's Telegram picture: its collection step runs `pam telegram` against the loopback
Telegram and the scripted model and gets back what Pam really sent — her texts, the inline
keyboard under her reply, one answer and one model call per tap — and its drawing makes a
PNG of any such chat."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.telegram_drawing import Message, draw
from bench.telegram_picture import LINES, SCRIPT, Chat, Sent, collect, pictured


@pytest.mark.slow
def test_the_chat_is_what_pam_sent_through_telegram(tmp_path: Path) -> None:
    chat = collect(tmp_path)

    learner = [s for s in chat.sent if s.learner]
    assert [s.text for s in learner if not s.tapped] == LINES
    pam = [s for s in chat.sent if not s.learner]
    assert len(pam) == len(learner)  # one answer to each line and each tap
    # Her reply, the correction under it, and her buttons in German (Lena's app is German).
    reply = pam[len(LINES) - 1]
    assert reply.text.startswith(SCRIPT.reply["reply"])
    assert "<s>he ido</s> → <b>fui</b>" in reply.text
    labels = [label for row in reply.keyboard for label in row]
    assert labels[:2] == ["Übersetzen", "Erklären"]
    assert [s.tapped for s in learner if s.tapped] == labels[:2]
    # Each tap's answer is the model's, and cost one call.
    assert pam[-2].text == SCRIPT.translate
    assert "Beispiel: Ayer fui a la playa." in pam[-1].text
    assert chat.model_tasks == ["reply", "translate", "explain"]


def test_a_chat_is_drawn_as_a_png(tmp_path: Path) -> None:
    chat = Chat(
        [
            Sent(True, "/level A2"),
            Sent(
                False,
                "¡Hola!\n\n✏️ <s>yo es</s> → <b>yo soy</b> — <i>ser &amp; estar</i>",
                (("Übersetzen", "Erklären"), ("🔊 Anhören", "Weniger Korrekturen und mehr")),
            ),
            Sent(True, "", tapped="Übersetzen"),
            Sent(False, "Hallo!"),
        ]
    )
    shown = pictured(chat, start="23:59")
    assert [m.time for m in shown] == ["23:59", "23:59", "00:00", "00:00"]
    path = tmp_path / "chat.png"
    draw(shown, path, learner="Lena")
    assert path.read_bytes().startswith(b"\x89PNG")


def test_a_character_no_font_can_draw_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no glyph"):
        draw([Message(False, "Hola 🦜")], tmp_path / "chat.png", learner="Lena")
