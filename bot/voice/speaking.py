"""Spoken replies, made after their text went out. A turn with /voice on queues the words of its
reply's spoken copy as an outbox part of its own, after the texts (memory/turns.py); a speech
lane of the worker (`Voicing`) claims it, has the speech server speak it (under
PAM_SPEECH_TIMEOUT), converts what the server answered to OGG/Opus (bot/voice/opus.py) and hands the
clip back to the outbox, whose delivery lanes send it after the reply's text. Neither the text
nor the learner's next message ever waits for it.

A spoken copy is sent at most once, and only while it is the newest thing Pam said to the
learner: once a newer reply to the address is queued (the learner wrote again while the speech
was being made), it is dropped, since a voice message arriving after the next reply would answer
the wrong message. A failed or timed-out speech call, or audio that cannot be converted, drops
it too (the operator is told why once); a worker that dies while speaking leaves the claim to
lapse, and another lane speaks it again; /forget removes it, and nothing is written back."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.backoff import backoff
from bot.languages import iso_code
from bot.logs import OnceLog
from bot.settings import VoiceSettings
from bot.voice.audio_info import UnreadableAudio
from bot.voice.opus import ogg_opus
from bot.voice.ports import Speaker
from memory.database.claims import OutboxClaim
from memory.database.records import LearnerGone
from memory.llm import LLMError
from memory.queue.heartbeat import Heartbeats
from memory.queue.outbox import SpeechParts
from memory.store.learners import Learners
from memory.store.ledger import Ledger
from memory.store.voice_clips import VoiceClips

log = logging.getLogger(__name__)

SPEECH = "speech"  # the ledger's purpose of a speech call
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s")
# A spoken copy the learner asked for (/say) is queued like any other, its words behind this
# mark and the pace to speak them at: an outbox part keeps its words and nothing more, and the
# mark is a private-use character the words of a reply never hold (`words` removes it).
_ASKED = "\ue000"
SLOWER = 0.8  # the pace of a reply heard again (OpenAI's speech takes 0.25–4.0)


def asked_for(words: str, speed: float = 1.0) -> str:
    """`words` as the part to speak a learner asked for (/say), at `speed`: spoken even when
    their replies are not (/voice off)."""
    return f"{_ASKED}{speed:g}{_ASKED}{words}"


def _asked(text: str) -> tuple[str, float | None]:
    """The words of a part to speak and, when a learner asked for it, its pace (else None)."""
    if not text.startswith(_ASKED):
        return text, None
    pace, mark, words = text[1:].partition(_ASKED)
    try:
        speed = float(pace)
    except ValueError:
        return text.replace(_ASKED, ""), None
    return (words, speed) if mark else (text.replace(_ASKED, ""), None)


def was_asked(text: str) -> bool:
    """Whether the part to speak `text` is one a learner asked for (`asked_for`)."""
    return _asked(text)[1] is not None


@dataclass(frozen=True)
class Spoken:
    """A reply spoken: its stored clip, or None and why not (for the outbox and the log), and
    what an operator should know about it (shown by `pam chat`, never to a learner)."""

    clip_id: int | None
    why: str = ""
    problem: str | None = None


class Speaking:
    """Replies spoken by `speaker` (None: no speech), as OGG/Opus, stored in `clips` for
    delivery, the characters spoken recorded in `ledger`."""

    def __init__(
        self, speaker: Speaker | None, settings: VoiceSettings, ledger: Ledger, clips: VoiceClips
    ) -> None:
        self.speaker = speaker if settings.voice_notes else None
        self.settings = settings
        self.ledger = ledger
        self.clips = clips
        self._once = OnceLog(log)
        self._converting: set[str] = set()  # the formats said to be converted, once each

    @property
    def enabled(self) -> bool:
        """Whether replies can be spoken at all."""
        return self.speaker is not None

    def words(self, reply: str) -> str | None:
        """What of `reply` to speak: at most PAM_SPEECH_MAX_CHARS, cut after a sentence where
        one ends; None when nothing is spoken (no speaker, nothing to say)."""
        text = _speakable(reply.replace(_ASKED, ""), self.settings.speech_max_chars)
        return text if self.speaker is not None and text else None

    def speak(self, learner_id: int, words: str, language: str | None) -> Spoken:
        """`words` spoken (in `language`, a hint), converted to OGG/Opus and stored as the
        learner's clip; words a learner asked for (`asked_for`) at the pace they asked for.
        A failed call or unconvertible audio gives no clip: logged, the operator told once per
        cause. Raises LearnerGone when the learner was forgotten meanwhile."""
        words, speed = _asked(words)
        if self.speaker is None or not words:
            return Spoken(None, "no speech server")
        started = time.monotonic()
        try:
            speech = self.speaker.speak(words, language=iso_code(language), speed=speed or 1.0)
        except LLMError as exc:
            log.warning("reply not spoken learner=%s: %s", learner_id, type(exc).__name__)
            if exc.advice:
                self._once.error(exc.advice, "Spoken replies fail: %s", exc.advice)
            return Spoken(None, f"the speech call failed ({type(exc).__name__})", exc.advice)
        try:
            audio, info = ogg_opus(speech.audio, speech.content_type)
        except UnreadableAudio as exc:
            kind = speech.content_type or "of no declared type"
            problem = (
                f"Spoken replies are off: the speech server's audio ({kind}) cannot be converted "
                f"to OGG/Opus: {exc}. Check PAM_SPEECH_MODEL and PAM_AUDIO_BASE_URL."
            )
            self._once.error(f"convert: {exc}", "%s", problem)
            return Spoken(None, f"unconvertible audio ({exc})", problem)
        if audio is not speech.audio:
            self._said_converted(speech.content_type)
        clip_id, _ = self.clips.save(learner_id, audio, info.content_type)
        tokens = round(len(words) * self.settings.speech_tokens_per_char)
        self.ledger.record_audio(learner_id, speech.model, SPEECH, tokens, chars=len(words))
        log.info(
            "reply spoken learner=%s chars=%d bytes=%d ms=%d",
            learner_id,
            len(words),
            len(audio),
            (time.monotonic() - started) * 1000,
        )
        return Spoken(clip_id)

    def _said_converted(self, content_type: str) -> None:
        """Say once per format that the speech server's audio is converted (it costs CPU)."""
        if content_type not in self._converting:
            self._converting.add(content_type)
            log.info("the speech server answers %s; Pam converts it to OGG/Opus", content_type)


