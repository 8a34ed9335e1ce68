"""/progress: the chart as a real PNG on day one, in week eight and for a learner with nothing
yet — no empty weeks, nothing that reads as failure, each category in its colour, every word in
the learner's native language and every script drawn without a missing glyph — its caption in
that language, and the chart's way through the worker — stored, queued with its caption,
claimed, and sent by the channel's `send_chart` with its signed link (or the caption alone
where the channel has no images, the chart is gone, or the learner was forgotten). The chart
is drawn by its delivery, after the turn: the learner's next message is answered meanwhile."""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import pytest
from PIL import Image
from sqlalchemy import Engine

import bot.review.progress
from bot import phrases
from bot.channels import TransientSendError
from bot.i18n import words_for
from bot.reply_format import CATEGORIES
from bot.review import chart
from bot.review.chart import (
    CATEGORY_COLOURS,
    CORRECTIONS_TITLE,
    DAYS_TITLE,
    DOMAIN,
    NOTHING_YET,
    category_colour,
    figure_of,
)
from bot.review.progress import render, summary
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from memory.messages import Sent
from memory.review.progress import Patterns, Progress, Week
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.helpers.queues import make_available_now, outbox_rows
from tests.support import WAIT, RecordingSender, inbound
from webhooks.charts import SignedLinks
from webhooks.settings import Settings
from webhooks.wiring import build

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PUBLIC = "https://pam.example"
NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)  # a Wednesday: day three of the week
MONDAY = date(2026, 11, 23)
SCRIPTS = ["Japanese", "Chinese", "Korean", "Arabic", "Hindi", "Russian", "German"]


def day_one() -> Progress:
    """A learner's first day: a few messages today, three patterns met, two right since."""
    return Progress(
        NOW,
        [Week(MONDAY, {"grammar": 2, "vocabulary": 1}, 0, 1)],
        frozenset({NOW.date()}),
        Patterns(to_practise=1, getting_there=2, mastered=0, ready=1),
    )


def week_eight() -> Progress:
    categories = ["grammar", "vocabulary", "spelling", "conjugation", "gender", "word-order"]
    weeks = [
        Week(
            MONDAY - timedelta(weeks=7 - n),
            {c: (n + k) % 4 for k, c in enumerate(categories)},
            mastered=n,
            active_days=min(n, 7),
        )
        for n in range(8)
    ]
    days = frozenset(MONDAY + timedelta(days=d) for d in (-3, -2, -1, 0, 1, 2))
    return Progress(NOW, weeks, days, Patterns(3, 4, 6, 2))


def nothing() -> Progress:
    return Progress(NOW, [Week(MONDAY)], frozenset())


def opened(png: bytes) -> Image.Image:
    assert png.startswith(PNG_SIGNATURE)
    image = Image.open(io.BytesIO(png))
    image.verify()
    return Image.open(io.BytesIO(png))


