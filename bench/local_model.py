"""The local-model benchmark: Pam on a real small model on this machine — llama-cpp-python's
OpenAI-compatible server (0.3.36, unmodified) on Qwen2.5-Coder 1.5B Instruct (Q4_K_M), two CPU
threads — driven as an operator tries a model out: `pam chat` with learner lines on stdin.

    python3 dev.py bench local_model --setup     # once: the server's venv and the model
    python3 dev.py bench local_model             # the run (15-40 minutes on 2 shared cores)
    python3 dev.py bench local_model --structured-output json_object

The set-up lives outside Pam's venv (~/.cache/pam-local, or PAM_LOCAL_LLM_PYTHON and
PAM_LOCAL_LLM_MODEL): see loopback/local_model.py. The run: /language and /level, 12 Spanish
lines with planted mistakes, then /profile; Pam's memory settings at their defaults, so a
fold and two profile jobs run in the background on the same one-slot server. The LLM timeout
is raised to 10 minutes (a CPU server is slow, and a retry would queue behind itself).

It reports each turn's latency (Pam's own `turn … ms=` log line), the structured-output mode
Pam settled on, the answers that were no reply (apologies), the calls that were asked again
and why (Pam's warnings), what Pam's existing checks dropped (its "dropped" log lines, by
what and why), replies that repeat the learner's line, corrections whose original is not in
the learner's message they were stored with, and what the profile and summary learned. These
are one small model's figures on one machine, not a measure of tutoring quality. Writes
bench/results/local_model.json and local_model.md."""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bench.latency_report import percentile
from bot.corrections import chat_part
from loopback.harness import progress
from loopback.local_model import (
    MODEL_ALIAS,
    ChatRun,
    configured,
    is_reply,
    llama_server,
    missing,
    scripted_chat,
    set_up,
    settled_mode,
)
from memory.database import db
from memory.database.models import Correction, Message
from memory.database.records import LEARNER, PAM
from memory.store.message_store import Store

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
USER = "lena"
# Each line carries a mistake a German-speaking A2 learner makes (noted after it).
LINES = [
    "Hola Pam, me llamo Lena y yo es enfermera en Berlín.",  # es → soy
    "Tengo 29 años y vivo en Berlín desde cinco años.",  # desde → desde hace
    "Ayer yo cociné una paella, pero el arroz estaba muy dura.",  # dura → duro
    "Mi novio se llama Javier, él es de Sevilla y trabaja como profesor.",  # (none)
    "El sábado pasado fuimos al cine y vemos una película de Almodóvar.",  # vemos → vimos
    "La película era muy interesante pero un poco tristes.",  # tristes → triste
    "En el hospital hay mucho trabajo, muchas personas están enfermos.",  # enfermos → enfermas
    "Me gusta escalar, es mi deporte favorito desde que era niña.",  # (none)
    "El próximo mes yo voy a visitar a ellos en Múnich.",  # visitarlos
    "Mi hermano tiene dos hijos, son muy simpático.",  # simpático → simpáticos
    "Estoy nerviosa porque la familia de Javier habla muy rápida.",  # rápida → rápido
    "Gracias por practicar conmigo, me ayudas mucho.",  # (none)
]
FIRST_LINE = 2  # the script's index of its first learner line


def script(lines: int) -> list[str]:
    """What `pam chat` is given: the settings, the first `lines` learner lines, /profile."""
    return ["/language Spanish English", "/level A2", *LINES[:lines], "/profile"]


TURN = re.compile(
    r" turn learner=\S+ prompt_tokens=(\S+) output_tokens=(\S+) calls=(\d+) .*ms=(\d+)"
)
# Pam's warnings for an answer it asked again or a call that failed (bot/llm/openai_chat.py).
TROUBLE = re.compile(r"LLM (\w+) (answer unusable|call refused|call failed)[^:]*:?\s*(.*)")
# What a "dropped" log line is about, by the first of these words in it.
DROPPED = ("correction", "profile", "summary", "reply")
ECHO_LIKENESS = 0.8


def folded(text: str) -> str:
    """`text` lower-cased, without accents, punctuation or runs of spaces: for finding one
    sentence inside another."""
    bare = unicodedata.normalize("NFKD", text.lower())
    bare = "".join(c for c in bare if not unicodedata.combining(c))
    return " ".join(re.sub(r"[^\w\s]", " ", bare).split())


def echoes(said: str, reply: str) -> bool:
    """Whether `reply` (without its correction lines) repeats the learner's line `said`: holds
    it, or reads nearly the same (80% alike, accents, case and punctuation aside)."""
    line, answer = folded(said), folded(reply)
    return line in answer or SequenceMatcher(None, line, answer).ratio() >= ECHO_LIKENESS


