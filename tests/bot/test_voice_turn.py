"""A voice note's turn, through fakes at Pam's own interfaces (the channel's fetcher, the
transcriber, the speaker) and real sample audio: heard and answered like text, shown as heard,
corrected for what was said (not the transcriber's spelling), spoken back after /voice on, and
every way a note goes wrong answered with a friendly word, nothing lost and nothing paid twice."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from sqlalchemy import Engine, select

from bot import phrases
from bot.channels import Audio, VoiceRefused, VoiceTooLarge, VoiceUnavailable
from bot.llm.openai_audio import OpenAITranscriber
from bot.llm.openai_chat import openai_client
from bot.turn.prompt import SPOKEN_RULE
from bot.turn.values import ModelUnavailable, Turn, TurnRequest
from bot.voice.hearing import HEARD_MARK, TRANSCRIPTION
from bot.voice.ports import Speech, Transcriber, Transcript
from bot.voice.speaking import SPEECH, Spoken
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback.audio_samples import sample
from loopback.llm_shapes import encoded
from loopback.openai_server import Fault, OpenAIServer
from memory.database.models import Usage
from memory.database.records import LEARNER, PAM, LearnerInfo
from memory.llm import Misconfigured, Outage, Unusable
from memory.messages import VOICE, Inbound, Sent, VoiceNote
from tests.conftest import unique_user
from tests.error_shapes import FASTER_WHISPER_SERVER_UNKNOWN_MODEL
from tests.fakes import FakeChatModel, reply_json
from tests.helpers.crafted_audio import CRAFTED
from tests.support import WAIT, RecordingSender, handle, wait_until
from tests.transcription_shapes import NOISE
from webhooks.settings import Settings
from webhooks.wiring import build

SAID = "Ayer yo es muy cansado, pero fui al cine."


@dataclass
class FakeTranscriber:
    """Hears `said` in every note (or raises what is queued); records each call."""

    said: str = SAID
    calls: list[dict[str, object]] = field(default_factory=list)
    failures: deque[Exception] = field(default_factory=deque)

    def transcribe(
        self, audio: bytes, *, name: str, content_type: str, language: str | None
    ) -> Transcript:
        self.calls.append(
            {"bytes": len(audio), "name": name, "type": content_type, "language": language}
        )
        if self.failures:
            raise self.failures.popleft()
        return Transcript(self.said, "fake-transcribe")


@dataclass
class FakeSpeaker:
    """Speaks every text as the OGG/Opus sample (or raises what is queued)."""

    texts: list[str] = field(default_factory=list)
    failures: deque[Exception] = field(default_factory=deque)
    speeds: list[float] = field(default_factory=list)

    def speak(self, text: str, *, language: str | None, speed: float = 1.0) -> Speech:
        self.texts.append(text)
        self.speeds.append(speed)
        if self.failures:
            raise self.failures.popleft()
        return Speech(sample("voice.ogg"), "audio/ogg", "fake-tts")


@dataclass
class FakeFetcher:
    """A channel's download: the audio it holds, or the error it is told to raise."""

    audio: Audio = field(default_factory=lambda: Audio(sample("voice.ogg"), "audio/ogg", "v.oga"))
    failures: deque[Exception] = field(default_factory=deque)
    calls: int = 0

    def fetch_voice(self, note: VoiceNote, max_bytes: int) -> Audio:
        self.calls += 1
        if self.failures:
            raise self.failures.popleft()
        if len(self.audio.data) > max_bytes:
            raise VoiceTooLarge("over the cap")
        return self.audio


@dataclass
class VoiceChannel(RecordingSender):
    """A channel that downloads voice notes and takes spoken replies, recording them."""

    fetcher: FakeFetcher = field(default_factory=FakeFetcher)
    voice_by_link: bool = False
    voices: list[tuple[str, bytes, str | None]] = field(default_factory=list)
    voice_lock: threading.Lock = field(default_factory=threading.Lock)

    def fetch_voice(self, note: VoiceNote, max_bytes: int) -> Audio:
        return self.fetcher.fetch_voice(note, max_bytes)

    def send_voice(
        self, chat_id: str, audio: bytes, url: str | None, *, idempotency_key: str
    ) -> Sent:
        with self.voice_lock:
            self.voices.append((chat_id, audio, url))
        return Sent(platform_id=f"v-{idempotency_key}")


@pytest.fixture
def transcriber() -> FakeTranscriber:
    return FakeTranscriber()


