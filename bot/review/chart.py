"""The /progress chart as a matplotlib Figure, every word of it in the learner's language:
this week as a strip of seven days (practised ones ticked) with the streak, the mistake
patterns Pam noticed in three stages (to practise, getting there, mastered) and how many are
ready for a quick review, and — only once there are two weeks or more to show — days practised and
corrections by kind, week by week. Nothing in it reads as failure: no red, no line of things
"due" rising; categories keep one colour in every chart. Drawn with the object API on the Agg
canvas (no pyplot, no global state), 1080 px wide, square on day one and upright once the
weeks show, with fonts big enough for Telegram's preview."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from babel.dates import format_skeleton

from bot.i18n import N_, Words
from bot.review.chart_fonts import LATIN, THIN_FONT_STROKE, THIN_FONTS, families
from memory.review.progress import Progress, Week

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

DOMAIN = "chart"  # the catalog of the chart's words and its caption
WIDTH_IN, DPI = 10.8, 100  # 1080 px wide
TILE_TEXT = 0.25  # the widest a pattern tile's words may be, of the page's width
MIN_WEEK_SLOTS = 5  # the week charts leave room for this many bars at least

# Colours: calm, and the same meaning in every chart.
INK, MUTED, FAINT = "#22313F", "#6B7B8C", "#D5DCE3"
PRACTISED = "#2A9D8F"  # a practised day, a mastered pattern
GETTING_THERE = "#E9B44C"
TO_PRACTISE = "#7A9CC6"  # neutral blue: nothing to be ashamed of
READY = "#457B9D"
# Each category's colour, by name, the same in every chart (colour-blind-safe hues).
CATEGORY_COLOURS = {
    "grammar": "#0072B2",
    "vocabulary": "#E69F00",
    "spelling": "#009E73",
    "word-order": "#CC79A7",
    "gender": "#56B4E9",
    "conjugation": "#8C6BB1",
    "punctuation": "#B59F00",
    "other": "#A0A0A0",
}
CATEGORY_NAMES = {
    "grammar": N_("grammar"),
    "vocabulary": N_("vocabulary"),
    "spelling": N_("spelling"),
    "word-order": N_("word order"),
    "gender": N_("gender"),
    "conjugation": N_("conjugation"),
    "punctuation": N_("punctuation"),
    "other": N_("other"),
}

COMMAND = re.compile(r"(/[a-z]+)")
LEFT_TO_RIGHT_MARK = "\u200e"

TITLE = N_("Your progress")
THIS_WEEK = N_("This week")
NEW_WEEK = N_("A new week: chat with me today to tick it off!")
PATTERNS = N_("Mistake patterns I noticed")
STAGES = (
    (N_("to practise"), N_("slipped last time"), TO_PRACTISE),
    (N_("getting there"), N_("right last time"), GETTING_THERE),
    (N_("mastered"), N_("right twice in a row"), PRACTISED),
)
NO_PATTERNS = N_("No mistake patterns yet — keep chatting!")
DAYS_TITLE = N_("Days practised, week by week")
CORRECTIONS_TITLE = N_("What I corrected, by kind")
NOTHING_YET = N_("Nothing to show yet — chat with me and your progress will show up here.")


def category_colour(category: str) -> str:
    """The colour of `category` in every chart (an unknown one is "other")."""
    return CATEGORY_COLOURS.get(category, CATEGORY_COLOURS["other"])


def figure_of(found: Progress, say: Words) -> Figure:
    """The chart of `found`, its words said by `say`."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    weekly = len(found.weeks) >= 2
    # Each section's height in inches, from the top; the page's is their sum.
    sections: list[tuple[float, Callable[[Axes, Progress, _Style], None]]] = (
        [(1.5, _header), (2.6, _week_strip), (3.2, _patterns), (3.0, _days), (4.1, _corrections)]
        if weekly
        else [(2.0, _header), (3.6, _week_strip), (5.2, _patterns)]
    )
    height = sum(h for h, _ in sections)
    figure = Figure(figsize=(WIDTH_IN, height), dpi=DPI, facecolor="white")
    canvas = FigureCanvasAgg(figure)  # its renderer measures the words that must fit
    style = _Style(say, canvas, height)
    if found.empty:
        style.text(figure, 0.5, 0.5, say(NOTHING_YET), 30, ha="center", wrap=True)
        return figure
    top = height
    for section_height, draw in sections:
        top -= section_height
        axes = figure.add_axes((0, top / height, 1, section_height / height))
        axes.set_axis_off()
        axes.set_xlim(0, 1)
        axes.set_ylim(0, 1)
        draw(axes, found, style)
    return figure


