"""Slash commands through the tutor: answers, settings changes, /profile and /forget."""

from __future__ import annotations

import re

import pytest

from bot import phrases
from bot.turn import forgetting
from bot.turn.commands import parse_command
from bot.turn.values import TurnRequest
from bot.worker.runtime import Pam
from memory.database.records import LEARNER, CorrectionRecord
from tests.bot.test_languages import EXPLAINED_IN
from tests.conftest import learner_of, unique_user
from tests.fakes import FakeChatModel
from tests.support import forget, handle


def ask(pam: Pam, user: str, text: str) -> str:
    """The one answer Pam gives to `text`."""
    answers = handle(pam, user, text)
    assert len(answers) == 1, answers
    return answers[0]


def test_start_welcomes_and_asks_for_a_language(pam: Pam, fake_model: FakeChatModel) -> None:
    answer = ask(pam, unique_user(), "/start")
    assert "I'm Pam" in answer
    assert phrases.NEEDS_LANGUAGE in answer
    assert "/language" in answer and "/forget" in answer
    assert fake_model.calls == []


def test_start_shows_the_settings_once_known(pam: Pam, fake_model: FakeChatModel) -> None:
    user = unique_user()
    ask(pam, user, "/language Spanish English")
    ask(pam, user, "/level b1")
    answer = ask(pam, user, "/start")
    assert "We're practising Spanish at level B1, with corrections explained in Spanish." in answer
    assert fake_model.calls == []


def test_start_says_when_the_native_language_was_only_guessed(pam: Pam) -> None:
    """Before the learner says their native language, Pam's words follow the one guessed from
    their app or number (native_guess), and /start says so and how to change it."""
    user = unique_user()
    ask(pam, user, "/language Spanish")
    info = learner_of(pam, user)
    pam.store.learners.update_settings(info.id, native_guess="Portuguese (Brazil)")

    answer = ask(pam, user, "/start")

    assert answer.startswith("Oi, eu sou a Pam!")
    assert "Imaginei que seu idioma nativo é português (Brasil)" in answer
    assert "/language <idioma que você pratica> <seu idioma nativo>" in answer

    ask(pam, user, "/language Spanish German")  # said: no more guessing
    answer = ask(pam, user, "/start")
    assert answer.startswith("Hallo, ich bin Pam!")
    assert "geraten" not in answer


def test_help_lists_the_new_commands(pam: Pam) -> None:
    answer = ask(pam, unique_user(), "/help")
    for command in ("/corrections few|normal|all", "/translate", "/explain", "/say", "/forget"):
        assert command in answer
    assert "(I ask first)" in answer


def test_help_lists_every_command(pam: Pam, fake_model: FakeChatModel) -> None:
    answer = ask(pam, unique_user(), "/help")
    assert answer == phrases.help_text(None)
    for command in ("/language", "/level", "/profile", "/forget", "/help"):
        assert command in answer
    assert fake_model.calls == []


@pytest.mark.parametrize("text", ["/help@PamBot", "/HELP", "/Help@pambot extra", "  /help  "])
def test_command_names_are_case_insensitive_and_telegram_style(
    pam: Pam, fake_model: FakeChatModel, text: str
) -> None:
    assert ask(pam, unique_user(), text) == phrases.help_text(None)
    assert fake_model.calls == []


def test_parse_command() -> None:
    command = parse_command("/Language@PamBot Spanish English")
    assert command is not None and command.name == "language"
    assert command.args == ["Spanish", "English"]
    assert parse_command("hola /help") is None
    assert parse_command("/") is None
    assert parse_command("/ hola") is None


def test_language_with_native(pam: Pam, fake_model: FakeChatModel) -> None:
    user = unique_user()
    answer = ask(pam, user, "/language Spanish English")
    assert "Spanish" in answer and "English" in answer
    info = learner_of(pam, user)
    assert (info.target_language, info.native_language) == ("Spanish", "English")
    assert fake_model.calls == []


@pytest.mark.parametrize("name", ["español", "es", "ES", "SPANISH", "spanish"])
def test_language_accepts_native_names_and_codes(
    pam: Pam, fake_model: FakeChatModel, name: str
) -> None:
    user = unique_user()
    answer = ask(pam, user, f"/language {name}")
    assert "Spanish" in answer
    assert learner_of(pam, user).target_language == "Spanish"
    assert fake_model.calls == []