@pytest.fixture
def speaker() -> FakeSpeaker:
    return FakeSpeaker()


@pytest.fixture
def fetcher() -> FakeFetcher:
    return FakeFetcher()


def voice_pam(
    settings: Settings,
    engine: Engine,
    model: FakeChatModel,
    transcriber: Transcriber,
    speaker: FakeSpeaker,
    **knobs: object,
) -> Pam:
    return build(
        settings.replace(**knobs) if knobs else settings,
        model=model,
        submit=lambda work: work(),
        engine=engine,
        transcriber=transcriber,
        speaker=speaker,
    )


@pytest.fixture
def pam_with(
    settings: Settings,
    engine: Engine,
    fake_model: FakeChatModel,
    transcriber: FakeTranscriber,
    speaker: FakeSpeaker,
) -> Callable[..., Pam]:
    """Pam with the fakes and some settings changed (`settings.replace`'s sections)."""
    return lambda **knobs: voice_pam(settings, engine, fake_model, transcriber, speaker, **knobs)


@pytest.fixture
def pam(pam_with: Callable[..., Pam]) -> Pam:
    return pam_with()


def spanish_learner(pam: Pam) -> tuple[str, LearnerInfo]:
    user = unique_user()
    learner = pam.store.learners.learner(user)
    learner = pam.store.learners.update_settings(
        learner.id, target_language="Spanish", native_language="English"
    )
    return user, learner


NOTE = VoiceNote("file-1", "audio/ogg", 2.0, 4000)
_inbox_ids = iter(range(10_000_000, 20_000_000))


def hear(
    pam: Pam,
    user: str,
    fetcher: FakeFetcher,
    note: VoiceNote = NOTE,
    *,
    inbox_id: int | None = None,
    can_retry: bool = False,
    caption: str = "",
) -> Turn:
    """The turn for `note`, stored as the worker stores it (the inbox id keeps it idempotent)."""
    return pam.tutor.answer(
        TurnRequest(
            user,
            caption,
            inbox_id=inbox_id if inbox_id is not None else next(_inbox_ids),
            kind=VOICE,
            can_retry=can_retry,
            voice=note,
            fetcher=fetcher,
            can_speak=True,
        )
    )


def messages_of(pam: Pam, learner_id: int) -> list[tuple[str, str, float | None]]:
    return [
        (m.role, m.content, m.spoken_seconds) for m in pam.store.conversation.messages(learner_id)
    ]


def audio_usage(engine: Engine, learner_id: int) -> list[tuple[str, int, float, int]]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(Usage.purpose, Usage.input_tokens, Usage.audio_seconds, Usage.speech_chars)
            .where(Usage.learner_id == learner_id, Usage.purpose.in_((TRANSCRIPTION, SPEECH)))
            .order_by(Usage.id)
        )
        return [
            (r.purpose, r.input_tokens, round(r.audio_seconds, 1), r.speech_chars) for r in rows
        ]


# -- heard, answered, shown as heard ------------------------------------------------------------


def test_a_voice_note_is_transcribed_and_answered_like_text(
    pam: Pam,
    fake_model: FakeChatModel,
    transcriber: FakeTranscriber,
    fetcher: FakeFetcher,
    engine: Engine,
) -> None:
    user, learner = spanish_learner(pam)
    turn = hear(pam, user, fetcher)
    assert turn.reply is not None
    (shown,) = turn.replies
    # The learner sees what Pam heard first, then the reply.
    assert shown.startswith(f"{HEARD_MARK} “{SAID}”\n\n")
    # The transcript reaches the reply prompt as the learner's message, with the spoken rule.
    (call,) = fake_model.of("reply")
    assert call.messages[-1] == {"role": "user", "content": SAID}
    assert call.messages[0]["content"].endswith(SPOKEN_RULE.strip())
    # The learner's target language is the transcription's hint; the type is what the bytes are.
    assert transcriber.calls == [
        {"bytes": len(sample("voice.ogg")), "name": "v.ogg", "type": "audio/ogg", "language": "es"}
    ]
    # Stored: the transcript, marked spoken with its length; Pam's reply without the 🎙 line.
    pam.writer.write(None, [], turn.reply)
    (said, reply) = messages_of(pam, learner.id)
    assert said[:2] == (LEARNER, SAID) and said[2] == pytest.approx(2.0, abs=0.2)
    assert not pam.store.conversation.messages(learner.id)[0].untranscribed
    assert reply[0] == PAM and HEARD_MARK not in reply[1]
    # The seconds heard are counted, converted to tokens for the budgets.
    ((purpose, tokens, seconds, _),) = audio_usage(engine, learner.id)
    assert purpose == TRANSCRIPTION and seconds == pytest.approx(2.0, abs=0.2)
    assert tokens == round(seconds * pam.settings.voice.transcription_tokens_per_second)


