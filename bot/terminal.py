"""`pam chat`: talk to Pam in the terminal, one line per message (so it can be scripted).

Piped or scripted, it prints Pam's answers and nothing else. In a terminal it behaves like
one: line editing and history (readline), "Pam is typing…" while a reply takes a moment,
corrections set apart in colour, Ctrl-D to leave. Either way, a problem only the operator
can fix (a rejected key, an unknown model, an unreachable server) is said on stderr: in the
terminal the learner is the operator. A /progress chart is written to a PNG file whose path
is printed after its summary; after /voice on, each reply's spoken copy to an OGG file. The
history, the charts and the spoken replies are each user's own (`--user`), and a confirmed
/forget deletes that user's."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import threading
from contextlib import suppress
from pathlib import Path
from types import TracebackType
from typing import Protocol, TextIO

from bot.review.progress import drawn
from bot.turn.values import Turn, TurnRequest
from bot.voice.speaking import Spoken
from memory.clock import Clock, utcnow
from memory.store.charts import Charts
from memory.store.voice_clips import VoiceClips

QUIT = "/quit"
PROMPT = "you> "
TYPING = "Pam is typing…"
# A reply faster than this shows no indicator: it would only flicker.
TYPING_AFTER_SECONDS = 0.4
HISTORY_LINES = 1000
# A user's name as it is in file names, when it is one already (else see `file_name`).
SAFE_NAME = r"[A-Za-z0-9_-]{1,40}"
CORRECTION = "✏️ "
CHART = "📈 Your chart: "
VOICE = "🔊 Hear me: "
# ANSI styles: bold for Pam's name, cyan for the correction lines.
BOLD, CYAN, RESET = "\x1b[1m", "\x1b[36m", "\x1b[0m"
ERASE_LINE = "\r\x1b[K"


class Turns(Protocol):
    """What the terminal needs of the tutor's turns (bot.turn.local_turns.LocalTurns)."""

    def reply(self, request: TurnRequest) -> Turn:
        """Answer one line from the learner, the reply stored (with the words to speak, if
        the request `can_speak` and they asked for it)."""
        ...

    def speak(self, turn: Turn) -> Spoken:
        """The turn's spoken copy, made now (after its text was shown)."""
        ...

    def after_send(self, turn: Turn) -> None:
        """Grade the review items by the turn's reply and start the memory jobs it made due."""
        ...


def file_name(user: str) -> str:
    """`user` as the files of `pam chat` name them: as it is when it is up to 40 letters,
    digits, `_` and `-` (what a file name takes everywhere); else kept to those, with a "."
    and a hash of the whole name after them, so that no two users share a name ("José M."
    and "Jos_M_" are "Jos_M_.1c0d…" and "Jos_M_"), and with them files or a history."""
    if re.fullmatch(SAFE_NAME, user):
        return user
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", user)[:31] or "learner"
    return f"{stem}.{hashlib.sha256(user.encode()).hexdigest()[:8]}"


def chart_file(folder: Path, user: str, now: Clock, kind: str = "progress") -> Path:
    """Where a /progress chart for `user` is written: pam-progress-<user>-<when>.png in
    `folder` (the user's name as `file_name` writes it); a spoken reply (`kind` "voice"):
    pam-voice-<user>-<when>.ogg."""
    name = file_name(user)
    if kind == "voice":  # a reply a second is possible: the microseconds tell them apart
        return folder / f"pam-voice-{name}-{now():%Y%m%d-%H%M%S-%f}.ogg"
    return folder / f"pam-{kind}-{name}-{now():%Y%m%d-%H%M%S}.png"


def files_of(folder: Path, user: str) -> list[Path]:
    """The charts and spoken replies `pam chat` wrote for `user` into `folder` (by their
    names: another user's never match, whatever their names)."""
    name = re.escape(file_name(user))
    written = re.compile(
        rf"pam-progress-{name}-\d{{8}}-\d{{6}}\.png|pam-voice-{name}-\d{{8}}-\d{{6}}-\d{{6}}\.ogg"
    )
    try:
        return sorted(path for path in folder.iterdir() if written.fullmatch(path.name))
    except OSError:  # no such folder (nothing was written), or unreadable
        return []


