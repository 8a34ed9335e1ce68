"""A Telegram chat drawn like a phone's screen (matplotlib, Agg): the learner's bubbles on the
right, Pam's on the left, her inline keyboard under a message, and a tap shown as a note.
Texts are Telegram HTML as Pam sent them (<b>, <i>, <s>); a command is blue, as Telegram shows
it. Sizes are a phone's points, drawn at two pixels each."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

WIDTH = 390.0  # a phone's width in points
SCALE = 2  # pixels per point
FONT = "DejaVu Sans"
TEXT_SIZE = 15.0
LINE = 20.0  # a text line's height
SMALL = 11.0
PAD_X, PAD_Y = 11.0, 7.0  # inside a bubble
MARGIN = 8.0  # between a bubble and the screen's edge
MAX_BUBBLE = 0.80 * WIDTH
GAP = 6.0  # between two messages
BUTTON_HEIGHT, BUTTON_GAP = 38.0, 3.0
BUTTON_SIZE = 14.0
BUTTON_PAD = 8.0  # a label's room at each side of its button
NOTE_HEIGHT = 28.0
NOTE_PILL, NOTE_SIZE = 22.0, 12.5
# Half a capital letter's height, per point of size: a line's middle, from its baseline.
CAP_HALF = 0.36
ICON_GAP = 5.0
SPEAKER_WIDTH = 1.25  # per point of size
HEADER = 58.0

WALLPAPER = "#d5e2c3"
INCOMING, OUTGOING = "#ffffff", "#e3fbcf"
INK, GREY, LINK = "#111b21", "#7d8a93", "#2f7fd1"
TICKS = "#4aa34a"
BUTTON = "#00000055"
NOTE = "#00000048"
# The emoji DejaVu Sans lacks that Pam's buttons use, drawn as an icon instead (🔊 Say it);
# the emoji variation selector is dropped (✏️ is drawn as DejaVu's ✏).
SPEAKER = "\U0001f50a"
ICONS = frozenset({SPEAKER})
DROPPED = "\ufe0f"
COMMAND = re.compile(r"^/[a-z_]+")


@dataclass(frozen=True)
class Message:
    """One of the chat's messages: who sent it, its Telegram HTML, the labels of its inline
    keyboard by row, and a time to show; or a tap on a button (`tapped`, its label)."""

    learner: bool
    text: str
    keyboard: tuple[tuple[str, ...], ...] = ()
    tapped: str | None = None
    time: str = ""


@dataclass(frozen=True)
class Run:
    """A piece of text in one style."""

    text: str
    bold: bool = False
    italic: bool = False
    strike: bool = False
    colour: str = INK


class _Runs(HTMLParser):
    """Telegram HTML (the tags Pam uses) read into styled runs; a newline is a run of its
    own."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.runs: list[Run] = []
        self.open: set[str] = set()

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self.open.add(tag)

    def handle_endtag(self, tag: str) -> None:
        self.open.discard(tag)

    def handle_data(self, data: str) -> None:
        bold, italic, strike = ("b" in self.open, "i" in self.open, "s" in self.open)
        for n, line in enumerate(data.split("\n")):
            if n:
                self.runs.append(Run("\n"))
            if line:
                self.runs.append(Run(line, bold, italic, strike))


def runs_of(text: str, learner: bool) -> list[Run]:
    """`text`'s styled runs: Pam's is Telegram HTML, the learner's plain text (a command at
    its start in Telegram's link blue)."""
    if learner:
        command = COMMAND.match(text)
        if command:
            return [Run(command.group(), colour=LINK), Run(text[command.end() :])]
        return [Run(text)]
    parser = _Runs()
    parser.feed(text)
    parser.close()
    return parser.runs


class Measure:
    """Text widths in points, as matplotlib will draw them."""

    def __init__(self) -> None:
        from matplotlib.textpath import TextToPath

        self.paths = TextToPath()

    def width(self, text: str, size: float, bold: bool = False, italic: bool = False) -> float:
        """How wide `text` is drawn (an icon: as `_speaker` draws it)."""
        if text in ICONS:
            return size * SPEAKER_WIDTH
        prop = _font(size, bold, italic)
        width, _, _ = self.paths.get_text_width_height_descent(text, prop, ismath=False)
        return float(width)