def test_a_text_turn_has_no_spoken_rule(pam: Pam, fake_model: FakeChatModel) -> None:
    user, _ = spanish_learner(pam)
    handle(pam, user, "Hola, ¿qué tal?")
    assert SPOKEN_RULE.strip() not in fake_model.of("reply")[0].messages[0]["content"]


def test_corrections_of_a_transcript_are_about_what_was_said(
    pam: Pam, fake_model: FakeChatModel, fetcher: FakeFetcher
) -> None:
    user, _ = spanish_learner(pam)
    fake_model.queue(
        "reply",
        reply_json(
            "¡Qué bien! ¿Qué película viste?",
            [
                {"original": "yo es", "corrected": "yo estaba", "category": "conjugation"},
                {"original": "Ayer", "corrected": "ayer", "category": "other"},
                {"original": "cine", "corrected": "cine.", "category": "other"},
                {"original": "fui al cine", "corrected": "fuí al cine", "category": "spelling"},
                {"original": "pero", "corrected": "pero,", "category": "punctuation"},
            ],
        ),
    )
    turn = hear(pam, user, fetcher)
    assert turn.reply is not None
    assert [c.original for c in turn.reply.corrections] == ["yo es"]
    assert "✏️ yo es → yo estaba" in turn.replies[0]


def test_a_caption_comes_before_the_transcript(
    pam: Pam, fake_model: FakeChatModel, fetcher: FakeFetcher
) -> None:
    user, _ = spanish_learner(pam)
    hear(pam, user, fetcher, caption="Mi audio de hoy")
    assert fake_model.of("reply")[0].messages[-1]["content"] == f"Mi audio de hoy\n\n{SAID}"


# -- every way a note goes wrong -----------------------------------------------------------------


def _answered_with(turn: Turn, text: str, **values: object) -> None:
    """`turn` answered with `text` in the learner's native language (English)."""
    assert turn.replies == [phrases.said(text, "English", **values)]
    assert turn.reply is None


def _kept_untranscribed(pam: Pam, learner_id: int, why: str) -> None:
    ((role, content, _),) = messages_of(pam, learner_id)
    assert role == LEARNER and content.startswith("🎙 (a voice note of") and why in content
    # Marked so, for a turn run again after a crash: not told by its words.
    assert [m.untranscribed for m in pam.store.conversation.messages(learner_id)] == [True]


@pytest.mark.parametrize(
    ("audio", "texts", "why"),
    [
        (Audio(b"", "audio/ogg", "v.oga"), phrases.VOICE_UNREADABLE, "unreadable"),
        (
            Audio(b"OggS\x00garbage" * 10, "audio/ogg", "v.oga"),
            phrases.VOICE_UNREADABLE,
            "unreadable",
        ),
        (Audio(sample("voice.amr"), "audio/amr", "v.amr"), phrases.VOICE_UNREADABLE, "unsupported"),
        (
            Audio(sample("video_silent.mp4"), "video/mp4", "n.mp4"),
            phrases.VOICE_NO_SOUND,
            "no sound",
        ),
    ],
    ids=["empty", "corrupt", "amr", "video-without-sound"],
)
def test_audio_pam_cannot_play_gets_a_word_and_is_kept(
    pam: Pam,
    fake_model: FakeChatModel,
    transcriber: FakeTranscriber,
    audio: Audio,
    texts: dict[str, str],
    why: str,
) -> None:
    user, learner = spanish_learner(pam)
    turn = hear(pam, user, FakeFetcher(audio), VoiceNote("f", None, None, None, "video_note"))
    _answered_with(turn, texts)
    _kept_untranscribed(pam, learner.id, why)
    assert transcriber.calls == [] and fake_model.of("reply") == []


def test_a_ten_minute_note_is_refused_before_the_download_when_telegram_says_so(
    pam: Pam, transcriber: FakeTranscriber, fetcher: FakeFetcher
) -> None:
    user, learner = spanish_learner(pam)
    turn = hear(pam, user, fetcher, VoiceNote("f", "audio/ogg", 600.0, 90_000))
    _answered_with(turn, phrases.VOICE_TOO_LONG, minutes=5)
    assert fetcher.calls == 0 and transcriber.calls == []
    _kept_untranscribed(pam, learner.id, "too long")
    assert "10:00" in messages_of(pam, learner.id)[0][1]