def forget_files(folder: Path, user: str, history: Path, stderr: TextIO) -> None:
    """Delete what `pam chat` wrote for `user` (/forget): their charts and spoken replies in
    `folder`, and their line `history`. What cannot be deleted is said on stderr."""
    for path in [*files_of(folder, user), history]:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            print(f"pam: could not delete {path}: {exc}", file=stderr, flush=True)


def save_chart(turn: Turn, charts: Charts, path: Path, stderr: TextIO) -> Path | None:
    """Write the turn's chart (if any) to `path`; the path written, or None (no chart, or it
    could not be written: said on stderr)."""
    if turn.chart_id is None:
        return None
    chart = charts.find(turn.chart_id)
    if chart is None:  # forgotten meanwhile
        return None
    return _write(drawn(charts, chart).png, path, "the chart", stderr)


def save_voice(spoken: Spoken, clips: VoiceClips, path: Path, stderr: TextIO) -> Path | None:
    """Write a spoken reply (if there is one) to `path`; the path written, or None."""
    clip = clips.find(spoken.clip_id) if spoken.clip_id is not None else None
    if clip is None:
        return None
    return _write(clip.audio, path, "the spoken reply", stderr)


def _write(data: bytes, path: Path, what: str, stderr: TextIO) -> Path | None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        print(f"pam: could not write {what} to {path}: {exc}", file=stderr, flush=True)
        return None
    return path.absolute()


def history_file(user: str) -> Path:
    """Where the line history of `pam chat` is kept for `user`: ~/.pam_history-<user> (the
    name as `file_name` writes it), so that one user's /forget empties their own alone."""
    return Path.home() / f".pam_history-{file_name(user)}"


def wants_colour(stream: TextIO) -> bool:
    """True when `stream` is a terminal that shows colour and the user has not opted out
    (https://no-color.org: NO_COLOR set to anything non-empty)."""
    return (
        stream.isatty()
        and not os.environ.get("NO_COLOR")
        and os.environ.get("TERM", "") not in ("", "dumb")
    )


def styled(reply: str, colour: bool) -> str:
    """`reply` as printed: its correction lines in colour when `colour`, else unchanged."""
    if not colour:
        return reply
    return "\n".join(
        f"{CYAN}{line}{RESET}" if line.startswith(CORRECTION) else line
        for line in reply.split("\n")
    )


class Typing:
    """Shows "Pam is typing…" on `stream` if the block takes longer than `after` seconds, and
    erases it before the block ends, so the answer prints on a clean line."""

    def __init__(self, stream: TextIO, after: float = TYPING_AFTER_SECONDS) -> None:
        self.stream = stream
        self.after = after
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.shown = False
        self.thread = threading.Thread(target=self._show, name="pam-typing", daemon=True)

    def _show(self) -> None:
        if self.done.wait(self.after):
            return
        with self.lock:
            if not self.done.is_set():
                self.stream.write(TYPING)
                self.stream.flush()
                self.shown = True

    def __enter__(self) -> Typing:
        self.thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with self.lock:
            self.done.set()
            if self.shown:
                self.stream.write(ERASE_LINE)
                self.stream.flush()
        self.thread.join()


