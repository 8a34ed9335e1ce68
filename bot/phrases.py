"""What Pam says outside the conversation itself: help, confirmations, apologies, the notes on
limits and on media she cannot read. All of it in the learner's NATIVE language (English when
Pam does not know it), from the "commands" catalog (bot/i18n): the chat and its corrections
stay in the target language, but a learner must understand what Pam says about the chat.

Each text is marked `N_` where it is defined and said with `said(TEXT, native, …)`, where
`native` is `native_of(learner)`."""

from __future__ import annotations

from babel import Locale, UnknownLocaleError

from bot.i18n import N_, Words, words_for
from memory.language_names import language_of

DOMAIN = "commands"


def words(native: str | None) -> Words:
    """Pam's words of this catalog for a learner whose native language is `native` (a name,
    "German", or a code, "de")."""
    return words_for(native, DOMAIN)


def said(text: str, native: str | None, /, **values: object) -> str:
    """`text` (one of the N_ texts) in the native language `native`, its placeholders filled."""
    return words(native)(text, **values)


def language_in(say: Words, language: str) -> str:
    """A language's name (an English name as Pam stores it, "Portuguese (Brazil)") as the
    learner's locale writes it ("Portugiesisch (Brasilien)"); as stored when CLDR has none."""
    found = language_of(language)
    if found is None:
        return language
    try:
        return str(Locale.parse(str(found), sep="-").get_display_name(say.cldr) or language)
    except (UnknownLocaleError, ValueError):
        return language


# /help: the commands, one line each (a command added is one text more for the translators).
HELP_INTRO = N_("Here's what I understand:")
HELP_LINES = (
    N_(
        "/language <language> [native language] — what you want to practise, e.g. "
        "/language Spanish English"
    ),
    N_("/level <A1–C2> — your level, e.g. /level B1"),
    N_("/corrections few|normal|all — how many of your mistakes I point out"),
    N_("/translate — my last message in your language"),
    N_("/explain — my corrections explained in your language"),
    N_("/say — my last message spoken (again: slower)"),
    N_("/profile — what I know about you"),
    N_("/review — practise the mistakes that are due"),
    N_("/progress — a chart of your last weeks: corrections, patterns learned, days practised"),
    N_("/voice on|off — my replies as voice messages too (send me voice notes any time)"),
    N_("/checkins on|off — whether I write to you first now and then"),
    N_("/timezone <zone> — your time zone, e.g. /timezone Europe/Madrid"),
    N_("/forget — erase everything I know about you (I ask first)"),
    N_("/help — this list"),
)
HELP_OUTRO = N_(
    "Anything else you write, I answer like a friend, and I point out mistakes along the way."
)


def help_text(native: str | None) -> str:
    """/help's answer: every command, in the learner's native language."""
    say = words(native)
    lines = [say(HELP_INTRO), *(say(line) for line in HELP_LINES), "", say(HELP_OUTRO)]
    return "\n".join(lines)


WELCOME = N_(
    "Hi, I'm Pam! 👋 I'm a friend who speaks the language you're learning.\n"
    "We just chat, and I gently correct your mistakes as we go."
)
# /start, while Pam only guessed the native language from the learner's app or number.
GUESSED_NATIVE = N_(
    "I guessed that your native language is {native}, so I write my own notes in it. If it "
    "isn't, tell me: /language <language you practise> <your native language>."
)


def welcome(native: str | None, settings: str, guessed: bool = False) -> str:
    """/start's answer: who Pam is, the learner's `settings` (already in their language), a
    word on the native language Pam `guessed`, and the commands."""
    say = words(native)
    parts = [say(WELCOME), settings]
    if guessed and native:
        parts.append(say(GUESSED_NATIVE, native=language_in(say, native)))
    return "\n\n".join([*parts, help_text(native)])


NEEDS_LANGUAGE = N_(
    "Tell me which language you want to practise with /language, e.g. /language Spanish English."
)

FORGOTTEN = N_(
    "Done — I've erased everything I knew about you: our messages, the summary, your profile, "
    "your corrections and usage. If you write again, we start fresh."
)

# /forget in a group: only what Pam keeps of the member from that group is erased.
FORGOTTEN_IN_GROUP = N_(
    "Done — I've erased what I knew about you from this group: our messages here, the "
    "summary, your profile, corrections and usage. Our private chat is untouched (/forget "
    "there erases it)."
)

