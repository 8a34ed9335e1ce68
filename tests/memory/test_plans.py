"""Dated plans in the learned profile: the model's plans read as untrusted output, resolved
against the dates of the messages they come from, merged with Pam's marks, and chosen when
their day has come."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import Engine

from memory.clock import ManualClock
from memory.database.records import LEARNER, StoredMessage
from memory.jobs.plans import (
    FOLLOWED_UP,
    MAX_PLANS,
    Plan,
    due_plan,
    kept_plans,
    marked,
    merged,
    normal_when,
    read_plans,
    span,
    upcoming,
    without_marks,
)
from memory.jobs.profile import PROFILE_SCHEMA, dated, learn_profile, parse_profile_answer
from tests.conftest import unique_user
from tests.fakes import FakeChatModel
from tests.support import handle
from webhooks.settings import Settings
from webhooks.wiring import build

MONDAY = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)  # Mon 2 March 2026


# -- reading the model's plans ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("2026-03-05", "2026-03-05"),
        ("2026-3-5", "2026-03-05"),
        ("2026-03-05T10:00:00", "2026-03-05"),
        ("2026-07", "2026-07"),
        ("2026-7", "2026-07"),
        ("Thursday", None),
        ("next week", None),
        ("2026-02-30", None),
        ("2026-13", None),
        ("9999-12-31", None),  # "I'll retire on 31 Dec 9999": no plan, and no overflow
        ("9999-12", None),
        ("0001-01", None),
        ("05/03/2026", None),
        (20260305, None),
        (None, None),
        (["2026-03-05"], None),
    ],
)
def test_a_plans_date_is_a_day_or_a_month(written: object, kept: str | None) -> None:
    assert normal_when(written) == kept


def test_malformed_plans_from_the_model_are_left_out_and_the_rest_kept() -> None:
    notes: list[str] = []
    plans = read_plans(
        [
            {"what": "job interview", "when": "2026-03-05", "mentioned": "2026-03-02"},
            {"what": "trip to Oaxaca", "when": "2026-07"},  # no mention date: the job's to fill
            {"what": "exam", "when": "Thursday"},
            {"what": "", "when": "2026-03-06"},
            {"what": "x" * 200, "when": "2026-03-06"},
            {"when": "2026-03-06"},
            "dentist on Friday",
            ["nested"],
            {"what": "job interview", "when": "2026-03-05"},  # a repeat
            {"what": "concert", "when": "2026-04-01", "mentioned": "yesterday"},
        ],
        notes,
    )
    assert plans == [
        {"what": "job interview", "when": "2026-03-05", "mentioned": "2026-03-02"},
        {"what": "trip to Oaxaca", "when": "2026-07"},
        {"what": "concert", "when": "2026-04-01"},
    ]
    assert len(notes) == 6
    assert not any("dentist" in note or "exam" in note for note in notes)  # never the words


def test_a_plans_field_with_no_whole_plan_keeps_the_other_fields() -> None:
    answer = {"who": "Lena", "plans": [{"what": "exam", "when": "soon"}, 42, "trip"]}
    assert parse_profile_answer(json.dumps(answer)) == {"who": "Lena"}


@pytest.mark.parametrize("plans", ["trip to Oaxaca in July", 7, {"what": "x"}, True])
def test_a_plans_field_of_the_wrong_shape_never_crashes(plans: object) -> None:
    assert parse_profile_answer(json.dumps({"who": "Lena", "plans": plans})) == {"who": "Lena"}


def test_plans_are_capped() -> None:
    many = [{"what": f"plan {n}", "when": f"2026-04-{n + 1:02d}"} for n in range(12)]
    notes: list[str] = []
    assert len(read_plans(many, notes) or []) == MAX_PLANS
    assert notes


@given(
    st.recursive(
        st.none() | st.text() | st.integers(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_any_plans_value_reads_without_crashing(value: object) -> None:
    try:
        plans = read_plans(value, [])
    except Exception as exc:  # pragma: no cover - the assertion says which
        raise AssertionError(f"read_plans raised {exc!r}") from exc
    for plan in plans or []:
        assert span(plan["when"]) is not None


def test_the_schema_asks_for_plans_as_objects() -> None:
    plans = PROFILE_SCHEMA["schema"]["properties"]["plans"]["anyOf"][0]
    assert plans["items"]["required"] == ["what", "when", "mentioned"]


# -- merging ----------------------------------------------------------------------------------


def test_a_mention_outside_the_batch_is_the_batchs_last_day() -> None:
    new = [
        {"what": "job interview", "when": "2026-03-05", "mentioned": "2025-01-01"},
        {"what": "dentist", "when": "2026-03-09"},
    ]
    kept = merged(new, None, date(2026, 3, 1), date(2026, 3, 2))
    assert [p["mentioned"] for p in kept] == ["2026-03-02", "2026-03-02"]


def test_what_was_over_when_told_or_absurdly_far_is_no_plan() -> None:
    new = [
        {"what": "exam last week", "when": "2026-02-20", "mentioned": "2026-03-02"},
        {"what": "pension", "when": "2031-01-01", "mentioned": "2026-03-02"},
        {"what": "this month's course", "when": "2026-03", "mentioned": "2026-03-02"},
    ]
    kept = merged(new, None, date(2026, 3, 2), date(2026, 3, 2))
    assert [p["what"] for p in kept] == ["this month's course"]


def test_pams_mark_survives_a_model_that_rewrites_the_plan() -> None:
    old = [
        {
            "what": "job interview",
            "when": "2026-03-05",
            "mentioned": "2026-03-02",
            FOLLOWED_UP: "2026-03-06",
        }
    ]
    new = [{"what": "interview at the bank", "when": "2026-03-05", "mentioned": "2026-03-02"}]
    kept = merged(new, old, date(2026, 3, 6), date(2026, 3, 6))
    assert kept[0][FOLLOWED_UP] == "2026-03-06"
    # The model never sees the mark, and cannot set one.
    assert FOLLOWED_UP not in json.dumps(without_marks(old))
    notes: list[str] = []
    assert read_plans([{**new[0], FOLLOWED_UP: "2026-01-01"}], notes) == new


def test_another_plan_on_the_same_day_is_not_marked() -> None:
    old = [{"what": "job interview", "when": "2026-03-05", FOLLOWED_UP: "2026-03-06"}]
    new = [{"what": "sister's birthday", "when": "2026-03-05"}]
    assert FOLLOWED_UP not in merged(new, old, date(2026, 3, 2), date(2026, 3, 2))[0]


# -- which plan is due ------------------------------------------------------------------------

INTERVIEW = {"what": "job interview", "when": "2026-03-05", "mentioned": "2026-03-02"}
TRIP = {"what": "trip to Oaxaca", "when": "2026-07", "mentioned": "2026-03-02"}


@pytest.mark.parametrize(
    ("today", "due"),
    [
        (date(2026, 3, 2), None),  # three days ahead: too early
        (date(2026, 3, 3), "near"),
        (date(2026, 3, 5), "near"),  # the day itself
        (date(2026, 3, 6), "passed"),
        (date(2026, 3, 9), "passed"),
        (date(2026, 3, 10), None),  # too late: the summary keeps the story
    ],
)
def test_a_day_plan_is_due_near_its_day(today: date, due: str | None) -> None:
    found = due_plan([INTERVIEW], today)
    assert (found[1] if found else None) == due


@pytest.mark.parametrize(
    ("today", "due"),
    [
        (date(2026, 6, 23), None),
        (date(2026, 6, 24), "near"),
        (date(2026, 7, 15), "near"),
        (date(2026, 8, 1), "passed"),
        (date(2026, 8, 10), "passed"),
        (date(2026, 8, 11), None),
    ],
)
def test_a_month_plan_is_due_around_its_month(today: date, due: str | None) -> None:
    found = due_plan([TRIP], today)
    assert (found[1] if found else None) == due


def test_a_passed_plan_comes_before_a_near_one_and_a_marked_one_never() -> None:
    dentist = {"what": "dentist", "when": "2026-03-07"}
    found = due_plan([dentist, INTERVIEW], date(2026, 3, 6))
    assert found is not None and found[0].what == "job interview" and found[1] == "passed"
    plans = marked([dentist, INTERVIEW], found[0], date(2026, 3, 6))
    again = due_plan(plans, date(2026, 3, 6))
    assert again is not None and again[0].what == "dentist"
    assert due_plan(marked(plans, again[0], date(2026, 3, 6)), date(2026, 3, 7)) is None


def test_upcoming_plans_are_the_soonest_ahead() -> None:
    past = {"what": "party", "when": "2026-02-01"}
    assert [p.what for p in upcoming([TRIP, past, INTERVIEW], date(2026, 3, 2))] == [
        "job interview",
        "trip to Oaxaca",
    ]


def test_a_stored_profiles_broken_plans_are_skipped() -> None:
    broken = [INTERVIEW, {"what": 3, "when": "2026-03-05"}, {"what": "x", "when": "soon"}, "x"]
    assert kept_plans(broken) == [Plan("job interview", "2026-03-05", "2026-03-02")]
    assert kept_plans("not a list") == []


# -- the profile job: dated messages in, resolved plans out --------------------------------------


def test_the_profile_prompt_dates_each_day_of_messages() -> None:
    said = [
        StoredMessage(1, LEARNER, "Tengo una entrevista el jueves", 8, said_at=MONDAY),
        StoredMessage(2, LEARNER, "Estoy nerviosa", 4, said_at=MONDAY + timedelta(hours=2)),
        StoredMessage(3, LEARNER, "Hoy llueve", 3, said_at=MONDAY + timedelta(days=1)),
    ]
    assert dated(said) == (
        "[Mon 2026-03-02]\n- Tengo una entrevista el jueves\n- Estoy nerviosa\n"
        "[Tue 2026-03-03]\n- Hoy llueve"
    )


def test_relative_dates_are_resolved_against_the_messages_date(
    settings: Settings, engine: Engine
) -> None:
    """The profile job shows the model the day each message was written, and keeps the plan
    it resolves ("el jueves", written on Monday 2 March, is Thursday 5 March), dated by the
    message; a plan it makes up (no word of the learner's behind it) is not kept."""
    clock = ManualClock(MONDAY)
    model = FakeChatModel()
    pam = build(settings, model=model, submit=lambda work: work(), engine=engine, clock=clock)
    user = unique_user("plans")
    handle(pam, user, "Hola, soy Lena")
    clock.advance(timedelta(hours=1))
    handle(pam, user, "El jueves tengo una entrevista de trabajo, ¡qué nervios!")
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    model.queue(
        "profile",
        json.dumps(
            {
                "who": "Lena",
                "plans": [
                    {
                        "what": "job interview (entrevista)",
                        "when": "2026-03-05",
                        "mentioned": "2026-03-02",
                    },
                    {"what": "wedding in Rome", "when": "2026-05-01", "mentioned": "2026-03-02"},
                ],
            }
        ),
    )
    assert learn_profile(learner.id, store=pam.store, model=model, config=settings.memory)
    prompt = model.of("profile")[-1].text
    assert "[Mon 2026-03-02]\n- Hola, soy Lena\n- El jueves tengo una entrevista" in prompt
    plans = pam.store.memory.profile(learner.id).data["plans"]
    assert plans == [
        {"what": "job interview (entrevista)", "when": "2026-03-05", "mentioned": "2026-03-02"}
    ]


def test_a_followed_up_plan_keeps_its_mark_through_a_profile_update(
    settings: Settings, engine: Engine
) -> None:
    clock = ManualClock(MONDAY)
    model = FakeChatModel()
    pam = build(settings, model=model, submit=lambda work: work(), engine=engine, clock=clock)
    user = unique_user("plans")
    handle(pam, user, "El jueves tengo una entrevista de trabajo")
    learner = pam.store.learners.find_learner(user)
    assert learner is not None
    # In English, with the learner's own word for it: a plan needs a word of theirs behind it.
    interview = {
        "what": "job interview (entrevista)",
        "when": "2026-03-05",
        "mentioned": "2026-03-02",
    }
    model.queue("profile", json.dumps({"plans": [interview]}))
    learn_profile(learner.id, store=pam.store, model=model, config=settings.memory)
    state = pam.store.memory.profile(learner.id)
    followed = marked(state.data["plans"], kept_plans(state.data["plans"])[0], date(2026, 3, 6))
    assert pam.store.memory.save_profile_data(
        learner.id, state.version, {**state.data, "plans": followed}
    )
    # A stale version loses: the mark is compare-and-set like every profile write.
    assert not pam.store.memory.save_profile_data(learner.id, state.version, state.data)
    clock.advance(timedelta(days=4))
    handle(pam, user, "La entrevista fue muy bien, me dieron el trabajo")
    model.queue(
        "profile",
        json.dumps({"plans": [{**interview, "what": "interview (entrevista de trabajo)"}]}),
    )
    learn_profile(learner.id, store=pam.store, model=model, config=settings.memory)
    # The model saw the plan without Pam's mark, and the mark outlived its rewrite.
    assert FOLLOWED_UP not in model.of("profile")[-1].text
    plans = pam.store.memory.profile(learner.id).data["plans"]
    assert plans[0][FOLLOWED_UP] == "2026-03-06"
    assert due_plan(plans, date(2026, 3, 6)) is None
