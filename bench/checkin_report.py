"""What the check-in simulation measured: every send the channels were asked for, checked
against each learner's script (the timezone they really live in, when they last wrote, opted
out, blocked the bot), the check-ins' rows (what each followed up, answered or skipped and
why) and the ledger's check-in calls; the targets; the plot of a day's outcomes."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from bench.checkin_learners import START, Script
from bench.checkin_sim import Simulation
from bot.checkins.timing import QuietHours
from memory.database.models import Usage
from memory.database.models_checkins import ANSWERED, QUEUED, SKIPPED, Checkin
from webhooks.whatsapp.timezone import number_timezone

WINDOW = timedelta(hours=24)
# The token benchmark's learner-month (600 messages) for Pam, all calls, the lightest learner:
# bench/results/tokens.json's costs (input + cached input + output).
TOKENS_JSON = Path(__file__).parent / "results" / "tokens.json"


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def zone_source(script: Script) -> str:
    """How Pam knows the learner's timezone: "stated" (/timezone), "number" (a WhatsApp
    number's country) or "hours" (guessed from the hours they write at)."""
    if script.stated_zone:
        return "stated"
    if script.channel == "whatsapp" and number_timezone(script.address) is not None:
        return "number"
    return "hours"


def _quiet_send(script: Script, at: datetime) -> dict[str, Any]:
    """A send in the learner's quiet hours as the report keeps it: who, where they really
    live, how Pam knew their zone, and the local times of their last 10 messages before it."""
    tz = script.tz
    before = sorted(m for m in script.messages if m < at)[-10:]
    return {
        "learner": script.index,
        "zone": script.zone,
        "zone_source": zone_source(script),
        "channel": script.channel,
        "sent_local": at.astimezone(tz).isoformat(),
        "messages_local": [m.astimezone(tz).isoformat() for m in before],
    }


def measure(sim: Simulation) -> dict[str, Any]:
    """The figures and targets of one simulation."""
    settings = sim.settings.checkin
    quiet = QuietHours(settings.quiet_start, settings.quiet_end)
    checkin_ids = sim.checkin_ids()
    sends = [s for s in sim.sends if s[2] in checkin_ids]
    by_outbox = Counter(outbox_id for _, _, outbox_id, _, _ in sends)
    first_403: dict[int, datetime] = {}
    violations: Counter[str] = Counter()
    # Each send in the learner's quiet hours, with what the learner's script tells of it.
    quiet_sends: list[dict[str, Any]] = []
    per_day: Counter[tuple[int, str]] = Counter()
    reached = template = free_form = 0
    for at, index, _, through_template, got in sorted(sends):
        script = sim.by_index[index]
        if index in first_403:
            violations["to_blocked"] += 1
        if not got:
            first_403.setdefault(index, at)
            continue
        reached += 1
        local = at.astimezone(script.tz)
        if quiet.quiet(local.hour):
            violations["quiet_hours"] += 1
            violations[f"quiet_hours_{zone_source(script)}"] += 1
            quiet_sends.append(_quiet_send(script, at))
        per_day[(index, local.date().isoformat())] += 1
        if script.opt_out_at is not None and at >= script.opt_out_at:
            violations["to_opted_out"] += 1
        if script.channel == "whatsapp":
            if through_template:
                template += 1
            else:
                free_form += 1
                last = max((m for m in script.messages if m <= at), default=None)
                if last is None or at - last >= WINDOW:
                    violations["whatsapp_outside_window"] += 1
    violations["over_one_a_day"] = sum(n - 1 for n in per_day.values() if n > 1)
    violations["duplicates"] = sum(n - 1 for n in by_outbox.values() if n > 1)

    engine = sim.pam.engine
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                Checkin.learner_id,
                Checkin.state,
                Checkin.skip_reason,
                Checkin.follows_up,
                Checkin.topic,
                Checkin.decided_at,
            )
        ).all()
        tokens = connection.execute(
            select(func.count(), func.sum(Usage.input_tokens), func.sum(Usage.output_tokens)).where(
                Usage.purpose == "checkin"
            )
        ).one()
    written = [r for r in rows if r.state in (QUEUED, ANSWERED)]
    answered = sum(r.state == ANSWERED for r in written)
    plan_rows = [r for r in written if r.follows_up == "plan"]
    real_plans = 0
    for row in plan_rows:
        script = sim.by_learner[row.learner_id]
        told = {p["what"] for p in script.plans} | {p["what"] for p in sim.new_plans[script.index]}
        real_plans += row.topic in told
    follows = Counter(r.follows_up for r in written)
    skipped = Counter(r.skip_reason for r in rows if r.state == SKIPPED)
    daily: dict[int, Counter[str]] = defaultdict(Counter)
    for row in rows:
        if row.decided_at is None:
            continue
        day = (_aware(row.decided_at) - START).days
        label = "sent" if row.state in (QUEUED, ANSWERED) else f"skipped: {row.skip_reason}"
        daily[day][label] += 1

    learners, days = len(sim.scripts), sim.days
    calls, input_tokens, output_tokens = tokens[0], tokens[1] or 0, tokens[2] or 0
    per_month = (input_tokens + output_tokens) / learners * 30 / days
    month = _token_month()
    targets = {
        name: violations[name] == 0
        for name in (
            "quiet_hours",
            "whatsapp_outside_window",
            "to_opted_out",
            "to_blocked",
            "over_one_a_day",
            "duplicates",
        )
    }
    return {
        "learners": learners,
        "days": days,
        "start": START.isoformat(),
        "telegram_learners": sum(s.channel == "telegram" for s in sim.scripts),
        "whatsapp_learners": sum(s.channel == "whatsapp" for s in sim.scripts),
        "zones": len({s.zone for s in sim.scripts}),
        "zone_sources": dict(Counter(zone_source(s) for s in sim.scripts)),
        "checkins_written": len(written),
        "checkins_reached": reached,
        "blocked_403": len(first_403),
        "whatsapp_free_form": free_form,
        "whatsapp_template": template,
        "violations": dict(violations),
        "quiet_sends": quiet_sends[:50],
        "targets": targets,
        "follows_up": dict(follows),
        "plan_share": len(plan_rows) / len(written) if written else 0.0,
        "real_plan_share": real_plans / len(written) if written else 0.0,
        "plans_not_in_script": len(plan_rows) - real_plans,
        "answered": answered,
        "answer_rate": answered / len(written) if written else 0.0,
        "skipped": dict(skipped),
        "learner_writes": {"when_due": sim.writes_due, "while_composed": sim.writes_composed},
        "answers_written": sim.answers,
        "model_answers_turned_down": sim.model.turned_down,
        "llm_calls": calls,
        "tokens": {"input": input_tokens, "output": output_tokens},
        "tokens_per_checkin": (input_tokens + output_tokens) / len(written) if written else 0,
        "tokens_per_learner_month": per_month,
        "token_benchmark_learner_month": month,
        "daily": {str(d): dict(c) for d, c in sorted(daily.items())},
        "seconds": sim.seconds,
    }