def test_a_ten_minute_note_is_measured_when_the_channel_says_nothing(
    pam: Pam, transcriber: FakeTranscriber
) -> None:
    user, learner = spanish_learner(pam)
    long = FakeFetcher(Audio(sample("long.ogg"), "audio/ogg", "voice.ogg"))
    turn = hear(pam, user, long, VoiceNote("https://api.twilio.com/…", "audio/ogg"))
    _answered_with(turn, phrases.VOICE_TOO_LONG, minutes=5)
    assert transcriber.calls == []
    _kept_untranscribed(pam, learner.id, "too long")


def test_a_note_over_the_size_cap_is_refused(
    pam_with: Callable[..., Pam],
    transcriber: FakeTranscriber,
    fetcher: FakeFetcher,
    engine: Engine,
) -> None:
    pam = pam_with(voice={"voice_max_bytes": 1000})
    user, _ = spanish_learner(pam)
    declared = hear(pam, user, fetcher, VoiceNote("f", "audio/ogg", 2.0, 50_000))
    assert fetcher.calls == 0  # Telegram's file_size said so: nothing downloaded
    _answered_with(declared, phrases.VOICE_TOO_LONG, minutes=5)
    measured = hear(pam, user, fetcher, VoiceNote("g", "audio/ogg"))  # the fetcher's cap
    assert measured.replies == declared.replies and transcriber.calls == []


def test_silence_gets_asked_again(
    pam: Pam, transcriber: FakeTranscriber, fetcher: FakeFetcher, engine: Engine
) -> None:
    user, learner = spanish_learner(pam)
    transcriber.said = ""
    _answered_with(hear(pam, user, fetcher), phrases.VOICE_SILENT)
    _kept_untranscribed(pam, learner.id, "silence")
    assert [u[0] for u in audio_usage(engine, learner.id)] == [TRANSCRIPTION]  # it was billed


def test_a_note_pam_could_not_hear_is_answered_in_the_native_language(
    pam: Pam, transcriber: FakeTranscriber, fetcher: FakeFetcher
) -> None:
    """Pam's word is in the learner's native language; the transcriber still hears the target
    language."""
    user, learner = spanish_learner(pam)
    pam.store.learners.update_settings(learner.id, native_language="German")
    transcriber.said = ""

    turn = hear(pam, user, fetcher)

    assert turn.replies == [phrases.said(phrases.VOICE_SILENT, "German")]
    assert turn.replies[0].startswith("Ich habe keine Worte gehört")
    assert [call["language"] for call in transcriber.calls] == ["es"]


@pytest.mark.parametrize(
    ("said", "stored"),
    [("Hola \ud83d amigo\x00 mío", "Hola \ufffd amigo mío"), ("\x00\x01 \t ", None)],
    ids=["lone-surrogate-and-nul", "nothing-but-controls"],
)
def test_a_transcript_is_cleaned_like_typed_text(
    pam: Pam,
    fake_model: FakeChatModel,
    transcriber: FakeTranscriber,
    fetcher: FakeFetcher,
    said: str,
    stored: str | None,
) -> None:
    user, learner = spanish_learner(pam)
    transcriber.said = said
    turn = hear(pam, user, fetcher)
    if stored is None:  # nothing a person said: silence
        _answered_with(turn, phrases.VOICE_SILENT)
        _kept_untranscribed(pam, learner.id, "silence")
        return
    assert fake_model.of("reply")[0].messages[-1]["content"] == stored
    assert messages_of(pam, learner.id)[0][1] == stored


def test_a_caption_is_answered_when_its_note_cannot_be_heard(
    pam: Pam, fake_model: FakeChatModel
) -> None:
    user, learner = spanish_learner(pam)
    amr = FakeFetcher(Audio(sample("voice.amr"), "audio/amr", "v.amr"))
    turn = hear(pam, user, amr, caption="¿Cómo se dice 'library'?")
    assert turn.reply is not None
    assert turn.replies[0].startswith(phrases.VOICE_UNREADABLE + "\n\n")
    (said,) = [m for m in messages_of(pam, learner.id) if m[0] == LEARNER]
    assert "not transcribed: unsupported format" in said[1]
    (stored,) = pam.store.conversation.messages(learner.id, role=LEARNER)
    assert stored.untranscribed
    assert said[1].endswith("¿Cómo se dice 'library'?")
    assert fake_model.of("reply")[0].messages[-1]["content"] == said[1]


