"""Text first, voice after: a reply's spoken copy through the worker, with fakes at Pam's own
interfaces (the speaker, the channel) and real sample audio. The text goes out before the speech
is made; the voice message follows as its own outbox part, once; a newer reply never waits for
an older one's speech (which is then dropped as stale); a speech server's WAV or MP3 arrives as
OGG/Opus (converted with PyAV); audio that cannot be converted, a failed or timed-out speech call
leave the text alone and tell the operator once; a worker that dies mid-speech leaves it to be
spoken again; /forget while it is spoken writes nothing back."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from sqlalchemy import Engine, func, select

from bot.voice.audio import inspect
from bot.voice.ports import Speech
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback.audio_samples import sample
from memory.clock import ManualClock
from memory.database.claims import FAILED
from memory.database.models import VoiceClip
from memory.database.models_queue import OutboxItem
from memory.llm import Outage
from memory.messages import Inbound, Sent
from tests.bot.test_voice_turn import FakeTranscriber, VoiceChannel, spanish_learner
from tests.fakes import FakeChatModel, reply_json
from tests.support import outlive
from webhooks.settings import Settings
from webhooks.wiring import build

REPLY = "¡Qué bien! ¿Y qué hiciste después?"


@dataclass
class ScriptedSpeaker:
    """Speaks every text as `audio` of `content_type` (or raises what is queued); `during`, if
    set, runs inside the call (what happens while the speech server works), once."""

    log: list[tuple[str, str]]
    audio: bytes = field(default_factory=lambda: sample("voice.ogg"))
    content_type: str = "audio/ogg"
    failures: list[Exception] = field(default_factory=list)
    during: Callable[[], None] | None = None

    def speak(self, text: str, *, language: str | None, speed: float = 1.0) -> Speech:
        self.log.append(("speak", text))
        during, self.during = self.during, None
        if during is not None:
            during()
        if self.failures:
            raise self.failures.pop(0)
        return Speech(self.audio, self.content_type, "fake-tts")


@dataclass
class OrderedChannel(VoiceChannel):
    """A voice channel that writes what it sends into the speaker's log too: one order."""

    log: list[tuple[str, str]] = field(default_factory=list)

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        self.log.append(("text", text))
        return super().send(chat_id, text, idempotency_key=idempotency_key)

    def send_voice(
        self, chat_id: str, audio: bytes, url: str | None, *, idempotency_key: str
    ) -> Sent:
        self.log.append(("voice", chat_id))
        return super().send_voice(chat_id, audio, url, idempotency_key=idempotency_key)


@dataclass
class Setup:
    pam: Pam
    worker: Worker
    channel: OrderedChannel
    speaker: ScriptedSpeaker
    user: str
    learner_id: int
    clock: ManualClock

    def say(self, platform_id: str, text: str) -> None:
        assert self.worker.inbox.accept(Inbound("test", platform_id, self.user, self.user, text))


@pytest.fixture
def setup(settings: Settings, engine: Engine, fake_model: FakeChatModel) -> Setup:
    log: list[tuple[str, str]] = []
    speaker = ScriptedSpeaker(log)
    clock = ManualClock()
    pam = build(
        settings,
        model=fake_model,
        submit=lambda work: work(),
        engine=engine,
        clock=clock,
        transcriber=FakeTranscriber(),
        speaker=speaker,
    )
    channel = OrderedChannel(log=log)
    worker = Worker(pam, {"test": channel})
    user, learner = spanish_learner(pam)
    pam.store.learners.update_settings(learner.id, voice_replies=True)
    fake_model.queue("reply", reply_json(REPLY), reply_json("¿Y mañana?"))
    return Setup(pam, worker, channel, speaker, user, learner.id, clock)


