"""The README's picture of a chat: a short conversation through `pam chat` — Pam's real code,
prompts and memory — on a real model, drawn as a phone chat from what Pam printed. Nothing in
the picture is written by hand but the learner's lines.

    python3 dev.py bench chat_picture          # the local model (bench local_model --setup)
    OPENAI_API_KEY=sk-... python3 dev.py bench chat_picture --openai gpt-4o-mini

Writes docs/img/chat.png and bench/results/chat_picture.json (the model, the learner's lines
and Pam's answers as printed)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopback.harness import progress
from loopback.local_model import MODEL_ALIAS, configured, llama_server, missing, scripted_chat

ROOT = Path(__file__).resolve().parent.parent
PICTURE = ROOT / "docs" / "img" / "chat.png"
RESULTS = ROOT / "bench" / "results"
SETUP = ["/language Spanish English", "/level A2"]
# A German-speaking nurse at A2; each line carries a mistake (noted after it).
LINES = [
    "Hola Pam! Me llamo Lena y yo es enfermera en Berlín.",  # es → soy
    "El sábado pasado fuimos al cine y vemos una película muy tristes.",  # vimos, triste
    "¿Te acuerdas de qué trabajo tengo?",  # recall: the first line
]
CORRECTION_MARK = "✏️"


@dataclass(frozen=True)
class Bubble:
    """One chat bubble: who speaks, the text, and the corrections under Pam's text."""

    learner: bool
    text: str
    corrections: tuple[str, ...] = ()


def bubbles(lines: list[str], answers: list[str]) -> list[Bubble]:
    """The learner's lines and Pam's answers to them, as bubbles; a `✏️ …` line of an answer
    is a correction."""
    out: list[Bubble] = []
    for line, answer in zip(lines, answers, strict=True):
        out.append(Bubble(True, line))
        text = [
            part for part in answer.splitlines() if part and not part.startswith(CORRECTION_MARK)
        ]
        fixes = [
            part.removeprefix(CORRECTION_MARK).strip()
            for part in answer.splitlines()
            if part.startswith(CORRECTION_MARK)
        ]
        out.append(Bubble(False, "\n".join(text), tuple(fixes)))
    return out


def draw(chat: list[Bubble], model: str, path: Path) -> None:
    """A phone-width chat: the learner's bubbles on the right, Pam's on the left with her
    corrections set apart beneath her words."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    width, columns, line_height = 6.0, 44, 0.235
    blocks: list[tuple[Bubble, list[str], list[str]]] = []
    for bubble in chat:
        body = [
            w for para in bubble.text.splitlines() for w in textwrap.wrap(para, columns) or [""]
        ]
        fixes = [w for fix in bubble.corrections for w in textwrap.wrap("✎ " + fix, columns)]
        blocks.append((bubble, body, fixes))
    height = 0.9 + sum(
        (len(b) + len(f) + (0.4 if f else 0)) * line_height + 0.55 for _, b, f in blocks
    )
    fig = plt.figure(figsize=(width, height), dpi=150)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    fig.patch.set_facecolor("#efe7dd")
    ax.text(0.3, height - 0.42, "Pam", fontsize=13, weight="bold", color="#1f2d3d")
    ax.text(0.95, height - 0.42, f"· {model}", fontsize=9, color="#6b7785")
    y = height - 0.85
    for bubble, body, fixes in blocks:
        rows = len(body) + len(fixes) + (0.4 if fixes else 0)
        box_h = rows * line_height + 0.25
        box_w = min(4.5, max(len(s) for s in body + fixes) * 0.083 + 0.4)
        x = width - 0.25 - box_w if bubble.learner else 0.25
        colour = "#d9fdd3" if bubble.learner else "#ffffff"
        ax.add_patch(
            FancyBboxPatch(
                (x, y - box_h),
                box_w,
                box_h,
                boxstyle="round,pad=0.02,rounding_size=0.12",
                fc=colour,
                ec="#d0d0d0",
                lw=0.6,
            )
        )
        ty = y - 0.12 - line_height * 0.8
        for row in body:
            ax.text(x + 0.18, ty, row, fontsize=9.5, color="#111b21", family="DejaVu Sans")
            ty -= line_height
        if fixes:
            ty -= line_height * 0.4
            for row in fixes:
                ax.text(x + 0.18, ty, row, fontsize=9, color="#b3261e", style="italic")
                ty -= line_height
        y -= box_h + 0.3
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, facecolor=fig.get_facecolor())
    plt.close(fig)


@contextmanager
def model_server(
    openai_model: str | None, folder: Path
) -> Iterator[tuple[str, str, dict[str, str]]]:
    """The server to talk to: OpenAI's (or OPENAI_BASE_URL's) with `openai_model`, else the
    local llama-cpp-python server of bench/local_model.py."""
    if openai_model:
        base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        yield base, openai_model, {"PAM_MODEL": openai_model, "PAM_MEMORY_MODEL": openai_model}
        return
    local = configured()
    problem = missing(local)
    if problem:
        raise RuntimeError(f"{problem} (run `python3 dev.py bench local_model --setup` once)")
    with llama_server(local, folder) as base_url:
        yield base_url, f"{MODEL_ALIAS} (local, llama-cpp-python)", {"PAM_LLM_TIMEOUT": "600"}


def run(openai_model: str | None, picture: Path, out: Path) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="pam-chat-picture-"))
    progress(f"the run's logs and database go to {folder}", "chat picture")
    with model_server(openai_model, folder) as (base_url, model, knobs):
        chat = scripted_chat(
            SETUP + LINES,
            base_url,
            folder,
            knobs=knobs,
            on_log=lambda line: progress(line.split(" ", 2)[-1][:120], "pam chat"),
        )
    if chat.returncode != 0:
        raise RuntimeError(f"pam chat exited with {chat.returncode}; see {folder}/pam-chat.log")
    answers = chat.answers()[len(SETUP) :]
    draw(bubbles(LINES, answers), model, picture)
    result = {
        "model": model,
        "lines": LINES,
        "answers": answers,
        "picture": str(picture.relative_to(ROOT)),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "chat_picture.json").write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n")
    progress(f"drew {picture}", "chat picture")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chat_picture", description=__doc__)
    parser.add_argument(
        "--openai", metavar="MODEL", help="use OpenAI (or OPENAI_BASE_URL) with MODEL"
    )
    parser.add_argument("--picture", type=Path, default=PICTURE, help="where the PNG goes")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON goes")
    args = parser.parse_args(argv)
    try:
        run(args.openai, args.picture.resolve(), args.out)
    except (OSError, RuntimeError) as exc:
        print(f"the chat picture could not be made: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
