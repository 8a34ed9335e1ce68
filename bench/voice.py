"""The voice benchmark: what a voice turn costs Pam, measured on its real code — in time (Pam's
own overhead, the fakes answering at once), in HTTP requests and database rows, and in tokens
and dollars.

    python3 dev.py bench voice                 # 200 turns of each kind
    python3 dev.py bench voice --turns 50      # a first look

Pam is built as the services build it (`webhooks.wiring.build`, no model given: the real
openai SDK for chat, transcription and speech) on a temporary SQLite file, with the real
channel clients — python-telegram-bot's (`TelegramClient`: getFile, the download, sendMessage,
sendVoice) and twilio's (`TwilioSender`: the media fetch through Twilio's redirect to its CDN,
Messages.json) — against the loopback fakes on 127.0.0.1. Each turn is a message accepted into
the durable inbox and `Worker.drain()`: claimed, answered, stored and delivered, as `pam
worker` does it. Five kinds of turn, one learner each, run interleaved (one turn of each kind
per round, the order rotating) after a few warm-up turns not counted: a text turn and a voice
turn on Telegram, a voice turn on WhatsApp, and on Telegram after /voice on a text turn and a
voice turn with a spoken reply. Memory jobs are off (no fold or profile call in a turn).

The voice parts are timed from the outside: the channel, transcriber and speaker objects Pam
is given are wrapped in timing proxies (download = getFile + file download, or Twilio's media
URL + its CDN; the transcription and speech requests, upload and parse included; the
sendVoice). Reading the note's container (bot.voice.audio) happens inside Pam's hearing, so it is
timed on its own, on the same bytes, as often. Requests are counted at the fakes, rows and
bytes in the database, around each turn.

The cost part reads the tokens Pam recorded in `llm_usage` (purpose "transcription" with
audio_seconds, "speech" with speech_chars) and scales them to realistic notes (20 s and 60 s;
the sample is ~2 s) and a realistic spoken reply, next to a text turn's tokens as the token
benchmark measured them (bench/results/tokens.json), in dollars at list prices. Writes
bench/results/voice.json (and voice.png) and prints Markdown tables for the docs."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

from bench.latency_report import percentile
from bot.channels import Audio, Sender
from bot.llm.openai_audio import OpenAISpeaker, OpenAITranscriber, audio_client
from bot.settings import LimitSettings, LLMSettings, VoiceSettings
from bot.voice.audio import inspect
from bot.voice.ports import Speaker, Speech, Transcriber, Transcript
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from loopback import twilio_server
from loopback.audio_samples import sample
from loopback.openai_server import HEARD, OpenAIServer
from loopback.telegram_server import TOKEN, TelegramServer
from loopback.twilio_server import MediaCDN, TwilioServer
from memory import prices
from memory.config import MemoryConfig
from memory.database import db
from memory.database.models import Usage, VoiceClip
from memory.database.schema import metadata
from memory.messages import VOICE, Inbound, Sent, VoiceNote
from webhooks.settings import Settings
from webhooks.telegram import CHANNEL as TELEGRAM
from webhooks.telegram.client import TelegramClient
from webhooks.telegram.settings import TelegramSettings
from webhooks.whatsapp import CHANNEL as WHATSAPP
from webhooks.whatsapp.sender import TwilioSender
from webhooks.wiring import build

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
TOKENS_RESULT = RESULTS / "tokens.json"
NOTE = "voice.ogg"  # ~2 s of Spanish speech, OGG/Opus, as Telegram and WhatsApp send notes
WARM_UP = 3  # turns of each kind not counted: connections opened, caches filled
CHAT_MODEL = "gpt-4o-mini"
# Memory jobs off: a fold or profile call inside a turn would be timed as the turn's.
NO_MEMORY_JOBS = MemoryConfig(summary_trigger_tokens=100_000_000, profile_every=100_000_000)

# List prices: memory/prices.py, the one table (the estimated-dollars metric reads it too).
TRANSCRIPTION_PER_MINUTE = prices.TRANSCRIPTION_PER_MINUTE["gpt-4o-mini-transcribe"]
SPEECH_PER_MINUTE = prices.SPEECH_PER_MINUTE["gpt-4o-mini-tts"]  # ≈
_MINI = next(price for price in prices.PRICES if price.model == CHAT_MODEL)
INPUT_PER_MILLION = _MINI.input  # gpt-4o-mini input tokens
OUTPUT_PER_MILLION = _MINI.output  # gpt-4o-mini output tokens
# Realistic sizes for the cost part (the sample note is ~2 s, the fake's reply one sentence):
NOTE_SECONDS = (20.0, 60.0)
# A chat reply of two or three sentences, as the reply prompt asks for (the spoken part: the
# corrections stay text), spoken at about 150 words a minute.
SPOKEN_REPLY_CHARS = 250
SPEECH_CHARS_PER_SECOND = prices.SPEECH_CHARS_PER_SECOND

Progress = Callable[[str], None]


def progress(message: str) -> None:
    """A progress line on stdout."""
    print(f"[voice {time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass(frozen=True)
class Kind:
    """One kind of turn: on which channel, whether the learner speaks (a voice note) and
    whether Pam speaks back (/voice on)."""

    slug: str
    name: str
    channel: str
    voice: bool
    spoken: bool


KINDS = (
    Kind("telegram-text", "text turn (Telegram)", TELEGRAM, voice=False, spoken=False),
    Kind("telegram-voice", "voice turn (Telegram)", TELEGRAM, voice=True, spoken=False),
    Kind("whatsapp-voice", "voice turn (WhatsApp)", WHATSAPP, voice=True, spoken=False),
    Kind("telegram-spoken", "text turn, spoken reply (/voice on)", TELEGRAM, False, True),
    Kind("telegram-voice-spoken", "voice turn, spoken reply (/voice on)", TELEGRAM, True, True),
)


# -- timing from the outside -----------------------------------------------------------------


@dataclass
class Stopwatch:
    """Durations in ms, by kind of turn and part; `kind` is the turn being run."""

    kind: str = ""
    parts: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    @contextmanager
    def timing(self, part: str) -> Iterator[None]:
        """Time the block as `part` of the current turn."""
        started = time.perf_counter()
        try:
            yield
        finally:
            ms = (time.perf_counter() - started) * 1000
            self.parts.setdefault(self.kind, {}).setdefault(part, []).append(ms)


class TimedChannel:
    """A channel's sender and voice fetcher (TelegramClient, TwilioSender), each call timed."""

    def __init__(self, inner: TelegramClient | TwilioSender, watch: Stopwatch) -> None:
        self.inner = inner
        self.watch = watch
        self.max_chars = inner.max_chars

    def length(self, text: str) -> int:
        """The platform's length of `text`."""
        return self.inner.length(text)

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        """The inner send, timed as "send text"."""
        with self.watch.timing("send text"):
            return self.inner.send(chat_id, text, idempotency_key=idempotency_key)

    def send_voice(
        self, chat_id: str, audio: bytes, url: str | None, *, idempotency_key: str
    ) -> Sent:
        """The inner send_voice, timed as "send voice"."""
        with self.watch.timing("send voice"):
            return self.inner.send_voice(chat_id, audio, url, idempotency_key=idempotency_key)

    def fetch_voice(self, note: VoiceNote, max_bytes: int) -> Audio:
        """The inner fetch_voice, timed as "download"."""
        with self.watch.timing("download"):
            return self.inner.fetch_voice(note, max_bytes)

    def __getattr__(self, name: str) -> Any:
        """Whatever else the worker asks of the channel (Telegram's "typing…"), untimed."""
        return getattr(self.inner, name)

    def close(self) -> None:
        """Close the inner client, where it holds connections (Telegram's)."""
        if isinstance(self.inner, TelegramClient):
            self.inner.close()


