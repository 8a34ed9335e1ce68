"""The statements the check-in store runs (memory/store/checkins.py), built once at import as
the turn's are (memory/database/statements.py): each call only binds its values. A round runs
a dozen of them per check-in and a few per learner it plans; built on every call, SQLAlchemy's
building and cache keys were most of a check-in's CPU. The names bound are the statements'
own ("of_learner", "w_topic", ...): an UPDATE or INSERT keeps its columns' names for itself."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Integer,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    update,
)

from memory.database.claims import FAILED, PENDING, UNFINISHED
from memory.database.models import Learner, Message, Usage, UTCDateTime
from memory.database.models_checkins import (
    ANSWERED,
    CLAIMED,
    QUEUED,
    SCHEDULED,
    SKIPPED,
    WAITING,
    Checkin,
    CheckinState,
)
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.records import LEARNER

_OF: Any = bindparam("of_learner")
_NOW = bindparam("now", type_=UTCDateTime())

# A learner's check-in state, as CheckinPrefs' fields.
PREFS_COLUMNS = (
    CheckinState.learner_id,
    CheckinState.preference,
    CheckinState.preference_set_at,
    CheckinState.timezone,
    CheckinState.timezone_stated,
    CheckinState.preferred_hour,
    CheckinState.last_sent_at,
    CheckinState.unanswered,
    CheckinState.disabled_reason,
)
PREFS = select(*PREFS_COLUMNS).where(CheckinState.learner_id == _OF)
STATE_EXISTS = select(exists().where(CheckinState.learner_id == _OF))
LEARNED = (
    update(CheckinState)
    .where(CheckinState.learner_id == _OF)
    .values(preferred_hour=bindparam("hour", type_=Integer))
)
LEARNER_AT = select(Learner.id).where(Learner.external_id == bindparam("address"))
ADDRESS = select(Learner.external_id).where(Learner.id == _OF)

# -- planning ----------------------------------------------------------------------------------

# Whether the learner has a check-in waiting, stated literally: the partial index of the waiting
# ones answers it (bound values SQLite cannot match with the index's condition).
_WAITING = exists().where(
    Checkin.learner_id == CheckinState.learner_id,
    Checkin.state.in_(bindparam("waiting", WAITING, literal_execute=True)),
)
CANDIDATES = (
    select(*PREFS_COLUMNS, Learner.external_id)
    .join(Learner, Learner.id == CheckinState.learner_id)
    .where(CheckinState.preference == "on", CheckinState.disabled_reason.is_(None))
    .where(~_WAITING, CheckinState.learner_id > bindparam("after"))
    .order_by(CheckinState.learner_id)
    .limit(bindparam("limit", type_=Integer))
)
# The same, less those who left `max_unanswered` check-ins in a row unanswered: a round would
# plan none for them (read every round, they were most of a large round's planning).
CANDIDATES_NOT_STOPPED = CANDIDATES.where(
    CheckinState.unanswered < bindparam("max_unanswered", type_=Integer)
)
_THEIR_OWN = and_(Message.learner_id == _OF, Message.role == LEARNER)
MESSAGE_TIMES = (
    select(Message.created_at)
    .where(_THEIR_OWN)
    .order_by(Message.id.desc())
    .limit(bindparam("limit", type_=Integer))
)
DAYS_TAKEN = select(Checkin.local_day).where(
    Checkin.learner_id == _OF, Checkin.local_day >= bindparam("since_day")
)
SCHEDULE = insert(Checkin)  # the row's columns bound per call

# -- claiming and deciding ---------------------------------------------------------------------

_CLAIMABLE = or_(
    and_(Checkin.state == SCHEDULED, Checkin.due_at <= _NOW),
    and_(Checkin.state == CLAIMED, Checkin.lease_expires_at < _NOW),
)
FIRST_CLAIMABLE = select(Checkin.id).where(_CLAIMABLE).order_by(Checkin.due_at, Checkin.id).limit(1)


def claim(first: Any) -> Any:
    """The claim of the check-in `first` selects (FIRST_CLAIMABLE, locked as the database
    can), bound with "now", "token" and "expires"."""
    return (
        update(Checkin)
        .where(Checkin.id == first.scalar_subquery(), _CLAIMABLE)
        .values(
            state=CLAIMED,
            claim_token=bindparam("token"),
            lease_expires_at=bindparam("expires", type_=UTCDateTime()),
            attempts=Checkin.attempts + 1,
        )
        .returning(
            Checkin.id,
            Checkin.attempts,
            Checkin.learner_id,
            Checkin.local_day,
            Checkin.due_at,
        )
    )


NEWEST_OWN = (
    select(Message.id, Message.created_at).where(_THEIR_OWN).order_by(Message.id.desc()).limit(1)
)
_INBOX_WAITING = exists().where(
    InboxItem.address == bindparam("address"), InboxItem.status.in_(UNFINISHED)
)
INBOX_WAITING = select(_INBOX_WAITING)
# When the newest message from the address reached the inbox (WhatsApp's window runs from it).
LAST_RECEIVED = (
    select(InboxItem.received_at)
    .where(InboxItem.address == bindparam("address"))
    .order_by(InboxItem.id.desc())
    .limit(1)
)

# A claim still held: bound with "checkin_id" and "held_token".
_HELD = and_(
    Checkin.id == bindparam("checkin_id"),
    Checkin.claim_token == bindparam("held_token"),
    Checkin.state == CLAIMED,
)
_DECIDED = bindparam("decided", type_=UTCDateTime())
# A check-in given up for "reason", decided then, its claim (if any) released.
_SKIPPED: dict[str, Any] = {
    "state": SKIPPED,
    "skip_reason": bindparam("reason"),
    "decided_at": _DECIDED,
    "claim_token": None,
    "lease_expires_at": None,
}
SKIP = update(Checkin).where(_HELD).values(_SKIPPED)
RETRY_AT = (
    update(Checkin)
    .where(_HELD)
    .values(
        state=SCHEDULED,
        due_at=bindparam("due", type_=UTCDateTime()),
        claim_token=None,
        lease_expires_at=None,
    )
)
RENEW = (
    update(Checkin).where(_HELD).values(lease_expires_at=bindparam("expires", type_=UTCDateTime()))
)
CANCEL_WAITING = and_(Checkin.learner_id == _OF, Checkin.state.in_(WAITING))
DELETE_WAITING = delete(Checkin).where(CANCEL_WAITING)
SKIP_WAITING = update(Checkin).where(CANCEL_WAITING).values(_SKIPPED)
# A learner's check-ins written whose outbox part is still pending (no delivery took it).
UNSENT = (
    select(Checkin.id, Checkin.outbox_id)
    .join(OutboxItem, OutboxItem.id == Checkin.outbox_id)
    .where(
        Checkin.learner_id == _OF,
        Checkin.state.in_((QUEUED, ANSWERED)),
        OutboxItem.status == PENDING,
    )
)
# Its outbox part ended unsent, if no delivery has taken it yet: bound with "part", "error".
UNSEND = (
    update(OutboxItem)
    .where(OutboxItem.id == bindparam("part"), OutboxItem.status == PENDING)
    .values(status=FAILED, text="", last_error=bindparam("error"))
)
# -- writing -----------------------------------------------------------------------------------

TAKEN = (
    update(Checkin)
    .where(_HELD)
    .values(
        state=QUEUED,
        claim_token=None,
        lease_expires_at=None,
        decided_at=_DECIDED,
        template=bindparam("w_template"),
        follows_up=bindparam("w_follows_up"),
        topic=bindparam("w_topic"),
    )
)
WROTE_SINCE = select(
    or_(
        exists().where(_THEIR_OWN, Message.id > bindparam("seen_id")),
        _INBOX_WAITING,
    )
)
LEARNER_WROTE = (
    update(Checkin)
    .where(Checkin.id == bindparam("checkin_id"))
    .values(state=SKIPPED, skip_reason="learner_wrote")
)
INSERT_MESSAGE = insert(Message).returning(Message.id)  # the row's columns bound per call
INSERT_USAGE = insert(Usage)
INSERT_OUTBOX = insert(OutboxItem).returning(OutboxItem.id)
LINK = (
    update(Checkin)
    .where(Checkin.id == bindparam("checkin_id"))
    .values(message_id=bindparam("w_message_id"), outbox_id=bindparam("w_outbox_id"))
)
SENT = (
    update(CheckinState)
    .where(CheckinState.learner_id == _OF)
    .values(last_sent_at=_DECIDED, unanswered=CheckinState.unanswered + 1)
)

# -- afterwards --------------------------------------------------------------------------------

_ANSWERED = exists().where(
    Message.learner_id == Checkin.learner_id,
    Message.role == LEARNER,
    Message.id > Checkin.message_id,
)
# Only the rows this UPDATE changes come back: a worker marking the same check-in at once
# waits for this one's lock and then finds it answered already.
MARK_ANSWERED = (
    update(Checkin)
    .where(
        Checkin.state == QUEUED,
        Checkin.decided_at >= bindparam("since", type_=UTCDateTime()),
        _ANSWERED,
    )
    .values(state=ANSWERED, answered_at=_NOW)
    .returning(Checkin.learner_id)
)
_LAST_WRITTEN = (
    select(func.max(Checkin.message_id))
    .where(Checkin.learner_id == CheckinState.learner_id)
    .correlate(CheckinState)
    .scalar_subquery()
)
# The learners still counting unanswered check-ins who wrote after the last one Pam wrote
# them, however long ago it went.
BACK_AFTER_SILENCE = select(CheckinState.learner_id).where(
    CheckinState.unanswered > 0,
    exists().where(
        Message.learner_id == CheckinState.learner_id,
        Message.role == LEARNER,
        Message.id > _LAST_WRITTEN,
    ),
)
_LEARNERS: Any = bindparam("learners", expanding=True)
RESET_UNANSWERED = (
    update(CheckinState).where(CheckinState.learner_id.in_(_LEARNERS)).values(unanswered=0)
)
DROP_SCHEDULED = delete(Checkin).where(
    Checkin.learner_id.in_(_LEARNERS), Checkin.state == SCHEDULED
)
QUEUED_SINCE = select(func.count()).where(
    Checkin.state.in_((QUEUED, ANSWERED)),
    Checkin.decided_at >= bindparam("since", type_=UTCDateTime()),
)
