"""The check-in simulation: a real Pam (store, outbox, worker delivery, the real check-in rounds
and MemoryComposer) on a real database and an injected clock, its model scripted
(bench/checkin_model.py), its learners scripted (bench/checkin_learners.py), its channels
senders that record what reaches each learner and answer a Telegram learner who blocked the
bot with the 403 the real sender turns into RecipientBlocked. Every `tick` of simulated time
the learners' events happen at their own times, then one check-in round runs and the worker
delivers; each delivered check-in is answered, or not, as the learner's persona says."""

from __future__ import annotations

import heapq
import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, insert, select

from bench.checkin_learners import CHAT, PAM_SAYS, START, SUMMARY, Script, new_plan
from bench.checkin_model import CheckinModel
from bot.channels import RecipientBlocked
from bot.checkins.compose import MemoryComposer
from bot.checkins.rounds import CheckinRounds
from bot.settings import LLMSettings
from bot.worker.runtime import Pam
from bot.worker.worker import Worker
from memory.clock import ManualClock
from memory.database import db
from memory.database.claims import DONE
from memory.database.models_checkins import SCHEDULED, Checkin
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.records import LEARNER, PAM
from memory.database.statements import insert_message
from memory.llm import Purpose
from memory.messages import Inbound, Sent
from memory.queue.inbox import Inbox
from memory.tokens import TokenCounter
from webhooks.settings import Settings
from webhooks.wiring import build, checkin_rounds

TEMPLATE_SID = "HXb5b62575e6e4ff6129ad7c8efe1f983e"  # the operator's approved template
# Chances, per due check-in, that the learner writes just as it is due (their message waits
# in the inbox) or while it is being composed.
WRITES_WHEN_DUE = 0.02
WRITES_WHILE_COMPOSED = 0.01
# The chance a learner's message tells of a new dated plan (the profile learns it).
TELLS_A_PLAN = 0.15
_ACCOUNT = re.compile(r"account name: L(\d+)\b")


@dataclass(frozen=True)
class Reached:
    """One send a channel was asked for: when, to whom (the script's index), its outbox id,
    whether through the template, and whether it reached them (False: blocked)."""

    at: datetime
    learner: int
    outbox_id: int
    template: bool
    reached: bool


