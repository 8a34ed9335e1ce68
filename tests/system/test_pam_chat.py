"""The real `pam` command as a subprocess, talking to a local OpenAI-compatible server (its
setup's error paths and `pam db upgrade` in this process)."""

from __future__ import annotations

import json
import os
import re
import select as io_select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, inspect, select

from bot import phrases
from bot.corrections import chat_part, parse_answer, render
from bot.turn import forgetting
from loopback.harness import free_port
from loopback.openai_server import Fault, OpenAIServer, default_answer
from memory.database import db
from memory.database.models import Correction, MemoryJob, Message, Usage
from memory.database.records import LEARNER, PAM, StoredMessage
from memory.jobs.summary import transcript
from memory.store.message_store import Store
from memory.tokens import TokenCounter
from tests.conftest import ROOT
from tests.helpers.cli import run_pam as in_process

pytestmark = pytest.mark.slow

TIMEOUT = 120  # seconds: a hanging `pam` fails its test instead of the whole CI run
USER = "lena"
EXTERNAL_ID = f"terminal:{USER}"

# A learner's evening of chat: self-introduction facts, everyday topics, typical mistakes.
LINES = [
    "¡Hola Pam! Me llamo Lena y yo es de Berlín.",
    "Tengo 29 años y trabajo como enfermera en un hospital grande.",
    "Mi lengua materna es el alemán, pero también hablo inglés.",
    "Aprendo español porque mi novio es de Sevilla.",
    "En mi tiempo libre me gusta mucho cocinar para mis amigos.",
    "Ayer yo cociné una paella, pero el arroz estaba muy dura.",
    "Mi novio se llama Javier y él trabaja de profesor.",
    "Nosotros vivimos juntos desde dos años.",
    "Los fines de semana vamos al mercado para comprar verduras frescas.",
    "El sábado pasado yo fui al cine y veo una película de Almodóvar.",
    "La película era muy interesante pero un poco triste.",
    "Hoy estoy muy cansada porque trabajé en el turno de noche.",
    "En el hospital hay mucho trabajo en invierno, muchas personas están enfermos.",
    "Mi compañera de trabajo, Anja, también aprende español conmigo.",
    "Nosotras practicamos juntas los martes después del trabajo.",
    "Me gusta la música latina, sobre todo la salsa.",
    "Quiero aprender a bailar salsa pero soy muy mala bailarina.",
    "¿Tú sabes bailar? Yo creo que es muy difícil para mí.",
    "Mi hermano vive en Múnich y tiene dos hijos pequeños.",
    "Los niños se llaman Max y Paula, son muy simpáticos.",
    "El próximo mes yo voy a visitar a ellos por el cumpleaños de Paula.",
    "Este fin de semana quiero ir a escalar con unos amigos.",
    "Escalar es mi deporte favorito desde que era niña.",
    "El año pasado fuimos a escalar en Mallorca, fue increíble.",
    "Pero tengo un poco de miedo de las alturas, es raro, ¿no?",
    "Hoy hace mucho frío en Berlín, está nevando.",
    "Me gusta más el verano porque puedo ir al lago.",
    "Cuando hace calor, yo nado en el lago casi todos los días.",
    "Mi comida favorita es la tortilla de patatas de la madre de Javier.",
    "En agosto vamos a viajar a Valencia para visitar a su familia.",
    "Estoy nerviosa porque su familia habla muy rápido.",
    "La última vez yo no entendí nada cuando su abuela hablaba.",
    "Pero ella es muy amable y siempre me da mucha comida.",
    "¿Puedes recomendarme un libro fácil en español?",
    "Ahora leo un libro de cuentos cortos, pero hay muchas palabras que no conozco.",
    "Normalmente yo busco las palabras en el diccionario del móvil.",
    "Mañana tengo que trabajar temprano, a las seis de la mañana.",
    "Después del trabajo quiero cocinar una sopa de lentejas.",
    "Gracias por practicar conmigo, me ayudas mucho.",
    "Hasta mañana, Pam, que tengas una buena noche.",
]
assert len(LINES) == 40