def parts(engine: Engine, address: str) -> list[tuple[bool, str, str | None]]:
    """The outbox parts to `address`: (a part to speak?, status, why it was not sent)."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(OutboxItem.speak, OutboxItem.status, OutboxItem.last_error)
            .where(OutboxItem.address == address)
            .order_by(OutboxItem.id)
        )
        return [(r.speak, r.status, r.last_error) for r in rows]


def clips_of(engine: Engine, learner_id: int) -> int:
    with engine.connect() as connection:
        count = connection.scalar(
            select(func.count()).select_from(VoiceClip).where(VoiceClip.learner_id == learner_id)
        )
        return int(count or 0)


def test_the_text_goes_out_before_its_speech_is_made_and_the_voice_follows_once(
    setup: Setup,
) -> None:
    setup.say("m1", "Ayer fui al cine")
    assert setup.worker.answer_next()
    # The turn sent its text and queued the words to speak; nothing was spoken on its path.
    assert setup.speaker.log == [("text", REPLY)]
    setup.worker.drain()
    assert setup.speaker.log == [("text", REPLY), ("speak", REPLY), ("voice", setup.user)]
    ((chat, audio, _),) = setup.channel.voices
    assert chat == setup.user and audio == sample("voice.ogg")
    assert parts(setup.pam.engine, setup.user) == [(False, "sent", None), (True, "sent", None)]
    # Sent once: nothing is left to speak or send.
    assert setup.worker.drain() == 0 and len(setup.channel.voices) == 1


def test_a_newer_reply_never_waits_for_an_older_ones_speech(setup: Setup) -> None:
    setup.say("m1", "Ayer fui al cine")
    assert setup.worker.answer_next()

    def the_learner_writes_again() -> None:  # while the speech server works on the first
        setup.say("m2", "Y hoy estoy cansado")
        assert setup.worker.answer_next()

    setup.speaker.during = the_learner_writes_again
    setup.worker.drain()
    # The second text went out while the first reply was being spoken; its voice, now older
    # than a reply the learner has, is dropped (a late voice would answer the wrong message).
    assert setup.speaker.log[:3] == [("text", REPLY), ("speak", REPLY), ("text", "¿Y mañana?")]
    assert parts(setup.pam.engine, setup.user)[1] == (
        True,
        FAILED,
        "not spoken: a newer reply went first",
    )
    # The newest reply's own spoken copy is made and sent: the only voice message.
    assert setup.speaker.log[3:] == [("speak", "¿Y mañana?"), ("voice", setup.user)]
    assert len(setup.channel.voices) == 1


def test_a_stale_spoken_copy_is_dropped_before_it_costs_a_speech_call(setup: Setup) -> None:
    setup.say("m1", "Ayer fui al cine")
    assert setup.worker.answer_next()
    setup.say("m2", "Y hoy estoy cansado")
    assert setup.worker.answer_next()  # not held back by the first reply's speech part
    assert setup.speaker.log == [("text", REPLY), ("text", "¿Y mañana?")]
    setup.worker.drain()
    assert [text for kind, text in setup.speaker.log if kind == "speak"] == ["¿Y mañana?"]
    assert len(setup.channel.voices) == 1


@pytest.mark.parametrize(
    ("name", "content_type"), [("voice.wav", "audio/wav"), ("voice.mp3", "audio/mpeg")]
)
def test_speech_in_another_format_arrives_as_ogg_opus(
    setup: Setup, name: str, content_type: str
) -> None:
    setup.speaker.audio, setup.speaker.content_type = sample(name), content_type
    setup.say("m1", "Ayer fui al cine")
    setup.worker.drain()
    ((_, audio, _),) = setup.channel.voices
    info = inspect(audio, None)
    assert (info.content_type, info.codec) == ("audio/ogg", "opus")
    assert info.seconds == pytest.approx(inspect(sample(name), None).seconds, abs=0.1)


def _errors(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and words in r.getMessage()
    ]


def test_audio_that_cannot_be_converted_leaves_the_text_and_is_said_once(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    setup.speaker.audio = b"<html><body>Bad Gateway</body></html>"
    setup.speaker.content_type = "text/html"
    for n, text in enumerate(["Ayer fui al cine", "Hoy también"]):
        setup.say(f"m{n}", text)
        setup.worker.drain()
    assert setup.channel.texts_to(setup.user) == [REPLY, "¿Y mañana?"]
    assert setup.channel.voices == [] and clips_of(setup.pam.engine, setup.learner_id) == 0
    (said,) = _errors(caplog, "cannot be converted to OGG/Opus")
    assert "text/html" in said and "Bad Gateway" not in said
    assert [p[2] for p in parts(setup.pam.engine, setup.user) if p[0]] == [
        "not spoken: unconvertible audio (FFmpeg cannot read it (InvalidDataError))"
    ] * 2


def test_a_speech_timeout_leaves_the_text_and_the_operator_is_told_once(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    advice = "The speech server did not answer within 120.0 s: raise PAM_SPEECH_TIMEOUT"
    setup.speaker.failures = [Outage("APITimeoutError", advice=advice) for _ in range(2)]
    for n, text in enumerate(["Ayer fui al cine", "Hoy también"]):
        setup.say(f"m{n}", text)
        setup.worker.drain()
    assert setup.channel.texts_to(setup.user) == [REPLY, "¿Y mañana?"]
    assert setup.channel.voices == []
    assert len(_errors(caplog, "PAM_SPEECH_TIMEOUT")) == 1


def test_a_worker_that_dies_mid_speech_leaves_it_to_be_spoken_again(setup: Setup) -> None:
    setup.say("m1", "Ayer fui al cine")
    assert setup.worker.answer_next()
    voicing = setup.worker.voicing
    assert voicing is not None
    dead = voicing.parts.claim_next()  # a lane took the part, then its process died
    assert dead is not None and dead.speak
    assert not setup.worker.speak_next(), "a claimed part is no other lane's"
    outlive(setup.clock, voicing.parts.lease)
    setup.worker.drain()
    assert [kind for kind, _ in setup.speaker.log] == ["text", "speak", "voice"]
    assert len(setup.channel.voices) == 1


def test_forget_while_a_reply_is_spoken_writes_nothing_back(setup: Setup) -> None:
    setup.say("m1", "Ayer fui al cine")
    assert setup.worker.answer_next()
    setup.speaker.during = lambda: setup.pam.store.learners.forget(setup.learner_id)
    setup.worker.drain()
    assert setup.channel.voices == []
    assert clips_of(setup.pam.engine, setup.learner_id) == 0
    assert parts(setup.pam.engine, setup.user) == []