# memory/grounding.py's one line per dropped thing: "dropped <kind> reason=<reason> …".
GROUNDING = re.compile(r"\bdropped (\w+) reason=(\w+)")


def drops(log: list[str]) -> dict[str, int]:
    """What Pam's checks dropped, by what (a correction, a profile fact, a reply, a summary)
    and why: memory/grounding.py's "dropped <kind> reason=<reason>" lines, and the older
    "… dropped: REASON" lines; Pam logs the reason, never the content. A reply's answer may be
    read twice (once to accept it, once to use it), so a correction's line can come twice: it
    counts once per turn. Work dropped because its learner was forgotten is no check's doing."""
    counted: Counter[str] = Counter()
    turn = 0
    seen: set[tuple[int, str]] = set()
    for line in log:
        turn += " turn learner=" in line
        grounded = GROUNDING.search(line)
        if grounded:
            what, reason = grounded.groups()
        else:
            head, found, reason = line.partition(" dropped: ")
            if not found or "forgotten" in reason:
                continue
            what = next((w for w in DROPPED if w in head), "other")
        said = line.split(" ", 2)[-1]  # without the time
        if what == "correction" and (turn, said) in seen:
            continue
        seen.add((turn, said))
        counted[f"{what}: {reason}"] += 1
    return dict(counted)


def troubles(log: list[str]) -> dict[str, int]:
    """Pam's warnings about calls asked again or failed, by purpose and kind."""
    counted: Counter[str] = Counter()
    for line in log:
        found = TROUBLE.search(line)
        if found:
            counted[f"{found.group(1)} {found.group(2)}: {found.group(3)[:60]}"] += 1
    return dict(counted)


def stored(run: ChatRun) -> dict[str, Any]:
    """What the run left in its SQLite file: replies, corrections, usage, profile, summary."""
    engine = db.make_engine(run.database_url)
    try:
        store = Store(engine)
        learner = store.learners.find_learner(f"terminal:{USER}")
        if learner is None:
            return {}
        messages = store.conversation.messages(learner.id)
        pairs = [
            (said.content, answer.content)
            for said, answer in itertools.pairwise(messages)
            if said.role == LEARNER and answer.role == PAM
        ]
        with store.inspection.sessions() as session:
            rows = session.execute(
                select(
                    Correction.original, Correction.corrected, Correction.category, Message.content
                )
                .join(Message, Message.id == Correction.message_id)
                .where(Correction.learner_id == learner.id)
                .order_by(Correction.id)
            ).all()
        summary = store.memory.summary(learner.id)
        profile = store.memory.profile(learner.id)
        return {
            "echoes": sum(echoes(said, chat_part(answer)) for said, answer in pairs),
            "replies_stored": len(pairs),
            "corrections": [
                {"original": original, "corrected": corrected, "category": category}
                for original, corrected, category, _ in rows
            ],
            # Quoting words the learner did not write in that message (issue 32).
            "corrections_not_in_their_line": sum(
                folded(original) not in folded(said) for original, _, _, said in rows
            ),
            "usage": {
                purpose: {"calls": calls, "input_tokens": sent, "output_tokens": got}
                for purpose, (calls, sent, got) in store.ledger.usage(learner.id).items()
            },
            "profile": profile.data,
            "profile_messages_read": profile.messages_processed,
            "summary": summary.text,
            "folds": summary.folds,
        }
    finally:
        engine.dispose()


def report(run: ChatRun, asked: str, seconds: float, lines: int) -> dict[str, Any]:
    """The figures of one run of `lines` learner lines."""
    turns = [TURN.search(line) for line in run.log]
    found = [t for t in turns if t]
    ms = [float(t.group(4)) for t in found]
    answers = run.answers()
    replies = answers[FIRST_LINE : FIRST_LINE + lines]
    return {
        "model": MODEL_ALIAS,
        "server": "llama-cpp-python 0.3.36, n_ctx 4096, 2 threads",
        "structured_output_asked": asked,
        "structured_output_used": settled_mode(run.log, asked),
        "exit_status": run.returncode,
        "seconds": round(seconds),
        "learner_lines": lines,
        "turns_logged": len(found),
        "latency_ms": {
            "p50": percentile(ms, 0.5),
            "p95": percentile(ms, 0.95),
            "max": max(ms, default=0.0),
        },
        "calls_per_turn": [int(t.group(3)) for t in found],
        "output_tokens_per_turn": [
            int(t.group(2)) if t.group(2).isdigit() else None for t in found
        ],
        "no_reply": sum(not is_reply(a) for a in replies) + lines - len(replies),
        "asked_again_or_failed": troubles(run.log),
        "dropped_by_checks": drops(run.log),
        "profile_command_said": answers[-1] if len(answers) == lines + 3 else None,
        "replies": replies,
        **stored(run),
    }


