"""The README's and the docs' /progress charts, made by Pam's real code: Tom (Spanish A2, the
token benchmark's learner) chats for eight weeks on the benchmark's own clock — a dozen
messages on five days of each week, four on the others' first — and gets over his mistakes
one by one (from week 2 on, one a fortnight: he writes them right from then on). The scripted
model corrects what he gets wrong, names each mistake's rule, and reports a due item he uses
correctly, as a careful model would; when Pam's question invites one of his old mistakes, he
takes it up. He sends /progress on his first evening, in his second week and at the end of
his eighth: three charts of the same learner.

    python3 dev.py bench progress_chart                  # docs/img/progress-*.png
    python3 dev.py bench progress_chart --native German  # his words in German, to look at

Prints progress and each chart's caption. Deterministic: fixed seeds and clock.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from bench.conversations import SPANISH, Learner, learner_messages
from bench.token_model import ScriptedModel
from bench.token_runs import START, temporary_pam
from bot.review.progress import drawn
from bot.review.prompt import DUE_TAG
from bot.turn.values import TurnRequest
from memory.clock import ManualClock
from memory.config import MemoryConfig
from memory.tokens import TokenCounter

IMAGES = Path(__file__).resolve().parents[1] / "docs" / "img"
WEEKS = 8
PER_DAY = 12
RESTING_DAY = 5  # he chats every day but one (Saturday) …
LIGHT_DAY = 6  # … and only a little on Sundays
FIXED_FROM_WEEK = 2  # his first mistake is gone from week 2, the next two weeks later, …
FIXED_EVERY_WEEKS = 2
# When he sends /progress (the day of the eight weeks, from 0, a Monday) and the chart's name.
SNAPSHOTS = {0: "day-one", 9: "week-two", WEEKS * 7 - 1: "week-eight"}


def _fixed(learner: Learner, text: str, week: int) -> str:
    """`text` with the mistakes Tom has got over by `week` written right."""
    for n, mistake in enumerate(learner.mistakes):
        if week >= FIXED_FROM_WEEK + n * FIXED_EVERY_WEEKS:
            text = text.replace(mistake.wrong, mistake.right)
            text = text.replace(mistake.wrong.lower(), mistake.right[0].lower() + mistake.right[1:])
    return text


def _answer(learner: Learner, model: ScriptedModel, text: str, week: int) -> str:
    """Tom's message, taking up the invitation when Pam's last reply invited a due item: he
    uses it, rightly once he has got over it, wrongly before."""
    last = model.calls[-1] if model.calls else None
    if last is None or last.purpose != "reply":
        return text
    due = last.messages[0]["content"].partition(f"<{DUE_TAG}>")[2]
    for mistake in learner.mistakes:
        if f"→ {mistake.right} (" in due or f"→ {mistake.right[0].lower()}" in due:
            return f"{text} {_fixed(learner, mistake.wrong, week)}."
    return text


def run(out: Path, learner: Learner = SPANISH, native: str | None = None) -> list[str]:
    """Tom's eight weeks, with /progress at each of SNAPSHOTS; each chart written to `out`
    as progress-<name>.png, their captions returned."""
    counter = TokenCounter("gpt-4o")
    model = ScriptedModel(counter, [learner])
    midnight = START.replace(hour=0)
    clock = ManualClock(START)
    script = iter(learner_messages(learner, WEEKS * 7 * PER_DAY))
    captions = []
    with temporary_pam(MemoryConfig(), model, clock) as pam:
        turns = pam.local_turns()
        language = f"/language {learner.target} {native or learner.native}"
        turns.take(TurnRequest(learner.external_id, language))
        for day in range(WEEKS * 7):
            week, weekday = divmod(day, 7)
            today = midnight + timedelta(days=day)
            messages = 0 if weekday == RESTING_DAY else 4 if weekday == LIGHT_DAY else PER_DAY
            for n in range(messages):
                clock.now = today + timedelta(hours=9, minutes=50 * n)
                text = _answer(learner, model, _fixed(learner, next(script), week), week)
                turns.take(TurnRequest(learner.external_id, text, "Tom"))
            if day in SNAPSHOTS:
                clock.now = today + timedelta(hours=20)
                turn = turns.reply(TurnRequest(learner.external_id, "/progress"))
                assert turn.chart_id is not None, "/progress made no chart"
                chart = pam.store.charts.find(turn.chart_id)
                assert chart is not None
                path = out / f"progress-{SNAPSHOTS[day]}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(drawn(pam.store.charts, chart).png)
                captions.append(f"{path.name}:\n{turn.replies[0]}")
            if weekday == 6:
                print(f"week {week + 1}/{WEEKS} done", flush=True)
    return captions


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 dev.py bench progress_chart", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, default=IMAGES, help="the folder for the PNGs")
    parser.add_argument("--native", help="Tom's native language (English)")
    args = parser.parse_args(argv)
    for caption in run(args.out, native=args.native):
        print(caption)
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