def texts(found: Progress, language: str | None) -> list[str]:
    """Every text the chart of `found` shows, in `language`, once drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    figure = figure_of(found, words_for(language, DOMAIN))
    FigureCanvasAgg(figure).draw()
    return [t.get_text() for t in figure.findobj(Text) if t.get_text().strip()]


@pytest.mark.parametrize(
    ("found", "size"),
    [(day_one(), (1080, 1080)), (week_eight(), (1080, 1440)), (nothing(), (1080, 1080))],
    ids=["day-one", "week-eight", "nothing"],
)
def test_the_chart_is_a_small_phone_sized_png(found: Progress, size: tuple[int, int]) -> None:
    png = render(found)
    image = opened(png)
    assert image.format == "PNG"
    assert image.size == size  # 1080 px wide, square or upright
    assert image.mode == "P"  # a palette: few colours, a small file
    assert len(png) < 60_000


def inked(image: Image.Image) -> int:
    """How many pixels are not (near) white."""
    return sum(image.convert("L").histogram()[:200])


def test_a_busy_chart_draws_its_panels_and_an_empty_one_says_so() -> None:
    busy, empty = opened(render(week_eight())), opened(render(nothing()))
    assert inked(busy) > 10 * inked(empty) > 0


def test_day_one_shows_its_week_and_patterns_and_no_empty_weeks() -> None:
    shown = texts(day_one(), None)
    assert "This week" in shown and "Mistake patterns I noticed" in shown
    assert [t for t in shown if len(t) == 3] == ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    assert "1 day practised" in shown
    assert {"to practise", "getting there", "mastered"} <= set(shown)
    # The weeks show only once there are two of them.
    assert DAYS_TITLE not in shown and CORRECTIONS_TITLE not in shown
    weekly = texts(week_eight(), None)
    assert DAYS_TITLE in weekly and CORRECTIONS_TITLE in weekly
    assert "3 days practised  ·  6 days in a row" in weekly


def test_nothing_reads_as_failure() -> None:
    shown = " ".join(texts(week_eight(), None)).lower()
    assert "due" not in shown and "fail" not in shown
    for colour in (chart.TO_PRACTISE, chart.READY, chart.GETTING_THERE, chart.PRACTISED):
        red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
        assert not (red > 150 and red > 1.6 * green and red > 1.6 * blue), colour


def test_a_new_week_is_a_fresh_start_not_a_zero() -> None:
    monday = datetime(2026, 11, 30, 8, tzinfo=UTC)  # nothing yet this week
    found = Progress(
        monday,
        [Week(MONDAY, {"grammar": 3}, 1, 3), Week(date(2026, 11, 30))],
        frozenset({date(2026, 11, 28), date(2026, 11, 29)}),
        Patterns(1, 1, 1, 0),
    )
    caption = summary(found, None)
    assert caption.splitlines()[0] == "A new week: chat with me today to tick it off!"
    assert "0 days" not in caption
    shown = texts(found, None)
    assert "A new week: chat with me today to tick it off!" in shown
    assert not any("0 days" in text for text in shown)


def test_arabic_runs_right_to_left() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    say = words_for("Arabic", DOMAIN)
    figure = figure_of(week_eight(), say)
    FigureCanvasAgg(figure).draw()
    at = {t.get_text(): t.get_position()[0] for t in figure.findobj(Text)}
    monday, sunday = say.date(MONDAY, "EEE"), say.date(MONDAY + timedelta(days=6), "EEE")
    assert at[monday] > at[sunday]  # Monday on the right
    assert at[say(chart.TITLE)] > 0.5  # lines start on the right


def bar_colours(found: Progress) -> set[str]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_hex
    from matplotlib.patches import Rectangle

    figure = figure_of(found, words_for(None, DOMAIN))
    FigureCanvasAgg(figure).draw()
    return {to_hex(p.get_facecolor()) for p in figure.findobj(Rectangle)}


def test_each_category_keeps_its_colour_in_every_chart() -> None:
    assert len(set(CATEGORY_COLOURS.values())) == len(CATEGORY_COLOURS)
    assert set(CATEGORY_COLOURS) == set(CATEGORIES)
    assert category_colour("made-up") == category_colour("other")
    # Spelling alone, or among many others: the same colour.
    weeks = [Week(MONDAY - timedelta(weeks=1), {"spelling": 2}), Week(MONDAY, {"spelling": 1})]
    alone = Progress(NOW, weeks, frozenset({NOW.date()}))
    spelling = category_colour("spelling").lower()
    assert spelling in bar_colours(alone)
    assert spelling in bar_colours(week_eight())
    grammar = category_colour("grammar").lower()
    assert grammar not in bar_colours(alone) and grammar in bar_colours(week_eight())


def test_every_word_of_the_chart_is_in_the_native_language() -> None:
    german = texts(week_eight(), "German")
    assert "Dein Fortschritt" in german and "Diese Woche" in german
    assert "Mo." in german and "Mi., 25. November" in german
    assert "Rechtschreibung" in german  # a category
    assert "23. Nov." in german  # a week
    english = set(texts(week_eight(), None))
    assert not english & set(german) - {"✓", "2", "3", "4", "6"} - {str(n) for n in range(20)}
    japanese = texts(day_one(), "Japanese")
    assert "今週" in japanese and "水" in japanese and "練習した日: 1日" in japanese


@pytest.mark.parametrize("language", SCRIPTS)
def test_the_chart_draws_every_script_without_missing_glyphs(language: str) -> None:
    # A missing glyph is a warning ("Glyph … missing from font(s) …"): an error here.
    for found in (day_one(), week_eight(), nothing()):
        opened(render(found, language))


def test_the_caption_is_in_the_native_language_with_english_as_the_fallback() -> None:
    english = summary(week_eight(), None)
    assert english.splitlines() == [
        "This week you practised on 3 days. That's 6 days in a row!",
        "I've noticed 13 mistake patterns: 6 mastered, 4 getting there.",
        "2 are ready for a quick review: send /review.",
    ]
    assert summary(week_eight(), "Klingon") == english
    assert summary(day_one(), "Spanish").splitlines() == [
        "Esta semana practicaste 1 día.",
        "He notado 3 errores recurrentes: 0 dominados, 2 casi.",
        "1 está listo para repasar: manda /review.",
    ]
    assert summary(nothing(), "German") == words_for("German", DOMAIN)(NOTHING_YET)
    assert "/review" in summary(week_eight(), "Arabic")


def test_help_lists_progress() -> None:
    assert "/progress" in phrases.help_text(None)


# -- through the worker -----------------------------------------------------------------------


@dataclass(frozen=True)
class ChartCall:
    chat_id: str
    png: bytes
    url: str | None
    caption: str
    idempotency_key: str


@dataclass
class ChartSender(RecordingSender):
    """A RecordingSender that also takes charts (queued failures apply to both)."""

    charts: list[ChartCall] = field(default_factory=list)

    def send_chart(
        self, chat_id: str, png: bytes, url: str | None, caption: str, *, idempotency_key: str
    ) -> Sent:
        with self.lock:
            self.charts.append(ChartCall(chat_id, png, url, caption, idempotency_key))
            failure = self.failures.popleft() if self.failures else None
        if failure is not None:
            raise failure
        return Sent(platform_id=f"p-{idempotency_key}")


CHANNEL = "test"


def pam_on(settings: Settings, engine: Engine, fake: FakeChatModel, public: str | None) -> Pam:
    return build(
        settings.replace(web={"public_url": public}),
        model=fake,
        submit=lambda w: w(),
        engine=engine,
    )


def token_of(url: str) -> str:
    """The signed token in a chart's link."""
    return url.removeprefix(f"{PUBLIC}/charts/").removesuffix(".png")