class TimedTranscriber:
    """A Transcriber whose every request is timed as "transcription"."""

    def __init__(self, inner: Transcriber, watch: Stopwatch) -> None:
        self.inner = inner
        self.watch = watch

    def transcribe(
        self, audio: bytes, *, name: str, content_type: str, language: str | None
    ) -> Transcript:
        """The inner transcription, timed."""
        with self.watch.timing("transcription"):
            return self.inner.transcribe(
                audio, name=name, content_type=content_type, language=language
            )


class TimedSpeaker:
    """A Speaker whose every request is timed as "speech"."""

    def __init__(self, inner: Speaker, watch: Stopwatch) -> None:
        self.inner = inner
        self.watch = watch

    def speak(self, text: str, *, language: str | None, speed: float = 1.0) -> Speech:
        """The inner speech, timed."""
        with self.watch.timing("speech"):
            return self.inner.speak(text, language=language, speed=speed)


# -- counting at the fakes and in the database -----------------------------------------------


@dataclass
class Fakes:
    """The loopback services Pam talks to."""

    openai: OpenAIServer
    telegram: TelegramServer
    twilio: TwilioServer
    cdn: MediaCDN

    def requests(self) -> Counter[str]:
        """Every request each fake has had so far, by what it was."""
        counts: Counter[str] = Counter()
        with self.openai.lock:
            counts["chat completion"] = len(self.openai.requests)
            for audio in self.openai.audio_requests:
                task = "speech" if audio.path.endswith("/speech") else "transcription"
                counts[task] += 1
        with self.telegram.lock:
            counts.update(f"telegram {call.method}" for call in self.telegram.calls)
            counts["telegram file download"] = len(self.telegram.downloads)
        with self.twilio.lock:
            counts["twilio media"] = len(self.twilio.media_seen)
            counts.update(
                "twilio message (media)" if "MediaUrl" in m else "twilio message (text)"
                for m in self.twilio.messages
            )
        with self.cdn.lock:
            counts["twilio CDN"] = len(self.cdn.seen)
        return counts


