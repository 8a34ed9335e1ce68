"""The words that make Pam search a learner's past on its own (PAM_RECALL=auto): phrases that
refer to earlier conversations, per language learners practise, and the capitalised words
that are no names. Data only; bot/turn/recall.py matches them accent- and case-insensitively, as
whole words, so write them in any case and with or without accents."""

from __future__ import annotations

# A question with one of these words is about the learner themselves ("¿Dónde viven mis
# papás?", "When is my exam?", "Wo arbeite ich gerade?"): they ask Pam what they told it.
# First person singular pronouns and possessives, and the commonest first-person verbs (a
# question about the asker often has no pronoun: "¿Dónde estoy trabajando?"). Left out: words
# that are also nouns or third person ("trabajo", "lavoro", "era", "war"), and words that
# mean something else in another language here (French "ma" is Italian "but", "ai" "to the").
ABOUT_ME: dict[str, str] = {
    "en": "my i me mine myself",
    "es": "mi mis yo mío mía conmigo estoy soy tengo voy hago vivo quiero puedo necesito sé "
    "digo pongo salgo sigo suelo cumplo tuve fui hice estuve dije vi",
    "de": "mein meine meinen meinem meiner meines ich mich mir bin habe arbeite wohne",
    "fr": "mon mes je j'ai moi suis vais habite travaille",
    "it": "mio miei mie io sono ho vado abito",
    "pt": "meu minha meus minhas eu mim comigo estou sou tenho vou moro",
}
# ...unless it speaks to Pam ("Me gusta el cine, ¿y a ti?", "Ich mag Krimis, und du?"): then
# it asks about Pam. Matched with their accents ("te" is you, "té" is tea).
TO_YOU: dict[str, str] = {
    "en": "you your yours",
    "es": "tú ti te tu tus contigo usted vos",
    "de": "du dich dir dein deine deinen deinem deiner",
    "fr": "toi ton ta tes vous votre",
    "it": "tuo tua tuoi tue",
    "pt": "você teu tua teus",
}

# A message that contains one of these refers to something said before.
PAST_PHRASES: dict[str, tuple[str, ...]] = {
    "en": (
        "remember",
        "remind me",
        "last time",
        "you told me",
        "i told you",
        "i mentioned",
        "i said before",
        "we talked about",
        "last week",
        "last month",
        "the other day",
    ),
    "es": (
        "te acuerdas",
        "te acordás",
        "recuerdas",
        "se acuerda",
        "la última vez",
        "la semana pasada",
        "el mes pasado",
        "el otro día",
        "te dije",
        "me dijiste",
        "te conté",
        "te hablé",
        "hablamos de",
        "aquella vez",
        "aquel día",
    ),
    "de": (
        "erinnerst du dich",
        "weißt du noch",
        "letzte woche",
        "letzten monat",
        "letztes mal",
        "das letzte mal",
        "ich habe dir erzählt",
        "ich hab dir erzählt",
        "hab ich dir erzählt",
        "habe ich dir erzählt",
        "ich habe dir gesagt",
        "du hast mir gesagt",
        "du hast mir erzählt",
        "neulich",
    ),
    "fr": (
        "tu te souviens",
        "tu te rappelles",
        "vous vous souvenez",
        "la dernière fois",
        "la semaine dernière",
        "le mois dernier",
        "l'autre jour",
        "je t'ai dit",
        "je t'ai parlé",
        "je t'ai raconté",
        "tu m'as dit",
    ),
    "it": (
        "ti ricordi",
        "ricordi",
        "l'ultima volta",
        "la settimana scorsa",
        "il mese scorso",
        "l'altro giorno",
        "ti ho detto",
        "ti ho raccontato",
        "mi hai detto",
    ),
    "pt": (
        "você se lembra",
        "você lembra",
        "se lembra",
        "lembra",
        "lembras",
        "te lembras",
        "da última vez",
        "a última vez",
        "semana passada",
        "mês passado",
        "outro dia",
        "te disse",
        "eu te falei",
        "te contei",
        "você me disse",
    ),
}

# Capitalised words that name nothing the learner could have told Pam about: the pronoun "I",
# and the days, months and languages English and German capitalise.
NOT_NAMES: frozenset[str] = frozenset(
    {
        "i",
        "i'm",
        "i've",
        "i'll",
        "i'd",
        "ok",
        "okay",
        "pam",
        # English
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        # German
        "montag",
        "dienstag",
        "mittwoch",
        "donnerstag",
        "freitag",
        "samstag",
        "sonntag",
        "januar",
        "februar",
        "marz",
        "mai",
        "juni",
        "juli",
        "oktober",
        "dezember",
        "hallo",
        "danke",
        # languages, in English and German
        "english",
        "spanish",
        "german",
        "french",
        "italian",
        "portuguese",
        "englisch",
        "spanisch",
        "deutsch",
        "franzosisch",
        "italienisch",
        "portugiesisch",
    }
)

# A name right after one of these is being introduced ("me llamo Lena", "my dog is called
# Toby", "ich bin Jonas"): news for Pam, not a reference to something said before.
INTRODUCING: frozenset[str] = frozenset(
    {
        # English
        "am",
        "i'm",
        "is",
        "called",
        "named",
        # Spanish
        "soy",
        "es",
        "llamo",
        "llama",
        "llamado",
        "llamada",
        # German
        "bin",
        "heiße",
        "heißt",
        "namens",
        # French
        "suis",
        "m'appelle",
        "s'appelle",
        "appelle",
        # Italian
        "sono",
        "chiamo",
        "chiama",
        # Portuguese
        "sou",
        "chamo",
        "chama",
        "chamado",
        "chamada",
    }
)

# German capitalises every noun: a capitalised word after one of these is a noun, no name.
GERMAN_DETERMINERS: frozenset[str] = frozenset(
    {
        "der",
        "die",
        "das",
        "den",
        "dem",
        "des",
        "ein",
        "eine",
        "einen",
        "einem",
        "einer",
        "eines",
        "kein",
        "keine",
        "keinen",
        "mein",
        "meine",
        "meinen",
        "meinem",
        "meiner",
        "dein",
        "deine",
        "deinen",
        "deinem",
        "sein",
        "seine",
        "seinen",
        "ihr",
        "ihre",
        "ihren",
        "unser",
        "unsere",
        "im",
        "am",
        "zum",
        "zur",
        "vom",
        "beim",
        "ins",
        "ans",
        "viel",
        "viele",
        "gute",
        "guten",
    }
)