class _Style:
    """Where and how text goes in a chart for one language: its fonts, the side lines start
    from (right in Arabic), and the order days and weeks run in."""

    def __init__(self, say: Words, canvas: FigureCanvasAgg, height: float) -> None:
        self.say = say
        self.canvas = canvas
        self.figure = canvas.figure
        self.height = height
        self.family = families(say.locale)
        self.stroke = THIN_FONT_STROKE if say.locale in THIN_FONTS else 0.0
        self.rtl = say.right_to_left
        self.start = 0.95 if self.rtl else 0.05
        self.align = "right" if self.rtl else "left"

    def text(
        self,
        where: Figure | Axes,
        x: float,
        y: float,
        text: str,
        size: float,
        width: float | None = None,
        **kw: object,
    ) -> None:
        """`text` at (x, y) of `where`, `size` points, in this language's fonts; made smaller
        if need be to fit in `width` (a fraction of the page's), when given."""
        if self.rtl:  # a /command stays one left-to-right word: "/review", not "review/"
            text = COMMAND.sub(LEFT_TO_RIGHT_MARK + r"\1", text)
        kw.setdefault("ha", self.align)
        kw.setdefault("va", "center")
        kw.setdefault("color", INK)
        stroke = self.stroke * size
        if kw.get("weight") == "bold" and self.family[0] != LATIN:
            del kw["weight"]
            stroke += size / 25
        if stroke:
            # The script fonts are variable fonts, which matplotlib draws at their default
            # weight (Thin for Noto Sans JP, SC and KR; Regular for the others): the letters
            # are thickened with an outline of their own colour to the weight wanted.
            from matplotlib.patheffects import withStroke

            kw["path_effects"] = [withStroke(linewidth=stroke, foreground=kw["color"])]
        artist = where.text(x, y, text, fontsize=size, family=self.family, **kw)  # type: ignore[arg-type]
        if width is not None:
            drawn = artist.get_window_extent(self.canvas.get_renderer()).width
            room = width * self.figure.bbox.width
            if drawn > room:
                artist.set_fontsize(size * room / drawn)

    def x(self, n: int, count: int) -> int:
        """Where the `n`th of `count` days or weeks goes: left to right, or right to left."""
        return count - 1 - n if self.rtl else n

    def inner(self, section: Axes, bottom: float, top: float) -> Axes:
        """Axes for a plot inside `section`, from `bottom` to `top` of its height, with room
        on the side for the y axis's numbers."""
        box = section.get_position()
        left, width = (0.06, 0.84) if self.rtl else (0.1, 0.84)
        rect = (left, box.y0 + bottom * box.height, width, (top - bottom) * box.height)
        return self.figure.add_axes(rect)


def _header(axes: Axes, found: Progress, style: _Style) -> None:
    say = style.say
    style.text(axes, style.start, 0.62, say(TITLE), 40, weight="bold")
    when = format_skeleton("MMMMEEEEd", found.now, locale=say.cldr)
    style.text(axes, style.start, 0.2, when, 22, color=MUTED)


def _week_strip(axes: Axes, found: Progress, style: _Style) -> None:
    """Seven days, Monday first: a ticked circle for each day practised, today ringed, the
    days still to come faint; under them how many days, and the streak."""
    say = style.say
    today = found.now.date()
    style.text(axes, style.start, 0.9, say(THIS_WEEK), 26, 0.9)
    for n, day in enumerate(found.week_days):
        x = 0.05 + 0.9 * (style.x(n, 7) + 0.5) / 7
        practised = day in found.practised
        face = PRACTISED if practised else "white"
        edge = PRACTISED if practised else (INK if day == today else FAINT)
        width = 4 if day == today else 2.5
        axes.scatter([x], [0.56], s=76**2, color=face, edgecolors=edge, linewidths=width)
        if practised:
            style.text(axes, x, 0.555, "✓", 34, ha="center", color="white", weight="bold")
        label = say.date(day, "EEE")
        style.text(axes, x, 0.27, label, 19, ha="center", color=INK if day <= today else MUTED)
    days = found.days_this_week
    line = say.plural("{count} day practised", "{count} days practised", days)
    if not days:  # Monday morning is a fresh start, not a zero
        line = say(NEW_WEEK)
    elif found.streak >= 2:
        line += "  ·  " + say.plural("{count} day in a row", "{count} days in a row", found.streak)
    style.text(axes, 0.5, 0.07, line, 22, 0.9, ha="center")


