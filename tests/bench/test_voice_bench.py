"""The voice benchmark run tiny (3 turns of each kind): every kind measured, each voice turn
asking exactly its channel's download and one transcription, each spoken reply one speech
request, one voice message and one stored clip; the rates read back from llm_usage are the
settings' conversions; the cost arithmetic and the report hold together. Benchmarks report;
tests do not time anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import voice
from bot.settings import VoiceSettings
from loopback.audio_samples import sample

# An acceptance experiment, no product claim: run with `python3 dev.py test -m experiment`.
pytestmark = [pytest.mark.experiment, pytest.mark.slow]

TURNS = 3


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench")
    lines: list[str] = []
    result = voice.run(TURNS, out, draw=False, report=lines.append)
    assert json.loads((out / "voice.json").read_text()) == json.loads(json.dumps(result))
    assert not (out / "voice.png").exists()
    assert lines[-1].startswith(f"round {TURNS}/{TURNS}")
    return result


def test_every_kind_is_measured_for_every_turn(found: dict[str, Any]) -> None:
    assert list(found["kinds"]) == [kind.slug for kind in voice.KINDS]
    for kind in found["kinds"].values():
        assert kind["turns"] == TURNS
        assert 0 < kind["turn_ms"]["p50"] <= kind["turn_ms"]["p95"]
        # Every turn's reply: one chat completion, one text sent.
        requests = kind["requests_per_turn"]
        assert requests["chat completion"] == 1
        assert sum(requests.get(name, 0) for name in voice.SENT) == 1


def test_a_text_turn_asks_for_no_audio(found: dict[str, Any]) -> None:
    text = found["kinds"]["telegram-text"]
    assert text["extra_requests"] == "" and text["extra_rows"] == ""
    assert "download" not in text["parts_ms"] and "transcription" not in text["parts_ms"]


def test_a_voice_note_costs_its_download_and_one_transcription(found: dict[str, Any]) -> None:
    telegram = found["kinds"]["telegram-voice"]["requests_per_turn"]
    whatsapp = found["kinds"]["whatsapp-voice"]["requests_per_turn"]
    assert telegram["telegram getFile"] == telegram["telegram file download"] == 1
    assert whatsapp["twilio media"] == whatsapp["twilio CDN"] == 1  # Twilio's redirect, once
    for requests in (telegram, whatsapp):
        assert requests["transcription"] == 1 and "speech" not in requests
    assert found["kinds"]["telegram-voice"]["extra_rows"] == "llm_usage +1"
    assert set(found["kinds"]["whatsapp-voice"]["parts_ms"]) == {
        "download",
        "transcription",
        "send text",
    }


def test_a_spoken_reply_costs_a_speech_request_a_voice_message_and_a_clip(
    found: dict[str, Any],
) -> None:
    spoken = found["kinds"]["telegram-spoken"]
    assert spoken["requests_per_turn"]["speech"] == 1
    assert spoken["requests_per_turn"]["telegram sendVoice"] == 1
    rows = spoken["rows_per_turn"]
    assert rows["voice_clips"] == 1 and rows["outbox"] == 2  # the text, then the voice
    # The fake speaks every reply as the voice sample: that is the clip stored.
    assert rows["voice clip bytes"] == len(sample(voice.NOTE))
    both = found["kinds"]["telegram-voice-spoken"]["requests_per_turn"]
    assert both["transcription"] == both["speech"] == both["telegram sendVoice"] == 1


def test_the_recorded_rates_are_the_settings_conversions(found: dict[str, Any]) -> None:
    defaults = VoiceSettings()
    cost = found["cost"]
    assert cost["transcription_tokens_per_second"] == pytest.approx(
        defaults.transcription_tokens_per_second, rel=0.01
    )
    assert cost["speech_tokens_per_char"] == pytest.approx(
        defaults.speech_tokens_per_char, rel=0.01
    )
    # Three kinds hear a note on every turn, the warm-up's included; two speak every reply.
    heard = found["usage"]["transcription"]
    assert heard["calls"] == 3 * (TURNS + voice.WARM_UP)
    assert heard["audio_seconds"] == pytest.approx(heard["calls"] * found["note"]["seconds"])
    assert found["usage"]["speech"]["calls"] == 2 * (TURNS + voice.WARM_UP)


def test_the_extra_time_is_split_into_parts_that_add_up(found: dict[str, Any]) -> None:
    for slug, parts in found["extra_ms"].items():
        shares = sum(ms for part, ms in parts.items() if part != "extra")
        assert shares == pytest.approx(parts["extra"], abs=0.05), slug


def test_costs_scale_with_the_note_and_count_against_the_daily_budget() -> None:
    usage = {
        "transcription": {"input_tokens": 1000, "audio_seconds": 4.0},
        "speech": {"input_tokens": 800, "speech_chars": 10},
    }
    text_turn = {"input": 1500, "output": 100, "source": "given"}

    cost = voice.costs(usage, text_turn)

    assert (cost["transcription_tokens_per_second"], cost["speech_tokens_per_char"]) == (250, 80)
    budget = cost["daily_budget_tokens"]
    assert budget == 200_000 and cost["text_exchanges_per_day"] == budget // 1600
    twenty, sixty = cost["notes"]
    assert twenty["transcription_tokens"] == 5000 and sixty["transcription_tokens"] == 15_000
    assert twenty["exchanges_per_day"] == budget // 6600
    speech = voice.SPOKEN_REPLY_CHARS * 80
    assert twenty["spoken_exchanges_per_day"] == budget // (6600 + speech)
    # 20 s at $0.003 a minute, on top of the reply's tokens.
    reply = (1500 * 0.15 + 100 * 0.60) / 1e6
    assert twenty["exchange_dollars"] == pytest.approx(reply + 0.001, abs=1e-5)
    assert sixty["spoken_exchange_dollars"] > sixty["exchange_dollars"]


def test_the_report_names_every_kind_and_note(found: dict[str, Any]) -> None:
    table = found["table"]
    for kind in voice.KINDS:
        assert f"| {kind.name} |" in table
    for seconds in voice.NOTE_SECONDS:
        assert f"| {round(seconds)} s voice note |" in table


def test_the_command_line_writes_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = voice.main(["--turns", "1", "--out", str(tmp_path), "--no-plot"])

    assert status == 0
    assert json.loads((tmp_path / "voice.json").read_text())["options"]["turns"] == 1
    assert "| voice turn (WhatsApp) |" in capsys.readouterr().out
