"""/forget, confirmed first: Pam asks, saying what the erase would take, and erases only on
the learner's yes — a button that carries the question's one-time code (`/forget yes <code>`:
Telegram's inline keyboard, WhatsApp's quick replies, the API's buttons), a reply word ("yes",
"ja", "sí" … in the learner's languages, English's always), or on a channel that confirms by
repeating (the HTTP API) `/forget` again. `/forget no`, or any other message, drops the
question; an unanswered one expires after PAM_FORGET_CONFIRM_SECONDS.

The request lives on the learner's row (memory/store/forget_requests.py). The erase takes it
in the same transaction, keyed on the learner, the code and the expiry
(memory/store/learners.py `forget_confirmed`): a duplicated webhook, a retried tap, a stale
button or two racing confirmations erase at most once, and the ones that come too late hear
kindly that there is nothing to confirm. A message that drops the question is answered as
usual, after a line saying that nothing was erased."""

from __future__ import annotations

import logging
import math
import secrets
import unicodedata
from datetime import timedelta

from bot import phrases
from bot.channels import Button
from bot.i18n import N_, Words, native_of, words_for
from bot.turn.commands import Command
from bot.turn.values import Turn, TurnRequest
from memory.clock import Clock
from memory.database.records import LearnerGone, LearnerInfo
from memory.store.forget_requests import Holdings
from memory.store.message_store import Store

log = logging.getLogger(__name__)

DOMAIN = "forget"
FORGET = "forget"
YES, NO = "yes", "no"  # the words of the buttons' commands: `/forget yes <code>`, `/forget no`
CODE_BYTES = 12  # a code of 16 characters: the button's command stays well under 64 bytes

# Translators: the words a learner may reply to confirm that Pam erases everything, separated
# by commas; the first is the one Pam asks for ("reply “yes”"). Lower case, no punctuation.
YES_WORDS = N_("yes")
YES_LABEL = N_("Yes, erase it all")
NO_LABEL = N_("No, keep it")

ASK = N_("Do you really want me to forget everything about you? This is what I'd erase:")
ASK_IN_GROUP = N_(
    "Do you really want me to forget what I know about you from this group? This is what I'd "
    "erase (our private chat stays as it is):"
)
SUMMARY = N_("the summary of our earlier conversation")
PROFILE = N_("what I've learned about you (your profile)")
SETTINGS = N_("your settings and usage records")
KEPT = N_("Okay, I'm keeping everything 🙂")
DROPPED = N_("(You didn't say yes, so I've erased nothing. /forget asks again.)")
EXPIRED = N_(
    "That request has expired, so I've erased nothing. Send /forget if you still want me to."
)
STALE = N_(
    "There's nothing to confirm there — that request was replaced or already answered, so I've "
    "erased nothing. Send /forget if you want me to."
)
NOTHING_KEPT = N_("I don't know anything about you yet, so there's nothing to erase.")


def plain(text: str) -> str:
    """`text` as a reply word is compared: case-folded, without punctuation, symbols or
    emoji, its spaces collapsed ("Sí!" → "sí", "Yes, erase it all" → "yes erase it all")."""
    kept = "".join(
        " " if unicodedata.category(ch)[0] in "PSZC" else ch
        for ch in unicodedata.normalize("NFC", text).casefold()
    )
    return " ".join(kept.split())


def yes_words(learner: LearnerInfo) -> set[str]:
    """What confirms a /forget as a reply: English "yes", and the yes-words and the confirm
    button's label in the learner's native language and in the one they practise."""
    words = {YES}
    for language in (native_of(learner), learner.target_language):
        say = words_for(language, DOMAIN)
        words |= {plain(word) for word in say(YES_WORDS).split(",")}
        words.add(plain(say(YES_LABEL)))
    return words - {""}


def _listed(say: Words, holdings: Holdings) -> list[str]:
    """What the erase would take, a line each; counts of nothing are left out."""
    lines = []
    if holdings.messages:
        lines.append(
            say.plural(
                "{count} message of our chat", "{count} messages of our chat", holdings.messages
            )
        )
    if holdings.summary:
        lines.append(say(SUMMARY))
    if holdings.profile:
        lines.append(say(PROFILE))
    if holdings.corrections:
        lines.append(say.plural("{count} correction", "{count} corrections", holdings.corrections))
    if holdings.review_items:
        lines.append(
            say.plural(
                "{count} mistake I keep for review",
                "{count} mistakes I keep for review",
                holdings.review_items,
            )
        )
    if holdings.charts:
        lines.append(
            say.plural("{count} progress chart", "{count} progress charts", holdings.charts)
        )
    if holdings.voice_clips:
        lines.append(
            say.plural("{count} spoken reply", "{count} spoken replies", holdings.voice_clips)
        )
    lines.append(say(SETTINGS))
    return [f"• {line}" for line in lines]