def _patterns(axes: Axes, found: Progress, style: _Style) -> None:
    """The patterns in their three stages, as three big numbers, and how many are ready to
    practise now."""
    say, patterns = style.say, found.patterns
    style.text(axes, style.start, 0.92, say(PATTERNS), 26, 0.9)
    if not patterns.met:
        style.text(axes, 0.5, 0.5, say(NO_PATTERNS), 22, ha="center", color=MUTED)
        return
    from matplotlib.patches import FancyBboxPatch

    counts = (patterns.to_practise, patterns.getting_there, patterns.mastered)
    for n, ((name, meaning, colour), count) in enumerate(zip(STAGES, counts, strict=True)):
        x = 0.04 + 0.92 * (style.x(n, 3) + 0.5) / 3
        box = FancyBboxPatch(
            (x - 0.14, 0.22),
            0.28,
            0.6,
            boxstyle="round,pad=0,rounding_size=0.03",
            facecolor=colour,
            alpha=0.16,
            edgecolor="none",
        )
        axes.add_patch(box)
        style.text(axes, x, 0.64, say.number(count), 54, ha="center", color=colour, weight="bold")
        style.text(axes, x, 0.41, say(name), 21, TILE_TEXT, ha="center")
        style.text(axes, x, 0.3, say(meaning), 15, TILE_TEXT, ha="center", color=MUTED)
    if patterns.ready:
        ready = say.plural(
            "{count} ready for a quick review now: /review",
            "{count} ready for a quick review now: /review",
            patterns.ready,
        )
        style.text(axes, 0.5, 0.08, ready, 21, 0.9, ha="center", color=READY)


def _labels(found: Progress, style: _Style) -> tuple[list[int], list[str]]:
    """Where each week goes and its name (its Monday, as the learner writes dates)."""
    weeks = found.weeks
    xs = [style.x(n, len(weeks)) for n in range(len(weeks))]
    return xs, [format_skeleton("MMMd", w.start, locale=style.say.cldr) for w in weeks]


def _days(section: Axes, found: Progress, style: _Style) -> None:
    """Bars: days practised in each week (of seven), each with its number on top."""
    style.text(section, style.start, 0.9, style.say(DAYS_TITLE), 26, 0.9)
    axes = style.inner(section, 0.2, 0.74)
    xs, labels = _labels(found, style)
    days = [w.active_days for w in found.weeks]
    axes.bar(xs, days, color=PRACTISED, width=0.6)
    _weeks_axis(axes, xs, labels, days, 7, style)


def _corrections(section: Axes, found: Progress, style: _Style) -> None:
    """Stacked bars: corrections in each week, by kind, each kind in its own colour, the
    kinds named under them."""
    say, weeks = style.say, found.weeks
    style.text(section, style.start, 0.93, say(CORRECTIONS_TITLE), 26, 0.9)
    axes = style.inner(section, 0.38, 0.8)
    xs, labels = _labels(found, style)
    shown = [c for c in CATEGORY_COLOURS if any(_count(w, c) for w in weeks)]
    bottom = [0] * len(weeks)
    for category in shown:
        heights = [_count(w, category) for w in weeks]
        axes.bar(xs, heights, bottom=bottom, width=0.6, color=category_colour(category))
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    _weeks_axis(axes, xs, labels, bottom, max(bottom, default=0), style)
    _legend(section, shown, style)


def _legend(section: Axes, shown: list[str], style: _Style) -> None:
    """Each kind shown, a square of its colour and its name, four to a row."""
    for n, category in enumerate(shown):
        row, column = divmod(n, 4)
        x = 0.1 + 0.21 * column
        if style.rtl:
            x = 1 - x
        y = 0.17 - 0.09 * row
        section.scatter([x], [y], s=20**2, marker="s", color=category_colour(category))
        side = -1 if style.rtl else 1
        style.text(section, x + side * 0.022, y, style.say(CATEGORY_NAMES[category]), 17)


def _count(week: Week, category: str) -> int:
    """The week's corrections in `category` ("other" takes any category not known)."""
    if category != "other":
        return week.corrections.get(category, 0)
    return sum(n for c, n in week.corrections.items() if c not in CATEGORY_COLOURS or c == "other")


def _weeks_axis(
    axes: Axes, xs: list[int], labels: list[str], totals: list[int], top: int, style: _Style
) -> None:
    """Each bar's total on top of it, the weeks under them (every other one named when there
    are many), in the learner's digits and dates; no y axis, a light baseline."""
    from matplotlib.transforms import blended_transform_factory

    room = max(MIN_WEEK_SLOTS - len(labels), 0) / 2  # two weeks: two bars, not two walls
    axes.set_xlim(-0.6 - room, len(labels) - 0.4 + room)
    axes.set_ylim(0, max(top, 1) * 1.22)
    axes.set_xticks([])
    axes.set_yticks([])
    for side in ("top", "right", "left"):
        axes.spines[side].set_visible(False)
    axes.spines["bottom"].set_color(FAINT)
    under = blended_transform_factory(axes.transData, axes.transAxes)
    every = 1 if len(labels) <= 5 else 2
    for n, (x, label, total) in enumerate(zip(xs, labels, totals, strict=True)):
        if total:
            style.text(
                axes,
                x,
                total + max(top, 1) * 0.03,
                style.say.number(total),
                17,
                ha="center",
                va="bottom",
                color=MUTED,
            )
        if (len(labels) - 1 - n) % every == 0:
            style.text(
                axes, x, -0.1, label, 17, ha="center", va="top", color=MUTED, transform=under
            )