def _font(size: float, bold: bool = False, italic: bool = False) -> Any:
    from matplotlib.font_manager import FontProperties

    return FontProperties(
        family=FONT,
        size=size,
        weight="bold" if bold else "normal",
        style="oblique" if italic else "normal",
    )


@dataclass
class Placed:
    """A word placed in a bubble: its run's style, and where it starts (x from the bubble's
    text edge, the line it is on)."""

    run: Run
    x: float
    line: int
    width: float


def _pieces(run: Run) -> list[str]:
    """`run` cut into words (each with the spaces after it) and icons."""
    text = run.text.replace(DROPPED, "")
    pieces: list[str] = []
    for word in re.findall(r"\S+\s*|\s+", text):
        start = 0
        for i, char in enumerate(word):
            if char in ICONS:
                pieces += [p for p in (word[start:i], char) if p]
                start = i + 1
        if word[start:]:
            pieces.append(word[start:])
    return pieces


def wrap(runs: Sequence[Run], width: float, measure: Measure) -> tuple[list[Placed], float]:
    """The words of `runs` placed in lines at most `width` wide, and the widest line."""
    placed: list[Placed] = []
    x, line, widest = 0.0, 0, 0.0
    for run in runs:
        if run.text == "\n":
            x, line = 0.0, line + 1
            continue
        for piece in _pieces(run):
            size = measure.width(piece.rstrip(), TEXT_SIZE, run.bold, run.italic)
            if x > 0 and x + size > width:
                x, line = 0.0, line + 1
                if not piece.strip():
                    continue
            style = Run(piece, run.bold, run.italic, run.strike, run.colour)
            placed.append(Placed(style, x, line, size))
            widest = max(widest, x + size)
            x += measure.width(piece, TEXT_SIZE, run.bold, run.italic)
    return placed, widest


def _missing_glyphs(messages: Sequence[Message]) -> set[str]:
    """Characters of the chat that DejaVu Sans cannot draw and no icon stands in for."""
    from fontTools.ttLib import TTFont
    from matplotlib import font_manager

    cmap = TTFont(font_manager.findfont(_font(TEXT_SIZE))).getBestCmap()
    text = "".join(
        html.unescape(m.text) + "".join(label for row in m.keyboard for label in row)
        for m in messages
    )
    return {c for c in text if ord(c) not in cmap and c not in ICONS and c not in DROPPED + "\n"}