def table(result: dict[str, Any]) -> str:
    """The figures as a small Markdown table."""
    latency = result["latency_ms"]
    retried = sum(result["asked_again_or_failed"].values())
    dropped = sum(result["dropped_by_checks"].values())
    rows = [
        ("model", f"{result['model']} on {result['server']}"),
        (
            "structured output",
            f"{result['structured_output_used']} (asked: {result['structured_output_asked']})",
        ),
        (
            "turn latency",
            f"p50 {latency['p50'] / 1000:.1f} s · p95 {latency['p95'] / 1000:.1f} s · "
            f"max {latency['max'] / 1000:.1f} s",
        ),
        ("lines with no reply (apology)", f"{result['no_reply']} of {result['learner_lines']}"),
        ("calls asked again or failed", str(retried)),
        ("replies repeating the learner's line", str(result.get("echoes", "?"))),
        (
            "corrections stored / original not in its line",
            f"{len(result.get('corrections', []))} / "
            f"{result.get('corrections_not_in_their_line', '?')}",
        ),
        ("dropped by Pam's checks", str(dropped)),
        (
            "folds / profile messages read",
            f"{result.get('folds')} / {result.get('profile_messages_read')}",
        ),
    ]
    lines = ["| | |", "| --- | --- |", *(f"| {name} | {value} |" for name, value in rows)]
    return "\n".join(lines)


def measure(
    base_url: str,
    folder: Path,
    asked: str,
    on_log: Callable[[str], None] = lambda line: None,
    lines: int = len(LINES),
) -> dict[str, Any]:
    """Run the script with its first `lines` learner lines through `pam chat` on the server
    at `base_url` (PAM_STRUCTURED_OUTPUT `asked`), in `folder`; the figures, with their
    table."""
    knobs = {"PAM_LLM_TIMEOUT": "600", "PAM_SHUTDOWN_WAIT_SECONDS": "900"}
    if asked != "auto":
        knobs["PAM_STRUCTURED_OUTPUT"] = asked
    started = time.monotonic()
    chat = scripted_chat(
        script(lines), base_url, folder, user=USER, timeout=3600, on_log=on_log, knobs=knobs
    )
    result = report(chat, asked, time.monotonic() - started, lines)
    result["table"] = table(result)
    return result


def run(asked: str, out: Path, lines: int = len(LINES)) -> dict[str, Any]:
    """Start the server, run the script through `pam chat`, write and return the figures."""
    local = configured()
    problem = missing(local)
    if problem:
        raise RuntimeError(problem)

    def seen(line: str) -> None:
        if " turn learner=" in line or " WARNING " in line or " ERROR " in line:
            progress(line.split(" ", 2)[-1][:140], "pam chat")

    # Kept afterwards: the server's log, pam chat's output and log, and its SQLite file.
    folder = Path(tempfile.mkdtemp(prefix="pam-local-model-"))
    progress(f"the run's logs and database go to {folder}", "local model")
    with llama_server(local, folder) as base_url:
        result = measure(base_url, folder, asked, seen, lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "local_model.json").write_text(
        json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    (out / "local_model.md").write_text(result["table"] + "\n", encoding="utf-8")
    return result


def main(argv: list[str] | None = None) -> int:
    """Set up or run the benchmark from the command line; 0 when it ran, 2 when it could
    not."""
    parser = argparse.ArgumentParser(prog="python -m bench.local_model", description=__doc__)
    parser.add_argument(
        "--setup", action="store_true", help="install the server and the model, then stop"
    )
    parser.add_argument(
        "--structured-output",
        default="auto",
        choices=["auto", "json_schema", "json_object_schema", "json_object", "off"],
        help="PAM_STRUCTURED_OUTPUT for the run (default: Pam's own, auto)",
    )
    parser.add_argument(
        "--lines",
        type=int,
        default=len(LINES),
        choices=range(1, len(LINES) + 1),
        metavar=f"1-{len(LINES)}",
        help=f"learner lines to send (default: all {len(LINES)})",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    args = parser.parse_args(argv)
    if args.setup:
        set_up(configured())
        return 0
    try:
        result = run(args.structured_output, args.out, args.lines)
    except (OSError, RuntimeError, AssertionError) as exc:
        print(f"the local-model benchmark could not run: {exc}", file=sys.stderr)
        return 2
    print()
    print("What /profile said:\n" + str(result["profile_command_said"]))
    print("\nThe summary:\n" + str(result.get("summary")))
    print("\nThe profile:\n" + json.dumps(result.get("profile"), ensure_ascii=False, indent=2))
    print("\nDropped by Pam's checks:", json.dumps(result["dropped_by_checks"], indent=2))
    print("Asked again or failed:", json.dumps(result["asked_again_or_failed"], indent=2))
    print()
    print(result["table"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
