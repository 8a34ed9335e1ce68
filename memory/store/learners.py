"""The learners Pam knows: found or created by their channel address, their explicit
settings, and /forget, which erases every row about one."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from memory.database.backends import backend_for
from memory.database.db import Tables
from memory.database.models import Learner, Profile, Summary
from memory.database.models_checkins import Checkin, CheckinState
from memory.database.models_queue import InboxItem, OutboxItem
from memory.database.models_recall import RecallEntry
from memory.database.records import LEARNER_TABLES, LearnerGone, LearnerInfo
from memory.database.statements import FIND_LEARNER
from memory.recall.search import reindex
from memory.store.scrubs import Outcome, Scrubs


def _learner_info(row: Learner) -> LearnerInfo:
    return LearnerInfo(
        id=row.id,
        external_id=row.external_id,
        display_name=row.display_name,
        target_language=row.target_language,
        native_language=row.native_language,
        level=row.level,
        voice_replies=bool(row.voice_replies),
        native_guess=row.native_guess,
        corrections=row.corrections,
        forget_asked_at=row.forget_asked_at,
    )


# How long the operator's /forget (or `pam chat`'s) tries to clear the files before it
# answers that the scrub is pending (the worker then retries it).
SCRUB_WITHIN_SECONDS = 2.0


class Learners(Tables):
    """Learners, read and written, and forgotten."""

    scrub_within = SCRUB_WITHIN_SECONDS

    def learner(self, external_id: str, display_name: str | None = None) -> LearnerInfo:
        """The learner with `external_id`, created (with empty summary and profile) if new."""
        found = self.find_learner(external_id)
        if found is not None:
            return found
        try:
            with self.sessions.begin() as session:
                row = Learner(external_id=external_id, display_name=display_name)
                session.add(row)
                session.flush()
                session.add(Summary(learner_id=row.id))
                session.add(Profile(learner_id=row.id, data={}))
                return _learner_info(row)
        except IntegrityError:  # created concurrently by another turn or process
            found = self.find_learner(external_id)
            if found is None:
                raise
            return found

    def find_learner(self, external_id: str) -> LearnerInfo | None:
        """The learner with `external_id`, or None."""
        with self.single.connect() as connection:
            row = connection.execute(FIND_LEARNER, {"external_id": external_id}).first()
        return LearnerInfo(**row._mapping) if row else None

    def get_learner(self, learner_id: int) -> LearnerInfo:
        """The learner with id `learner_id`; raises LearnerGone if there is none."""
        with self.sessions() as session:
            row = session.get(Learner, learner_id)
            if row is None:
                raise LearnerGone(learner_id)
            return _learner_info(row)

    def say_limit(self, learner_id: int, now: datetime, last_said_before: datetime) -> bool:
        """Record that Pam tells the learner a limit stopped their turn, as of `now`, unless
        she last told them at or after `last_said_before`: whether to say it. One statement,
        so turns of one learner on two lanes say it once."""
        said = Learner.limit_said_at
        statement = (
            update(Learner)
            .where(Learner.id == learner_id, or_(said.is_(None), said < last_said_before))
            .values(limit_said_at=now)
        )
        with self.single.begin() as connection:
            return bool(connection.execute(statement).rowcount)

    def update_settings(self, learner_id: int, **values: str | bool | None) -> LearnerInfo:
        """Set some of `target_language`, `native_language`, `level`, `display_name`,
        `voice_replies`, `native_guess`, `corrections`."""
        allowed = {
            "target_language",
            "native_language",
            "level",
            "display_name",
            "voice_replies",
            "native_guess",
            "corrections",
        }
        if not set(values) <= allowed:
            raise ValueError(f"unknown learner settings: {sorted(set(values) - allowed)}")
        with self.sessions.begin() as session:
            row = session.get(Learner, learner_id)
            if row is None:
                raise LearnerGone(learner_id)
            relanguage = (
                "target_language" in values and values["target_language"] != row.target_language
            )
            for name, value in values.items():
                setattr(row, name, value)
            if relanguage:  # recall's stems and configuration follow the language
                session.flush()
                reindex(
                    session.connection(), backend_for(self.engine), learner_id, row.target_language
                )
            return _learner_info(row)

    def forget(self, learner_id: int, keep_inbox_id: int | None = None) -> bool:
        """Erase every row about the learner, in every table, in one transaction: their
        conversation, summary, profile, corrections, usage, memory jobs, and queued inbound
        and outbound messages up to `keep_inbox_id` (the /forget being answered). The
        operator's erase (the admin endpoint); a learner's goes through `forget_confirmed`.

        Then their bytes are cleared from the database's files (memory/store/scrubs.py): after
        the /forget message and its confirmation are unlinked, by the worker, when there is
        a `keep_inbox_id`; else here, trying for up to `scrub_within` seconds. True when
        the files hold nothing more of them (on Postgres, once the rows are deleted: see
        docs/how/remembers.md on VACUUM); False when the scrub is recorded and tried again later."""
        with self.sessions.begin() as session:
            indexed = self._erase(session, learner_id, keep_inbox_id)
        if indexed is None:  # nobody to erase
            return True
        return self._scrub(indexed, keep_inbox_id)

    def forget_confirmed(
        self,
        learner_id: int,
        code: str | None,
        asked_after: datetime,
        keep_inbox_id: int | None = None,
    ) -> bool:
        """Erase everything about the learner as `forget` does, if they have a /forget request
        asked after `asked_after` (an older one has expired) whose code is `code` (None: any
        code, for a confirmation that names none, a reply word). The request is taken in the
        same transaction as the erase, by a conditional UPDATE of the learner's row, so a
        duplicated, retried, stale or racing confirmation erases at most once. Whether it
        erased (False: no such request, nothing changed)."""
        taken = update(Learner).where(
            Learner.id == learner_id,
            Learner.forget_code.is_not(None),
            Learner.forget_asked_at > asked_after,
        )
        if code is not None:
            taken = taken.where(Learner.forget_code == code)
        with self.sessions.begin() as session:
            # The first statement writes: on Postgres it locks the row, so a racing
            # confirmation waits and then finds it gone; on SQLite it takes the write lock.
            if not session.connection().execute(taken.values(forget_code=None)).rowcount:
                return False
            indexed = self._erase(session, learner_id, keep_inbox_id)
        self._scrub(bool(indexed), keep_inbox_id)
        return True

    def _erase(self, session: Session, learner_id: int, keep_inbox_id: int | None) -> bool | None:
        """Delete every row about the learner in `session`'s transaction and record the scrub
        of their bytes; whether recall had indexed any of their words (None: no such
        learner, nothing done)."""
        learner = session.get(Learner, learner_id)
        if learner is None:
            return None
        # The check-ins go first: a check-in being written holds its row's lock (on Postgres)
        # until its message and outbox part are committed, so this waits for that write and
        # the outbox part is deleted below, or takes the rows first and the write finds its
        # claim gone. Deleted after the outbox, a write committing in between would leave a
        # queued check-in to an erased learner.
        session.execute(delete(Checkin).where(Checkin.learner_id == learner_id))
        session.execute(delete(CheckinState).where(CheckinState.learner_id == learner_id))
        inbox = delete(InboxItem).where(InboxItem.address == learner.external_id)
        outbox = delete(OutboxItem).where(OutboxItem.address == learner.external_id)
        if keep_inbox_id is not None:
            # Only what came before the /forget: its confirmation must still go out, and
            # messages sent after it belong to the fresh start.
            inbox = inbox.where(InboxItem.id < keep_inbox_id)
            outbox = outbox.where(
                OutboxItem.inbox_id.is_(None) | (OutboxItem.inbox_id < keep_inbox_id)
            )
        session.execute(outbox)
        session.execute(inbox)
        indexed = session.scalar(
            select(RecallEntry.id).where(RecallEntry.learner_id == learner_id).limit(1)
        )
        for model in LEARNER_TABLES:
            session.execute(delete(model).where(model.learner_id == learner_id))
        session.execute(delete(Learner).where(Learner.id == learner_id))
        Scrubs(self.engine, self.clock).record(session.connection(), keep_inbox_id)
        return indexed is not None

    def _scrub(self, indexed: bool, keep_inbox_id: int | None) -> bool:
        """After an erase committed: the database's own clean-up, and the scrub of the files
        (see `forget`); whether the files hold nothing more of the learner."""
        backend = backend_for(self.engine)
        backend.after_forget(indexed=indexed)
        if not backend.clears_files:
            return True
        if keep_inbox_id is not None:
            return False
        return Scrubs(self.engine, self.clock).run(within=self.scrub_within) is Outcome.DONE