def database_rows(engine: Engine) -> Counter[str]:
    """Rows in every table, and the bytes of the stored voice clips."""
    counts: Counter[str] = Counter()
    with engine.connect() as connection:
        for table in metadata.sorted_tables:
            counts[table.name] = int(
                connection.execute(select(func.count()).select_from(table)).scalar_one()
            )
        clip_bytes = connection.execute(select(func.sum(func.length(VoiceClip.audio)))).scalar()
    counts["voice clip bytes"] = int(clip_bytes or 0)
    return counts


def usage_by_purpose(engine: Engine) -> dict[str, dict[str, float]]:
    """What `llm_usage` recorded, per purpose: calls, tokens, seconds heard, characters."""
    query = select(
        Usage.purpose,
        func.count().label("calls"),
        func.sum(Usage.input_tokens).label("input_tokens"),
        func.sum(Usage.output_tokens).label("output_tokens"),
        func.sum(Usage.audio_seconds).label("audio_seconds"),
        func.sum(Usage.speech_chars).label("speech_chars"),
    ).group_by(Usage.purpose)
    with engine.connect() as connection:
        return {
            row.purpose: {
                "calls": int(row.calls),
                "input_tokens": int(row.input_tokens or 0),
                "output_tokens": int(row.output_tokens or 0),
                "audio_seconds": round(float(row.audio_seconds or 0.0), 3),
                "speech_chars": int(row.speech_chars or 0),
            }
            for row in connection.execute(query)
        }


# What a delivered reply is, at the fakes.
SENT = ("telegram sendMessage", "twilio message (text)")


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Measured:
    """What the turns of one kind came to."""

    turn_ms: list[float] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    rows: Counter[str] = field(default_factory=Counter)