# What the fake profile model "learns": (word in a new learner message, key, value).
FACTS = [
    ("Lena", "who", "Lena, a nurse from Berlin"),
    ("alemán", "native_language", "German"),
    ("español", "target_language", "Spanish"),
    # With the learner's own word, as profile.txt asks: a fact without one is dropped.
    ("cocinar", "interests", "cooking (cocinar)"),
    ("escalar", "interests", "climbing (escalar)"),
    ("Valencia", "misc", "plans a summer trip to Valencia"),
]
LIST_KEYS = {"interests", "misc"}
EVERYTHING_LEARNED = {
    "who": "Lena, a nurse from Berlin",
    "native_language": "German",
    "target_language": "Spanish",
    "interests": ["cooking (cocinar)", "climbing (escalar)"],
    "misc": ["plans a summer trip to Valencia"],
}
# What Pam adds to every profile it writes: the learner's mistake patterns (the server's reply
# corrects "yo es → yo soy" every turn; a rule-less correction is named by its change).
PATTERNS = {"recurring_mistakes": ["es → soy"]}
NOTHING_LEARNED = "(nothing learned yet)"
NO_SUMMARY = "(no earlier conversation yet)"
SUMMARY_NUMBER = re.compile(r"^Summary #(\d+):")


# -- helpers -------------------------------------------------------------------------------


def section(text: str, tag: str) -> str:
    """The content of the `<tag>` data section of a prompt."""
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.DOTALL)
    assert match, f"no <{tag}> section in prompt"
    return match.group(1)


def learned_profile(current: dict[str, Any], new_lines: list[str]) -> dict[str, Any] | None:
    """The profile a diligent model would write: the current one plus the facts in the new
    messages; None when nothing is new."""
    profile = json.loads(json.dumps(current))
    for word, key, value in FACTS:
        if any(word in line for line in new_lines):
            if key in LIST_KEYS:
                values = profile.setdefault(key, [])
                if value not in values:
                    values.append(value)
            else:
                profile[key] = value
    return None if profile == current else profile


