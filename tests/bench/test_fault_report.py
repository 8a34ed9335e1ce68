"""The fault run's verdict on duplicates: only a reply whose first copy went out just before a
worker's SIGKILL, sent exactly twice, and the last its learner got before the kill, is the
documented send-to-record gap."""

from __future__ import annotations

from collections import Counter

from bench.fault_report import KILL_GAP, kill_gap_duplicates
from bench.fault_servers import MARKER, Delivered

KILL = 100.0  # when the run noted a worker's SIGKILL (time.time(), rounded to 10 ms)


def verdict(deliveries: list[Delivered], kills: list[float]) -> tuple[list[str], list[int]]:
    per_marker = Counter(m for d in deliveries for m in MARKER.findall(d.text))
    twice = [m for m, n in per_marker.items() if n > 1]
    return kill_gap_duplicates(twice, deliveries, per_marker, kills)


def reply(marker: str, at: float) -> Delivered:
    """Pam's reply to the message `marker` (learner-message, e.g. L01-M03), to that learner."""
    return Delivered(marker.split("-")[0], f"¡Qué bien! ({marker})", at)


def test_a_reply_sent_just_before_a_kill_and_again_after_it_is_the_gap() -> None:
    deliveries = [reply("L01-M03", KILL - 0.2), reply("L01-M03", KILL + 4.0)]

    assert verdict(deliveries, [KILL]) == (["L01-M03"], [1])


def test_a_send_stamped_within_the_rounding_of_the_kill_time_is_the_gap_too() -> None:
    deliveries = [reply("L01-M03", KILL + 0.004), reply("L01-M03", KILL + 4.0)]

    assert verdict(deliveries, [KILL]) == (["L01-M03"], [1])


def test_duplicates_away_from_a_kill_or_sent_three_times_are_not_explained() -> None:
    deliveries = [
        reply("L01-M01", KILL - KILL_GAP - 0.5),  # long before the kill
        reply("L01-M01", KILL + 4.0),
        reply("L02-M01", KILL + 1.0),  # after it: the killed worker cannot have sent it
        reply("L02-M01", KILL + 1.1),
        reply("L03-M01", KILL - 0.1),  # three copies: more than one kill's gap
        reply("L03-M01", KILL + 4.0),
        reply("L03-M01", KILL + 5.0),
    ]

    assert verdict(deliveries, [KILL]) == ([], [0])


def test_each_duplicate_is_charged_to_the_kill_it_preceded() -> None:
    later = KILL + 30.0
    deliveries = [
        reply("L01-M01", KILL - 0.1),
        reply("L02-M01", KILL - 0.05),
        reply("L03-M01", later - 0.3),
        *(reply(m, later + 5.0) for m in ("L01-M01", "L02-M01", "L03-M01")),
    ]

    explained, per_kill = verdict(deliveries, [KILL, later])

    assert sorted(explained) == ["L01-M01", "L02-M01", "L03-M01"]
    assert per_kill == [2, 1]  # two learners' sends were in flight at the first kill


def test_a_reply_its_learner_got_another_after_before_the_kill_had_been_recorded() -> None:
    deliveries = [
        reply("L01-M01", KILL - 0.5),
        reply("L01-M02", KILL - 0.2),  # the lane moved on: M01's send was recorded
        reply("L01-M01", KILL + 4.0),
        reply("L01-M02", KILL + 4.1),  # the last before the kill: the gap
    ]

    assert verdict(deliveries, [KILL]) == (["L01-M02"], [1])