class Bench:
    """Pam with its real clients against the fakes, one learner per kind of turn."""

    def __init__(self, pam: Pam, worker: Worker, fakes: Fakes, watch: Stopwatch) -> None:
        self.pam = pam
        self.worker = worker
        self.fakes = fakes
        self.watch = watch
        self.note = sample(NOTE)
        self.note_seconds = inspect(self.note, "audio/ogg").seconds
        self.sent = 0
        fakes.telegram.add_file("bench-note", self.note, path="voice/file_7.oga")

    def inbound(self, kind: Kind, text: str = "") -> Inbound:
        """The next message of `kind`'s learner: `text`, or (for a voice kind, no text) a
        voice note as its channel announces one."""
        self.sent += 1
        index = KINDS.index(kind)
        voice = None
        if kind.voice and not text:
            if kind.channel == WHATSAPP:  # every WhatsApp message has media URLs of its own
                ref = self.fakes.twilio.add_media(self.note, "audio/ogg")
                voice = VoiceNote(ref, "audio/ogg", source="voice")
            else:
                voice = VoiceNote(
                    "bench-note", "audio/ogg", round(self.note_seconds), len(self.note)
                )
        if kind.channel == WHATSAPP:
            address = chat = f"whatsapp:+3460000{index:04d}"
            platform_id = f"SM{self.sent:032d}"
        else:
            chat = str(700_000_000 + index)
            address, platform_id = f"telegram:{chat}", str(self.sent)
        return Inbound(
            channel=kind.channel,
            platform_id=platform_id,
            address=address,
            chat_id=chat,
            text=text or ("" if kind.voice else HEARD),
            display_name=f"Learner {index}",
            kind=VOICE if voice is not None else "text",
            voice=voice,
        )

    def say(self, kind: Kind, text: str) -> None:
        """A message of `kind`'s learner answered, not measured (commands, warm-up)."""
        self.watch.kind = ""
        self.worker.inbox.accept(self.inbound(kind, text))
        self.worker.drain()

    def turn(self, kind: Kind, measured: Measured) -> None:
        """One measured turn of `kind`: accepted into the inbox, then the worker's drain
        (claim, answer, store, deliver) timed; its requests and rows counted."""
        message = self.inbound(kind)
        requests, rows = self.fakes.requests(), database_rows(self.pam.engine)
        self.watch.kind = kind.slug
        self.worker.inbox.accept(message)
        started = time.perf_counter()
        self.worker.drain()
        measured.turn_ms.append((time.perf_counter() - started) * 1000)
        self.watch.kind = ""
        asked = self.fakes.requests() - requests
        if not any(name in asked for name in SENT):
            raise RuntimeError(f"the {kind.slug} turn was not answered and delivered")
        measured.requests.update(asked)
        measured.rows.update(database_rows(self.pam.engine) - rows)


def bench_settings(database_url: str, fakes: Fakes) -> Settings:
    """Pam's settings for the run: the fakes' addresses, no limits (they would answer without
    the model), memory jobs off, voice on with its defaults."""
    return Settings(
        database_url=database_url,
        llm=LLMSettings(api_key="voice-bench", base_url=fakes.openai.base_url, model=CHAT_MODEL),
        memory=NO_MEMORY_JOBS.model_copy(update={"memory_model": CHAT_MODEL}),
        limits=LimitSettings(rate_limit_per_minute=0, learner_daily_tokens=0, daily_tokens=0),
        voice=VoiceSettings(voice_notes=True),
        telegram=TelegramSettings(bot_token=TOKEN, api_url=fakes.telegram.base_url),
    )


@contextmanager
def running(watch: Stopwatch) -> Iterator[Bench]:
    """The fakes, Pam on a temporary SQLite file and its worker, all closed afterwards."""
    with ExitStack() as stack:
        cdn = stack.enter_context(MediaCDN())
        fakes = Fakes(
            stack.enter_context(OpenAIServer()),
            stack.enter_context(TelegramServer()),
            stack.enter_context(TwilioServer(cdn)),
            cdn,
        )
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pam-voice-")))
        url = f"sqlite:///{folder / 'voice.db'}"
        engine = db.make_engine(url)
        db.upgrade(engine)
        settings = bench_settings(url, fakes)
        audio = audio_client(settings.voice, settings.llm)
        pam = build(
            settings,
            submit=lambda work: work(),
            engine=engine,
            transcriber=TimedTranscriber(
                OpenAITranscriber(audio, settings.voice.transcription_model), watch
            ),
            speaker=TimedSpeaker(
                OpenAISpeaker(audio, settings.voice.speech_model, settings.voice.speech_voice),
                watch,
            ),
        )
        stack.callback(pam.close, 0)
        twilio = TwilioSender(
            twilio_server.ACCOUNT_SID,
            twilio_server.AUTH_TOKEN,
            twilio_server.NUMBER,
            api_url=fakes.twilio.base_url,
        )
        senders: dict[str, Sender] = {
            TELEGRAM: TimedChannel(TelegramClient(TOKEN, fakes.telegram.base_url), watch),
            WHATSAPP: TimedChannel(twilio, watch),
        }
        worker = Worker(pam, senders)
        stack.callback(worker.close_senders)
        yield Bench(pam, worker, fakes, watch)