def test_language_keeps_the_native_language_when_only_the_target_changes(pam: Pam) -> None:
    user = unique_user()
    ask(pam, user, "/language Spanish German")
    ask(pam, user, "/LANGUAGE@PamBot fr")
    info = learner_of(pam, user)
    assert (info.target_language, info.native_language) == ("French", "German")


@pytest.mark.parametrize(
    "text",
    [
        "/language",
        "/language klingonx123",
        "/language Spanish English French",
        "/language Spanish klingonx123",
        "/language Spanish Spanish",
    ],
)
def test_bad_language_arguments_get_usage(pam: Pam, fake_model: FakeChatModel, text: str) -> None:
    user = unique_user()
    answer = ask(pam, user, text)
    assert "/language Spanish" in answer  # the usage example
    info = learner_of(pam, user)
    assert (info.target_language, info.native_language) == (None, None)
    assert fake_model.calls == []


@pytest.mark.parametrize("word", ["klingonx123", "frenchfries", "JavaScript"])
def test_a_word_that_merely_starts_like_a_language_is_unknown(pam: Pam, word: str) -> None:
    """langcodes.find falls back to the longest known prefix ("frenchfries" → French)."""
    user = unique_user()
    answer = ask(pam, user, f"/language {word}")
    assert "I don't know the language" in answer and word in answer
    assert learner_of(pam, user).target_language is None


@pytest.mark.parametrize("code", ["und", "zxx", "mul"])
def test_codes_that_are_not_languages_are_refused(pam: Pam, code: str) -> None:
    user = unique_user()
    ask(pam, user, f"/language {code}")
    assert learner_of(pam, user).target_language is None


def test_a_valid_tag_with_a_long_name_is_answered_not_crashed(pam: Pam) -> None:
    """langcodes names this 17-character tag in 61 characters; the column holds 60."""
    user = unique_user()
    answer = ask(pam, user, "/language zh-Hant-GS-pinyin")
    assert answer
    assert ask(pam, user, "/help") == phrases.help_text(None)


@pytest.mark.parametrize("text", ["/level b1", "/level B1", "/LEVEL  b1 ", "/level@PamBot b1"])
def test_level(pam: Pam, fake_model: FakeChatModel, text: str) -> None:
    user = unique_user()
    ask(pam, user, "/language Spanish English")
    answer = ask(pam, user, text)
    assert answer == (
        "Got it. We're practising Spanish at level B1, with corrections explained in Spanish."
    )
    assert learner_of(pam, user).level == "B1"
    assert fake_model.calls == []


@pytest.mark.parametrize(("level", "explained_in"), EXPLAINED_IN)
def test_the_level_confirmation_and_the_prompt_name_the_same_explanation_language(
    pam: Pam, fake_model: FakeChatModel, level: str, explained_in: str
) -> None:
    user = unique_user()
    ask(pam, user, "/language es en")

    answer = ask(pam, user, f"/level {level}")
    handle(pam, user, "Hola, yo es Lena")

    assert answer == (
        f"Got it. We're practising Spanish at level {level}, "
        f"with corrections explained in {explained_in}."
    )
    assert f"- explanation language: {explained_in}\n" in fake_model.of("reply")[-1].text
    assert explained_in in ask(pam, user, "/start") and explained_in in ask(pam, user, "/profile")


