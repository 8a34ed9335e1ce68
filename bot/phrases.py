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
    return _in(target_language, APOLOGIES)


# Answers to what Pam cannot read yet, in the target language: voice notes, and other media
# (photos, stickers, documents, locations, contacts, polls).
NOT_TEXT = {
    "voice": {
        "English": "I can only read text for now — could you write that to me? 🙂",
        "Spanish": "Por ahora solo puedo leer texto — ¿me lo escribes? 🙂",
        "French": "Pour l'instant je ne lis que le texte — tu peux me l'écrire ? 🙂",
        "German": "Ich kann im Moment nur Text lesen — schreibst du es mir? 🙂",
        "Italian": "Per ora leggo solo il testo — me lo scrivi? 🙂",
        "Portuguese": "Por enquanto só consigo ler texto — você me escreve? 🙂",
        "Dutch": "Ik kan voorlopig alleen tekst lezen — schrijf je het me? 🙂",
    },
    "media": {
        "English": "I can't see that — I only read text for now. Tell me about it in words? 🙂",
        "Spanish": "No puedo verlo — por ahora solo leo texto. ¿Me lo cuentas con palabras? 🙂",
        "French": "Je ne peux pas le voir — je ne lis que le texte. Tu me le décris ? 🙂",
        "German": "Das kann ich nicht sehen — ich lese nur Text. Beschreibst du es mir? 🙂",
        "Italian": "Non riesco a vederlo — leggo solo testo. Me lo descrivi a parole? 🙂",
        "Portuguese": "Não consigo ver isso — só leio texto. Me conta com palavras? 🙂",
        "Dutch": "Dat kan ik niet zien — ik lees alleen tekst. Vertel je het in woorden? 🙂",
    },
}


def _in(language: str | None, texts: dict[str, str]) -> str:
    base = (language or "English").split(" (")[0]
    return texts.get(base, texts["English"])


def not_text(kind: str, target_language: str | None) -> str:
    """The friendly answer to a voice note or other media, in the target language."""
    return _in(target_language, NOT_TEXT["voice" if kind == "voice" else "media"])