def _token_month() -> dict[str, float]:
    """The token benchmark's tokens per learner-month for Pam, by learner (empty when its
    results are missing)."""
    try:
        costs = json.loads(TOKENS_JSON.read_text())["costs"]
    except (OSError, KeyError, ValueError):
        return {}
    month = {}
    for learner, strategies in costs["learners"].items():
        tokens = strategies["pam"]["tokens"]
        month[learner] = float(tokens["input"] + tokens["cached"] + tokens["output"])
    return month


def table(result: dict[str, Any]) -> str:
    """The measured table, as the docs show it (Markdown)."""
    v, t = result["violations"], result["targets"]

    def target(name: str) -> str:
        return f"{v.get(name, 0)} ({'ok' if t[name] else 'FAILED'})"

    month = result["token_benchmark_learner_month"]
    lightest = min(month.values()) if month else 0
    added = result["tokens_per_learner_month"]
    rows = [
        ("learners × days", f"{result['learners']:,} × {result['days']}"),
        (
            "check-ins written / reached the learner",
            f"{result['checkins_written']:,} / {result['checkins_reached']:,}",
        ),
        (
            "WhatsApp free-form / through the template",
            f"{result['whatsapp_free_form']:,} / {result['whatsapp_template']:,}",
        ),
        ("in the learner's quiet hours (local)", target("quiet_hours")),
        (
            "… of them to learners whose timezone Pam guessed from their hours",
            f"{v.get('quiet_hours_hours', 0)} of {result['zone_sources'].get('hours', 0):,} "
            "such learners",
        ),
        ("WhatsApp free-form outside the 24-hour window", target("whatsapp_outside_window")),
        ("to opted-out learners", target("to_opted_out")),
        ("to blocked learners after their 403", target("to_blocked")),
        ("more than one on a learner's local day", target("over_one_a_day")),
        ("duplicates", target("duplicates")),
        (
            "follow up a remembered plan (from the learner's script)",
            f"{result['plan_share']:.1%} ({result['real_plan_share']:.1%})",
        ),
        ("answered (scripted learners)", f"{result['answer_rate']:.1%}"),
        ("LLM tokens per check-in", f"{result['tokens_per_checkin']:,.0f}"),
        ("LLM tokens per learner-month added", f"{added:,.0f}"),
    ]
    if lightest:
        rows.append(
            (
                "… of the token benchmark's lightest learner-month",
                f"{added / lightest:.1%} of {lightest:,.0f}",
            )
        )
    lines = ["| measure | value |", "|---|---:|"]
    lines += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    """Check-ins per simulated day by outcome: sent, and skipped by reason (stacked)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    days = sorted(int(d) for d in result["daily"])
    labels = sorted(
        {label for counts in result["daily"].values() for label in counts},
        key=lambda label: (label != "sent", label),
    )
    figure, axes = plt.subplots(figsize=(11, 5.5))
    bottom = [0] * len(days)
    # Skip reasons in colours apart from the sent bars' green.
    colors = ("#f08c00", "#74c0fc", "#e64980", "#9775fa", "#a0522d", "#868e96", "#ffd43b")
    for n, label in enumerate(labels):
        values = [result["daily"][str(d)].get(label, 0) for d in days]
        color = "#2b8a3e" if label == "sent" else colors[(n - 1) % len(colors)]
        axes.bar(days, values, bottom=bottom, label=label, color=color, width=0.8)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axes.set_xlabel(f"simulated day (from {START:%a %d %b %Y}, UTC)")
    axes.set_ylabel("check-ins decided")
    axes.set_title(
        f"Check-ins per day, {result['learners']:,} learners in {result['zones']} timezones "
        f"(US DST on day 2, EU on day 23)"
    )
    axes.legend(loc="upper right", fontsize=8, ncol=2)
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