class LineEditing:
    """readline for `input()`: arrow keys, Ctrl-R and a history kept in `path` (readable by
    the user alone: it holds what they wrote). Only for a real terminal; where the standard
    library has no readline (Windows), input() still works, without history."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            import readline
        except ImportError:
            self.readline = None
            return
        self.readline = readline
        readline.set_history_length(HISTORY_LINES)
        with suppress(OSError):  # no history yet, or unreadable: start afresh
            readline.read_history_file(path)

    def forget(self) -> None:
        """Drop the history (the learner said /forget: their words go from here too)."""
        if self.readline is not None:
            self.readline.clear_history()
        self.path.unlink(missing_ok=True)

    def save(self) -> None:
        """Write the history, for the next `pam chat`."""
        if self.readline is None:
            return
        try:
            self.path.touch(mode=0o600, exist_ok=True)
            self.readline.write_history_file(self.path)
        except OSError as exc:
            print(f"pam: could not save the line history in {self.path}: {exc}", file=sys.stderr)


def chat(
    turns: Turns,
    user: str,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    *,
    log_file: Path | None = None,
    charts: Charts | None = None,
    chart_dir: Path | None = None,
    clock: Clock = utcnow,
    clips: VoiceClips | None = None,
) -> None:
    """Read lines until /quit or end of input, printing Pam's answers. `log_file`: where the
    logs go meanwhile, to say so at the start; `charts`: where /progress charts are read
    from, to be written to files in `chart_dir` (None: the working directory); `clips`: the
    same for spoken replies (None: replies are not spoken). The streams default to this
    process's at the call, not at import: a test that runs `pam chat` in its own process
    (tests/helpers/cli.py) swaps them in between."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    interactive = stdin.isatty()
    # readline edits the real terminal only: input() reads sys.stdin and echoes to sys.stdout.
    history = history_file(user)
    editing = (
        LineEditing(history)
        if interactive and stdin is sys.stdin and stdout is sys.stdout
        else None
    )
    colour = interactive and wants_colour(stdout)
    if interactive:
        where = f"\nLogs go to {log_file}." if log_file is not None else ""
        print(
            f"Pam is here, {user}. Type /help for commands and /quit (or Ctrl-D) to leave."
            f"{where}\n",
            file=stdout,
        )
    external_id = f"terminal:{user}"
    said_problem: str | None = None
    try:
        while True:
            line = read_line(stdin, stdout, interactive, editing is not None)
            if line is None:
                if interactive:
                    print(file=stdout)  # Ctrl-D leaves the cursor after the prompt
                break
            text = line.rstrip("\n")
            if text.strip().lower() == QUIT:
                break
            request = TurnRequest(external_id, text, user, can_speak=clips is not None)
            if interactive:
                with Typing(stdout):
                    turn = turns.reply(request)
            else:
                turn = turns.reply(request)
            name = f"{BOLD}pam>{RESET}" if colour else "pam>"
            for reply in turn.replies:
                print(f"{name} {styled(reply, colour)}\n", file=stdout, flush=True)
            if charts is not None and turn.chart_id is not None:
                path = chart_file(chart_dir or Path(), user, clock)
                if (saved := save_chart(turn, charts, path, stderr)) is not None:
                    print(f"{name} {CHART}{saved}\n", file=stdout, flush=True)
            problem = turn.problem
            if clips is not None and turn.speech is not None:  # spoken after the text shows
                spoken = turns.speak(turn)
                problem = problem or spoken.problem
                path = chart_file(chart_dir or Path(), user, clock, "voice")
                if (saved := save_voice(spoken, clips, path, stderr)) is not None:
                    print(f"{name} {VOICE}{saved}\n", file=stdout, flush=True)
            turns.after_send(turn)
            if problem and problem != said_problem:
                # Said once per cause, not after every message that meets it.
                print(f"pam: {problem}", file=stderr, flush=True)
            said_problem = problem
            if turn.forgot:  # what Pam wrote for them goes too, and what they typed
                if editing is not None:
                    editing.forget()
                forget_files(chart_dir or Path(), user, history, stderr)
    finally:
        if editing is not None:
            editing.save()


def read_line(stdin: TextIO, stdout: TextIO, interactive: bool, editing: bool) -> str | None:
    """The next line the learner typed (None at the end of input)."""
    if editing:
        try:
            return input(PROMPT)
        except EOFError:
            return None
    if interactive:
        print(PROMPT, end="", file=stdout, flush=True)
    line = stdin.readline()
    return line or None
