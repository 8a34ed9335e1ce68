"""The terminal loop of `pam chat` in-process, with the real tutor and the fake model: what a
script sees, what a person at a terminal sees, and the operator's problems on stderr."""

from __future__ import annotations

import io
import re
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from bot import phrases
from bot.terminal import (
    BOLD,
    CHART,
    CYAN,
    ERASE_LINE,
    PROMPT,
    RESET,
    TYPING,
    Typing,
    chart_file,
    chat,
    file_name,
    files_of,
    history_file,
    styled,
    wants_colour,
)
from bot.turn import forgetting
from bot.worker.runtime import Pam
from memory.clock import ManualClock
from memory.llm import Misconfigured
from tests.fakes import FakeChatModel, reply_json

CORRECTED = reply_json(
    "¡Qué bien!",
    [
        {
            "original": "yo es",
            "corrected": "yo soy",
            "explanation": "'ser': soy",
            "category": "conjugation",
        }
    ],
)
SHOWN = "¡Qué bien!\n\n✏️ yo es → yo soy — 'ser': soy"
KEY_REJECTED = "the API key was rejected by http://127.0.0.1:9/v1: set OPENAI_API_KEY"
NO_MODEL = "http://127.0.0.1:9/v1 has no model 'gpt-nope': set PAM_MODEL"


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def run(pam: Pam, lines: list[str], stdin: io.StringIO | None = None) -> tuple[str, str]:
    """`chat` over `lines`; what it wrote to stdout and to stderr."""
    stdin = stdin or io.StringIO("".join(f"{line}\n" for line in lines))
    stdout = Terminal() if stdin.isatty() else io.StringIO()
    stderr = io.StringIO()
    chat(pam.local_turns(), "lena", stdin, stdout, stderr)
    return stdout.getvalue(), stderr.getvalue()


def test_a_script_gets_the_answers_and_nothing_else(pam: Pam, fake_model: FakeChatModel) -> None:
    fake_model.queue("reply", CORRECTED, reply_json("Vale."))

    stdout, stderr = run(pam, ["Hola, yo es Lena", "", "Adiós", "/quit", "never read"])

    assert stdout == f"pam> {SHOWN}\n\npam> Vale.\n\n"
    assert stderr == ""
    assert len(fake_model.of("reply")) == 2


