"""The /progress chart and its caption, both in the learner's native language (the chart's
drawing is bot/review/chart.py's). The chart is drawn with matplotlib's object API on the Agg
canvas — no pyplot, no global state, safe on any lane's thread — and saved as a small palette
PNG. matplotlib is imported on the first chart only, or by `warm_in_background` when a worker
starts: the web process and the memory jobs never load it, and a worker's first /progress does
not wait for matplotlib, numpy and Pillow to load and the font list to be built (seconds on a
small machine, more without a bytecode cache)."""

from __future__ import annotations

import io
import logging
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from bot.i18n import native_of, words_for
from bot.review.chart import DOMAIN, NEW_WEEK, NOTHING_YET
from memory.review.progress import Patterns, Progress, Week, progress
from memory.store.charts import Charts, StoredChart
from memory.store.learners import Learners

if TYPE_CHECKING:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

log = logging.getLogger(__name__)

PALETTE_COLOURS = 64  # a palette PNG: a chart has few colours, and antialiasing needs some


def summary(found: Progress, language: str | None) -> str:
    """The chart's caption, in `language` (the learner's native one; English when None or
    one Pam has no words in): the days practised this week and the streak, the patterns and
    their stages, and how many are ready for a quick review."""
    say = words_for(language, DOMAIN)
    if found.empty:
        return say(NOTHING_YET)
    days = found.days_this_week
    lines = [
        say.plural(
            "This week you practised on {count} day.",
            "This week you practised on {count} days.",
            days,
        )
        if days
        else say(NEW_WEEK)
    ]
    if days and found.streak >= 2:
        lines[0] += " " + say.plural(
            "That's {count} day in a row!", "That's {count} days in a row!", found.streak
        )
    patterns = found.patterns
    if patterns.met:
        lines.append(
            say.plural(
                "I've noticed {count} mistake pattern: {mastered} mastered, "
                "{getting_there} getting there.",
                "I've noticed {count} mistake patterns: {mastered} mastered, "
                "{getting_there} getting there.",
                patterns.met,
                mastered=say.number(patterns.mastered),
                getting_there=say.number(patterns.getting_there),
            )
        )
    if patterns.ready:
        lines.append(
            say.plural(
                "{count} is ready for a quick review: send /review.",
                "{count} are ready for a quick review: send /review.",
                patterns.ready,
            )
        )
    return "\n".join(lines)


def render(found: Progress, language: str | None = None) -> bytes:
    """The chart of `found` as PNG bytes, its words in `language` (the learner's native
    one)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from bot.review.chart import figure_of

    figure = figure_of(found, words_for(language, DOMAIN))
    canvas = figure.canvas
    assert isinstance(canvas, FigureCanvasAgg)
    canvas.draw()
    return _small_png(canvas)


def drawn(charts: Charts, chart: StoredChart) -> StoredChart:
    """`chart` with its PNG: drawn now from the learner's progress as of when it was asked
    for, in their native language, and stored, when its turn left it NOT_DRAWN. Its delivery
    calls this, after the turn: the learner's next message is answered meanwhile. Raises
    LearnerGone when the learner was forgotten meanwhile."""
    if chart.drawn:
        return chart
    started, cpu = time.monotonic(), time.thread_time()
    learner = Learners(charts.engine, charts.clock).get_learner(chart.learner_id)
    found = progress(charts.engine, chart.learner_id, chart.created_at)
    png = render(found, native_of(learner))
    # cpu_ms: this thread's own work; render_ms above it is time spent waiting for the CPU.
    log.info(
        "progress chart learner=%s bytes=%d render_ms=%d cpu_ms=%d",
        chart.learner_id,
        len(png),
        (time.monotonic() - started) * 1000,
        (time.thread_time() - cpu) * 1000,
    )
    charts.draw(chart.id, png)
    return replace(chart, png=png)


def warm() -> None:
    """Load everything a chart needs by drawing one nobody sees (matplotlib's Agg canvas, its
    font list, Pillow's PNG writer); logs how long it took. A failure is logged, never raised:
    the learner's /progress would then load it, as before."""
    started = time.monotonic()
    try:
        render(_sample(datetime.now(UTC)))
    except Exception:
        log.exception("chart renderer failed to load; the first /progress loads it")
        return
    log.info("chart renderer ready load_ms=%d", (time.monotonic() - started) * 1000)


def warm_in_background() -> threading.Thread:
    """Start `warm` on a thread of its own (a worker starts it with its lanes, so the first
    /progress finds the renderer loaded); the thread."""
    # Not a daemon: a worker stopped while it draws would end the interpreter under
    # matplotlib's C++ code, which aborts the process ("terminate called without an active
    # exception", status -6); the exit waits the second or two it takes instead.
    thread = threading.Thread(target=warm, name="pam-charts-warm", daemon=False)
    thread.start()
    return thread


def _sample(now: datetime) -> Progress:
    """A chart with something in every part, for `warm` to draw."""
    start = now.date() - timedelta(days=now.weekday())
    weeks = [Week(start - timedelta(weeks=1), {"grammar": 2}, 0, 1), Week(start, {"other": 1})]
    return Progress(now, weeks, frozenset({now.date()}), Patterns(1, 1, 1, 1))


def _small_png(canvas: FigureCanvasAgg) -> bytes:
    """The drawn canvas as a palette PNG, optimised: a few tens of kilobytes, where Agg's own
    truecolour PNG is several times that."""
    from PIL import Image

    width, height = canvas.get_width_height()
    rgba = canvas.buffer_rgba()
    image = Image.frombuffer("RGBA", (width, height), rgba, "raw", "RGBA", 0, 1).convert("RGB")
    out = io.BytesIO()
    # Fast octree: a fifth of median cut's time, and a chart's flat colours lose nothing.
    palette = image.quantize(colors=PALETTE_COLOURS, method=Image.Quantize.FASTOCTREE)
    palette.save(out, format="PNG", optimize=True)
    return out.getvalue()
