"""Slash commands, the same on every channel: /start /help /profile /language /level
/corrections /review /progress /voice, and /checkins /timezone (bot/turn/checkin_commands.py).
/forget, asked and confirmed over two messages, is bot/turn/forgetting.py's; the buttons'
/translate /explain /say are bot/turn/taps.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from bot import phrases
from bot.channels import Button, GroupChats
from bot.i18n import N_, Words, native_of
from bot.languages import explanation_language, languages_of
from bot.review.progress import summary
from bot.review.reviewing import Reviewing
from bot.turn.checkin_commands import CheckinCommands
from bot.turn.density import density_line, set_density
from bot.turn.settings_commands import set_languages, set_level
from memory.clock import Clock, utcnow
from memory.database.records import LearnerInfo
from memory.jobs.plans import Plan, kept_plans
from memory.jobs.profile import FIELDS, document
from memory.jobs.profile_facts import settled
from memory.review.progress import progress
from memory.store.charts import NOT_DRAWN
from memory.store.message_store import Store


@dataclass(frozen=True)
class Command:
    """A parsed slash command: `/Language@PamBot Spanish English` → ("language", [...]).
    `inbox_id` is the inbox item it arrived as, when it came through a channel's queue;
    `group` its channel when it was said in a group (a chat others read), else None."""

    name: str
    args: list[str]
    inbox_id: int | None = None
    group: GroupChats | None = None


# What shows one learner's memory: answered in their private chat only, never in a group.
PRIVATE = ("profile", "review", "progress", "checkins", "timezone")


@dataclass(frozen=True)
class CommandAnswer:
    """A command's answer that carries more than text: a /progress chart (stored, by id)
    sent with the text as its caption, buttons under it. A plain str answers every other
    command."""

    text: str
    chart_id: int | None = None
    buttons: tuple[Button, ...] = ()  # under the text, where the channel can show them


Handler = Callable[[LearnerInfo, Command], "str | CommandAnswer"]


def parse_command(text: str) -> Command | None:
    """The command in `text`, or None when it is ordinary chat."""
    text = text.strip()
    if not text.startswith("/") or len(text) < 2 or text[1].isspace():
        return None
    head, *args = text.split()
    name = head[1:].split("@", 1)[0].lower()
    return Command(name, args)


def _settings_line(learner: LearnerInfo, learned: dict[str, Any]) -> str:
    """The learner's settings in a sentence, in their native language, with the language
    corrections are explained in as the reply prompt decides it (what the learner set, else
    what Pam learned)."""
    say = phrases.words(native_of(learner))
    if not learner.target_language:
        return say(phrases.NEEDS_LANGUAGE)
    target, native, level = languages_of(
        learner.target_language, learner.native_language, learner.level, learned
    )
    explained = explanation_language(level, target, native) or learner.target_language
    names = {
        "target": phrases.language_in(say, learner.target_language),
        "explained": phrases.language_in(say, explained),
    }
    if learner.level:
        return say(
            "We're practising {target} at level {level}, with corrections explained in "
            "{explained}.",
            level=learner.level,
            **names,
        )
    if level is None and native and native != explained:
        return say(
            "We're practising {target}, with corrections explained in {explained} (at /level "
            "A1 or A2, in {native}).",
            native=phrases.language_in(say, native),
            **names,
        )
    return say("We're practising {target}, with corrections explained in {explained}.", **names)


def _voice_line(learner: LearnerInfo) -> str:
    """Whether the learner hears Pam's replies, and how to change it."""
    say = phrases.words(native_of(learner))
    if learner.voice_replies:
        return say("Voice replies are on (/voice off to stop).")
    return say("Voice replies are off (/voice on to hear me).")


LABELS = {
    "who": N_("Who you are"),
    "style": N_("How you like to chat"),
    "focus": N_("What you're working on"),
    "interests": N_("Interests"),
    "misc": N_("Other things I remember"),
    "native_language": N_("Native language"),
    "target_language": N_("Practising"),
    "level": N_("Level (my estimate)"),
    "recurring_mistakes": N_("Mistakes you often make"),
    "plans": N_("Plans you told me about"),
}
# Learned fields that name a language: shown in the learner's locale's name for it.
LANGUAGE_FIELDS = ("native_language", "target_language")


def _learned_value(say: Words, key: str, value: object) -> str:
    """A learned field's value as the profile shows it."""
    if key == "plans":
        return say.list(f"{p.what} ({_plan_date(say, p)})" for p in kept_plans(value))
    if isinstance(value, list):
        return say.list(str(item) for item in value)
    if key in LANGUAGE_FIELDS and isinstance(value, str):
        return phrases.language_in(say, value)
    return str(value)


