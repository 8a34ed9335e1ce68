"""/progress: the chart as a real PNG for an empty and a busy learner, its summary in the
target language, and the chart's way through the worker — stored, queued with its caption,
claimed, and sent by the channel's `send_chart` with its signed link (or the caption alone
where the channel has no images, the chart is gone, or the learner was forgotten). The chart
is drawn by its delivery, after the turn: the learner's next message is answered meanwhile."""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import pytest
from PIL import Image
from sqlalchemy import Engine

import bot.review.progress
from bot import phrases
from bot.channels import TransientSendError
from bot.review.progress import HEIGHT_IN, WIDTH_IN, render, summary
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from memory.messages import Sent
from memory.review.progress import Week
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


def busy_weeks() -> list[Week]:
    start = date(2026, 10, 5)
    categories = ["grammar", "vocabulary", "spelling", "conjugation", "gender", "word order"]
    return [
        Week(
            start + timedelta(weeks=n),
            {c: (n + k) % 4 for k, c in enumerate(categories)},
            learned=n,
            due=8 - n,
            active_days=min(n, 7),
        )
        for n in range(8)
    ]


def empty_weeks() -> list[Week]:
    return [Week(date(2026, 10, 5) + timedelta(weeks=n)) for n in range(8)]


def opened(png: bytes) -> Image.Image:
    assert png.startswith(PNG_SIGNATURE)
    image = Image.open(io.BytesIO(png))
    image.verify()
    return Image.open(io.BytesIO(png))


@pytest.mark.parametrize("weeks", [busy_weeks(), empty_weeks()], ids=["busy", "empty"])
def test_the_chart_is_a_small_phone_sized_png(weeks: list[Week]) -> None:
    png = render(weeks)
    image = opened(png)
    assert image.format == "PNG"
    assert image.size == (WIDTH_IN * 100, HEIGHT_IN * 100)
    assert image.mode == "P"  # a palette: few colours, a small file
    assert len(png) < 60_000


def inked(image: Image.Image) -> int:
    """How many pixels are not (near) white."""
    return sum(image.convert("L").histogram()[:200])


def test_a_busy_chart_draws_its_panels_and_an_empty_one_says_so() -> None:
    busy, empty = opened(render(busy_weeks())), opened(render(empty_weeks()))
    assert inked(busy) > 20 * inked(empty) > 0


def test_the_summary_is_in_the_target_language_with_english_as_the_fallback() -> None:
    this_week = Week(date(2026, 11, 23), {"grammar": 9, "spelling": 3}, 7, 1, active_days=2)
    weeks = [*empty_weeks()[1:], this_week]
    spanish = summary(weeks, "Spanish", NOW)
    assert spanish.splitlines() == [
        "Esta semana — correcciones: 12, patrones aprendidos: 7, para repasar: 1.",
        "Días que practicaste esta semana: 2 de 3.",
    ]
    english = summary(weeks, "Klingon", NOW)
    assert english.startswith("This week — corrections: 12, patterns learned: 7")
    assert summary(weeks, None, NOW) == english
    assert len(summary(weeks, "German", NOW).splitlines()) == 2


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
    assert call.caption.startswith("This week — corrections: 0")
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
    assert call.text.startswith("This week — corrections: 0")


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

    def slow_render(weeks: Sequence[Week]) -> bytes:
        """The renderer of a fresh process on a small machine: as slow as the test wants."""
        drawing.set()
        assert finish.wait(WAIT)
        return render(weeks)

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
    def broken_render(weeks: Sequence[Week]) -> bytes:
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

    def forgetting_render(weeks: Sequence[Week]) -> bytes:
        """/forget arrives while the chart is drawn."""
        pam.store.learners.forget(pam.store.learners.learner(user).id)
        return render(weeks)

    monkeypatch.setattr(bot.review.progress, "render", forgetting_render)
    sender = ChartSender()
    worker = Worker(pam, {CHANNEL: sender})
    ask_progress(worker, user)

    worker.drain()

    assert sender.charts == [] and sender.calls == []
    assert outbox_rows(engine, user) == []