def ask_progress(worker: Worker, user: str) -> None:
    assert worker.inbox.accept(inbound(user, "/progress", channel=CHANNEL))


def test_progress_sends_the_chart_with_its_summary_and_signed_link(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    pam = pam_on(settings, engine, fake_model, PUBLIC)
    sender = ChartSender()
    worker = Worker(pam, {CHANNEL: sender})
    user = unique_user()
    ask_progress(worker, user)
    worker.drain()
    (call,) = sender.charts
    assert sender.calls == []  # no text besides the chart's caption
    opened(call.png)
    assert call.url is not None and call.url.startswith(f"{PUBLIC}/charts/")
    assert call.url.endswith(".png")
    assert call.caption == NOTHING_YET  # a new learner: nothing yet
    assert fake_model.calls == []  # a command: no model call
    (row,) = outbox_rows(engine, user)
    assert row.status == "sent" and row.chart_id is not None
    token = token_of(call.url)
    assert isinstance(pam.links, SignedLinks)
    chart_id, nonce, _ = pam.links.read(token)
    assert chart_id == row.chart_id
    assert pam.store.charts.get(chart_id, nonce) == (call.png, pam.store.learners.learner(user).id)


def test_without_a_public_url_the_chart_goes_without_a_link(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    sender = ChartSender()
    worker = Worker(pam_on(settings, engine, fake_model, None), {CHANNEL: sender})
    ask_progress(worker, unique_user())
    worker.drain()
    (call,) = sender.charts
    assert call.url is None and call.png.startswith(PNG_SIGNATURE)


def test_a_channel_without_images_gets_the_summary_as_text(
    settings: Settings, engine: Engine, fake_model: FakeChatModel, sender: RecordingSender
) -> None:
    worker = Worker(pam_on(settings, engine, fake_model, PUBLIC), {CHANNEL: sender})
    user = unique_user()
    ask_progress(worker, user)
    worker.drain()
    (call,) = sender.calls
    assert call.text == NOTHING_YET


def progress_send_failed(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> tuple[Worker, ChartSender, str]:
    """A worker that answered a learner's /progress but whose send of the chart failed for
    now: the reply waits in the outbox for a retry."""
    sender = ChartSender()
    sender.failures.append(TransientSendError("down a moment"))
    worker = Worker(pam_on(settings, engine, fake_model, PUBLIC), {CHANNEL: sender})
    user = unique_user()
    ask_progress(worker, user)
    worker.drain()
    return worker, sender, user


def test_a_retried_chart_goes_through_the_delivery_lanes_and_a_pruned_one_as_its_caption(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    worker, sender, user = progress_send_failed(settings, engine, fake_model)
    pam = worker.pam
    make_available_now(engine)
    worker.drain()
    first, again = sender.charts
    assert (again.png, again.caption, again.idempotency_key) == (
        first.png,
        first.caption,
        first.idempotency_key,
    )
    # The same chart's link (its id and nonce), signed anew: a second later, its token differs.
    assert isinstance(pam.links, SignedLinks)
    assert first.url is not None and again.url is not None
    assert pam.links.read(token_of(again.url))[:2] == pam.links.read(token_of(first.url))[:2]
    assert sender.calls == []

    # Once more, with the chart pruned before the retry: the caption goes alone.
    sender.failures.append(TransientSendError("down a moment"))
    ask_progress(worker, user)
    worker.drain()
    assert pam.store.charts.prune(datetime.now(UTC) + timedelta(seconds=1)) >= 1
    make_available_now(engine)
    worker.drain()
    (text,) = sender.calls
    assert text.text == sender.charts[-1].caption
    assert [r.status for r in outbox_rows(engine, user)] == ["sent", "sent"]


def test_a_chart_of_a_learner_forgotten_before_its_send_sends_nothing(
    settings: Settings, engine: Engine, fake_model: FakeChatModel
) -> None:
    worker, sender, user = progress_send_failed(settings, engine, fake_model)
    pam = worker.pam
    make_available_now(engine)
    claim = worker.outbox.claim_next()
    assert claim is not None and claim.chart_id is not None
    learner = pam.store.learners.learner(user)
    pam.store.learners.forget(learner.id)  # the chart and the reply's row go with them
    assert worker.delivery.send(claim)
    assert len(sender.charts) == 1 and sender.calls == []  # only the first, failed, try
    assert outbox_rows(engine, user) == []


def test_the_learners_next_message_is_answered_while_their_chart_is_drawn(
    settings: Settings,
    engine: Engine,
    fake_model: FakeChatModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    drawing, finish = threading.Event(), threading.Event()

    def slow_render(found: Progress, language: str | None = None) -> bytes:
        """The renderer of a fresh process on a small machine: as slow as the test wants."""
        drawing.set()
        assert finish.wait(WAIT)
        return render(found, language)

    monkeypatch.setattr(bot.review.progress, "render", slow_render)
    sender = ChartSender()
    worker = Worker(pam_on(settings, engine, fake_model, PUBLIC), {CHANNEL: sender})
    user = unique_user()
    ask_progress(worker, user)
    assert worker.inbox.accept(inbound(user, "Ayer fui a la playa", channel=CHANNEL))

    assert worker.answer_next()  # the /progress turn ends without drawing
    assert not drawing.is_set()
    lane = threading.Thread(target=worker.deliver_next)  # a delivery lane draws the chart...
    lane.start()
    assert drawing.wait(WAIT)
    assert worker.answer_next()  # ...while the learner's next message is answered
    assert "Ayer fui a la playa" in str(fake_model.calls[-1])
    assert sender.charts == [] and sender.calls == []  # its reply waits behind the chart

    finish.set()
    lane.join(WAIT)
    assert not lane.is_alive()
    assert len(sender.charts) == 1 and sender.calls == []
    opened(sender.charts[0].png)
    worker.drain()
    (reply,) = sender.calls  # then the reply, in order
    assert [r.status for r in outbox_rows(engine, user)] == ["sent", "sent"]
    assert reply.text


def test_a_chart_that_cannot_be_drawn_sends_its_caption_at_once(
    settings: Settings,
    engine: Engine,
    fake_model: FakeChatModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A failure that would repeat on every retry must not hold up the learner's replies.
    def broken_render(found: Progress, language: str | None = None) -> bytes:
        raise ValueError("a shape of data the chart cannot draw")

    monkeypatch.setattr(bot.review.progress, "render", broken_render)
    sender = ChartSender()
    worker = Worker(pam_on(settings, engine, fake_model, PUBLIC), {CHANNEL: sender})
    user = unique_user()
    ask_progress(worker, user)
    assert worker.inbox.accept(inbound(user, "Ayer fui a la playa", channel=CHANNEL))

    worker.drain()

    assert sender.charts == []
    caption, reply = sender.calls
    assert caption.text and reply.text
    assert [r.status for r in outbox_rows(engine, user)] == ["sent", "sent"]


def test_a_learner_forgotten_while_their_chart_is_drawn_gets_nothing(
    settings: Settings,
    engine: Engine,
    fake_model: FakeChatModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pam = pam_on(settings, engine, fake_model, PUBLIC)
    user = unique_user()

    def forgetting_render(found: Progress, language: str | None = None) -> bytes:
        """/forget arrives while the chart is drawn."""
        pam.store.learners.forget(pam.store.learners.learner(user).id)
        return render(found, language)

    monkeypatch.setattr(bot.review.progress, "render", forgetting_render)
    sender = ChartSender()
    worker = Worker(pam, {CHANNEL: sender})
    ask_progress(worker, user)

    worker.drain()

    assert sender.charts == [] and sender.calls == []
    assert outbox_rows(engine, user) == []