def test_a_note_without_its_audio_s_address_gets_a_word(pam: Pam) -> None:
    user, _ = spanish_learner(pam)
    # Twilio's form named audio media but no MediaUrl: nothing to fetch.
    turn = pam.tutor.answer(
        TurnRequest(user, "", inbox_id=next(_inbox_ids), kind=VOICE, voice=None)
    )
    assert turn.replies == [phrases.VOICE_UNREADABLE]


def test_a_media_url_pam_refuses_to_fetch_gets_a_word(pam: Pam, fetcher: FakeFetcher) -> None:
    user, learner = spanish_learner(pam)
    fetcher.failures.append(VoiceRefused("a media URL on another host"))
    _answered_with(hear(pam, user, fetcher), phrases.VOICE_UNREADABLE)
    _kept_untranscribed(pam, learner.id, "could not be fetched")


@pytest.mark.parametrize(
    "failure",
    [VoiceUnavailable("twilio answered 503"), Outage("the audio server timed out")],
    ids=["download", "transcription"],
)
def test_an_outage_is_retried_from_the_inbox_then_apologised_for(
    pam: Pam,
    fake_model: FakeChatModel,
    transcriber: FakeTranscriber,
    fetcher: FakeFetcher,
    failure: Exception,
) -> None:
    user, learner = spanish_learner(pam)
    queue = fetcher.failures if isinstance(failure, VoiceUnavailable) else transcriber.failures
    queue.extend([failure, failure])
    inbox_id = next(_inbox_ids)
    with pytest.raises(ModelUnavailable):
        hear(pam, user, fetcher, inbox_id=inbox_id, can_retry=True)
    assert messages_of(pam, learner.id) == []  # nothing kept yet: the inbox still has it
    # The last attempt: the apology, and the note kept as not transcribed.
    _answered_with(hear(pam, user, fetcher, inbox_id=inbox_id), phrases.VOICE_FAILED)
    _kept_untranscribed(pam, learner.id, "the audio service failed")
    assert fake_model.of("reply") == []


def test_a_misconfigured_audio_server_tells_the_operator(
    pam: Pam, transcriber: FakeTranscriber, fetcher: FakeFetcher
) -> None:
    user, _ = spanish_learner(pam)
    advice = "set PAM_AUDIO_BASE_URL to a server with /audio/transcriptions"
    transcriber.failures.append(Misconfigured("404", advice))
    turn = hear(pam, user, fetcher)
    _answered_with(turn, phrases.VOICE_FAILED)
    assert turn.problem == advice


def test_a_transcription_the_server_could_not_make_is_not_asked_again(
    pam: Pam, transcriber: FakeTranscriber, fetcher: FakeFetcher
) -> None:
    user, learner = spanish_learner(pam)
    transcriber.failures.append(Unusable("400: the audio file could not be decoded"))
    _answered_with(hear(pam, user, fetcher, can_retry=True), phrases.VOICE_UNREADABLE)
    assert len(transcriber.calls) == 1
    _kept_untranscribed(pam, learner.id, "the transcription failed")


def test_a_note_not_heard_is_not_fetched_again_when_its_turn_runs_again(
    pam: Pam, fake_model: FakeChatModel, transcriber: FakeTranscriber
) -> None:
    # The worker died after the friendly word was kept: the re-run says it again from what
    # was stored, without a download, a transcription or a second message.
    user, learner = spanish_learner(pam)
    amr = FakeFetcher(Audio(sample("voice.amr"), "audio/amr", "v.amr"))
    inbox_id = next(_inbox_ids)
    _answered_with(hear(pam, user, amr, inbox_id=inbox_id), phrases.VOICE_UNREADABLE)
    _answered_with(hear(pam, user, amr, inbox_id=inbox_id), phrases.VOICE_UNREADABLE)
    assert amr.calls == 1 and transcriber.calls == [] and fake_model.of("reply") == []
    _kept_untranscribed(pam, learner.id, "unsupported format")


