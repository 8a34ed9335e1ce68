"""The check-in benchmark at a small scale (bench/checkins.py): 60 scripted learners through 4
simulated days on a real SQLite file, the real rounds, store, outbox and MemoryComposer. Its
zero-targets hold, its JSON and plot are written, and what it counts is what the database
and the channels saw. Nothing here times anything."""

from __future__ import annotations

import json
from pathlib import Path

from bench import checkins
from bench.checkin_learners import PLANS, scripts


def test_a_small_month_meets_every_zero_target_and_writes_its_figures(tmp_path: Path) -> None:
    code = checkins.main(["--learners", "60", "--days", "4", "--out", str(tmp_path)])

    result = json.loads((tmp_path / "checkins.json").read_text())
    # Every zero-target holds, quiet hours included for learners whose timezone Pam guessed
    # from the hours they write at: a fixed offset, an hour off once US summer time begins (day
    # 2 here), which is why their quiet hours are kept an hour wider.
    assert code == 0, result["violations"]
    assert all(result["targets"].values()), result["violations"]
    assert result["learners"] == 60 and result["days"] == 4
    assert result["checkins_written"] > 0
    assert result["checkins_reached"] <= result["checkins_written"]
    assert result["telegram_learners"] and result["whatsapp_learners"]
    # What a plan check-in followed up is a plan from that learner's own script.
    assert result["plans_not_in_script"] == 0
    assert 0 < result["answer_rate"] < 1
    # Real tiktoken counts, as the ledger records them: a prompt and a short answer each.
    assert result["llm_calls"] >= result["checkins_written"]
    assert 200 < result["tokens_per_checkin"] < 3000
    assert sum(sum(day.values()) for day in result["daily"].values()) >= result["checkins_written"]


def test_the_scripts_span_zones_channels_and_dated_plans() -> None:
    learners = scripts(400, 30)
    assert len({s.zone for s in learners}) >= 15
    assert {s.channel for s in learners} == {"telegram", "whatsapp"}
    assert len({s.address for s in learners}) == len(learners)
    told = [p["what"] for s in learners for p in s.plans]
    assert set(told) <= {what for what, _, _ in PLANS} and len(told) > 200
    # Each history mentions its plans in the learner's words, on the day it was told.
    with_plans = next(s for s in learners if s.plans)
    mentioned = {p["mentioned"] for p in with_plans.plans}
    days = {m.astimezone(with_plans.tz).date().isoformat() for m, _ in with_plans.history}
    assert mentioned <= days
