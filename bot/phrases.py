"""What Pam says outside the conversation itself: help, confirmations, apologies."""

from __future__ import annotations

HELP = """Here's what I understand:
/language <language> [native language] — what you want to practise, e.g. /language Spanish English
/level <A1–C2> — your level, e.g. /level B1
/profile — what I know about you
/forget — erase everything I know about you
/help — this list

Anything else you write, I answer like a friend, and I point out mistakes along the way."""

WELCOME = (
    """Hi, I'm Pam! 👋 I'm a friend who speaks the language you're learning.
We just chat, and I gently correct your mistakes as we go.

{settings}

"""
    + HELP
)

NEEDS_LANGUAGE = (
    "Tell me which language you want to practise with /language, e.g. /language Spanish English."
)

FORGOTTEN = (
    "Done — I've erased everything I knew about you: our messages, the summary, your profile, "
    "your corrections and usage. If you write again, we start fresh."
)

TOO_LONG = (
    "That's a long message! 😅 Could you send it in smaller parts (under {limit} characters "
    "each)? Then I can answer properly."
)

# Said in the target language when the LLM stays unreachable; the message itself is kept.
APOLOGIES = {
    "English": "Sorry, my head is a bit foggy right now 😅 Give me a minute and write again?",
    "Spanish": "Perdona, ahora mismo estoy un poco espeso 😅 ¿Me escribes otra vez en un minuto?",
    "French": "Désolée, j'ai un petit bug dans la tête 😅 Tu peux me réécrire dans une minute ?",
    "German": "Sorry, ich bin gerade etwas durcheinander 😅 Schreibst du mir gleich nochmal?",
    "Italian": "Scusa, ho la testa un po' tra le nuvole 😅 Mi riscrivi tra un minuto?",
    "Portuguese": "Desculpa, estou meio confusa agora 😅 Me escreve de novo daqui a um minuto?",
    "Dutch": "Sorry, ik ben even de draad kwijt 😅 Stuur je het zo nog een keer?",
}


def apology(target_language: str | None) -> str:
    """A short apology, in the learner's target language when Pam knows it."""
    base = (target_language or "English").split(" (")[0]
    return APOLOGIES.get(base, APOLOGIES["English"])