def test_a_turn_retried_after_the_llm_failed_does_not_transcribe_again(
    pam: Pam,
    fake_model: FakeChatModel,
    transcriber: FakeTranscriber,
    fetcher: FakeFetcher,
    engine: Engine,
) -> None:
    user, learner = spanish_learner(pam)
    fake_model.queue("reply", Outage("the chat model is down"))
    inbox_id = next(_inbox_ids)
    with pytest.raises(ModelUnavailable):
        hear(pam, user, fetcher, inbox_id=inbox_id, can_retry=True)
    turn = hear(pam, user, fetcher, inbox_id=inbox_id, can_retry=True)
    assert turn.reply is not None and turn.replies[0].startswith(HEARD_MARK)
    assert len(transcriber.calls) == 1 and fetcher.calls == 1
    assert [m[:2] for m in messages_of(pam, learner.id)] == [(LEARNER, SAID)]
    assert len(audio_usage(engine, learner.id)) == 1  # paid once


def test_a_learner_over_the_budget_costs_no_transcription(
    pam_with: Callable[..., Pam],
    transcriber: FakeTranscriber,
    fetcher: FakeFetcher,
    engine: Engine,
) -> None:
    # Two notes' seconds at 250 tokens a second pass a budget of 600 tokens.
    pam = pam_with(limits={"learner_daily_tokens": 600})
    user, _ = spanish_learner(pam)
    hear(pam, user, fetcher)
    passed = hear(pam, user, fetcher)  # its transcription passes the budget
    assert passed.replies == [phrases.LEARNER_BUDGET]
    over = hear(pam, user, fetcher)
    assert over.replies == []  # said once a minute at most (issue 27)
    assert len(transcriber.calls) == 2 and fetcher.calls == 2


def test_with_voice_notes_off_a_note_gets_the_text_only_answer(
    pam_with: Callable[..., Pam],
    transcriber: FakeTranscriber,
    fetcher: FakeFetcher,
    engine: Engine,
) -> None:
    pam = pam_with(voice={"voice_notes": False})
    user, _ = spanish_learner(pam)
    assert hear(pam, user, fetcher).replies == [phrases.NOT_VOICE]
    assert fetcher.calls == 0 and transcriber.calls == []
    assert handle(pam, user, "/voice on") == [phrases.VOICE_UNAVAILABLE]


# -- spoken replies ----------------------------------------------------------------------------


def test_voice_on_speaks_the_chat_part_of_each_reply(
    pam: Pam, fake_model: FakeChatModel, speaker: FakeSpeaker, engine: Engine
) -> None:
    user, learner = spanish_learner(pam)
    assert "Voice replies are off (/voice on to hear me)." in handle(pam, user, "/start")[0]
    assert handle(pam, user, "/voice on") == [phrases.VOICE_ON]
    assert "Voice replies are on" in handle(pam, user, "/profile")[0]
    fake_model.queue(
        "reply",
        reply_json(
            "¡Qué bien! ¿Qué película viste?",
            [{"original": "yo es", "corrected": "yo estaba", "category": "conjugation"}],
        ),
    )
    turn = pam.tutor.answer(
        TurnRequest(user, "Ayer yo es cansado", inbox_id=next(_inbox_ids), can_speak=True)
    )
    # The turn only says what to speak (corrections stay text): nothing is spoken on its path.
    assert turn.speech == "¡Qué bien! ¿Qué película viste?" and speaker.texts == []
    spoken = pam.local_turns().speak(turn)  # as `pam chat` does, once the text is shown
    assert spoken.clip_id is not None and speaker.texts == [turn.speech]
    clip = pam.store.voice_clips.find(spoken.clip_id)
    assert clip is not None and clip.audio.startswith(b"OggS") and clip.learner_id == learner.id
    ((purpose, tokens, _, chars),) = audio_usage(engine, learner.id)
    assert (purpose, chars) == (SPEECH, len(speaker.texts[0]))
    assert tokens == round(chars * pam.settings.voice.speech_tokens_per_char)
    # A channel that takes no voice gets none; /voice off stops it.
    assert pam.tutor.answer(TurnRequest(user, "Hola", inbox_id=next(_inbox_ids))).speech is None
    assert handle(pam, user, "/voice off") == [phrases.VOICE_OFF]
    assert (
        pam.tutor.answer(
            TurnRequest(user, "Hola", inbox_id=next(_inbox_ids), can_speak=True)
        ).speech
        is None
    )
    assert len(speaker.texts) == 1


