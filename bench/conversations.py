"""Scripted learners for the token benchmark, generated deterministically from fixed seeds:
a Spanish learner and a German learner who chat about their lives (5–40 words a message, some
with typical mistakes), and a 50-message chat that is mostly "ok", "jaja" and 👍."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

MIN_WORDS, MAX_WORDS = 5, 40


@dataclass(frozen=True)
class Mistake:
    """A typical learner mistake: the wrong fragment, its correction, and why."""

    wrong: str
    right: str
    category: str
    explanation: str


@dataclass(frozen=True)
class Learner:
    """One scripted learner: who they are and what their sentences are made of."""

    external_id: str
    name: str
    target: str
    native: str
    level: str
    sentences: tuple[str, ...]
    openers: tuple[str, ...]
    slots: dict[str, tuple[str, ...]]
    mistakes: tuple[Mistake, ...]
    seed: int
    replies: tuple[str, ...] = field(default=())


SPANISH = Learner(
    external_id="bench:tom",
    name="Tom",
    target="Spanish",
    native="English",
    level="A2",
    seed=11,
    openers=("¡Hola Pam!", "Bueno,", "Oye,", "Pues", "Jaja,", "Buenas,", "Mira,", ""),
    sentences=(
        "Hoy trabajé mucho en la oficina y ahora estoy muy cansado.",
        "El {day} voy a {place} con {person}.",
        "Me gusta mucho cocinar {food} los fines de semana.",
        "Mi hermana vive en {place} y la visito cada mes.",
        "Esta semana empecé a {activity} por las tardes.",
        "Ayer yo voy al cine con {person} y la película fue muy larga.",
        "Yo es profesor de inglés en una escuela pequeña.",
        "Tengo {number} años y vivo en Manchester con mi novia.",
        "La problema es que no tengo tiempo para practicar.",
        "Quiero viajar a {place} en verano porque nunca estuve allí.",
        "Mi jefe es simpático pero a veces habla demasiado rápido.",
        "¿Tú qué haces normalmente los domingos?",
        "Estoy aprendiendo español porque mi novia es de {place}.",
        "El fin de semana pasado comí {food} en un restaurante nuevo.",
        "Mañana tengo una reunión muy importante a las nueve.",
        "No me gusta el invierno, prefiero el calor y la playa.",
        "Mi perro se llama Rufus y tiene {number} años.",
        "Cuando era niño jugaba al fútbol todos los días.",
        "Estoy muy emocionado por el viaje a {place}.",
        "Creo que mi español es mejor que hace un mes.",
        "Ayer llovió todo el día y me quedé en casa leyendo.",
        "Mi madre cocina {food} mejor que nadie.",
        "Necesito comprar un regalo para el cumpleaños de {person}.",
        "Los verbos irregulares son muy difícil para mí.",
        "Me levanto a las seis porque el tren sale temprano.",
        "A mí me gustan las películas de terror, ¿y a ti?",
        "Estoy leyendo un libro sobre la historia de {place}.",
        "El próximo mes quiero {activity} con {person}.",
        "Hace mucho calor hoy, casi treinta grados.",
        "Mi novia dice que hablo como un turista, jaja.",
    ),
    slots={
        "day": ("sábado", "domingo", "viernes", "lunes"),
        "place": ("Sevilla", "Madrid", "Valencia", "México", "Bilbao", "Granada"),
        "person": ("mi novia", "mi hermano", "unos amigos", "mis padres", "mi compañero"),
        "food": ("paella", "tortilla", "tacos", "gazpacho", "pescado"),
        "activity": ("correr", "nadar", "tocar la guitarra", "bailar salsa", "hacer yoga"),
        "number": ("tres", "cinco", "siete", "treinta y dos"),
    },
    mistakes=(
        Mistake("yo voy al cine", "fui al cine", "conjugation", "Ayer → past tense: fui."),
        Mistake("Yo es", "Soy", "conjugation", "With yo, ser is soy."),
        Mistake("La problema", "El problema", "gender", "Problema is masculine."),
        Mistake("muy difícil", "muy difíciles", "grammar", "The adjective agrees: plural."),
    ),
    replies=(
        "¡Qué bien, Tom!",
        "Yo también estoy un poco cansada hoy, tuve mucho trabajo en el café.",
        "Me encanta esa idea, suena muy divertido.",
        "En mi ciudad hace sol casi todo el año, así que salgo mucho.",
        "El fin de semana pasado fui a la playa con mi prima.",
        "Tu español mejora cada semana, de verdad.",
        "Creo que vas a disfrutar mucho ese viaje.",
        "A mí también me gusta cocinar, sobre todo platos sencillos.",
        "¿Qué vas a hacer después?",
        "¿Y cómo te sientes con eso?",
        "¿Qué es lo que más te gusta de tu trabajo?",
        "¿Ya sabes con quién vas a ir?",
    ),
)

GERMAN = Learner(
    external_id="bench:lucia",
    name="Lucía",
    target="German",
    native="Spanish",
    level="B1",
    seed=23,
    openers=("Hallo Pam!", "Also,", "Na ja,", "Haha,", "Hey,", "Weißt du,", ""),
    sentences=(
        "Heute hatte ich einen langen Tag in der Klinik.",
        "Am {day} fahre ich mit {person} nach {place}.",
        "Ich koche am Wochenende gern {food} für meine Freunde.",
        "Meine Schwester wohnt in {place} und ich besuche sie oft.",
        "Seit dieser Woche gehe ich abends {activity}.",
        "Gestern ich bin ins Kino gegangen und der Film war sehr gut.",
        "Ich arbeite als Ärztin in einem Krankenhaus in Sevilla.",
        "Ich bin {number} Jahre alt und wohne mit zwei Katzen zusammen.",
        "Das Problem ist, dass ich keine Zeit für Grammatik habe.",
        "Im Sommer möchte ich nach {place} reisen, weil ich dort nie war.",
        "Meine Chefin ist nett, aber sie spricht sehr schnell.",
        "Was machst du normalerweise am Sonntag?",
        "Ich lerne Deutsch, weil ich nächstes Jahr in {place} arbeiten will.",
        "Letztes Wochenende habe ich {food} in einem neuen Restaurant gegessen.",
        "Morgen habe ich eine wichtige Prüfung um neun Uhr.",
        "Ich mag den Winter nicht, ich bevorzuge Sonne und Strand.",
        "Ich habe gestern mit der Bus zur Arbeit gefahren.",
        "Als Kind habe ich jeden Tag Klavier gespielt.",
        "Ich freue mich sehr auf die Reise nach {place}.",
        "Ich glaube, mein Deutsch ist besser als vor einem Monat.",
        "Gestern hat es den ganzen Tag geregnet und ich bin zu Hause geblieben.",
        "Meine Mutter kocht {food} besser als alle anderen.",
        "Ich muss ein Geschenk für den Geburtstag von {person} kaufen.",
        "Die Artikel sind für mich sehr schwer, besonders die Dativ.",
        "Ich stehe um sechs Uhr auf, weil mein Dienst früh beginnt.",
        "Ich mag Krimis sehr gern, und du?",
        "Ich lese gerade ein Buch über die Geschichte von {place}.",
        "Nächsten Monat will ich mit {person} {activity}.",
        "Heute ist es sehr heiß, fast fünfunddreißig Grad.",
        "Mein Freund sagt, ich spreche Deutsch wie eine Touristin, haha.",
    ),
    slots={
        "day": ("Samstag", "Sonntag", "Freitag", "Montag"),
        "place": ("Berlin", "München", "Hamburg", "Wien", "Köln", "Leipzig"),
        "person": ("meinem Freund", "meiner Schwester", "ein paar Kollegen", "meinen Eltern"),
        "food": ("Paella", "Tortilla", "Linsensuppe", "Gazpacho", "Fisch"),
        "activity": ("joggen", "schwimmen", "tanzen", "klettern", "Yoga machen"),
        "number": ("neunundzwanzig", "einunddreißig", "vierunddreißig"),
    },
    mistakes=(
        Mistake("Gestern ich bin", "Gestern bin ich", "word-order", "Verb second: bin ich."),
        Mistake(
            "habe ich gestern mit der Bus",
            "bin gestern mit dem Bus",
            "grammar",
            "Fahren takes sein; der Bus → mit dem Bus (dative).",
        ),
        Mistake("die Dativ", "der Dativ", "gender", "Dativ is masculine: der Dativ."),
    ),
    replies=(
        "Das klingt wirklich toll, Lucía!",
        "Ich hatte heute auch viel zu tun, aber jetzt sitze ich gemütlich auf dem Balkon.",
        "Die Idee gefällt mir sehr gut.",
        "Bei uns regnet es gerade fast jeden Tag, deshalb lese ich viel.",
        "Letztes Wochenende war ich mit meiner Cousine am See.",
        "Dein Deutsch wird wirklich jede Woche besser.",
        "Ich glaube, die Reise wird dir gefallen.",
        "Ich koche auch gern, am liebsten einfache Gerichte.",
        "Was machst du danach?",
        "Und wie fühlst du dich dabei?",
        "Was gefällt dir an deiner Arbeit am meisten?",
        "Weißt du schon, mit wem du fährst?",
    ),
)

LEARNERS = (SPANISH, GERMAN)


def word_count(text: str) -> int:
    """Words as a reader counts them."""
    return len(text.split())


def _fill(sentence: str, learner: Learner, rng: random.Random) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: rng.choice(learner.slots[m.group(1)]), sentence)


def learner_messages(learner: Learner, turns: int) -> list[str]:
    """`turns` messages of 5–40 words, the same every run (seeded per learner)."""
    rng = random.Random(learner.seed)
    messages: list[str] = []
    for _ in range(turns):
        wanted = rng.choices((1, 2, 3, 4), weights=(3, 4, 2, 1))[0]
        parts = [_fill(s, learner, rng) for s in rng.sample(learner.sentences, wanted)]
        opener = rng.choice(learner.openers)
        if opener and not opener.endswith("!"):  # "Oye, mi perro…", not "Oye, Mi perro…"
            parts[0] = parts[0][0].lower() + parts[0][1:]
        text = " ".join([opener, *parts]).strip()
        while word_count(text) > MAX_WORDS:
            parts.pop()
            text = " ".join([opener, *parts]).strip()
        if word_count(text) < MIN_WORDS:
            text = f"{text} {_fill(rng.choice(learner.sentences), learner, rng)}"
        messages.append(text)
    return messages


def corrections_for(learner: Learner, text: str) -> list[dict[str, str]]:
    """The corrections a good tutor makes to `text` (the script knows its own mistakes)."""
    found = []
    for mistake in learner.mistakes:
        at = text.casefold().find(mistake.wrong.casefold())
        if at != -1:
            written = text[at : at + len(mistake.wrong)]
            right = (
                mistake.right
                if written[0].isupper()
                else mistake.right[0].lower() + mistake.right[1:]
            )
            found.append(
                {
                    "original": written,
                    "corrected": right,
                    "explanation": mistake.explanation,
                    "category": mistake.category,
                }
            )
    return found[:3]


# The 50-message chat: 40 messages that say nothing (in the languages learners mix) and
# 10 that say a lot, told the way people tell things: in bursts of two or three messages.
LOW_INFO_CHAT: tuple[tuple[bool, str], ...] = (
    (False, "hola!"),
    (True, "Hoy fue mi primer día en el hospital nuevo de Valencia, soy enfermera en urgencias."),
    (True, "Mis compañeros son simpáticos, pero el turno de noche es muy duro para mí."),
    (False, "jaja"),
    (False, "sí"),
    (False, "ok"),
    (False, "gracias!"),
    (False, "👍"),
    (False, "vale vale"),
    (False, "jajaja"),
    (False, "claro"),
    (True, "El sábado voy a correr mi primera media maratón con mi hermano Daniel."),
    (True, "Entrenamos tres veces por semana en el parque del Turia, pero me duele la rodilla."),
    (True, "Mi objetivo es terminar en menos de dos horas, aunque no sé si es posible."),
    (False, "haha"),
    (False, "thanks"),
    (False, "ok 👍"),
    (False, "genial"),
    (False, "😂😂"),
    (False, "buenas noches"),
    (False, "hola"),
    (False, "sí sí"),
    (False, "jeje"),
    (False, "ok"),
    (False, "danke"),
    (True, "Terminé la media maratón en una hora y cincuenta y ocho minutos, ¡estoy feliz!"),
    (False, "jajaja"),
    (False, "gracias"),
    (False, "👍👍"),
    (False, "vale"),
    (False, "claro que sí"),
    (False, "ok"),
    (True, "Mi novio Marco es italiano y quiere que aprenda también un poco de italiano."),
    (True, "Vamos a visitar a su familia en Turín en diciembre, y tengo miedo de no entender."),
    (False, "jaja"),
    (False, "sí"),
    (False, "👌"),
    (False, "perfecto"),
    (False, "muchas gracias"),
    (False, "ok"),
    (False, "buenos días"),
    (False, "hola Pam"),
    (False, "bien bien"),
    (False, "jajaja"),
    (False, "🙂"),
    (False, "ok"),
    (True, "Necesito practicar el pretérito indefinido, siempre lo confundo con el imperfecto."),
    (True, "Mi examen DELE B2 es en mayo, así que quiero estudiar una hora cada día."),
    (False, "gracias!"),
    (False, "chao"),
)
