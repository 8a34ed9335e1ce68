"""Check-ins as the database keeps them (issue 31): each learner's preferences and history
(`checkin_states`), and the check-ins (`checkins`), one per learner and local day. Any number
of workers share them: a due check-in is claimed under a lease (FOR UPDATE SKIP LOCKED where the
database has it, compare-and-set everywhere), and written as Pam's turn — her message, its
usage, its outbox part — in one transaction that first proves the claim still holds and that
the learner has not written since it was taken. A worker that dies mid-check-in leaves a claim
whose lease runs out; the next round takes it up, and the UNIQUE (learner_id, local_day) and the
claim's compare-and-set keep it from being written twice."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.exc import IntegrityError

from memory import metrics
from memory.database.backends import backend_for
from memory.database.claims import PENDING
from memory.database.db import Tables
from memory.database.models import Learner, Profile
from memory.database.models_checkins import (
    QUEUED,
    SCHEDULED,
    SKIPPED,
    Checkin,
    CheckinState,
)
from memory.database.records import PAM, LearnerGone
from memory.database.statements import skip_never_sent
from memory.llm import Usage as BilledCall
from memory.store import checkin_statements as sql

ON, OFF = "on", "off"
# What `write` answers when the profile changed since its edit was made: nothing was written,
# the claim still holds, and the caller makes the edit again.
PROFILE_CHANGED = "profile_changed"
# How many of a learner's latest messages tell the hours they write at.
HOURS_LOOKED_AT = 50
# A check-in still unanswered this long after it went is no longer looked at as answered
# (the rounds' look stays bounded however many pile up unanswered).
ANSWERED_WITHIN = timedelta(days=30)
# How often a learner back after a silence longer than that is looked for.
SILENCE_LOOKED_AT_EVERY = timedelta(minutes=10)
# The claim statement of each kind of database (claim_next), built on first use.
_CLAIMS: dict[str, Any] = {}


@dataclass(frozen=True)
class CheckinPrefs:
    """A learner's check-in state, as `CheckinState` holds it (the defaults for a learner with
    no row: never said, no timezone)."""

    learner_id: int
    preference: str | None = None
    preference_set_at: datetime | None = None
    timezone: str | None = None
    timezone_stated: bool = False
    preferred_hour: int | None = None
    last_sent_at: datetime | None = None
    unanswered: int = 0
    disabled_reason: str | None = None

    @property
    def wanted(self) -> bool:
        """Whether the learner said yes and Pam has not stopped on her own."""
        return self.preference == ON and self.disabled_reason is None


@dataclass(frozen=True)
class Candidate:
    """A learner who wants check-ins and has none waiting: one to plan."""

    prefs: CheckinPrefs
    address: str


@dataclass(frozen=True)
class CheckinClaim:
    """A due check-in a worker holds: its row, its learner and their address."""

    id: int
    token: str
    attempts: int
    learner_id: int
    address: str
    local_day: str
    due_at: datetime


@dataclass(frozen=True)
class Activity:
    """What a check-in is decided on: the learner's newest message of their own (its id and
    time, when its turn ran; 0 and None for none), whether a message of theirs waits in the
    inbox, and when the newest message from their address reached the inbox (None: none kept,
    so none came within the queue's retention, a day at least)."""

    last_message_id: int
    last_message_at: datetime | None
    waiting: bool
    last_received_at: datetime | None = None


@dataclass(frozen=True)
class ProfileEdit:
    """The learned profile's data as a check-in leaves it (a plan it follows up marked), to
    be written only over the profile's `version` it was made from."""

    version: int
    data: dict[str, Any]


@dataclass(frozen=True)
class CheckinWrite:
    """A check-in to write as Pam's turn: the text and its token count, where it goes, whether
    through a template, the composer's labels, the billed calls, and the profile's edit that
    goes with it (None: none); `send_before`, its outbox part's deadline (None: none)."""

    text: str
    tokens: int
    channel: str
    chat_id: str
    template: bool
    follows_up: str
    topic: str
    usage: Sequence[BilledCall]
    profile: ProfileEdit | None = None
    send_before: datetime | None = None


@dataclass(frozen=True)
class CheckinRow:
    """A check-in as operators see it (no text: that is in the conversation)."""

    id: int
    local_day: str
    due_at: datetime
    state: str
    skip_reason: str | None
    template: bool
    follows_up: str | None
    topic: str | None
    decided_at: datetime | None
    answered_at: datetime | None


def _prefs(row: Any, learner_id: int) -> CheckinPrefs:
    """`row`: a CheckinState, or a row of sql.PREFS_COLUMNS; None: the defaults."""
    if row is None:
        return CheckinPrefs(learner_id)
    return CheckinPrefs(
        learner_id=row.learner_id,
        preference=row.preference,
        preference_set_at=row.preference_set_at,
        timezone=row.timezone,
        timezone_stated=bool(row.timezone_stated),
        preferred_hour=row.preferred_hour,
        last_sent_at=row.last_sent_at,
        unanswered=row.unanswered,
        disabled_reason=row.disabled_reason,
    )


def _row(row: Checkin) -> CheckinRow:
    return CheckinRow(
        id=row.id,
        local_day=row.local_day,
        due_at=row.due_at,
        state=row.state,
        skip_reason=row.skip_reason,
        template=bool(row.template),
        follows_up=row.follows_up,
        topic=row.topic,
        decided_at=row.decided_at,
        answered_at=row.answered_at,
    )


def _held(claim: CheckinClaim) -> dict[str, Any]:
    """The values that bind a statement to the claim still held (sql._HELD)."""
    return {"checkin_id": claim.id, "held_token": claim.token}


class _ProfileChanged(Exception):
    """A check-in's profile edit found a newer profile: its write is rolled back."""


def _bill(
    connection: Connection, learner_id: int, usage: Sequence[BilledCall], now: datetime
) -> None:
    """Record the calls a check-in billed (purpose "checkin"), counted in the budgets."""
    if not usage:
        return
    rows = [
        {
            "learner_id": learner_id,
            "model": call.model[:100],
            "purpose": "checkin",
            "input_tokens": call.input_tokens,
            "output_tokens": call.output_tokens,
            "created_at": now,
        }
        for call in usage
    ]
    connection.execute(sql.INSERT_USAGE, rows)


def _edited(connection: Connection, learner_id: int, edit: ProfileEdit) -> bool:
    """Write `edit` over the learner's profile, only if it is still at the edit's version."""
    statement = (
        update(Profile)
        .where(Profile.learner_id == learner_id, Profile.version == edit.version)
        .values(data=edit.data, version=Profile.version + 1)
    )
    return bool(connection.execute(statement).rowcount)


class Checkins(Tables):
    """Check-in preferences, plans, claims and writes."""

    # When this process last looked for learners back after a long silence (mark_answered).
    _silence_looked_at: datetime | None = None

    # -- a learner's preferences ---------------------------------------------------------------

    def prefs(self, learner_id: int) -> CheckinPrefs:
        """The learner's check-in state (the defaults when they have none)."""
        with self.single.connect() as connection:
            row = connection.execute(sql.PREFS, {"of_learner": learner_id}).first()
        return _prefs(row, learner_id)

    def _update(self, learner_id: int, **values: Any) -> CheckinPrefs:
        """Set `values` on the learner's state, made if they have none. Raises LearnerGone."""
        now = self.clock()
        try:
            with self.sessions.begin() as session:
                if session.get(Learner, learner_id) is None:
                    raise LearnerGone(learner_id)
                row = session.get(CheckinState, learner_id)
                if row is None:
                    row = CheckinState(learner_id=learner_id, unanswered=0, timezone_stated=False)
                    session.add(row)
                for name, value in values.items():
                    setattr(row, name, value)
                row.updated_at = now
                session.flush()
                return _prefs(row, learner_id)
        except IntegrityError as exc:  # made by a concurrent write, or the learner is gone
            if values and self._exists(learner_id):
                return self._update(learner_id, **values)
            raise LearnerGone(learner_id) from exc

    def _exists(self, learner_id: int) -> bool:
        with self.single.connect() as connection:
            return bool(connection.execute(sql.STATE_EXISTS, {"of_learner": learner_id}).scalar())

    def set_preference(self, learner_id: int, on: bool) -> CheckinPrefs:
        """/checkins on|off. Turning them on clears a stop Pam made on her own (a block the
        learner has since lifted, or check-ins left unanswered) and its count; turning them
        off cancels the check-ins planned."""
        now = self.clock()
        if on:
            prefs = self._update(
                learner_id,
                preference=ON,
                preference_set_at=now,
                disabled_reason=None,
                unanswered=0,
            )
        else:
            prefs = self._update(learner_id, preference=OFF, preference_set_at=now)
            self.cancel_waiting(learner_id, "opted_out")
        return prefs

    def set_timezone(self, learner_id: int, timezone: str, *, stated: bool) -> CheckinPrefs:
        """The learner's timezone (an IANA name): said by them, or guessed. The check-in planned
        goes, to be planned again at the new local time."""
        prefs = self._update(learner_id, timezone=timezone, timezone_stated=stated)
        if stated:
            self.cancel_waiting(learner_id, None)
        return prefs

    def learned(self, learner_id: int, hour: int) -> None:
        """Keep the local hour the learner usually writes at, for operators to see."""
        with self.single.begin() as connection:
            connection.execute(sql.LEARNED, {"of_learner": learner_id, "hour": hour})

    def disable(self, address: str, reason: str) -> bool:
        """Stop check-ins to the learner at `address` for `reason` (their channel says they
        blocked Pam); the check-ins planned are cancelled. Whether such a learner exists."""
        with self.single.connect() as connection:
            learner_id = connection.execute(sql.LEARNER_AT, {"address": address}).scalar()
        if learner_id is None:
            return False
        try:
            self._update(learner_id, disabled_reason=reason)
        except LearnerGone:
            return False
        self.cancel_waiting(learner_id, reason)
        return True

    def cancel_waiting(self, learner_id: int, reason: str | None) -> int:
        """Cancel the learner's check-ins not yet written: skipped for `reason`, or deleted
        (None: to be planned again, as after a new timezone). A claim a worker holds is
        cancelled too: its write then finds it gone. With a `reason` (they opted out, or
        blocked Pam), one written but not yet taken by delivery is not sent either, in the
        same transaction: its outbox part ends unsent, the check-in skipped for `reason`
        (counted in pam_checkins_skipped_total). How many were cancelled."""
        if reason is None:
            with self.single.begin() as connection:
                deleted = connection.execute(sql.DELETE_WAITING, {"of_learner": learner_id})
            return int(deleted.rowcount)
        values = {"of_learner": learner_id, "reason": reason, "decided": self.clock()}
        # A real transaction (`single` autocommits each statement on Postgres).
        with self.engine.begin() as connection:
            skipped = int(connection.execute(sql.SKIP_WAITING, values).rowcount)
            unsent = self._unsend(connection, learner_id, reason)
        if unsent:
            metrics.CHECKINS_SKIPPED.labels(reason).inc(unsent)
        return skipped + unsent

    @staticmethod
    def _unsend(connection: Connection, learner_id: int, reason: str) -> int:
        """Stop the learner's written check-ins whose outbox part no delivery has taken yet
        (see `cancel_waiting`); how many. One a delivery holds already goes."""
        stopped = 0
        for row in connection.execute(sql.UNSENT, {"of_learner": learner_id}).all():
            error = f"check-in not sent: {reason}"
            if not connection.execute(sql.UNSEND, {"part": row.outbox_id, "error": error}).rowcount:
                continue  # a delivery took it meanwhile
            skip_never_sent(connection, row.id, learner_id, reason)
            stopped += 1
        return stopped

    # -- planning ------------------------------------------------------------------------------

    def candidates(
        self, after: int = 0, limit: int = 1000, max_unanswered: int = 0
    ) -> list[Candidate]:
        """Learners who want check-ins and have none waiting, by id: `limit` at most, with an
        id above `after` (keyset paging: a round walks them all, a page at a time); with
        `max_unanswered`, not those who left that many in a row unanswered."""
        values = {"after": after, "limit": limit, "max_unanswered": max_unanswered}
        query = sql.CANDIDATES_NOT_STOPPED if max_unanswered else sql.CANDIDATES
        with self.single.connect() as connection:
            return [
                Candidate(_prefs(row, row.learner_id), row.external_id)
                for row in connection.execute(query, values)
            ]

    def message_times(self, learner_id: int, limit: int = HOURS_LOOKED_AT) -> list[datetime]:
        """When the learner's latest `limit` messages of their own were written, newest first."""
        values = {"of_learner": learner_id, "limit": limit}
        with self.single.connect() as connection:
            return list(connection.execute(sql.MESSAGE_TIMES, values).scalars())

    def days_taken(self, learner_id: int, since_day: str) -> set[str]:
        """The local days from `since_day` on that have a check-in already (any state)."""
        values = {"of_learner": learner_id, "since_day": since_day}
        with self.single.connect() as connection:
            return set(connection.execute(sql.DAYS_TAKEN, values).scalars())

    def schedule(self, learner_id: int, local_day: str, due_at: datetime) -> bool:
        """Plan a check-in for `due_at` on the learner's `local_day`; False when that day has
        one already (planned by another worker at the same time) or the learner is gone."""
        row = {"learner_id": learner_id, "local_day": local_day, "due_at": due_at}
        row |= {"state": SCHEDULED, "attempts": 0, "created_at": self.clock()}
        try:
            with self.single.begin() as connection:
                connection.execute(sql.SCHEDULE, row)
        except IntegrityError:
            return False
        return True

    # -- claiming and deciding -----------------------------------------------------------------

    def claim_next(self, lease: timedelta) -> CheckinClaim | None:
        """Take the check-in due first (planned and due, or claimed under a lease that ran out),
        under a lease of `lease`; None when none is due."""
        now = self.clock()
        token = str(uuid.uuid4())
        values = {"now": now, "token": token, "expires": now + lease}
        with self.single.begin() as connection:
            row = connection.execute(self._claim_statement(), values).first()
            if row is None:
                return None
            address = connection.execute(sql.ADDRESS, {"of_learner": row.learner_id}).scalar()
        return CheckinClaim(
            id=row.id,
            token=token,
            attempts=row.attempts,
            learner_id=row.learner_id,
            address=address or "",
            local_day=row.local_day,
            due_at=row.due_at,
        )

    def _claim_statement(self) -> Any:
        """The claim as this database locks it, built once per database kind."""
        dialect = self.engine.dialect.name
        statement = _CLAIMS.get(dialect)
        if statement is None:
            first = backend_for(self.engine).lock_next(sql.FIRST_CLAIMABLE, Checkin)
            statement = _CLAIMS[dialect] = sql.claim(first)
        return statement

    def activity(self, learner_id: int, address: str) -> Activity:
        """The learner's newest message of their own, whether one waits in the inbox, and
        when the newest from their address reached it."""
        with self.single.connect() as connection:
            row = connection.execute(sql.NEWEST_OWN, {"of_learner": learner_id}).first()
            queued = bool(connection.execute(sql.INBOX_WAITING, {"address": address}).scalar())
            received_at = connection.execute(sql.LAST_RECEIVED, {"address": address}).scalar()
        if row is None:
            return Activity(0, None, queued, received_at)
        return Activity(row.id, row.created_at, queued, received_at)

    def skip(self, claim: CheckinClaim, reason: str) -> bool:
        """Give the claimed check-in up for `reason`; False when the claim was gone."""
        values = _held(claim) | {"reason": reason[:40], "decided": self.clock()}
        with self.single.begin() as connection:
            return bool(connection.execute(sql.SKIP, values).rowcount)

    def retry_at(self, claim: CheckinClaim, due_at: datetime) -> bool:
        """Give the claimed check-in back, due again at `due_at` (the model failed)."""
        with self.single.begin() as connection:
            return bool(connection.execute(sql.RETRY_AT, _held(claim) | {"due": due_at}).rowcount)

    def renew(self, claim: CheckinClaim, lease: timedelta) -> bool:
        """Extend the claim's lease while its check-in is composed; False when it is gone."""
        values = _held(claim) | {"expires": self.clock() + lease}
        with self.single.begin() as connection:
            return bool(connection.execute(sql.RENEW, values).rowcount)

    def write(self, claim: CheckinClaim, seen: Activity, checkin: CheckinWrite) -> str | None:
        """Write the claimed check-in as Pam's turn, in one transaction: her message, the
        calls it billed, its outbox part, the profile's edit (a plan marked followed up), the
        check-in marked queued and the learner's count of unanswered check-ins raised. Not
        when the claim is gone (None: /forget, /checkins off or another worker after the lease
        ran out) or the learner wrote since `seen` (then the check-in is skipped,
        "learner_wrote", and their message gets a normal reply): the state the check-in is in
        afterwards. The calls are billed whatever the outcome, unless the learner is gone.
        PROFILE_CHANGED, with nothing written: a profile update came after the edit was made."""
        now = self.clock()
        held = _held(claim)
        taken = held | {
            "decided": now,
            "w_template": checkin.template,
            "w_follows_up": checkin.follows_up[:20],
            "w_topic": checkin.topic[:100],
        }
        wrote: dict[str, Any] = {"of_learner": claim.learner_id, "address": claim.address}
        wrote["seen_id"] = seen.last_message_id
        try:
            with self.engine.begin() as connection:
                # The first statement writes: on Postgres it locks the check-in's row (a /forget
                # waits for it, then deletes what it wrote), on SQLite it takes the write lock.
                if not connection.execute(sql.TAKEN, taken).rowcount:
                    _bill(connection, claim.learner_id, checkin.usage, now)
                    return None
                if connection.execute(sql.WROTE_SINCE, wrote).scalar():
                    connection.execute(sql.LEARNER_WROTE, {"checkin_id": claim.id})
                    _bill(connection, claim.learner_id, checkin.usage, now)
                    return SKIPPED
                if checkin.profile is not None and not _edited(
                    connection, claim.learner_id, checkin.profile
                ):
                    raise _ProfileChanged
                _bill(connection, claim.learner_id, checkin.usage, now)
                self._queue(connection, claim, checkin, now)
        except _ProfileChanged:  # rolled back: the claim holds as it did
            return PROFILE_CHANGED
        except IntegrityError:  # the learner was forgotten as it ran
            return None
        return QUEUED

    @staticmethod
    def _queue(
        connection: Connection, claim: CheckinClaim, checkin: CheckinWrite, now: datetime
    ) -> None:
        """Pam's message, its outbox part and the learner's raised count (see `write`)."""
        message = {"learner_id": claim.learner_id, "role": PAM, "content": checkin.text}
        message |= {"tokens": checkin.tokens, "created_at": now}
        message_id = connection.execute(sql.INSERT_MESSAGE, message).scalar_one()
        part = {
            "inbox_id": None,
            "seq": 0,
            "channel": checkin.channel,
            "address": claim.address,
            "chat_id": checkin.chat_id,
            "text": checkin.text,
            "status": PENDING,
            "attempts": 0,
            "available_at": now,
            "created_at": now,
            "checkin": True,
            "template": checkin.template,
            "send_before": checkin.send_before,
        }
        outbox_id = connection.execute(sql.INSERT_OUTBOX, part).scalar_one()
        link = {"checkin_id": claim.id, "w_message_id": message_id, "w_outbox_id": outbox_id}
        connection.execute(sql.LINK, link)
        connection.execute(sql.SENT, {"of_learner": claim.learner_id, "decided": now})

    # -- afterwards ----------------------------------------------------------------------------

    def mark_answered(self) -> int:
        """Mark answered every queued check-in whose learner has written since, reset their
        count of unanswered check-ins and drop the check-in planned next, to be planned again
        without a back-off: how many this call marked (a row another worker marked first is
        not counted twice). A learner whose check-ins are too old to be looked at as answered
        (ANSWERED_WITHIN: they were silent for weeks) and who writes again has their count
        reset all the same, so that check-ins resume; those old ones stay unanswered."""
        now = self.clock()
        with self.engine.begin() as connection:
            since = {"since": now - ANSWERED_WITHIN, "now": now}
            marked_for = list(connection.execute(sql.MARK_ANSWERED, since).scalars())
            learners = set(marked_for) | self._back_after_silence(connection, now)
            if learners:
                ids = {"learners": sorted(learners)}
                connection.execute(sql.RESET_UNANSWERED, ids)
                # The next check-in was planned as the last went out, backing off as if it
                # would go unanswered: planned again (by the next round) as for a learner who
                # answers.
                connection.execute(sql.DROP_SCHEDULED, ids)
        return len(marked_for)

    def _back_after_silence(self, connection: Connection, now: datetime) -> set[int]:
        """The learners still counting unanswered check-ins who wrote after the last one Pam
        wrote them, however long ago it went; looked at once every SILENCE_LOOKED_AT_EVERY at
        most (a learner back after weeks can wait minutes, and the look reads every learner
        backing off or stopped, each round)."""
        last = self._silence_looked_at
        if last is not None and now - last < SILENCE_LOOKED_AT_EVERY:
            return set()
        self._silence_looked_at = now
        return set(connection.execute(sql.BACK_AFTER_SILENCE).scalars())

    def queued_since(self, since: datetime) -> int:
        """Check-ins written since `since`, by every worker (the sending rate's count)."""
        with self.single.connect() as connection:
            return int(connection.execute(sql.QUEUED_SINCE, {"since": since}).scalar() or 0)

    def history(self, learner_id: int, limit: int = 5) -> list[CheckinRow]:
        """The learner's latest check-ins, planned ones first (for operators)."""
        query = (
            select(Checkin)
            .where(Checkin.learner_id == learner_id)
            .order_by(Checkin.local_day.desc())
            .limit(limit)
        )
        with self.sessions() as session:
            return [_row(row) for row in session.scalars(query)]
