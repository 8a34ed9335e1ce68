"""The README's chat picture is drawn from what `pam chat` printed: a learner line, then Pam's
answer with its `✏️` corrections set apart."""

from __future__ import annotations

from pathlib import Path

from bench.chat_picture import Bubble, bubbles, draw


def test_answers_become_bubbles_with_their_corrections() -> None:
    answer = "¡Qué bien! ¿Dónde trabajas?\n\n✏️ yo es → yo soy — 'ser': soy"
    chat = bubbles(["Yo es enfermera."], [answer])
    assert chat == [
        Bubble(True, "Yo es enfermera."),
        Bubble(False, "¡Qué bien! ¿Dónde trabajas?", ("yo es → yo soy — 'ser': soy",)),
    ]


def test_the_picture_is_a_png(tmp_path: Path) -> None:
    path = tmp_path / "chat.png"
    draw(bubbles(["Hola"], ["¡Hola! ¿Qué tal?\n\n✏️ hola → Hola — mayúscula"]), "a model", path)
    assert path.read_bytes().startswith(b"\x89PNG")