def profile_batch(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The current profile and the new learner messages of a profile request (each day's
    under a date line, "[Thu 2026-03-05]", which the messages' plans are dated by)."""
    user = body["messages"][1]["content"]
    lines = [
        line
        for line in section(user, "new_learner_messages").splitlines()
        if not (line.startswith("[") and line.endswith("]"))
    ]
    assert all(line.startswith("- ") for line in lines), lines
    return json.loads(section(user, "current_profile")), [line[2:] for line in lines]


def answer(task: str, body: dict[str, Any], count: int) -> str:
    """The server's answers: the default ones, and a profile learned from the messages."""
    if task != "profile":
        return default_answer(task, body, count)
    learned = learned_profile(*profile_batch(body))
    return json.dumps(learned, ensure_ascii=False) if learned else '{"no_change": true}'


def shown_reply(count: int, line: str | None = None, after: str = "") -> str:
    """What Pam prints and stores for the server's `count`-th reply (corrections included):
    to the learner's `line` (the server corrects "yo es" only where it is), after Pam's
    previous reply `after` (whose ending the server does not repeat)."""
    messages = [{"role": "assistant", "content": after}] if after else []
    if line is not None:
        messages.append({"role": "user", "content": line})
    return render(parse_answer(default_answer("reply", {"messages": messages}, count)))


def shown_replies(lines: list[str], first: int = 1, after: str = "") -> list[str]:
    """What Pam prints for `lines`, answered in turn by the server's `first`-th reply on."""
    shown: list[str] = []
    for count, line in enumerate(lines, start=first):
        shown.append(shown_reply(count, line, shown[-1] if shown else after))
    return shown


def pam_env(tmp_path: Path, server: OpenAIServer | None, **knobs: str) -> dict[str, str]:
    """The environment of a `pam` subprocess: this one's (cleaned of PAM_/OPENAI_ variables by
    the autouse fixture, TIKTOKEN_CACHE_DIR kept), a SQLite file in `tmp_path`, the server."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["DATABASE_URL"] = database_url(tmp_path)
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
        env["OPENAI_API_KEY"] = "test"
    env.update(knobs)
    return env


def database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'pam.db'}"


def run_pam(
    *args: str, cwd: Path, env: dict[str, str], stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    """Run `pam ARGS` to completion, feeding it `stdin`; bounded by TIMEOUT."""
    return subprocess.run(
        [sys.executable, "-m", "webhooks.cli", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=TIMEOUT,
        check=False,
    )


def chat(
    lines: list[str], *, cwd: Path, env: dict[str, str], user: str = USER
) -> tuple[subprocess.CompletedProcess[bytes], str]:
    """`pam chat --user lena` (or `user`) with `lines` on stdin; the process and its decoded
    stdout."""
    stdin = "".join(f"{line}\n" for line in lines).encode()
    process = run_pam("chat", "--user", user, cwd=cwd, env=env, stdin=stdin)
    stderr = process.stderr.decode(errors="replace")
    assert "Traceback" not in stderr, stderr
    return process, process.stdout.decode()


def answers(stdout: str) -> list[str]:
    """Pam's answers in `pam chat`'s output (each printed as `pam> …` and a blank line)."""
    assert stdout.startswith("pam> ") or not stdout, stdout
    return [part.removesuffix("\n\n") for part in stdout.split("pam> ")[1:]]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(answer=answer) as server:
        yield server


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Store]:
    """The store of the SQLite file the `pam` subprocess used (open it after it exits)."""
    engine = db.make_engine(database_url(tmp_path))
    yield Store(engine)
    engine.dispose()


def count_rows(store: Store, model: type[Any]) -> int:
    with store.inspection.sessions() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


# -- setup ---------------------------------------------------------------------------------


def test_without_llm_configuration_pam_chat_explains_the_setup(tmp_path: Path) -> None:
    env = pam_env(tmp_path, None)
    del env["DATABASE_URL"]  # the default: a SQLite file in the working directory

    code, out, help_text = in_process(
        "chat", "--user", USER, cwd=tmp_path, env=env, stdin=b"Hola\n"
    )

    assert code != 0
    assert "OPENAI_API_KEY" in help_text
    assert "OPENAI_BASE_URL" in help_text
    assert "Ollama" in help_text
    assert "Traceback" not in help_text
    assert out == ""
    assert list(tmp_path.iterdir()) == [], "nothing is created before Pam can talk"


def test_db_upgrade_creates_the_schema_on_a_fresh_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "pam.db"
    path.parent.mkdir()
    env = pam_env(tmp_path, None, DATABASE_URL=f"sqlite:///{path}")

    first_code, first_out, first_err = in_process("db", "upgrade", cwd=tmp_path, env=env)
    again_code, again_out, again_err = in_process("db", "upgrade", cwd=tmp_path, env=env)

    assert first_code == 0, first_err
    assert again_code == 0, again_err
    assert "pam: applied " in first_out
    assert "pam: database is up to date (at " in again_out
    engine = db.make_engine(f"sqlite:///{path}")
    try:
        tables = set(inspect(engine).get_table_names())
        assert {
            "alembic_version",
            "learners",
            "messages",
            "summaries",
            "profiles",
            "corrections",
            "llm_usage",
            "memory_jobs",
        } <= tables
        learner = Store(engine).learners.learner("terminal:someone")
        assert Store(engine).conversation.messages(learner.id) == []
    finally:
        engine.dispose()


def test_db_upgrade_explains_a_sqlite_path_it_cannot_open(tmp_path: Path) -> None:
    env = pam_env(tmp_path, None, DATABASE_URL=f"sqlite:///{tmp_path / 'missing' / 'pam.db'}")

    code, _, stderr = in_process("db", "upgrade", cwd=tmp_path, env=env)

    assert code != 0
    assert "Traceback" not in stderr, "bad configuration deserves a clear answer, not a crash"
    assert stderr.startswith("pam: ")


# -- the acceptance session ----------------------------------------------------------------


def test_a_scripted_40_message_session_folds_learns_and_keeps_the_window(
    tmp_path: Path, server: OpenAIServer, open_store: Store
) -> None:
    env = pam_env(
        tmp_path,
        server,
        PAM_SUMMARY_TRIGGER_TOKENS="400",
        PAM_WINDOW_MESSAGES="10",
        PAM_PROFILE_EVERY="5",
        PAM_LLM_TIMEOUT="20",
        PAM_SHUTDOWN_WAIT_SECONDS="60",
    )

    process, stdout = chat(LINES, cwd=tmp_path, env=env)

    assert process.returncode == 0, process.stderr.decode()
    replies = shown_replies(LINES)
    assert answers(stdout) == replies
    assert b"tiktoken could not load" not in process.stderr

    # -- the database afterwards ----------------------------------------------------------
    store = open_store
    learner = store.learners.find_learner(EXTERNAL_ID)
    assert learner is not None
    conversation = store.conversation.messages(learner.id)
    assert len(conversation) == 80
    assert [(m.role, m.content) for m in conversation] == [
        pair
        for line, reply in zip(LINES, replies, strict=True)
        for pair in ((LEARNER, line), (PAM, reply))
    ]
    counter = TokenCounter("gpt-4o-mini")
    assert [m.tokens for m in conversation] == [
        counter.count_message(m.content) for m in conversation
    ], "token counts come from tiktoken (TIKTOKEN_CACHE_DIR reached the subprocess)"
    # One correction for each line that holds the mistake the server corrects (issue 32:
    # none is kept for a message without the words it quotes).
    mistaken = [line for line in LINES if "yo es" in line.lower()]
    assert mistaken
    assert len(store.ledger.corrections(learner.id, limit=100)) == len(mistaken)

    summaries = server.of("summary")
    profiles = server.of("profile")
    replies = server.of("reply")
    assert len(replies) == 40
    assert summaries, "the conversation passed the threshold: folds happened"
    assert profiles, "every 5 learner messages the profile job ran"

    summary = store.memory.summary(learner.id)
    assert summary.folds == len(summaries)
    assert summary.text == default_answer("summary", {}, len(summaries))
    assert summary.watermark < conversation[-10].id, "the last 10 messages are never folded"

    profile = store.memory.profile(learner.id)
    assert profile.data == EVERYTHING_LEARNED | PATTERNS
    assert "Lena" in profile.data["who"]

    usage = store.ledger.usage(learner.id)
    assert usage["reply"][0] == 40
    assert usage["summary"][0] == len(summaries)
    assert usage["profile"][0] == len(profiles)

    # -- folds: consecutive chunks, oldest first, none lost or repeated --------------------
    fold_ends = [0]  # fold_ends[j]: how many messages fold j and the ones before it hold
    for j, body in enumerate(summaries, start=1):
        user = body["messages"][1]["content"]
        expected_previous = default_answer("summary", {}, j - 1) if j > 1 else "(none yet)"
        assert section(user, "previous_summary") == expected_previous
        folded = section(user, "conversation")
        start = fold_ends[-1]
        end = next(
            (e for e in range(start + 1, 71) if transcript(conversation[start:e]) == folded),
            None,
        )
        assert end is not None, f"fold {j} is not the messages right after fold {j - 1}"
        fold_ends.append(end)
    assert conversation[fold_ends[-1] - 1].id == summary.watermark

    # -- profile jobs: every learner message read once, in order ---------------------------
    read: list[str] = []
    states: list[dict[str, Any]] = [{}]
    for body in profiles:
        current, new_lines = profile_batch(body)
        assert current == states[-1], "each profile job starts from the latest profile"
        read += new_lines
        learned = learned_profile(current, new_lines)
        if learned is not None:
            states.append(learned | PATTERNS)
    assert read == LINES[: len(read)]
    assert len(read) >= 36, "at most profile_every - 1 learner messages are left unread"
    assert profile.messages_processed == len(read)
    assert states[-1] == EVERYTHING_LEARNED | PATTERNS

    # -- every reply prompt: profile, summary and the unfolded conversation ----------------
    learned_from: int | None = None
    last_state = last_fold = 0
    for i, body in enumerate(replies, start=1):
        messages = body["messages"]
        system = messages[0]
        assert system["role"] == "system"
        assert system["content"].startswith("# Task: reply")
        assert all(m["role"] != "system" for m in messages[1:])

        # The learned profile, as delimited JSON data, once the first profile job is done.
        profile_text = section(system["content"], "learner_profile")
        if profile_text == NOTHING_LEARNED:
            assert learned_from is None, f"reply {i} lost the learned profile"
            state = 0
        else:
            state = states.index(json.loads(profile_text))  # one of the profiles written
            assert "Lena, a nurse from Berlin" in profile_text
            learned_from = learned_from or i
        assert state >= last_state, "a prompt never shows an older profile than before"
        last_state = state

        # The summary of fold j, and exactly the messages after fold j, verbatim and in order.
        summary_text = section(system["content"], "conversation_summary")
        if summary_text == NO_SUMMARY:
            fold = 0
        else:
            number = SUMMARY_NUMBER.match(summary_text)
            assert number, summary_text
            fold = int(number.group(1))
            assert summary_text == default_answer("summary", {}, fold)
        assert fold >= last_fold, "a prompt never shows an older summary than before"
        last_fold = fold

        so_far = conversation[: 2 * i - 1]  # up to this reply's learner message
        expected = [as_chat(m) for m in so_far[fold_ends[fold] :]]
        assert messages[1:] == expected, f"reply {i}: unfolded messages missing or extra"
        window = [as_chat(m) for m in so_far[-10:]]
        assert messages[-len(window) :] == window, f"reply {i}: the last 10 are not verbatim"

    assert learned_from is not None, "no reply prompt carried the learned profile"
    first_profile_done = server.requests.index(profiles[0])
    assert server.requests.index(replies[learned_from - 1]) > first_profile_done
    assert last_fold > 0, "no reply prompt carried the rolling summary"


def as_chat(message: StoredMessage) -> dict[str, str]:
    """A stored message as it appears in a reply prompt (Pam's without its correction lines)."""
    if message.role == LEARNER:
        return {"role": "user", "content": message.content}
    return {"role": "assistant", "content": chat_part(message.content)}


# -- the terminal loop ---------------------------------------------------------------------


def test_quit_stops_reading(tmp_path: Path, server: OpenAIServer, open_store: Store) -> None:
    process, stdout = chat(
        [LINES[0], "  /Quit ", LINES[1], LINES[2]], cwd=tmp_path, env=pam_env(tmp_path, server)
    )

    assert process.returncode == 0
    assert answers(stdout) == [shown_reply(1)]
    assert len(server.of("reply")) == 1
    learner = open_store.learners.find_learner(EXTERNAL_ID)
    assert learner is not None
    assert [m.content for m in open_store.conversation.messages(learner.id)] == [
        LINES[0],
        shown_reply(1),
    ]


def test_end_of_input_right_away_is_a_quiet_exit(tmp_path: Path, server: OpenAIServer) -> None:
    process, stdout = chat([], cwd=tmp_path, env=pam_env(tmp_path, server))

    assert process.returncode == 0
    assert stdout == ""
    assert server.requests == []


def test_profile_and_forget_in_the_terminal(
    tmp_path: Path, server: OpenAIServer, open_store: Store
) -> None:
    env = pam_env(tmp_path, server)
    first, _ = chat(LINES[:5], cwd=tmp_path, env=env)  # the 5th message starts a profile job
    assert first.returncode == 0

    process, stdout = chat(["/profile", "/forget", "yes", "/profile"], cwd=tmp_path, env=env)

    assert process.returncode == 0
    shown, asked, forgotten, empty = answers(stdout)
    assert asked.startswith(forgetting.ASK) and "• 10 messages of our chat" in asked
    assert "• Who you are: Lena, a nurse from Berlin" in shown
    assert "• Interests: cooking (cocinar)" in shown
    assert "• Native language: German" in shown
    assert "(learned from 5 of your messages" in shown
    assert "✏️ yo es → yo soy" in shown
    assert forgotten == phrases.FORGOTTEN
    assert "I haven't learned anything about you yet" in empty
    assert "Lena" not in empty
    assert "yo es" not in empty

    store = open_store
    for model in (Message, Correction, Usage, MemoryJob):
        assert count_rows(store, model) == 0, f"{model.__tablename__} kept rows after /forget"
    learner = store.learners.find_learner(EXTERNAL_ID)  # the last /profile met a new, empty learner
    assert learner is not None
    assert store.memory.profile(learner.id).data == {}
    assert store.memory.summary(learner.id).text == ""


def test_progress_in_the_terminal_writes_the_chart_and_prints_its_path(
    tmp_path: Path, server: OpenAIServer
) -> None:
    charts = tmp_path / "charts"
    env = pam_env(tmp_path, server, PAM_CHART_DIR=str(charts))
    process, stdout = chat([LINES[0], LINES[1], "/progress"], cwd=tmp_path, env=env)

    assert process.returncode == 0
    *_, summary, where = answers(stdout)
    lines = summary.splitlines()
    assert lines[0] == "This week you practised on 1 day."
    assert re.fullmatch(
        r"I've noticed [1-9]\d* mistake patterns?: 0 mastered, 0 getting there\.", lines[1]
    )
    assert where.startswith("📈 Your chart: ")
    path = Path(where.removeprefix("📈 Your chart: "))
    assert path.parent == charts
    assert re.fullmatch(r"pam-progress-lena-\d{8}-\d{6}\.png", path.name)
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    # Without PAM_CHART_DIR, in the working directory.
    process, stdout = chat(["/progress"], cwd=tmp_path, env=pam_env(tmp_path, server))
    assert process.returncode == 0
    path = Path(answers(stdout)[-1].removeprefix("📈 Your chart: "))
    assert path.parent == tmp_path and path.is_file()


def test_voice_on_in_the_terminal_writes_each_spoken_reply_and_prints_its_path(
    tmp_path: Path, server: OpenAIServer
) -> None:
    voices = tmp_path / "voices"
    env = pam_env(tmp_path, server, PAM_CHART_DIR=str(voices))
    process, stdout = chat(["/voice on", LINES[0], "/voice off", LINES[1]], cwd=tmp_path, env=env)

    assert process.returncode == 0
    on, reply, where, off, _ = answers(stdout)
    assert on.startswith("🔊 Voice replies are on") and off.startswith("🔇 Voice replies are off")
    assert "✏️" in reply  # the corrections stay in writing
    assert where.startswith("🔊 Hear me: ")
    path = Path(where.removeprefix("🔊 Hear me: "))
    assert path.parent == voices
    assert re.fullmatch(r"pam-voice-lena-\d{8}-\d{6}-\d{6}\.ogg", path.name)
    assert path.read_bytes().startswith(b"OggS")
    # Spoken: the chat part of the reply, none of its corrections.
    (spoken,) = [r for r in server.audio_requests if r.path.endswith("/audio/speech")]
    assert spoken.fields["input"] and "✏️" not in spoken.fields["input"]
    assert spoken.fields["response_format"] == "opus"


def test_forget_in_the_terminal_deletes_that_users_charts_spoken_replies_and_history(
    tmp_path: Path, server: OpenAIServer
) -> None:
    """What `pam chat` wrote for the user goes with a confirmed /forget — charts, spoken
    replies, line history — and nothing of another user's: not even of "lena-x", whose
    files' names begin like lena's."""
    out = tmp_path / "out"
    env = pam_env(tmp_path, server, PAM_CHART_DIR=str(out), HOME=str(tmp_path))
    for user in (USER, "lena-x"):
        process, _ = chat(["/voice on", LINES[0], "/progress"], cwd=tmp_path, env=env, user=user)
        assert process.returncode == 0
        (tmp_path / f".pam_history-{user}").write_text(f"what {user} typed\n")
    written = {path.name for path in out.iterdir()}
    theirs = {
        name
        for name in written
        if not name.startswith(("pam-voice-lena-x-", "pam-progress-lena-x-"))
    }
    assert len(theirs) == 2 and len(written) == 4  # a chart and a spoken reply each

    process, stdout = chat(["/forget"], cwd=tmp_path, env=env)  # asked: nothing goes yet
    assert answers(stdout)[0].startswith(forgetting.ASK)
    assert "• 1 progress chart" in answers(stdout)[0]
    assert {path.name for path in out.iterdir()} == written

    process, stdout = chat(["/forget", "yes"], cwd=tmp_path, env=env)

    assert process.returncode == 0 and answers(stdout)[-1] == phrases.FORGOTTEN
    assert {path.name for path in out.iterdir()} == written - theirs
    assert not (tmp_path / f".pam_history-{USER}").exists()
    assert (tmp_path / ".pam_history-lena-x").read_text() == "what lena-x typed\n"


def test_invalid_utf8_and_control_characters_do_not_crash(
    tmp_path: Path, server: OpenAIServer, open_store: Store
) -> None:
    stdin = (
        b"Hola, soy Lena y estudio espa\xf1ol \xff\xfe\n"  # Latin-1 bytes, not UTF-8
        b"   \t \n"  # nothing to answer
        b"Hola\x00 amiga\x1b[31m, \xc3\n"  # NUL, an escape sequence, a cut-off UTF-8 sequence
        b"\xed\xa0\x80 \xf0\x9f\x98\x80 ok\n"  # an encoded surrogate, then a real emoji
    )
    process = run_pam(
        "chat", "--user", USER, cwd=tmp_path, env=pam_env(tmp_path, server), stdin=stdin
    )

    assert process.returncode == 0, process.stderr.decode(errors="replace")
    assert b"Traceback" not in process.stderr
    learner = open_store.learners.find_learner(EXTERNAL_ID)
    assert learner is not None
    said = [m.content for m in open_store.conversation.messages(learner.id, role=LEARNER)]
    assert len(said) == 3
    assert said[0].startswith("Hola, soy Lena y estudio espa\ufffdol")
    assert "\x00" not in said[1] and "\x1b" not in said[1]
    assert said[2].endswith("😀 ok")
    assert answers(process.stdout.decode()) == shown_replies(said)
    for text in said:
        text.encode("utf-8")  # no lone surrogates reached the database


@pytest.mark.parametrize(
    "faults",
    [
        pytest.param([Fault(status=500)], id="server-error"),
        # An unusable answer is asked again, four calls in all: then the apology.
        pytest.param(
            [Fault(status=200, body=b"<html>proxy error</html>")] * 4, id="malformed-body"
        ),
    ],
)
def test_an_llm_failure_gets_an_apology_and_the_chat_goes_on(
    tmp_path: Path, server: OpenAIServer, open_store: Store, faults: list[Fault]
) -> None:
    server.fail_next(*faults)
    env = pam_env(tmp_path, server, PAM_LLM_MAX_RETRIES="0")

    process, stdout = chat(LINES[:3], cwd=tmp_path, env=env)

    assert process.returncode == 0
    second, third = shown_replies(LINES[1:3], first=len(faults) + 1)
    assert answers(stdout) == [phrases.APOLOGY, second, third]
    learner = open_store.learners.find_learner(EXTERNAL_ID)
    assert learner is not None
    assert [(m.role, m.content) for m in open_store.conversation.messages(learner.id)] == [
        (LEARNER, LINES[0]),
        (LEARNER, LINES[1]),
        (PAM, second),
        (LEARNER, LINES[2]),
        (PAM, third),
    ]


# -- in a terminal (a pseudo-terminal) -------------------------------------------------------


class Pty:
    """`pam chat` on a pseudo-terminal, as a person at a keyboard runs it: stdin, stdout and
    stderr are the terminal; keys are written to it and the screen's bytes read back."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.master, slave = os.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "webhooks.cli", "chat", "--user", USER],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.screen = b""

    def read_until(self, wanted: str, after: int = 0) -> str:
        """The screen once `wanted` appears on it after byte `after` (bounded by TIMEOUT)."""
        deadline = time.monotonic() + TIMEOUT
        while wanted.encode() not in self.screen[after:]:
            assert time.monotonic() < deadline, f"no {wanted!r} on the screen: {self.screen!r}"
            ready, _, _ = io_select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    self.screen += os.read(self.master, 65536)
                except OSError:  # the child closed the terminal
                    break
        return self.screen.decode(errors="replace")

    def type(self, keys: str) -> int:
        """Type `keys`; the screen's length before them (for `read_until`)."""
        mark = len(self.screen)
        os.write(self.master, keys.encode())
        return mark

    def finish(self) -> int:
        """Wait for the exit status, reading the screen to the end."""
        deadline = time.monotonic() + TIMEOUT
        while self.process.poll() is None or io_select.select([self.master], [], [], 0)[0]:
            assert time.monotonic() < deadline, f"pam chat did not exit: {self.screen!r}"
            if io_select.select([self.master], [], [], 0.1)[0]:
                try:
                    self.screen += os.read(self.master, 65536)
                except OSError:
                    break
        return self.process.wait(TIMEOUT)

    def close(self) -> None:
        """Kill the chat if it still runs (a failed test), and close the terminal."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(TIMEOUT)
        with suppress(OSError):
            os.close(self.master)


@pytest.fixture
def terminals() -> Iterator[list[Pty]]:
    """The terminals a test opens, closed after it whatever happened."""
    opened: list[Pty] = []
    yield opened
    for terminal in opened:
        terminal.close()


def terminal_env(tmp_path: Path, server: OpenAIServer, **knobs: str) -> dict[str, str]:
    """A terminal's environment: a home of its own (for the history), a colour terminal."""
    env = pam_env(tmp_path, server, HOME=str(tmp_path), TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    return {**env, **knobs}


def test_in_a_terminal_pam_edits_lines_types_colours_and_keeps_the_log_apart(
    tmp_path: Path, server: OpenAIServer, terminals: list[Pty]
) -> None:
    # The first reply takes a while (the indicator shows); the second call fails once, and its
    # warning goes to the log file, not into the line being typed.
    server.fail_next(Fault(status=200, delay=1.5), Fault(status=500))
    terminal = Pty(tmp_path, terminal_env(tmp_path, server, PAM_LLM_MAX_RETRIES="0"))
    terminals.append(terminal)

    banner = terminal.read_until("you> ")
    log_file = tmp_path / "pam-chat.log"
    assert f"Logs go to {log_file}." in banner, "it says where the logs go, once"
    mark = terminal.type("Hola, yo es Lena\r")
    screen = terminal.read_until("you> ", after=mark + 10)[mark:]
    typing, erased, answer = screen.partition("Pam is typing…\r\x1b[K")
    assert erased, f"no typing indicator, erased before the answer: {screen!r}"
    assert "Hola, yo es Lena" in typing  # the terminal's echo of what was typed
    assert answer.startswith("\x1b[1mpam>\x1b[0m Respuesta 1")
    assert "\x1b[36m✏️ yo es → yo soy" in answer, "the correction is set apart in colour"

    mark = terminal.type("Otra cosa\r")
    terminal.read_until(phrases.APOLOGY, after=mark)
    terminal.read_until("you> ", after=terminal.screen.index(b"foggy", mark))
    mark = terminal.type("\x1b[A\x1b[A\r")  # up, up: the first line again, from the history
    terminal.read_until("Respuesta", after=mark)
    terminal.read_until("you> ", after=terminal.screen.index(b"Respuesta", mark))
    terminal.type("\x04")  # Ctrl-D
    assert terminal.finish() == 0

    assert terminal.screen.endswith(b"you> \r\n"), "Ctrl-D leaves on a new line"
    screen = terminal.screen.decode(errors="replace")
    assert "WARNING" not in screen and "Traceback" not in screen
    assert "LLM reply call failed" in log_file.read_text()
    said = [body["messages"][-1]["content"] for body in server.of("reply")]
    assert said == ["Hola, yo es Lena", "Otra cosa", "Hola, yo es Lena"]
    history = (tmp_path / f".pam_history-{USER}").read_text().splitlines()
    assert history[-2:] == ["Otra cosa", "Hola, yo es Lena"]
    assert (tmp_path / f".pam_history-{USER}").stat().st_mode & 0o077 == 0, "the user's alone"


def test_in_a_terminal_forget_also_empties_the_line_history(
    tmp_path: Path, server: OpenAIServer, terminals: list[Pty]
) -> None:
    terminal = Pty(tmp_path, terminal_env(tmp_path, server))
    terminals.append(terminal)
    terminal.read_until("you> ")
    others = tmp_path / ".pam_history-kai"
    others.write_text("Me llamo Kai\n")
    for line in ("Me llamo Lena", "/forget", "yes"):
        mark = terminal.type(f"{line}\r")
        terminal.read_until("you> ", after=mark + len(line) + 2)
    terminal.type("/quit\r")
    assert terminal.finish() == 0

    assert "Lena" not in (tmp_path / f".pam_history-{USER}").read_text()
    assert others.read_text() == "Me llamo Kai\n", "another user's history stays"


def test_no_color_keeps_a_terminal_plain(
    tmp_path: Path, server: OpenAIServer, terminals: list[Pty]
) -> None:
    terminal = Pty(tmp_path, terminal_env(tmp_path, server, NO_COLOR="1"))
    terminals.append(terminal)
    terminal.read_until("you> ")
    mark = terminal.type("Hola, yo es Lena\r")
    screen = terminal.read_until("you> ", after=mark + 20)[mark:]
    terminal.type("\x04")
    assert terminal.finish() == 0
    assert "pam> Respuesta 1" in screen and "✏️ yo es → yo soy" in screen
    assert "\x1b[36m" not in screen and "\x1b[1m" not in screen


# -- the learner is the operator: problems only they can fix, said plainly -----------------

REJECTED_KEY = json.dumps(
    {
        "error": {
            "message": "Incorrect API key provided: sk-test***********. You can find your API "
            "key at https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
).encode()  # OpenAI's 401 body (platform.openai.com/docs/guides/error-codes)
NO_SUCH_MODEL = json.dumps(
    {
        "error": {
            "message": "The model `gpt-4o-mini` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
).encode()


def operator_lines(stderr: str) -> list[str]:
    """The lines `pam chat` itself says on stderr (not the log lines)."""
    return [line for line in stderr.splitlines() if line.startswith("pam: ")]


@pytest.mark.parametrize(
    ("fault", "advice"),
    [
        pytest.param(
            Fault(status=401, body=REJECTED_KEY),
            "rejected the API key (401): check OPENAI_API_KEY.",
            id="rejected-key",
        ),
        pytest.param(
            Fault(status=404, body=NO_SUCH_MODEL),
            # The server's own words ride along (bot/llm/errors.py): where a model is named
            # by a heuristic, they show what the server meant.
            "has no model 'gpt-4o-mini' (404: model_not_found The model `gpt-4o-mini` does "
            "not exist or you do not have access to it.): check PAM_MODEL and PAM_MEMORY_MODEL "
            "(on Ollama, `ollama pull` it first).",
            id="unknown-model",
        ),
    ],
)
def test_a_misconfigured_llm_is_said_on_stderr_once_naming_the_url(
    tmp_path: Path, server: OpenAIServer, fault: Fault, advice: str
) -> None:
    server.fail_next(fault, fault, fault)
    env = pam_env(tmp_path, server, OPENAI_API_KEY="sk-test-SECRET-3f9a")

    process, stdout = chat(LINES[:3], cwd=tmp_path, env=env)

    assert process.returncode == 0
    assert answers(stdout) == [phrases.APOLOGY] * 3  # the persona still answers
    stderr = process.stderr.decode()
    assert operator_lines(stderr) == [f"pam: The LLM server at {server.base_url} {advice}"], stderr
    assert "SECRET" not in stderr and "sk-test" not in stderr


def test_an_unreachable_base_url_is_said_on_stderr_with_what_to_check(tmp_path: Path) -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    env = pam_env(tmp_path, None, OPENAI_BASE_URL=base_url, PAM_LLM_MAX_RETRIES="0")

    process, stdout = chat(LINES[:2], cwd=tmp_path, env=env)

    assert process.returncode == 0
    assert answers(stdout) == [phrases.APOLOGY] * 2
    assert operator_lines(process.stderr.decode()) == [
        f"pam: Pam cannot reach the LLM server at {base_url}: is it running, and is "
        "OPENAI_BASE_URL right?"
    ]