class Voicing:
    """A speech lane's work: claim the next part to speak from `parts`, speak it with
    `speaking` for the learner whose address it is (from `learners`), and hand it back for
    delivery, waking the delivery lanes with `hand_over`. `leases` keeps the claim alive while
    the speech server works, however slow; a part claimed more than `max_attempts` times (its
    workers died speaking it) is dropped."""

    def __init__(
        self,
        parts: SpeechParts,
        speaking: Speaking,
        learners: Learners,
        leases: Heartbeats,
        max_attempts: int,
        hand_over: Callable[[], None],
    ) -> None:
        self.parts = parts
        self.speaking = speaking
        self.learners = learners
        self.leases = leases
        self.max_attempts = max_attempts
        self.hand_over = hand_over

    def next(self) -> bool:
        """Speak the next part waiting to be spoken, if any. True if there was one."""
        claim = self.parts.claim_next()
        if claim is None:
            return False
        try:
            self._voice(claim)
        except LearnerGone:  # /forget won: the part is gone with the learner
            log.info("speech outbox=%s dropped: its learner was forgotten", claim.id)
        except Exception as exc:  # a bug must not stop the lane; the part is tried again
            log.exception("speech crashed outbox=%s", claim.id)
            self.parts.retry_later(claim, backoff(claim.attempts), f"{type(exc).__name__}")
        return True

    def _voice(self, claim: OutboxClaim) -> None:
        """Speak one claimed part, or drop it."""
        if claim.attempts > self.max_attempts:
            self._drop(claim, f"gave up after {claim.attempts - 1} attempts")
            return
        if self.parts.outdated(claim):
            self._drop(claim, "a newer reply went first")
            return
        learner = self.learners.find_learner(claim.address)
        if learner is None or not (learner.voice_replies or was_asked(claim.text)):
            self._drop(claim, "voice replies are off")
            return
        every = self.parts.lease.total_seconds() / 3
        with self.leases.beat(every, lambda: self.parts.renew(claim)):
            spoken = self.speaking.speak(learner.id, claim.text, learner.target_language)
        if spoken.clip_id is None:
            self._drop(claim, spoken.why)
        elif self.parts.spoken(claim, spoken.clip_id):
            self.hand_over()

    def _drop(self, claim: OutboxClaim, why: str) -> None:
        """The part is not spoken (its text went alone)."""
        self.parts.drop(claim, why)
        log.info("speech outbox=%s dropped: %s", claim.id, why)


def _speakable(text: str, limit: int) -> str:
    """`text` to speak: at most `limit` characters, cut after a sentence where one ends."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    ends = [match.start() for match in _SENTENCE_END.finditer(cut)]
    return cut[: ends[-1]] if ends else cut.rsplit(" ", 1)[0]