# /profile, /review and /progress in a group: what Pam knows of one learner is not shown to
# the group; the private chat's link follows when Pam knows it.
PRIVATE_ONLY = N_("That stays between you and me 🙂 Ask me in our private chat!")


def private_only(native: str | None, link: str | None) -> str:
    """The note that a command about the learner alone is answered in private, with the
    link to the private chat when there is one."""
    note = said(PRIVATE_ONLY, native)
    return f"{note}\n{link}" if link else note


TOO_LONG = N_(
    "That's a long message! 😅 Could you send it in smaller parts (under {limit} characters "
    "each)? Then I can answer properly."
)

# When the LLM stays unreachable; the message itself is kept.
APOLOGY = N_("Sorry, my head is a bit foggy right now 😅 Give me a minute and write again?")


def apology(native: str | None) -> str:
    """A short apology, in the learner's native language."""
    return said(APOLOGY, native)


# Answers to what Pam cannot read yet: voice notes (when they are off), and other media
# (photos, stickers, documents, locations, contacts, polls).
NOT_VOICE = N_("I can only read text for now — could you write that to me? 🙂")
NOT_MEDIA = N_("I can't see that — I only read text for now. Tell me about it in words? 🙂")


def not_text(kind: str, native: str | None) -> str:
    """The friendly answer to a voice note or other media, in the native language."""
    return said(NOT_VOICE if kind == "voice" else NOT_MEDIA, native)


# Cost and abuse limits: too many messages a minute, the learner's daily token budget, the
# operator's daily budget for everyone.
SLOW_DOWN = N_("Whoa, that's a lot of messages at once! 😅 Give me a minute to catch up?")
LEARNER_BUDGET = N_("We've chatted a lot today — I need a rest! 😴 Let's talk again tomorrow?")
SERVICE_BUDGET = N_("I'm taking a little break right now 😴 — please write again later!")

# When the model refuses to answer or its provider's content filter stops the answer: a light
# change of subject (the provider's reason goes to the log only).
REFUSED = N_("Hmm, I'd rather not talk about that 🙂 Shall we chat about something else?")

# Voice notes Pam could not listen to (the note itself is kept, as a voice note not
# transcribed). "{minutes}" is the length cap.
VOICE_TOO_LONG = N_(
    "That voice note is a bit long for me 😅 Could you keep it under {minutes} minutes?"
)
VOICE_UNREADABLE = N_("I couldn't play that voice note 🙉 Could you record it again?")
VOICE_NO_SOUND = N_("I can't hear anything in that video 🙉 Try a voice note, or tell me in words?")
VOICE_SILENT = N_("I couldn't hear any words in that one 🤔 Could you say it again, a bit closer?")
VOICE_FAILED = N_(
    "Sorry, I can't listen to voice notes right now 😅 Could you write it, or send it again later?"
)

# /voice: spoken replies on and off.
VOICE_ON = N_(
    "🔊 Voice replies are on: I'll send my answers as voice messages too (corrections stay "
    "in writing). /voice off to stop."
)
VOICE_OFF = N_("🔇 Voice replies are off: I'll answer in writing only. /voice on to hear me again.")
VOICE_UNAVAILABLE = N_(
    "🔇 Voice replies aren't available here yet, so I'll keep answering in writing."
)
VOICE_USAGE = N_("Say /voice on to get my replies as voice messages too, or /voice off to stop.")

# Telegram's command menu (setMyCommands, per language_code): each command and what it does.
MENU = (
    ("start", N_("Say hello and see your settings")),
    ("help", N_("What Pam understands")),
    ("language", N_("What you practise: /language Spanish English")),
    ("level", N_("Your level: /level A2")),
    ("profile", N_("What Pam knows about you")),
    ("review", N_("Practise the mistakes that are due")),
    ("progress", N_("A chart of your last weeks")),
    ("voice", N_("Replies as voice messages: /voice on or /voice off")),
    ("checkins", N_("Pam writes first now and then: /checkins on or /checkins off")),
    ("forget", N_("Erase everything Pam knows about you")),
)


def menu(locale: str) -> list[tuple[str, str]]:
    """The command menu in `locale` (one of bot.i18n.LOCALES, as Telegram's language_code
    names it: "de")."""
    say = words(locale)
    return [(command, say(description)) for command, description in MENU]
