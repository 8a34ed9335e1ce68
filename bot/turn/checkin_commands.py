"""/checkins on|off — whether Pam writes first now and then (issue 31: a learner opts in; nobody
gets one unasked) — and /timezone <zone>, the learner's timezone as an IANA name, checked
with zoneinfo; and the line /start offers check-ins with, while the learner has not said. In
the learner's native language, from the "checkins" catalog."""

from __future__ import annotations

from bot.i18n import N_, Words, native_of, words_for
from bot.timezones import is_fixed_offset, readable, timezone_named, zone
from memory.clock import Clock
from memory.database.records import LearnerInfo
from memory.store.checkins import ON, Checkins

CHECKINS_ON = N_(
    "Check-ins are on 🙂 Now and then I'll write to you first, in your daytime, at most once a "
    "day. /checkins off stops them."
)
CHECKINS_OFF = N_(
    "Check-ins are off: I'll only write when you do. /checkins on turns them back on."
)
# /checkins to a learner who never turned them on: nothing to turn "back" on.
CHECKINS_NEVER_ON = N_("Check-ins aren't on: I only write when you do.")
# /checkins to a learner Pam stopped writing to on her own (their chat refused her messages).
CHECKINS_PAUSED = N_(
    "Check-ins are paused: my last messages couldn't reach you. /checkins on starts them again."
)
CHECKINS_USAGE = N_(
    "Say /checkins on if you'd like me to write to you first now and then, or /checkins off to "
    "stop."
)
NOT_SWITCHED_ON = N_("(Check-ins aren't switched on here yet: I'll start once they are.)")
TIMEZONE_IS = N_(
    "Your time zone: {timezone}. If that's wrong, tell me yours, e.g. /timezone Europe/Madrid."
)
TIMEZONE_GUESSED = N_(
    "Your time zone: {timezone}, as I guessed from the hours you write at. If that's wrong, "
    "tell me yours, e.g. /timezone Europe/Madrid."
)
TIMEZONE_NOT_YET = N_(
    "I don't know your time zone yet. Tell me yours, e.g. /timezone Europe/Madrid, so I write "
    "at a good time for you."
)
TIMEZONE_SET = N_("Got it: your time zone is {timezone}, where it's {time} now.")
TIMEZONE_UNKNOWN = N_(
    "I don't know the time zone “{name}”. Write it like this: /timezone Europe/Madrid or "
    "/timezone America/Mexico_City."
)
OFFER = N_(
    "I can also write to you first now and then, like a friend would. Say /checkins on if "
    "you'd like that."
)
DOMAIN = "checkins"


def words(native: str | None) -> Words:
    """Pam's words of the "checkins" catalog in the native language `native`."""
    return words_for(native, DOMAIN)


# The longest zone name said back to the learner (what they typed is untrusted).
MAX_NAME_CHARS = 40


class CheckinCommands:
    """Answers /checkins and /timezone; `enabled`: PAM_CHECKINS (whether check-ins go out here
    at all: a learner may opt in before, and is told so)."""

    def __init__(self, checkins: Checkins, clock: Clock, *, enabled: bool) -> None:
        self.checkins = checkins
        self.clock = clock
        self.enabled = enabled

    def checkins_command(self, learner: LearnerInfo, args: list[str]) -> str:
        """/checkins on|off."""
        say = words(native_of(learner))
        choice = args[0].lower() if len(args) == 1 else ""
        if choice not in ("on", "off"):
            return f"{say(CHECKINS_USAGE)}\n{say(self._state(learner.id))}"
        self.checkins.set_preference(learner.id, on=choice == "on")
        if choice == "off":
            return say(CHECKINS_OFF)
        lines = [say(CHECKINS_ON)]
        if not self.enabled:
            lines.append(say(NOT_SWITCHED_ON))
        lines.append(self._timezone_line(say, learner.id))
        return "\n".join(lines)

    def timezone_command(self, learner: LearnerInfo, args: list[str]) -> str:
        """/timezone <zone>: set it (checked against the IANA names zoneinfo knows); without
        one, the timezone Pam goes by."""
        say = words(native_of(learner))
        if not args:
            return self._timezone_line(say, learner.id)
        typed = " ".join(args)
        name = timezone_named(typed)
        if name is None:
            shown = typed if len(typed) <= MAX_NAME_CHARS else typed[: MAX_NAME_CHARS - 1] + "…"
            return say(TIMEZONE_UNKNOWN, name=shown)
        self.checkins.set_timezone(learner.id, name, stated=True)
        local = self.clock().astimezone(zone(name))
        return say(TIMEZONE_SET, timezone=readable(name), time=f"{local:%H:%M}")

    def offer(self, learner: LearnerInfo) -> str | None:
        """/start's offer of check-ins, while the learner has not said yes or no (none where
        check-ins are off: nothing would come)."""
        if not self.enabled or self.checkins.prefs(learner.id).preference is not None:
            return None
        return words(native_of(learner))(OFFER)

    def _state(self, learner_id: int) -> str:
        """The learner's check-ins as /checkins tells them: on, off (they said so), never
        turned on, or paused by Pam (their chat refused her messages)."""
        prefs = self.checkins.prefs(learner_id)
        if prefs.preference is None:
            return CHECKINS_NEVER_ON
        if prefs.preference != ON:
            return CHECKINS_OFF
        return CHECKINS_PAUSED if prefs.disabled_reason is not None else CHECKINS_ON

    def _timezone_line(self, say: Words, learner_id: int) -> str:
        """The timezone Pam goes by, as a person reads it (a guess from the hours the learner
        writes at is a fixed offset, "UTC+01:00", and said to be a guess), or that she knows
        none yet (a learner new on Telegram: none is guessed before they wrote 5 messages)."""
        prefs = self.checkins.prefs(learner_id)
        if prefs.timezone is None:  # not said, and none guessed yet
            return say(TIMEZONE_NOT_YET)
        shown = readable(prefs.timezone)
        if not prefs.timezone_stated and is_fixed_offset(prefs.timezone):
            return say(TIMEZONE_GUESSED, timezone=shown)
        return say(TIMEZONE_IS, timezone=shown)