class Forgetting:
    """Answers /forget and its confirmations for a learner, and drops an unanswered question:
    requests recorded in `store`, expiring `confirm_seconds` after they were asked by
    `clock`."""

    def __init__(self, store: Store, clock: Clock, confirm_seconds: float) -> None:
        self.store = store
        self.clock = clock
        self.expiry = timedelta(seconds=confirm_seconds)

    def waiting(self, learner: LearnerInfo) -> bool:
        """Whether the learner has an open /forget question (asked, not expired)."""
        asked = learner.forget_asked_at
        return asked is not None and asked > self.clock() - self.expiry

    def answer(self, learner: LearnerInfo | None, command: Command, request: TurnRequest) -> Turn:
        """The answer to `/forget [yes <code> | no]` by `learner` (None: Pam knows nobody at
        the request's address, and makes no one up for it)."""
        native = native_of(learner) if learner is not None else request.language_hint
        say = words_for(native, DOMAIN)
        verb = command.args[0].lower() if command.args else ""
        if learner is None:
            return Turn([say(STALE if verb in (YES, NO) else NOTHING_KEPT)], None)
        if verb == NO:
            self.store.forget_requests.drop(learner.id)
            return Turn([say(KEPT)], learner.id)
        if verb == YES:
            code = command.args[1] if len(command.args) > 1 else None
            return self.confirm(learner, code, request)
        if request.repeat_confirms and self.waiting(learner):
            return self.confirm(learner, None, request)
        return self._ask(learner, request, say)

    def confirms(self, learner: LearnerInfo, text: str) -> bool:
        """Whether `text` answers the learner's /forget question (open or expired) with yes."""
        return learner.forget_asked_at is not None and plain(text) in yes_words(learner)

    def confirm(self, learner: LearnerInfo, code: str | None, request: TurnRequest) -> Turn:
        """Erase everything about the learner if their question is open and `code` is its
        code (None: whatever its code, for a yes that names none); else say why not."""
        native = native_of(learner)
        cutoff = self.clock() - self.expiry
        erased = self.store.learners.forget_confirmed(
            learner.id, code, cutoff, keep_inbox_id=request.inbox_id
        )
        if erased:
            log.info("forget confirmed learner=%s", learner.id)
            done = phrases.FORGOTTEN if request.group is None else phrases.FORGOTTEN_IN_GROUP
            return Turn([phrases.said(done, native)], learner.id, forgot=True)
        say = words_for(native, DOMAIN)
        if learner.forget_asked_at is not None and not self.waiting(learner):
            log.info("forget not confirmed learner=%s: expired", learner.id)
            self.store.forget_requests.drop(learner.id)
            return Turn([say(EXPIRED)], learner.id)
        log.info("forget not confirmed learner=%s: nothing to confirm", learner.id)
        return Turn([say(STALE)], learner.id)

    def drop(self, learner: LearnerInfo) -> str | None:
        """Drop the learner's /forget question, which the message being answered does not
        confirm: the line that says nothing was erased (None: there was no open question)."""
        if learner.forget_asked_at is None:
            return None
        was_open = self.waiting(learner)
        dropped = self.store.forget_requests.drop(learner.id)
        if not (dropped and was_open):
            return None
        log.info("forget dropped learner=%s: answered with something else", learner.id)
        return words_for(native_of(learner), DOMAIN)(DROPPED)

    def _ask(self, learner: LearnerInfo, request: TurnRequest, say: Words) -> Turn:
        """The question: what the erase would take, how to confirm and until when, with a
        button to confirm (carrying a new one-time code) and one to keep everything."""
        code = secrets.token_urlsafe(CODE_BYTES)
        try:
            holdings = self.store.forget_requests.ask(learner.id, code, self.clock())
        except LearnerGone:
            return Turn([say(NOTHING_KEPT)], learner.id)
        log.info("forget asked learner=%s", learner.id)
        minutes = max(1, math.ceil(self.expiry.total_seconds() / 60))
        if request.repeat_confirms:
            how = say.plural(
                "To erase it all, send /forget again within {count} minute. Anything else "
                "keeps everything.",
                "To erase it all, send /forget again within {count} minutes. Anything else "
                "keeps everything.",
                minutes,
            )
        else:
            yes = say(YES_WORDS).split(",")[0].strip() or YES
            how = say.plural(
                "To erase it all, reply “{yes}” within {count} minute. Anything else keeps "
                "everything.",
                "To erase it all, reply “{yes}” within {count} minutes. Anything else keeps "
                "everything.",
                minutes,
                yes=yes,
            )
        head = say(ASK if request.group is None else ASK_IN_GROUP)
        text = "\n".join([head, *_listed(say, holdings), "", how])
        buttons = (
            Button(say(YES_LABEL), f"/{FORGET} {YES} {code}"),
            Button(say(NO_LABEL), f"/{FORGET} {NO}"),
        )
        return Turn([text], learner.id, buttons=buttons)