def test_a_failed_speech_call_never_costs_the_text(
    pam: Pam, fake_model: FakeChatModel, speaker: FakeSpeaker
) -> None:
    user, learner = spanish_learner(pam)
    pam.store.learners.update_settings(learner.id, voice_replies=True)
    speaker.failures.append(Unusable("the text cannot be spoken"))
    turn = pam.tutor.answer(TurnRequest(user, "Hola", inbox_id=next(_inbox_ids), can_speak=True))
    assert turn.speech and turn.reply is not None and turn.replies and turn.problem is None
    spoken = pam.local_turns().speak(turn)
    assert spoken.clip_id is None and spoken.problem is None
    # A speech server that is not there tells the operator (pam chat shows `problem`).
    advice = "set PAM_AUDIO_BASE_URL to a server with /audio/speech"
    speaker.failures.append(Misconfigured("404", advice))
    turn = pam.tutor.answer(TurnRequest(user, "Hola", inbox_id=next(_inbox_ids), can_speak=True))
    assert turn.replies and turn.problem is None
    assert pam.local_turns().speak(turn) == Spoken(
        None, "the speech call failed (Misconfigured)", advice
    )


def test_voice_usage_line(pam: Pam) -> None:
    user, _ = spanish_learner(pam)
    (answer,) = handle(pam, user, "/voice")
    assert answer.startswith(phrases.VOICE_USAGE) and "off" in answer


# -- through the worker: heard, answered, the voice part delivered after the text ----------------


def test_no_speech_is_paid_for_where_it_cannot_be_delivered(
    pam: Pam, speaker: FakeSpeaker, engine: Engine
) -> None:
    # A channel that fetches voice from a link, and no PAM_PUBLIC_URL: text alone, unspoken.
    channel = VoiceChannel(voice_by_link=True)
    worker = Worker(pam, {"test": channel})
    user, learner = spanish_learner(pam)
    pam.store.learners.update_settings(learner.id, voice_replies=True)
    assert worker.inbox.accept(Inbound("test", "t1", user, user, "Hola"))
    worker.drain()
    assert len(channel.texts_to(user)) == 1 and channel.voices == []
    assert speaker.texts == [] and audio_usage(engine, learner.id) == []


def test_the_worker_hears_a_note_and_sends_the_spoken_reply_after_the_text(
    pam: Pam, fake_model: FakeChatModel, transcriber: FakeTranscriber
) -> None:
    channel = VoiceChannel()
    worker = Worker(pam, {"test": channel})
    user, learner = spanish_learner(pam)
    pam.store.learners.update_settings(learner.id, voice_replies=True)
    note = Inbound("test", "v1", user, user, "", kind=VOICE, voice=NOTE)
    assert worker.inbox.accept(note)
    worker.drain()
    (text,) = channel.texts_to(user)
    assert text.startswith(f"{HEARD_MARK} “{SAID}”")
    ((chat, audio, _),) = channel.voices
    assert chat == user and audio == sample("voice.ogg")
    assert len(transcriber.calls) == 1
    assert not worker.inbox.accept(note), "a redelivered note is not heard again"
    worker.drain()
    assert len(transcriber.calls) == 1 and len(channel.voices) == 1


@dataclass
class CraftedChannel(VoiceChannel):
    """A voice channel whose notes are `notes[ref]`, recording the CPU time (the lane thread's,
    not the wall clock's) from each note's download to the reply it got, and the process's
    CPU time when each chat was first answered."""

    notes: dict[str, bytes] = field(default_factory=dict)
    fetched_at: dict[int, float] = field(default_factory=dict)  # thread id: its CPU time
    turn_cpu: dict[str, float] = field(default_factory=dict)  # chat: its note's turn CPU
    answered_at: dict[str, float] = field(default_factory=dict)  # chat: the process's CPU

    def fetch_voice(self, note: VoiceNote, max_bytes: int) -> Audio:
        self.fetched_at[threading.get_ident()] = time.thread_time()
        return Audio(self.notes[note.ref], note.content_type, f"{note.ref}.ogg")

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        fetched = self.fetched_at.pop(threading.get_ident(), None)
        with self.lock:
            if fetched is not None:
                self.turn_cpu[chat_id] = time.thread_time() - fetched
            self.answered_at.setdefault(chat_id, time.process_time())
        return super().send(chat_id, text, idempotency_key=idempotency_key)


