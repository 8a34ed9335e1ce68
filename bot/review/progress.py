"""The /progress chart and its two-line summary: three panels (corrections per week by
category, review items learned versus due, active days) drawn with matplotlib's object API on
the Agg canvas — no pyplot, no global state, safe on any lane's thread — sized for a phone
and saved as a small palette PNG. matplotlib is imported on the first chart only, or by
`warm_in_background` when a worker starts: the web process and the memory jobs never load it,
and a worker's first /progress does not wait for matplotlib, numpy and Pillow to load and the
font list to be built (seconds on a small machine, more without a bytecode cache)."""

from __future__ import annotations

import io
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from bot.phrases import in_language
from memory.review.progress import Week, progress
from memory.store.charts import Charts, StoredChart

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg

log = logging.getLogger(__name__)

WIDTH_IN, HEIGHT_IN, DPI = 10, 12, 100  # 1000 × 1200 px: readable on a phone, held upright
PALETTE_COLOURS = 64  # a palette PNG: a chart has few colours, and antialiasing needs some
MAX_CATEGORIES = 5  # more get folded into "other": a legend a thumb can read
COLOURS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860"]
LEARNED_COLOUR, DUE_COLOUR, DAYS_COLOUR = "#55A868", "#C44E52", "#4C72B0"

# The summary, in the target language: line one this week's numbers, line two the days.
THIS_WEEK = {
    "English": "This week — corrections: {corrections}, patterns learned: {learned}, "
    "due for review: {due}.",
    "Spanish": "Esta semana — correcciones: {corrections}, patrones aprendidos: {learned}, "
    "para repasar: {due}.",
    "French": "Cette semaine — corrections : {corrections}, points acquis : {learned}, "
    "à réviser : {due}.",
    "German": "Diese Woche — Korrekturen: {corrections}, gelernte Muster: {learned}, "
    "zu wiederholen: {due}.",
    "Italian": "Questa settimana — correzioni: {corrections}, schemi imparati: {learned}, "
    "da ripassare: {due}.",
    "Portuguese": "Esta semana — correções: {corrections}, padrões aprendidos: {learned}, "
    "para revisar: {due}.",
    "Dutch": "Deze week — correcties: {corrections}, geleerde patronen: {learned}, "
    "te herhalen: {due}.",
}
DAYS = {
    "English": "Days you practised this week: {days} of {elapsed}.",
    "Spanish": "Días que practicaste esta semana: {days} de {elapsed}.",
    "French": "Jours de pratique cette semaine : {days} sur {elapsed}.",
    "German": "Tage mit Übung diese Woche: {days} von {elapsed}.",
    "Italian": "Giorni di pratica questa settimana: {days} su {elapsed}.",
    "Portuguese": "Dias em que praticaste esta semana: {days} de {elapsed}.",
    "Dutch": "Dagen dat je oefende deze week: {days} van {elapsed}.",
}
NOTHING_YET = (
    "Nothing to chart yet — chat with me for a few days\nand your progress will show up here."
)


def summary(weeks: Sequence[Week], language: str | None, now: datetime) -> str:
    """Two lines about this week (the last of `weeks`), in the target language (English where
    Pam has no template for it)."""
    week = weeks[-1]
    first = in_language(THIS_WEEK, language).format(
        corrections=week.total_corrections, learned=week.learned, due=week.due
    )
    elapsed = now.weekday() + 1  # Monday is day one
    return first + "\n" + in_language(DAYS, language).format(days=week.active_days, elapsed=elapsed)


def has_data(weeks: Sequence[Week]) -> bool:
    """Whether there is anything to draw."""
    return any(w.corrections or w.learned or w.due or w.active_days for w in weeks)


def render(weeks: Sequence[Week]) -> bytes:
    """The chart of `weeks` as PNG bytes (a note saying there is nothing yet when the learner
    has no data)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    canvas = FigureCanvasAgg(figure)
    if has_data(weeks):
        corrections, items, days = figure.subplots(3, 1, sharex=True)
        labels = [f"{w.start:%d %b}" for w in weeks]
        _corrections(corrections, weeks)
        _items(items, weeks)
        _days(days, weeks, labels)
        figure.suptitle("Your progress, week by week", fontsize=20)
    else:
        figure.text(0.5, 0.5, NOTHING_YET, ha="center", va="center", fontsize=22, wrap=True)
    canvas.draw()
    return _small_png(canvas)


def drawn(charts: Charts, chart: StoredChart) -> StoredChart:
    """`chart` with its PNG: drawn now from the learner's weeks as of when it was asked for,
    and stored, when its turn left it NOT_DRAWN. Its delivery calls this, after the turn: the
    learner's next message is answered meanwhile."""
    if chart.drawn:
        return chart
    started, cpu = time.monotonic(), time.thread_time()
    png = render(progress(charts.engine, chart.learner_id, chart.created_at))
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
        render(())
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


def _corrections(axes: Axes, weeks: Sequence[Week]) -> None:
    """Stacked bars: corrections per week, by category (the biggest few, then "other")."""
    totals: Counter[str] = Counter()
    for week in weeks:
        totals.update(week.corrections)
    shown = [name for name, _ in totals.most_common(MAX_CATEGORIES)]
    if len(totals) > MAX_CATEGORIES and "other" not in shown:
        shown[-1] = "other"
    x = range(len(weeks))
    bottom = [0] * len(weeks)
    for n, name in enumerate(shown):
        heights = [_in_category(week, name, shown) for week in weeks]
        axes.bar(x, heights, bottom=bottom, color=COLOURS[n % len(COLOURS)], label=name)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    axes.set_title("Corrections per week", fontsize=16, loc="left")
    if shown:
        axes.legend(fontsize=12, loc="upper left", frameon=False, ncols=min(3, len(shown)))
    _style(axes, max(bottom, default=0))


def _in_category(week: Week, name: str, shown: list[str]) -> int:
    """The week's corrections in `name`; "other" also takes the categories not shown."""
    if name != "other":
        return week.corrections.get(name, 0)
    return sum(count for c, count in week.corrections.items() if c == "other" or c not in shown)


def _items(axes: Axes, weeks: Sequence[Week]) -> None:
    """Lines: review patterns learned, and due, at each week's end."""
    x = range(len(weeks))
    learned = [w.learned for w in weeks]
    due = [w.due for w in weeks]
    axes.plot(x, learned, color=LEARNED_COLOUR, linewidth=3, marker="o", label="learned")
    axes.plot(x, due, color=DUE_COLOUR, linewidth=3, marker="o", label="due for review")
    axes.set_title("Mistake patterns: learned vs due", fontsize=16, loc="left")
    axes.legend(fontsize=12, loc="best", frameon=False)
    _style(axes, max(learned + due, default=0))


def _days(axes: Axes, weeks: Sequence[Week], labels: list[str]) -> None:
    """Bars: days with practice in each week (of 7)."""
    x = range(len(weeks))
    axes.bar(x, [w.active_days for w in weeks], color=DAYS_COLOUR)
    axes.set_title("Days you practised", fontsize=16, loc="left")
    axes.set_xticks(list(x), labels, fontsize=12)
    _style(axes, 7)


def _style(axes: Axes, top: int) -> None:
    """Whole numbers on the y axis, a little room above the highest value, light frame."""
    from matplotlib.ticker import MaxNLocator

    axes.set_ylim(0, max(top, 1) * 1.15)
    axes.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
    axes.tick_params(labelsize=12)
    axes.grid(axis="y", alpha=0.3)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


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