class BenchSender:
    """A channel's sender: records each send at the simulated time; a learner who blocked the
    bot gets nothing, and Pam gets Telegram's 403 as the real sender reports it."""

    max_chars = 4096

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def length(self, text: str) -> int:
        return len(text)

    def send(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        return self._send(chat_id, idempotency_key, template=False)

    def send_template(self, chat_id: str, text: str, *, idempotency_key: str) -> Sent:
        return self._send(chat_id, idempotency_key, template=True)

    def _send(self, chat_id: str, key: str, *, template: bool) -> Sent:
        sim = self.sim
        script = sim.by_chat[chat_id]
        blocked = script.block_at is not None and sim.clock.now >= script.block_at
        sim.sends.append(
            (sim.clock.now, script.index, int(key.removeprefix("pam-")), template, not blocked)
        )
        if blocked:
            raise RecipientBlocked("telegram forbids it: Forbidden: bot was blocked by the user")
        return Sent(platform_id=key)


@dataclass
class Simulation:
    """A month of check-ins for `scripts`, on the database at `database_url`."""

    database_url: str
    scripts: list[Script]
    days: int
    tick: timedelta = timedelta(minutes=10)
    seed: int = 31
    progress: Callable[[str], None] = print
    clock: ManualClock = field(init=False)
    sends: list[tuple[datetime, int, int, bool, bool]] = field(default_factory=list)
    by_chat: dict[str, Script] = field(default_factory=dict)
    outcomes: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    new_plans: dict[int, list[dict[str, str]]] = field(default_factory=lambda: defaultdict(list))
    answers: int = 0
    writes_due: int = 0
    writes_composed: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    sequence: int = 0
    rounds_run: int = 0
    last_round: datetime = START
    by_learner: dict[int, Script] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.clock = ManualClock(START - timedelta(days=30))
        self.rng = random.Random(self.seed)
        settings = Settings(database_url=self.database_url, llm=LLMSettings(api_key="bench"))
        self.settings = settings.replace(
            checkin={"enabled": True, "threads": 1},
            whatsapp={"checkin_template_sid": TEMPLATE_SID},
        )
        self.model = CheckinModel(TokenCounter(self.settings.llm.model), self.seed)
        engine = db.make_engine(self.database_url)
        db.upgrade(engine)
        # Memory jobs (folds, profile updates) are the token benchmark's: none run here.
        self.pam: Pam = build(
            self.settings,
            model=self.model,
            submit=lambda work: None,
            engine=engine,
            clock=self.clock,
        )
        sender = BenchSender(self)
        senders = {"telegram": sender, "whatsapp": sender}
        self.worker = Worker(self.pam, senders)
        self.composer = MemoryComposer(self.pam.store, self.model, self.settings)
        rounds = checkin_rounds(self.pam, self.settings, senders, self.composer)
        assert rounds is not None
        self.rounds: CheckinRounds = rounds
        self.inbox = Inbox(self.pam.engine, 60, self.clock)
        self.by_index = {s.index: s for s in self.scripts}
        self.by_chat = {s.chat_id: s for s in self.scripts}
        if len(self.by_chat) != len(self.scripts):  # one Pam learner for two scripts
            raise ValueError("two scripted learners share an address")
        self.model.during = self._during

    # -- before the month ----------------------------------------------------------------------

    def seed_learners(self) -> None:
        """Each learner's account, settings, history, learned profile (with the dated plans
        the history told) and, for half of them, a rolling summary; all opted in."""
        began = time.monotonic()
        store, counter = self.pam.store, self.pam.counter
        for n, script in enumerate(self.scripts, 1):
            self.clock.now = script.history[0][0] - timedelta(minutes=1)
            learner = store.learners.learner(script.address, display_name=f"L{script.index}")
            script.learner_id = learner.id
            store.learners.update_settings(
                learner.id,
                target_language=script.language,
                native_language="English",
                level="A2",
            )
            store.checkins.set_preference(learner.id, on=True)
            if script.stated_zone:
                store.checkins.set_timezone(learner.id, script.zone, stated=True)
            ids = []
            with self.pam.engine.begin() as connection:  # the history in one transaction
                for moment, text in script.history:
                    said = insert_message(
                        connection, learner.id, LEARNER, text, counter.count(text), moment
                    )
                    ids.append(said.id)
                    arrived(connection, script, moment, f"seed-{said.id}")
                    script.messages.append(moment)
                    reply = self.rng.choice(PAM_SAYS[script.language])
                    insert_message(
                        connection,
                        learner.id,
                        PAM,
                        reply,
                        counter.count(reply),
                        moment + timedelta(seconds=20),
                    )
            self.clock.now = script.history[-1][0] + timedelta(minutes=2)
            profile = store.memory.profile(learner.id)
            data = {
                "who": "Works in a hospital, has a sister who is a nurse",
                "interests": ["films", "cooking", "walks"],
                "plans": script.plans,
            }
            store.memory.save_profile(learner.id, profile.version, data, ids[-1], len(ids))
            if script.summary:
                summary = store.memory.summary(learner.id)
                store.memory.save_summary(
                    learner.id, summary.version, SUMMARY, counter.count(SUMMARY), ids[1]
                )
            if n % 1000 == 0 or n == len(self.scripts):
                self.progress(f"  seeded {n:,} learners ({time.monotonic() - began:.0f} s)")
        self.by_learner = {s.learner_id: s for s in self.scripts}
        self.seconds["seed"] = time.monotonic() - began

    def _pam_reply(self, script: Script) -> None:
        reply = self.rng.choice(PAM_SAYS[script.language])
        self.pam.store.conversation.add_message(
            script.learner_id, PAM, reply, self.pam.counter.count(reply)
        )

    # -- the month -----------------------------------------------------------------------------

    def _events(self) -> list[tuple[datetime, int, str, int]]:
        """Every learner's own messages, opt-outs and blocks, by time."""
        events: list[tuple[datetime, int, str, int]] = []
        for script in self.scripts:
            for day in range(-1, self.days + 1):
                local = (START + timedelta(days=day)).astimezone(script.tz).date()
                if self.rng.random() < script.persona.writes:
                    moment = script.at_hour(local, self.rng, spread=2)
                    if moment >= START:
                        events.append((moment, self._seq(), "write", script.index))
            if script.opt_out_at is not None:
                events.append((script.opt_out_at, self._seq(), "opt_out", script.index))
        heapq.heapify(events)
        return events

    def _seq(self) -> int:
        self.sequence += 1
        return self.sequence

    def run(self) -> None:
        """The month, tick by tick."""
        began = time.monotonic()
        events = self._events()
        end = START + timedelta(days=self.days)
        now = START
        checked = 0
        next_day = START + timedelta(days=1)
        while now < end:
            # The next moment anything happens: a check-in falls due, a learner acts, or a
            # tick passes; rounds run then, as a worker's every 30 s would within seconds.
            now = min(now + self.tick, self._next_due(now), events[0][0] if events else end, end)
            while events and events[0][0] <= now:
                moment, _, kind, index = heapq.heappop(events)
                self.clock.now = max(moment, self.clock.now)
                self._event(kind, self.by_index[index], events)
            self.clock.now = now
            self._writes_when_due(now)
            report = self.rounds.run_round()
            self.rounds_run += 1
            self.last_round = now
            day = (now - START).days
            for outcome, count in report.outcomes.items():
                self.outcomes[str(day)][outcome] += count
            self.worker.drain()
            checked = self._answer_new_sends(checked, events)
            if now >= next_day or now >= end:
                next_day += timedelta(days=1)
                sent = sum(c["queued"] for c in self.outcomes.values())
                self.progress(
                    f"  day {min(day, self.days):2d}/{self.days}: {sent:,} check-ins written, "
                    f"{len(self.sends):,} sends, {self.answers:,} answered, "
                    f"{self.rounds_run:,} rounds ({time.monotonic() - began:.0f} s)"
                )
        self.seconds["month"] = time.monotonic() - began

    def _next_due(self, now: datetime) -> datetime:
        """When the next planned check-in falls due (a tick away when none is planned)."""
        query = select(func.min(Checkin.due_at)).where(
            Checkin.state == SCHEDULED, Checkin.due_at > now
        )
        with self.pam.engine.connect() as connection:
            due = connection.execute(query).scalar()
        if due is None:
            return now + self.tick
        return due if due.tzinfo else due.replace(tzinfo=UTC)

    def _event(self, kind: str, script: Script, events: list[Any]) -> None:
        if kind == "opt_out":
            self.pam.store.checkins.set_preference(script.learner_id, on=False)
        elif kind in ("write", "answer"):
            if script.block_at is not None and self.clock.now >= script.block_at:
                return  # a learner who blocked the bot has left
            self._write(script)
            if kind == "answer":
                self.answers += 1

    def _write(self, script: Script) -> None:
        """The learner writes (and Pam's reply follows); now and then of a new dated plan,
        which the profile learns."""
        store, now = self.pam.store, self.clock.now
        text = self.rng.choice(CHAT)
        if self.rng.random() < TELLS_A_PLAN:
            entry, text = new_plan(script, self.rng, now.astimezone(script.tz).date())
            self.new_plans[script.index].append(entry)
            for _ in range(3):  # compare-and-set, as the profile job writes
                state = store.memory.profile(script.learner_id)
                plans = [*state.data.get("plans", []), entry][-5:]
                if store.memory.save_profile_data(
                    script.learner_id, state.version, {**state.data, "plans": plans}
                ):
                    break
        with self.pam.engine.begin() as connection:  # as a worker's lane, after the inbox
            arrived(connection, script, now, f"sim-{self._seq()}")
        store.conversation.add_learner_message(
            script.learner_id, text, self.pam.counter.count(text)
        )
        script.messages.append(now)
        self._pam_reply(script)

    def _writes_when_due(self, now: datetime) -> None:
        """Some learners write just as their check-in falls due: the message waits in the
        inbox (the worker answers it after the round)."""
        query = select(Checkin.learner_id).where(
            Checkin.state == SCHEDULED,
            Checkin.due_at <= now,
            Checkin.due_at > self.last_round,
        )
        with self.pam.engine.connect() as connection:
            due = list(connection.execute(query).scalars())
        for learner_id in due:
            if self.rng.random() < WRITES_WHEN_DUE:
                self._inbox_write(self.by_learner[learner_id])
                self.writes_due += 1

    def _inbox_write(self, script: Script) -> None:
        channel = script.channel
        self.inbox.accept(
            Inbound(
                channel,
                f"sim-{self._seq()}",
                script.address,
                script.chat_id,
                self.rng.choice(CHAT),
            )
        )
        script.messages.append(self.clock.now)

    def _during(self, purpose: Purpose, system: str) -> None:
        """As a check-in is composed, its learner may write (hooked to the model's call): the
        check-in then goes unsent, and their message gets a normal reply."""
        if purpose != "checkin" or self.rng.random() >= WRITES_WHILE_COMPOSED:
            return
        found = _ACCOUNT.search(system)
        if found is not None:
            self._inbox_write(self.by_index[int(found.group(1))])
            self.writes_composed += 1

    def _answer_new_sends(self, checked: int, events: list[Any]) -> int:
        """Schedule the answers to the check-ins delivered since `checked`."""
        new = self.sends[checked:]
        if not new:
            return checked
        ids = [outbox_id for *_, outbox_id, _, _ in new]
        with self.pam.engine.connect() as connection:
            checkins = set(
                connection.execute(
                    select(OutboxItem.id).where(OutboxItem.id.in_(ids), OutboxItem.checkin)
                ).scalars()
            )
        for at, index, outbox_id, _, reached in new:
            if outbox_id not in checkins or not reached:
                continue
            script = self.by_index[index]
            if self.rng.random() >= script.persona.answers:
                continue
            answer_at = at + timedelta(minutes=self.rng.randint(5, 240))
            if not script.awake(answer_at):
                day = answer_at.astimezone(script.tz).date()
                if answer_at.astimezone(script.tz).hour >= 9:
                    day += timedelta(days=1)
                answer_at = script.at_hour(day, self.rng)
            heapq.heappush(events, (answer_at, self._seq(), "answer", index))
        return len(self.sends)

    def checkin_ids(self) -> set[int]:
        """The outbox ids of every check-in written."""
        with self.pam.engine.connect() as connection:
            return set(
                connection.execute(select(OutboxItem.id).where(OutboxItem.checkin)).scalars()
            )


def arrived(connection: Connection, script: Script, at: datetime, platform_id: str) -> None:
    """The learner's message as the inbox keeps it once answered: WhatsApp's 24-hour window
    runs from when it reached Pam (`received_at`), as for a message that came through a
    webhook."""
    row: dict[str, Any] = {"channel": script.channel, "platform_id": platform_id}
    row |= {"chat_id": script.chat_id}
    row |= {"address": script.address, "text": "", "status": DONE, "attempts": 1}
    row |= {"received_at": at, "available_at": at, "finished_at": at}
    connection.execute(insert(InboxItem).values(**row))