def draw(messages: Sequence[Message], path: Path, learner: str, title: str = "Pam") -> None:
    """Draw `messages` as `learner`'s Telegram chat with the bot `title` into the PNG at
    `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    missing = _missing_glyphs(messages)
    if missing:
        raise ValueError(f"no glyph to draw {sorted(missing)}: add an icon for it")
    measure = Measure()
    blocks = [_Block.of(m, measure) for m in messages]
    height = HEADER + GAP * 2 + sum(b.height + GAP for b in blocks) + MARGIN
    fig = plt.figure(figsize=(WIDTH / 72, height / 72), dpi=72 * SCALE)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, WIDTH)
    ax.set_ylim(height, 0)  # y runs down the screen
    ax.axis("off")
    fig.patch.set_facecolor(WALLPAPER)
    _header(ax, title)
    y = HEADER + GAP * 2
    for block in blocks:
        block.draw(ax, y, measure, learner)
        y += block.height + GAP
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, facecolor=fig.get_facecolor(), pil_kwargs={"optimize": True})
    plt.close(fig)


def _header(ax: Any, title: str) -> None:
    """The chat's top bar: back, the bot's name, its avatar."""
    from matplotlib.patches import Circle, Rectangle

    ax.add_patch(Rectangle((0, 0), WIDTH, HEADER, fc="#f7f7f7", ec="none"))
    ax.plot([0, WIDTH], [HEADER, HEADER], color="#d0d0d0", lw=0.6)
    ax.text(12, HEADER / 2, "‹", fontsize=30, color=LINK, va="center", family=FONT)
    ax.text(
        WIDTH / 2,
        HEADER / 2 - 8,
        title,
        fontsize=16,
        weight="bold",
        ha="center",
        va="center",
        color=INK,
        family=FONT,
    )
    ax.text(
        WIDTH / 2,
        HEADER / 2 + 11,
        "bot",
        fontsize=12,
        ha="center",
        va="center",
        color=GREY,
        family=FONT,
    )
    ax.add_patch(Circle((WIDTH - 30, HEADER / 2), 18, fc="#f0876c", ec="none"))
    ax.text(
        WIDTH - 30,
        HEADER / 2 + 1,
        title[:1],
        fontsize=16,
        weight="bold",
        color="white",
        ha="center",
        va="center",
        family=FONT,
    )


@dataclass
class _Block:
    """A message laid out: its words, its bubble's width and text height, its whole height
    (the keyboard's rows included)."""

    message: Message
    words: list[Placed]
    width: float
    text_height: float
    height: float

    @classmethod
    def of(cls, message: Message, measure: Measure) -> _Block:
        if message.tapped is not None:
            return cls(message, [], 0.0, 0.0, NOTE_HEIGHT)
        room = MAX_BUBBLE - 2 * PAD_X
        words, widest = wrap(runs_of(message.text, message.learner), room, measure)
        lines = 1 + max((w.line for w in words), default=0)
        # The time sits at the end of the last line, as Telegram puts it, or under it.
        last = max((w.x + w.width for w in words if w.line == lines - 1), default=0.0)
        stamp = measure.width(_stamp(message), SMALL) + 10
        if last + stamp <= room:
            widest = max(widest, last + stamp)
        else:
            lines += 1
        # The bubble widens for its keyboard, as Telegram's does, up to the screen's margins:
        # a row's buttons share its width equally.
        keys = max(
            (
                len(row) * max(_label_width(b, measure) + 2 * BUTTON_PAD for b in row)
                + BUTTON_GAP * (len(row) - 1)
                for row in message.keyboard
            ),
            default=0.0,
        )
        width = min(max(widest + 2 * PAD_X, keys), WIDTH - 2 * MARGIN)
        text_height = lines * LINE + 2 * PAD_Y
        keyboard = len(message.keyboard) * (BUTTON_HEIGHT + BUTTON_GAP)
        return cls(message, words, width, text_height, text_height + keyboard)

    def draw(self, ax: Any, top: float, measure: Measure, learner: str) -> None:
        """Draw the message with its top at `top` (a tap: as `learner`'s)."""
        from matplotlib.patches import FancyBboxPatch

        message = self.message
        if message.tapped is not None:
            _note(ax, top, f"{learner} taps “{message.tapped}”", measure)
            return
        left = WIDTH - MARGIN - self.width if message.learner else MARGIN
        ax.add_patch(
            FancyBboxPatch(
                (left, top),
                self.width,
                self.text_height,
                boxstyle="round,pad=0,rounding_size=15",
                fc=OUTGOING if message.learner else INCOMING,
                ec="none",
            )
        )
        for word in self.words:
            _word(ax, left + PAD_X + word.x, top + PAD_Y + word.line * LINE, word.run, measure)
        ax.text(
            left + self.width - PAD_X + 2,
            top + self.text_height - PAD_Y - 2,
            _stamp(message),
            fontsize=SMALL,
            color=TICKS if message.learner else GREY,
            ha="right",
            va="baseline",
            family=FONT,
        )
        y = top + self.text_height + BUTTON_GAP
        for row in message.keyboard:
            _buttons(ax, left, y, self.width, row, measure)
            y += BUTTON_HEIGHT + BUTTON_GAP


def _stamp(message: Message) -> str:
    """The time under a message, with the learner's two ticks (read)."""
    return message.time + ("  ✓✓" if message.learner else "")


def _label_width(label: str, measure: Measure) -> float:
    """How wide a button's label is drawn, its icon and the gap after it included."""
    icon = next((c for c in label if c in ICONS), None)
    gap = measure.width(icon, BUTTON_SIZE) + ICON_GAP if icon else 0.0
    return gap + measure.width(_label(label), BUTTON_SIZE, bold=True)


def _label(label: str) -> str:
    """A button's label without its emoji (drawn as an icon beside it)."""
    return "".join(c for c in label if c not in ICONS and c != DROPPED).strip()


def _word(ax: Any, x: float, line_top: float, run: Run, measure: Measure) -> None:
    """One word (or icon) of a bubble's text, its line's top at `line_top`."""
    baseline = line_top + LINE * 0.75
    if run.text in ICONS:
        _speaker(ax, x, baseline - CAP_HALF * TEXT_SIZE, TEXT_SIZE, INK)
        return
    ax.text(
        x,
        baseline,
        run.text,
        fontproperties=_font(TEXT_SIZE, run.bold, run.italic),
        color=run.colour,
        va="baseline",
    )
    if run.strike:
        width = measure.width(run.text.rstrip(), TEXT_SIZE, run.bold, run.italic)
        ax.plot([x, x + width], [baseline - 5, baseline - 5], color=run.colour, lw=1.1)


def _buttons(
    ax: Any, left: float, top: float, width: float, row: Sequence[str], measure: Measure
) -> None:
    """A row of inline-keyboard buttons, `width` wide together; an icon before its label, and
    a label too long for its button cut with an ellipsis, as Telegram cuts it."""
    from matplotlib.patches import FancyBboxPatch

    each = (width - BUTTON_GAP * (len(row) - 1)) / len(row)
    middle = top + BUTTON_HEIGHT / 2
    for n, label in enumerate(row):
        x = left + n * (each + BUTTON_GAP)
        ax.add_patch(
            FancyBboxPatch(
                (x, top),
                each,
                BUTTON_HEIGHT,
                boxstyle="round,pad=0,rounding_size=9",
                fc=BUTTON,
                ec="none",
            )
        )
        icon = next((c for c in label if c in ICONS), None)
        gap = measure.width(icon, BUTTON_SIZE) + ICON_GAP if icon else 0.0
        text = _label(label)
        while measure.width(text, BUTTON_SIZE, bold=True) + gap > each - 2 * BUTTON_PAD:
            text = text[:-2].rstrip() + "…"
        start = x + (each - measure.width(text, BUTTON_SIZE, bold=True) - gap) / 2
        if icon:
            _speaker(ax, start, middle, BUTTON_SIZE, "white")
        ax.text(
            start + gap,
            middle + CAP_HALF * BUTTON_SIZE,
            text,
            fontproperties=_font(BUTTON_SIZE, bold=True),
            color="white",
            va="baseline",
        )


def _note(ax: Any, top: float, text: str, measure: Measure) -> None:
    """A note in the middle of the chat, in the pill Telegram puts dates in."""
    from matplotlib.patches import FancyBboxPatch

    width = measure.width(text, NOTE_SIZE, bold=True) + 22
    ax.add_patch(
        FancyBboxPatch(
            (WIDTH / 2 - width / 2, top + 2),
            width,
            NOTE_PILL,
            boxstyle="round,pad=0,rounding_size=11",
            fc=NOTE,
            ec="none",
        )
    )
    middle = top + 2 + NOTE_PILL / 2
    ax.text(
        WIDTH / 2,
        middle + CAP_HALF * NOTE_SIZE,
        text,
        fontproperties=_font(NOTE_SIZE, bold=True),
        color="white",
        ha="center",
        va="baseline",
    )


def _speaker(ax: Any, x: float, middle: float, size: float, colour: str) -> None:
    """🔊 for a text `size` high: a speaker with two sound waves, its left edge at `x` and its
    middle at `middle`."""
    from matplotlib.patches import Arc, Polygon

    s = size / 14
    body = [
        (x, middle - 2.5 * s),
        (x + 3 * s, middle - 2.5 * s),
        (x + 7 * s, middle - 6 * s),
        (x + 7 * s, middle + 6 * s),
        (x + 3 * s, middle + 2.5 * s),
        (x, middle + 2.5 * s),
    ]
    ax.add_patch(Polygon(body, closed=True, fc=colour, ec="none"))
    for radius in (4 * s, 8 * s):
        ax.add_patch(
            Arc(
                (x + 7 * s, middle),
                radius * 2,
                radius * 2,
                theta1=-50,
                theta2=50,
                color=colour,
                lw=1.4 * s,
            )
        )