def test_a_configuration_problem_is_said_on_stderr_once_per_cause(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    fake_model.queue(
        "reply",
        Misconfigured("401 Unauthorized", KEY_REJECTED),
        Misconfigured("401 Unauthorized", KEY_REJECTED),
        reply_json("Vale."),
        Misconfigured("401 Unauthorized", KEY_REJECTED),
        Misconfigured("404 model_not_found", NO_MODEL),
    )

    stdout, stderr = run(pam, ["uno", "dos", "tres", "cuatro", "cinco"])

    apology = phrases.APOLOGY
    assert (
        stdout.split("pam> ")[1:] == [f"{apology}\n\n"] * 2 + ["Vale.\n\n"] + [f"{apology}\n\n"] * 2
    ), "the learner still gets the persona's answer"
    # Once for the first two, again after it had worked in between, and for the new cause.
    assert stderr.splitlines() == [
        f"pam: {KEY_REJECTED}",
        f"pam: {KEY_REJECTED}",
        f"pam: {NO_MODEL}",
    ]


def test_at_a_terminal_pam_prompts_sets_corrections_apart_and_ends_on_a_new_line(
    pam: Pam, fake_model: FakeChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    fake_model.queue("reply", CORRECTED)

    stdout, _ = run(pam, [], stdin=Terminal("Hola, yo es Lena\n"))  # then end of input: Ctrl-D

    banner, _, conversation = stdout.partition("\n\n")
    assert banner.startswith("Pam is here, lena.") and "Ctrl-D" in banner
    # On a loaded machine the reply may take past the typing indicator's delay: it shows and
    # is erased before the answer (test_typing_shows_while_a_reply_takes_long_...), and the
    # answer's line is the same either way.
    conversation = conversation.replace(TYPING + ERASE_LINE, "", 1)
    assert conversation == (
        f"{PROMPT}{BOLD}pam>{RESET} ¡Qué bien!\n\n{CYAN}✏️ yo es → yo soy — 'ser': soy{RESET}\n\n"
        f"{PROMPT}\n"
    )


@pytest.mark.parametrize(
    ("term", "no_color", "colour"),
    [("xterm", None, True), ("xterm", "1", False), ("dumb", None, False), (None, None, False)],
)
def test_colour_only_where_the_terminal_shows_it_and_no_color_is_unset(
    monkeypatch: pytest.MonkeyPatch, term: str | None, no_color: str | None, colour: bool
) -> None:
    for name, value in (("TERM", term), ("NO_COLOR", no_color)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert wants_colour(Terminal()) is colour
    assert wants_colour(io.StringIO()) is False  # piped: never


def test_styled_colours_correction_lines_only() -> None:
    assert styled(SHOWN, colour=False) == SHOWN
    assert styled(SHOWN, colour=True) == (
        f"¡Qué bien!\n\n{CYAN}✏️ yo es → yo soy — 'ser': soy{RESET}"
    )


def test_typing_shows_while_a_reply_takes_long_and_is_erased_before_it() -> None:
    stream = Terminal()
    with Typing(stream, after=0.0) as typing:
        # The reply "takes long": until the indicator is up (bounded, so a broken Typing
        # fails here instead of hanging the run).
        for _ in range(2000):
            if typing.shown:
                break
            threading.Event().wait(0.01)
        assert typing.shown
        assert stream.getvalue() == TYPING
    assert stream.getvalue() == TYPING + ERASE_LINE


def test_a_quick_reply_shows_no_typing_indicator() -> None:
    stream = Terminal()
    with Typing(stream, after=3600.0):
        pass
    assert stream.getvalue() == ""


def test_progress_writes_the_chart_where_asked_and_says_where(pam: Pam, tmp_path: Path) -> None:
    clock = ManualClock(datetime(2026, 11, 25, 9, 30, 5, tzinfo=UTC))
    stdin, stdout, stderr = io.StringIO("/progress\n"), io.StringIO(), io.StringIO()
    user = "lena/../../etc"  # a name is no path
    chat(
        pam.local_turns(),
        user,
        stdin,
        stdout,
        stderr,
        charts=pam.store.charts,
        chart_dir=tmp_path,
        clock=clock,
    )
    summary, where = stdout.getvalue().split("pam> ")[1:]
    assert summary.startswith("Nothing to show yet")
    path = tmp_path / f"pam-progress-{file_name(user)}-20261125-093005.png"
    assert file_name(user).startswith("lena_etc.")
    assert where == f"{CHART}{path}\n\n"
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert stderr.getvalue() == ""


def test_a_chart_that_cannot_be_written_is_said_on_stderr(pam: Pam, tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    stdin, stdout, stderr = io.StringIO("/progress\n"), io.StringIO(), io.StringIO()
    chat(
        pam.local_turns(), "lena", stdin, stdout, stderr, charts=pam.store.charts, chart_dir=blocked
    )
    assert len(stdout.getvalue().split("pam> ")) == 2  # the summary alone
    assert "could not write the chart" in stderr.getvalue()


def test_the_chart_file_name_is_safe_and_dated() -> None:
    now = ManualClock(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert chart_file(Path("out"), "lena-2", now) == Path(
        "out/pam-progress-lena-2-20260102-030405.png"
    )
    name = chart_file(Path("out"), "José M.", now)
    assert re.fullmatch(r"out/pam-progress-Jos_M_\.[0-9a-f]{8}-20260102-030405\.png", str(name))
    assert re.fullmatch(
        r"pam-progress-learner\.[0-9a-f]{8}-20260102-030405\.png", chart_file(Path(), "", now).name
    )


@given(st.text(max_size=60), st.text(max_size=60))
def test_no_two_users_share_a_file_name(one: str, other: str) -> None:
    """Their charts, spoken replies and line histories are apart: one user's /forget never
    deletes another's ("José M." and "Jos_M_" were one name once)."""
    assume(one != other)
    assert file_name(one) != file_name(other)
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", file_name(one))


def test_the_files_of_a_user_are_theirs_alone(tmp_path: Path) -> None:
    now = ManualClock(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    users = ("lena", "lena-x", "lena!", "Lena", "lena-20260102")
    for user in users:
        chart_file(tmp_path, user, now).write_bytes(b"png")
        chart_file(tmp_path, user, now, "voice").write_bytes(b"ogg")
    (tmp_path / "pam-progress-lena-notes.txt").write_text("not Pam's")
    for user in users:
        assert files_of(tmp_path, user) == sorted(
            [chart_file(tmp_path, user, now), chart_file(tmp_path, user, now, "voice")]
        )
    assert files_of(tmp_path / "nowhere", "lena") == []


def test_a_confirmed_forget_deletes_the_users_charts_voice_and_history(
    pam: Pam, fake_model: FakeChatModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    clock = ManualClock(datetime(2026, 11, 25, 9, 30, 5, tzinfo=UTC))
    others = chart_file(tmp_path, "kai", clock)
    others.write_bytes(b"png")
    history_file("kai").write_text("Hola, soy Kai\n")

    def session(lines: list[str]) -> str:
        stdin, stdout = io.StringIO("".join(f"{line}\n" for line in lines)), io.StringIO()
        chat(
            pam.local_turns(),
            "lena",
            stdin,
            stdout,
            io.StringIO(),
            charts=pam.store.charts,
            chart_dir=tmp_path,
            clock=clock,
        )
        return stdout.getvalue()

    session(["Hola, soy Lena", "/progress"])
    history_file("lena").write_text("Hola, soy Lena\n")  # as an interactive session keeps it
    [chart] = files_of(tmp_path, "lena")

    asked = session(["/forget"])  # asked: nothing goes yet
    assert forgetting.ASK in asked
    assert chart.exists() and history_file("lena").exists()
    session(["/forget", "yes"])

    assert not chart.exists() and not history_file("lena").exists()
    assert others.exists() and history_file("kai").read_text() == "Hola, soy Kai\n"
    assert pam.store.learners.find_learner("terminal:lena") is None