def _plan_date(say: Words, plan: Plan) -> str:
    """A plan's day ("10 December 2026") or month ("July 2026") as the learner's locale
    writes it."""
    return say.month(plan.first) if plan.is_month else say.date(plan.first, "long")


def _when(say: Words, moment: datetime) -> str:
    """A moment as a person reads it in the learner's language (Pam keeps time in UTC)."""
    return say("{date} at {time} UTC", date=say.date(moment, "long"), time=say.time(moment))


class Commands:
    """Answers commands for one learner (none of them erases anything: /forget is
    bot/turn/forgetting.py's)."""

    def __init__(
        self,
        store: Store,
        review: Reviewing | None = None,
        clock: Clock = utcnow,
        *,
        voice: bool = True,
        window: int = 10,
        checkins: bool = False,
    ) -> None:
        self.store = store
        self.review = review or Reviewing(store.reviews)
        self.clock = clock  # which weeks /progress shows
        self.voice_enabled = voice  # PAM_VOICE_NOTES: the operator may turn voice off
        self.window = window  # PAM_WINDOW_MESSAGES: the messages always kept word for word
        # /checkins and /timezone; `checkins`: PAM_CHECKINS, whether check-ins go out at all.
        self.checkins = CheckinCommands(store.checkins, clock, enabled=checkins)
        self.handlers: dict[str, Handler] = {
            "start": self.start,
            "help": self.help,
            "profile": self.profile,
            "language": self.language,
            "level": self.level,
            "corrections": self.corrections,
            "review": self.start_review,
            "progress": self.progress,
            "voice": self.voice,
            "checkins": lambda learner, command: self.checkins.checkins_command(
                learner, command.args
            ),
            "timezone": lambda learner, command: self.checkins.timezone_command(
                learner, command.args
            ),
        }

    def handle(self, learner: LearnerInfo, command: Command) -> str | CommandAnswer:
        """The answer to `command`."""
        handler = self.handlers.get(command.name)
        native = native_of(learner)
        if handler is None:
            say = phrases.words(native)
            unknown = say("I don't know the command /{command}.", command=command.name[:40])
            return f"{unknown}\n{phrases.help_text(native)}"
        if command.group is not None and command.name in PRIVATE:
            link = command.group.private_chat_link(command.name)
            return phrases.private_only(native, link)
        return handler(learner, command)

    def _settings_of(self, learner: LearnerInfo) -> str:
        """The settings line for `learner`, with what Pam has learned about them."""
        return _settings_line(learner, self.store.memory.profile(learner.id).data)

    def start(self, learner: LearnerInfo, command: Command) -> str | CommandAnswer:
        """/start: the welcome, with the learner's settings. `/start profile` (a group's
        link into the private chat says it) is /profile, and so for each of PRIVATE."""
        if command.group is None and len(command.args) == 1 and command.args[0] in PRIVATE:
            return self.handle(learner, replace(command, name=command.args[0], args=[]))
        learned = self.store.memory.profile(learner.id).data
        lines = (_settings_line(learner, learned), _voice_line(learner))
        # While the learner has not said yes or no; never in a group, where none would come.
        offer = self.checkins.offer(learner) if command.group is None else None
        settings = "\n".join((*lines, density_line(learner, learned), *([offer] if offer else [])))
        guessed = learner.native_language is None and learner.native_guess is not None
        return phrases.welcome(native_of(learner), settings, guessed)

    def help(self, learner: LearnerInfo, command: Command) -> str:
        """/help: the commands."""
        return phrases.help_text(native_of(learner))

    def start_review(self, learner: LearnerInfo, command: Command) -> str:
        """/review: practise the due items one at a time (no LLM call: the exercises are
        templated), or when the next one is due."""
        return self.review.start(learner)

    def language(self, learner: LearnerInfo, command: Command) -> str:
        """/language <target> [native]: the languages to practise and to explain in."""
        return set_languages(self.store.learners, learner, command.args, self._settings_of)

    def level(self, learner: LearnerInfo, command: Command) -> str:
        """/level <A1…C2, a word, a range>: the learner's CEFR level."""
        return set_level(self.store.learners, learner, command.args, self._settings_of)

    def corrections(self, learner: LearnerInfo, command: Command) -> str:
        """/corrections few|normal|all: how many of the learner's mistakes a reply points out
        (bot/turn/density.py); the Fewer corrections button says /corrections few."""
        return set_density(self.store, learner, command.args)

    def progress(self, learner: LearnerInfo, command: Command) -> CommandAnswer:
        """/progress: the chart of the learner's last weeks, stored for delivery, and its
        summary in the learner's native language as the caption. The chart is drawn where it
        is delivered (bot/review/progress.py, drawn), after this turn: drawing takes a while (a
        fresh process loads matplotlib), and the learner's next message must not wait."""
        found = progress(self.store.charts.engine, learner.id, self.clock())
        caption = summary(found, native_of(learner))
        chart_id, _ = self.store.charts.save(learner.id, NOT_DRAWN, caption)
        return CommandAnswer(caption, chart_id)

    def voice(self, learner: LearnerInfo, command: Command) -> str:
        """/voice on|off: Pam's replies spoken too (their chat part), or not."""
        say = phrases.words(native_of(learner))
        choice = command.args[0].lower() if len(command.args) == 1 else ""
        if choice not in ("on", "off"):
            return f"{say(phrases.VOICE_USAGE)} {_voice_line(learner)}"
        if choice == "on" and not self.voice_enabled:
            return say(phrases.VOICE_UNAVAILABLE)
        self.store.learners.update_settings(learner.id, voice_replies=choice == "on")
        done = phrases.VOICE_ON if choice == "on" else phrases.VOICE_OFF
        return say(done)

    def profile(self, learner: LearnerInfo, command: Command) -> str:
        """Everything Pam keeps about the learner, in words, in their native language."""
        say = phrases.words(native_of(learner))
        profile = self.store.memory.profile(learner.id)
        summary = self.store.memory.summary(learner.id)
        unfolded, _ = self.store.conversation.unfolded_tokens(learner.id)
        corrections = self.store.ledger.corrections(learner.id, limit=5)
        # A learned language or level beside the one the learner set: theirs is shown alone.
        doc = document(replace(profile, data=settled(profile.data, learner)))
        lines = [say("Here's what I know about you:"), "", _settings_line(learner, profile.data)]
        lines.append(_voice_line(learner))
        # The density learned from the chat is said with the setting it stands in for.
        lines.append(density_line(learner, profile.data))
        learned = [
            f"• {say(LABELS[key])}: {_learned_value(say, key, value)}"
            for key in FIELDS
            if key in LABELS and (value := doc.get(key))
        ]
        if learned:
            lines += ["", *learned]
            if profile.messages_processed and profile.updated_at:
                when = _when(say, profile.updated_at)
                lines.append(
                    say.plural(
                        "(learned from {count} of your messages, last updated {when})",
                        "(learned from {count} of your messages, last updated {when})",
                        profile.messages_processed,
                        when=when,
                    )
                )
        else:
            lines += ["", say("I haven't learned anything about you yet — tell me about yourself!")]
        lines.append("")
        if summary.folds and summary.updated_at:
            when = _when(say, summary.updated_at)
            lines.append(
                say.plural(
                    "Our earlier conversation is kept as a summary (updated once, {when}):",
                    "Our earlier conversation is kept as a summary (updated {count} times, last "
                    "{when}):",
                    summary.folds,
                    when=when,
                )
            )
            lines.append(summary.text)
        elif summary.folds:
            lines.append(say("Our earlier conversation is kept as a summary:"))
            lines.append(summary.text)
        else:
            lines.append(
                say("There's no summary yet: I still remember our whole chat word for word.")
            )
        if unfolded:
            lines.append(self._window_line(say, unfolded))
        if corrections:
            lines += ["", say("Recent corrections:")]
            lines += [f"✏️ {c.original} → {c.corrected}" for c in corrections]
        lines += ["", say("Use /forget to erase all of this.")]
        return "\n".join(lines)

    def _window_line(self, say: Words, unfolded: int) -> str:
        """How many messages Pam keeps word for word: the newest `window` always; those
        beyond it stay word for word too until the next summary takes them (a fold waits
        for enough of them and enough tokens, memory/jobs/summary.py)."""
        kept = min(unfolded, self.window)
        line = say.plural(
            "I keep our last message word for word.",
            "I keep our last {count} messages word for word.",
            kept,
        )
        if unfolded <= self.window:
            return line
        waiting = say.plural(
            "{count} older one is waiting to be summarised.",
            "{count} older ones are waiting to be summarised.",
            unfolded - self.window,
        )
        return f"{line} {waiting}"