def run_turns(bench: Bench, turns: int, report: Progress) -> dict[str, Measured]:
    """Every kind's `turns` turns, interleaved round by round (the order rotating, so no kind
    always runs first), after the learners are set up and warmed up."""
    for kind in KINDS:
        bench.say(kind, "/language Spanish English")
        if kind.spoken:
            bench.say(kind, "/voice on")
        for _ in range(WARM_UP):
            bench.say(kind, "" if kind.voice else HEARD)
    measured = {kind.slug: Measured() for kind in KINDS}
    every = max(1, turns // 4)
    for round_ in range(turns):
        shift = round_ % len(KINDS)
        for kind in KINDS[shift:] + KINDS[:shift]:
            bench.turn(kind, measured[kind.slug])
        if (round_ + 1) % every == 0 or round_ + 1 == turns:
            report(f"round {round_ + 1}/{turns} ({(round_ + 1) * len(KINDS)} turns)")
    return measured


def inspect_ms(data: bytes, times: int) -> list[float]:
    """Reading the note's container (bot.voice.audio.inspect), timed `times` times."""
    found = []
    for _ in range(times):
        started = time.perf_counter()
        inspect(data, "audio/ogg")
        found.append((time.perf_counter() - started) * 1000)
    return found


# -- the report ------------------------------------------------------------------------------


def stats(values: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean of `values`, in ms, rounded."""
    items = list(values)
    mean = sum(items) / len(items) if items else 0.0
    return {
        "p50": round(percentile(items, 0.5), 2),
        "p95": round(percentile(items, 0.95), 2),
        "mean": round(mean, 2),
    }


def per_turn(counts: Counter[str], turns: int) -> dict[str, float]:
    """`counts` over `turns`, per turn (what was not touched left out)."""
    return {name: round(count / turns, 3) for name, count in sorted(counts.items()) if count}


def text_turn_tokens(recorded_reply: dict[str, float], turns: int) -> dict[str, Any]:
    """A text turn's tokens (input, output; every call of the turn): Pam's mean over the token
    benchmark's scripted learner-month, else the reply tokens recorded here (the fake counts
    characters / 4 of a short conversation, so fewer than a real prompt)."""
    try:
        costs = json.loads(TOKENS_RESULT.read_text())["costs"]
        pam = [learner["pam"]["tokens"] for learner in costs["learners"].values()]
        messages = costs["messages"] * len(pam)
        return {
            "input": round(sum(t["input"] + t["cached"] for t in pam) / messages),
            "output": round(sum(t["output"] for t in pam) / messages),
            "source": "bench/results/tokens.json: Pam's mean per message, all calls",
        }
    except (OSError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return {
            "input": round(recorded_reply["input_tokens"] / max(1, recorded_reply["calls"])),
            "output": round(recorded_reply["output_tokens"] / max(1, recorded_reply["calls"])),
            "source": f"llm_usage of this run's reply calls ({turns} turns of each kind)",
        }


def costs(usage: dict[str, dict[str, float]], text_turn: dict[str, Any]) -> dict[str, Any]:
    """The recorded rates, and what realistic voice exchanges cost in tokens (against the
    default daily budget) and in dollars at the list prices."""
    heard, spoken = usage["transcription"], usage["speech"]
    per_second = heard["input_tokens"] / heard["audio_seconds"]
    per_char = spoken["input_tokens"] / spoken["speech_chars"]
    budget = int(LimitSettings.model_fields["learner_daily_tokens"].default)
    text_tokens = int(text_turn["input"] + text_turn["output"])
    text_dollars = (
        text_turn["input"] * INPUT_PER_MILLION + text_turn["output"] * OUTPUT_PER_MILLION
    ) / 1e6
    speech_tokens = round(SPOKEN_REPLY_CHARS * per_char)
    speech_seconds = SPOKEN_REPLY_CHARS / SPEECH_CHARS_PER_SECOND
    speech_dollars = speech_seconds / 60 * SPEECH_PER_MINUTE
    notes = []
    for seconds in NOTE_SECONDS:
        heard_tokens = round(seconds * per_second)
        heard_dollars = seconds / 60 * TRANSCRIPTION_PER_MINUTE
        plain = text_tokens + heard_tokens
        notes.append(
            {
                "note_seconds": seconds,
                "transcription_tokens": heard_tokens,
                "transcription_dollars": round(heard_dollars, 5),
                "exchange_tokens": plain,
                "exchange_dollars": round(text_dollars + heard_dollars, 5),
                "exchanges_per_day": budget // plain,
                "spoken_exchange_tokens": plain + speech_tokens,
                "spoken_exchange_dollars": round(text_dollars + heard_dollars + speech_dollars, 5),
                "spoken_exchanges_per_day": budget // (plain + speech_tokens),
            }
        )
    return {
        "transcription_tokens_per_second": round(per_second, 3),
        "speech_tokens_per_char": round(per_char, 3),
        "daily_budget_tokens": budget,
        "text_turn": text_turn | {"dollars": round(text_dollars, 6)},
        "text_exchanges_per_day": budget // text_tokens,
        "spoken_reply": {
            "chars": SPOKEN_REPLY_CHARS,
            "seconds": round(speech_seconds, 1),
            "tokens": speech_tokens,
            "dollars": round(speech_dollars, 5),
        },
        "notes": notes,
        "prices": {
            "source": "OpenAI's pricing page (platform.openai.com/docs/pricing) as of 2026; "
            "list prices, check them before budgeting",
            "gpt-4o-mini-transcribe_per_minute": TRANSCRIPTION_PER_MINUTE,
            "gpt-4o-mini-tts_per_minute": SPEECH_PER_MINUTE,
            "gpt-4o-mini_input_per_million": INPUT_PER_MILLION,
            "gpt-4o-mini_output_per_million": OUTPUT_PER_MILLION,
        },
    }


def extra_time(kinds: dict[str, Any], inspect_mean: float) -> dict[str, dict[str, float]]:
    """A voice turn's and a spoken reply's extra time over a text turn, split into the parts
    timed from the outside and the rest (Pam's own: rows, ledger, checks). Means, not p50s:
    means add up, so the parts and the rest sum to the extra."""
    text = kinds["telegram-text"]["turn_ms"]["mean"]
    split: dict[str, dict[str, float]] = {}
    for slug, parts in (
        ("telegram-voice", ("download", "transcription")),
        ("whatsapp-voice", ("download", "transcription")),
        ("telegram-spoken", ("speech", "send voice")),
    ):
        extra = kinds[slug]["turn_ms"]["mean"] - text
        found = {part: kinds[slug]["parts_ms"][part]["mean"] for part in parts}
        if slug != "telegram-spoken":
            found["inspect"] = inspect_mean
        split[slug] = {"extra": round(extra, 2), **found}
        split[slug]["rest"] = round(extra - sum(found.values()), 2)
    return split


def tables(result: dict[str, Any]) -> str:
    """The Markdown tables for the docs's "Voice" section."""
    kinds = result["kinds"]
    lines = [
        "| turn (loopback, Pam's own time) | p50 ms | p95 ms | extra HTTP requests | "
        "extra rows (bytes) |",
        "|---|---:|---:|---|---|",
    ]
    for kind in KINDS:
        found = kinds[kind.slug]
        lines.append(
            f"| {kind.name} | {found['turn_ms']['p50']:.1f} | {found['turn_ms']['p95']:.1f} | "
            f"{found['extra_requests'] or '—'} | {found['extra_rows'] or '—'} |"
        )
    lines.append("")
    split = result["extra_ms"]
    lines.append(
        "Extra time over a text turn (means, ms): "
        + "; ".join(
            f"{KIND_NAMES[slug]} +{parts['extra']:.1f} ("
            + ", ".join(f"{part} {ms:.1f}" for part, ms in parts.items() if part != "extra")
            + ")"
            for slug, parts in split.items()
        )
        + "."
    )
    cost = result["cost"]
    text = cost["text_turn"]
    lines += [
        "",
        f"| exchange (gpt-4o-mini reply, {text['input']:,} + {text['output']:,} tokens) | "
        "tokens counted | list price | per day in 200,000 tokens |",
        "|---|---:|---:|---:|",
        f"| text message | {text['input'] + text['output']:,} | ${text['dollars']:.5f} | "
        f"{cost['text_exchanges_per_day']} |",
    ]
    for note in cost["notes"]:
        seconds = round(note["note_seconds"])
        lines.append(
            f"| {seconds} s voice note | {note['exchange_tokens']:,} | "
            f"${note['exchange_dollars']:.5f} | {note['exchanges_per_day']} |"
        )
        lines.append(
            f"| {seconds} s voice note, spoken reply ({cost['spoken_reply']['chars']} chars) | "
            f"{note['spoken_exchange_tokens']:,} | ${note['spoken_exchange_dollars']:.5f} | "
            f"{note['spoken_exchanges_per_day']} |"
        )
    return "\n".join(lines)


KIND_NAMES = {kind.slug: kind.name for kind in KINDS}


def extras(measured: Measured, text: Measured, turns: int) -> tuple[str, str]:
    """What a turn of this kind asks and stores beyond a text turn, per turn, as words: every
    request but the reply's own (its chat completion, its text sent), every row a text turn
    does not write."""
    asked = per_turn(measured.requests, turns)
    for name in ("chat completion", *SENT):
        asked.pop(name, None)
    stored = per_turn(measured.rows - text.rows, turns)
    clip = stored.pop("voice clip bytes", 0)
    words = ", ".join(f"{name} ×{n:g}" for name, n in asked.items())
    rows = ", ".join(f"{name} +{n:g}" for name, n in stored.items())
    if clip:
        rows += f" ({clip:,.0f} B of clip)"
    return words, rows


def plot(result: dict[str, Any], path: Path) -> None:
    """Each kind's turn time, p50 bar with its p95 marked, on one horizontal chart."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    kinds = result["kinds"]
    names = [kind.name for kind in KINDS][::-1]
    p50 = [kinds[kind.slug]["turn_ms"]["p50"] for kind in KINDS][::-1]
    p95 = [kinds[kind.slug]["turn_ms"]["p95"] for kind in KINDS][::-1]
    fig, ax = plt.subplots(figsize=(9, 3.6), dpi=120)
    ax.barh(names, p50, color="#1b9e77", label="p50")
    ax.scatter(p95, names, color="#d95f02", marker="|", s=300, label="p95", zorder=3)
    ax.set_xlabel("Pam's own time per turn on loopback, ms (inbox → delivered)")
    ax.set_title(f"Voice turns vs text turns ({result['options']['turns']} turns each)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run(turns: int, out: Path | None, draw: bool, report: Progress = progress) -> dict[str, Any]:
    """The whole benchmark: measure, write `out`/voice.json (and voice.png), return it."""
    watch = Stopwatch()
    report(f"{turns} turns of each of {len(KINDS)} kinds, interleaved")
    with running(watch) as bench:
        measured = run_turns(bench, turns, report)
        usage = usage_by_purpose(bench.pam.engine)
        note_bytes, note_seconds = len(bench.note), bench.note_seconds
    inspected = stats(inspect_ms(sample(NOTE), turns))
    text = measured["telegram-text"]
    kinds: dict[str, Any] = {}
    for kind in KINDS:
        found = measured[kind.slug]
        asked, stored = extras(found, text, turns)
        kinds[kind.slug] = {
            "name": kind.name,
            "turns": len(found.turn_ms),
            "turn_ms": stats(found.turn_ms),
            "parts_ms": {p: stats(v) for p, v in sorted(watch.parts.get(kind.slug, {}).items())},
            "requests_per_turn": per_turn(found.requests, turns),
            "rows_per_turn": per_turn(found.rows, turns),
            "extra_requests": asked,
            "extra_rows": stored,
        }
    result: dict[str, Any] = {
        "options": {"turns": turns, "warm_up": WARM_UP, "memory_jobs": "off"},
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "note": {"sample": NOTE, "bytes": note_bytes, "seconds": round(note_seconds, 3)},
        "kinds": kinds,
        "inspect_ms": inspected,
        "extra_ms": extra_time(kinds, inspected["mean"]),
        "usage": usage,
        "cost": costs(usage, text_turn_tokens(usage["reply"], turns)),
    }
    result["table"] = tables(result)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "voice.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        if draw:
            plot(result, out / "voice.png")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark from the command line; 0 when it ran, 2 when it could not."""
    parser = argparse.ArgumentParser(prog="python -m bench.voice", description=__doc__)
    parser.add_argument("--turns", type=int, default=200, help="measured turns of each kind")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where voice.json goes")
    parser.add_argument("--no-plot", action="store_true", help="skip voice.png")
    args = parser.parse_args(argv)
    if args.turns < 1:
        parser.error("--turns must be at least 1")
    try:
        result = run(args.turns, args.out, not args.no_plot)
    except (OSError, RuntimeError) as exc:
        print(f"the voice benchmark could not run: {exc}", file=sys.stderr)
        return 2
    print()
    print(result["table"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