def test_without_a_level_corrections_are_explained_in_the_target_language(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user = unique_user()

    answer = ask(pam, user, "/language es en")
    handle(pam, user, "Hola, yo es Lena")

    assert answer == (
        "Great! We're practising Spanish, with corrections explained in Spanish "
        "(at /level A1 or A2, in English). Say hi whenever you're ready!"
    )
    assert "- explanation language: Spanish\n" in fake_model.of("reply")[-1].text


def test_level_before_a_language_is_kept(pam: Pam, fake_model: FakeChatModel) -> None:
    user = unique_user()
    answer = ask(pam, user, "/level c2")
    assert answer.startswith("Got it: level C2.")
    assert "/language" in answer
    assert learner_of(pam, user).level == "C2"
    assert fake_model.calls == []


@pytest.mark.parametrize("text", ["/level Z9", "/level", "/level B7 C9", "/level whatever"])
def test_bad_level_gets_usage(pam: Pam, fake_model: FakeChatModel, text: str) -> None:
    user = unique_user()
    answer = ask(pam, user, text)
    assert "A1, A2, B1, B2, C1, C2" in answer
    assert "/level A2" in answer
    assert learner_of(pam, user).level is None
    assert fake_model.calls == []


@pytest.mark.parametrize("text", ["/foo", "/foo@PamBot bar", "/etc/passwd"])
def test_unknown_command_is_helpful(pam: Pam, fake_model: FakeChatModel, text: str) -> None:
    answer = ask(pam, unique_user(), text)
    assert "I don't know the command" in answer
    assert phrases.help_text(None) in answer
    assert fake_model.calls == []


def test_profile_of_a_new_learner(pam: Pam, fake_model: FakeChatModel) -> None:
    answer = ask(pam, unique_user(), "/profile")
    assert "I haven't learned anything about you yet" in answer
    assert "There's no summary yet" in answer
    assert "I keep our last" not in answer  # nothing kept yet
    assert "/forget" in answer
    assert fake_model.calls == []


def test_profile_shows_what_pam_knows(pam: Pam, fake_model: FakeChatModel) -> None:
    user = unique_user()
    ask(pam, user, "/language Spanish English")
    info = learner_of(pam, user)
    first = handle(pam, user, "Hola, yo es Lena")
    assert first
    messages = pam.store.conversation.messages(info.id)
    profile = {
        "who": "Lena, a nurse from Berlin",
        "interests": ["climbing", "jazz"],
        "recurring_mistakes": ["ser/estar"],
        "level": "A2",
    }
    assert pam.store.memory.save_profile(info.id, 0, profile, messages[0].id, 1)
    summary = "Lena is planning a trip to Valencia in May."
    assert pam.store.memory.save_summary(info.id, 0, summary, 12, messages[0].id)
    pam.store.ledger.add_corrections(
        info.id, messages[0].id, [CorrectionRecord("yo es", "yo soy", "ser", "conjugation")]
    )
    calls_before = len(fake_model.calls)

    answer = ask(pam, user, "/profile")

    # No level set: the one Pam learned (A2) decides, as it does in the prompt.
    assert "We're practising Spanish, with corrections explained in English." in answer
    assert "• Who you are: Lena, a nurse from Berlin" in answer
    assert "• Interests: climbing and jazz" in answer  # a list as the locale writes one
    assert "• Mistakes you often make: ser/estar" in answer
    assert "• Level (my estimate): A2" in answer
    # Dates as a person reads them, not 2026-12-02T01:05:42+00:00.
    assert re.search(r"\(learned from 1 of your messages, last updated \w+ \d+, 20\d\d at ", answer)
    assert not re.search(r"\d{4}-\d\d-\d\d", answer)
    assert "kept as a summary (updated once, " in answer
    assert summary in answer
    assert "I keep our last message word for word." in answer
    assert "Recent corrections:" in answer
    assert "yo es → yo soy" in answer
    assert len(fake_model.calls) == calls_before


def test_profile_says_how_many_messages_pam_keeps_word_for_word(pam: Pam) -> None:
    """The newest PAM_WINDOW_MESSAGES (10) always; older ones not folded yet are said apart:
    they are still word for word, until the next summary takes them."""
    user = unique_user()
    ask(pam, user, "/language Spanish English")
    for n in range(6):  # 12 messages, Pam's replies included; too few tokens to fold
        assert handle(pam, user, f"Hola {n}")

    answer = ask(pam, user, "/profile")

    assert (
        "I keep our last 10 messages word for word. 2 older ones are waiting to be summarised."
        in answer
    )


def test_profile_is_in_the_native_language(pam: Pam) -> None:
    user = unique_user()
    ask(pam, user, "/language Spanish German")
    info = learner_of(pam, user)
    assert handle(pam, user, "Hola, yo es Lena")
    messages = pam.store.conversation.messages(info.id)
    profile = {"interests": ["Klettern", "Jazz"]}
    assert pam.store.memory.save_profile(info.id, 0, profile, messages[0].id, 1)

    answer = ask(pam, user, "/profile")

    assert answer.startswith("Das weiß ich über dich:")
    assert "Wir üben Spanisch, Korrekturen erkläre ich auf " in answer
    assert "• Interessen: Klettern und Jazz" in answer
    assert re.search(r"zuletzt aktualisiert am \d+\. \w+ 20\d\d um \d\d:\d\d UTC", answer)
    assert "Unsere letzten 2 Nachrichten behalte ich Wort für Wort." in answer
    assert answer.endswith("Mit /forget löschst du das alles.")


def test_forget_erases_every_row_and_confirms(pam: Pam, fake_model: FakeChatModel) -> None:
    user, other = unique_user("forget"), unique_user("keep")
    for who in (user, other):
        ask(pam, who, "/language Spanish English")
        # Each message has the mistake its correction quotes (else it is dropped).
        for text in ("Hola, yo es Lena", "Yo es enfermera", "Y yo es de Berlín"):
            fake_model.queue(
                "reply",
                '{"reply": "¡Qué bien!", "corrections": '
                '[{"original": "yo es", "corrected": "yo soy", "category": "conjugation"}]}',
            )
            handle(pam, who, text)
    info, other_info = learner_of(pam, user), learner_of(pam, other)
    before = pam.store.inspection.rows_about(info.id, user)
    assert before["messages"] == 6 and before["corrections"] == 3 and before["llm_usage"] == 3
    other_before = pam.store.inspection.rows_about(other_info.id, other)
    calls_before = len(fake_model.calls)

    assert forget(pam, user) == [phrases.FORGOTTEN]

    assert set(pam.store.inspection.rows_about(info.id, user).values()) == {0}
    assert pam.store.learners.find_learner(user) is None
    assert pam.store.inspection.rows_about(other_info.id, other) == other_before
    assert len(fake_model.calls) == calls_before


def test_after_forget_nothing_old_reaches_the_prompt(pam: Pam, fake_model: FakeChatModel) -> None:
    user = unique_user()
    handle(pam, user, "Mi secreto es PINEAPPLE42")
    forget(pam, user)
    handle(pam, user, "Hola de nuevo")
    assert "PINEAPPLE42" not in fake_model.of("reply")[-1].text
    fresh = learner_of(pam, user)
    assert [m.content for m in pam.store.conversation.messages(fresh.id, role=LEARNER)] == [
        "Hola de nuevo"
    ]


def test_forget_of_a_stranger_is_harmless(pam: Pam, fake_model: FakeChatModel) -> None:
    """Pam knows nothing of them: she says so, and makes no learner up to ask."""
    user = unique_user()
    assert ask(pam, user, "/forget") == forgetting.NOTHING_KEPT
    assert pam.store.learners.find_learner(user) is None
    assert fake_model.calls == []


# -- in a group --------------------------------------------------------------------------------


class Group:
    """A channel's group chat (bot.channels.GroupChats): its link into the private chat."""

    def __init__(self, link: str | None = "https://t.me/PamBot") -> None:
        self.link = link
        self.asked: list[str] = []

    def in_group(self, chat_id: str) -> bool:
        return True

    def private_chat_link(self, start: str) -> str | None:
        self.asked.append(start)
        return f"{self.link}?start={start}" if self.link else None


def in_group(pam: Pam, user: str, text: str, group: Group) -> list[str]:
    return pam.tutor.answer(TurnRequest(user, text, group=group)).replies


@pytest.mark.parametrize("command", ["profile", "review", "progress"])
def test_in_a_group_what_shows_the_learner_is_a_note_in_their_native_language(
    pam: Pam, command: str
) -> None:
    user, group = unique_user(), Group()
    ask(pam, user, "/language German Spanish")
    ask(pam, user, "Ich habe eine Schwester, sie ist Krankenschwester.")

    [note] = in_group(pam, user, f"/{command}@PamBot", group)

    assert note == phrases.private_only("Spanish", f"https://t.me/PamBot?start={command}")
    assert note.startswith("Eso queda entre tú y yo")
    assert group.asked == [command]


def test_in_a_group_other_commands_are_answered_as_anywhere(pam: Pam) -> None:
    group = Group()
    assert in_group(pam, unique_user(), "/help", group) == [phrases.help_text(None)]
    assert group.asked == []


def test_the_start_link_answers_the_command_in_private(pam: Pam) -> None:
    user = unique_user()
    ask(pam, user, "/language Spanish English")
    assert ask(pam, user, "/start profile").startswith("Here's what I know about you")
    assert "I'm Pam" in ask(pam, user, "/start anything-else")
    # In a group, the start link's words are no way around the note.
    [welcome] = in_group(pam, user, "/start profile", Group())
    assert "I'm Pam" in welcome


def test_forget_in_a_group_asks_first_and_says_what_it_erased(pam: Pam) -> None:
    user, group = unique_user(), Group()
    ask(pam, user, "Hola")
    asked = pam.tutor.answer(TurnRequest(user, "/forget", group=group))
    assert asked.replies[0].startswith(forgetting.ASK_IN_GROUP)
    assert pam.store.learners.find_learner(user) is not None  # asked: nothing erased yet
    [yes, _] = asked.buttons
    assert in_group(pam, user, yes.command, group) == [phrases.FORGOTTEN_IN_GROUP]
    assert pam.store.learners.find_learner(user) is None