def test_crafted_notes_from_several_learners_hold_no_one_elses_turn(
    pam: Pam, transcriber: FakeTranscriber
) -> None:
    """Issue 27: four crafted notes from four accounts took every inbox lane, each note's
    reading walking its millions of empty blocks or chunks holding the GIL, and an unrelated
    learner's /help waited 89.9 s. Each note now costs its lane a fraction of a second of
    CPU (timed in CPU, not wall-clock, seconds) and gets "I can't play this", and /help,
    queued behind them, is answered before the process has spent 2 s of CPU in all."""
    shapes = ["flac", "wav", "mp4", "mp3-tags"]
    size = pam.settings.voice.voice_max_bytes  # the biggest note Pam downloads
    channel = CraftedChannel(notes={shape: CRAFTED[shape](size) for shape in shapes})
    channel.notes["warm-up"] = sample("voice.ogg")
    worker = Worker(pam, {"test": channel})
    # A first turn pays the process's one-off costs (imports, tokenizer tables): not counted.
    user, _ = spanish_learner(pam)
    assert worker.inbox.accept(
        Inbound("test", "w", user, user, "", kind=VOICE, voice=VoiceNote("warm-up"))
    )
    worker.drain()

    learners = [spanish_learner(pam)[0] for _ in shapes]
    other = unique_user()
    started = time.process_time()
    for user, shape in zip(learners, shapes, strict=True):
        note = VoiceNote(shape, "audio/ogg", None, size)
        assert worker.inbox.accept(Inbound("test", shape, user, user, "", kind=VOICE, voice=note))
    assert worker.inbox.accept(Inbound("test", "help", other, other, "/help"))
    worker.start(len(shapes), 1)  # a lane for each crafted note, as in the report
    try:
        wait_until(lambda: other in channel.answered_at, "/help answered")
        assert channel.answered_at[other] - started < 2.0
        wait_until(lambda: len(channel.answered_at) == len(shapes) + 2, "every learner answered")
    finally:
        stopped = worker.stop(WAIT)
    assert stopped
    assert channel.texts_to(other) == [phrases.help_text(None)]
    for user in learners:
        assert channel.texts_to(user) == [phrases.VOICE_UNREADABLE]
        assert channel.turn_cpu[user] < 0.25
    assert len(transcriber.calls) == 1  # the warm-up's: nothing crafted reached the API


# -- through the real SDK and the loopback audio API -------------------------------------------


@pytest.fixture
def loopback_transcriber() -> Iterator[tuple[OpenAIServer, OpenAITranscriber]]:
    """A Whisper model's transcriber on the real openai SDK, against the loopback server."""
    with OpenAIServer() as server, openai_client("k", server.base_url, 5.0, 0) as client:
        yield server, OpenAITranscriber(client, "whisper-1")


def test_noise_whisper_wrote_words_for_is_answered_as_silence(
    settings: Settings,
    engine: Engine,
    fake_model: FakeChatModel,
    speaker: FakeSpeaker,
    fetcher: FakeFetcher,
    loopback_transcriber: tuple[OpenAIServer, OpenAITranscriber],
) -> None:
    # Issue 26: Pam showed 🎙 “y” and replied to it.
    server, transcriber = loopback_transcriber
    pam = voice_pam(settings, engine, fake_model, transcriber, speaker)
    user, learner = spanish_learner(pam)
    server.answer_next(NOISE)

    _answered_with(hear(pam, user, fetcher), phrases.VOICE_SILENT)
    _kept_untranscribed(pam, learner.id, "silence")
    assert fake_model.of("reply") == []
    assert server.audio_requests[0].fields["response_format"] == "verbose_json"


def test_an_unknown_transcription_model_is_the_operators_to_fix_not_the_learners(
    settings: Settings,
    engine: Engine,
    fake_model: FakeChatModel,
    speaker: FakeSpeaker,
    fetcher: FakeFetcher,
    loopback_transcriber: tuple[OpenAIServer, OpenAITranscriber],
) -> None:
    # Issue 26: a wrong model setting asked the learner to record again.
    server, transcriber = loopback_transcriber
    pam = voice_pam(settings, engine, fake_model, transcriber, speaker)
    user, _ = spanish_learner(pam)
    body = encoded(FASTER_WHISPER_SERVER_UNKNOWN_MODEL)
    server.fail_next(Fault(status=400, body=body))

    turn = hear(pam, user, fetcher)

    assert turn.replies == [phrases.VOICE_FAILED]
    assert turn.replies != [phrases.VOICE_UNREADABLE]
    assert turn.problem is not None and "PAM_TRANSCRIPTION_MODEL" in turn.problem
