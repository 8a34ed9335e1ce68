"""Scripted learners for the token benchmark, generated deterministically from fixed seeds:
a Spanish (A2) and a German (B1) learner who chat about their lives in 5–40 words a message, a
French (B2) learner who writes paragraphs of 40–120 words about work, family, plans and
opinions (all with typical mistakes of their level), and a 50-message chat that is mostly "ok",
"jaja" and 👍."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

MIN_WORDS, MAX_WORDS = 5, 40
LONG_MIN_WORDS, LONG_MAX_WORDS = 40, 120


@dataclass(frozen=True)
class Mistake:
    """A typical learner mistake: the wrong fragment, its correction, why, and the name of
    its pattern as a tutor model gives it (the same each time it recurs)."""

    wrong: str
    right: str
    category: str
    explanation: str
    rule: str = ""


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
    # Whether the learner writes paragraphs (several sentences to a length drawn from
    # min_words…max_words) rather than a few short sentences.
    paragraphs: bool = False
    min_words: int = MIN_WORDS
    max_words: int = MAX_WORDS


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
        Mistake(
            "yo voy al cine",
            "fui al cine",
            "conjugation",
            "Ayer → past tense: fui.",
            "past tense after ayer",
        ),
        Mistake("Yo es", "Soy", "conjugation", "With yo, ser is soy.", "yo es → soy"),
        Mistake(
            "La problema",
            "El problema",
            "gender",
            "Problema is masculine.",
            "el problema is masculine",
        ),
        Mistake(
            "muy difícil",
            "muy difíciles",
            "grammar",
            "The adjective agrees: plural.",
            "adjective plural agreement",
        ),
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
        Mistake(
            "Gestern ich bin",
            "Gestern bin ich",
            "word-order",
            "Verb second: bin ich.",
            "verb second after a time word",
        ),
        Mistake(
            "habe ich gestern mit der Bus",
            "bin gestern mit dem Bus",
            "grammar",
            "Fahren takes sein; der Bus → mit dem Bus (dative).",
            "fahren takes sein, mit + dative",
        ),
        Mistake(
            "die Dativ",
            "der Dativ",
            "gender",
            "Dativ is masculine: der Dativ.",
            "der Dativ is masculine",
        ),
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

FRENCH = Learner(
    external_id="bench:sam",
    name="Sam",
    target="French",
    native="English",
    level="B2",
    seed=37,
    paragraphs=True,
    min_words=LONG_MIN_WORDS,
    max_words=LONG_MAX_WORDS,
    openers=("Salut Pam !", "Alors,", "Bon,", "Tu sais,", "Franchement,", "Écoute,", ""),
    sentences=(
        "Cette semaine au bureau a été assez intense, parce que nous lançons une nouvelle "
        "version de l'application et tout le monde travaille tard le soir.",
        "Mon équipe à {city} est petite mais très soudée, et j'apprécie vraiment que ma "
        "cheffe nous laisse organiser notre travail comme nous le voulons.",
        "Bien que je suis fatigué en ce moment, je continue à faire mes exercices de "
        "français tous les matins dans le tram avant d'arriver au bureau.",
        "Le week-end dernier, je suis allé voir {person} à {place} et nous avons passé des "
        "heures à discuter de politique, de cinéma et de nos projets.",
        "Si j'aurais plus de temps, je m'inscrirais à un cours de théâtre, parce que je "
        "pense que ça m'aiderait à parler avec moins d'hésitations.",
        "Ma sœur vient d'avoir un bébé, donc toute la famille est un peu en ébullition et "
        "ma mère appelle tout le monde trois fois par jour.",
        "Je trouve que les gens ici sont plus directs qu'en Angleterre, ce qui m'a surpris "
        "au début, mais maintenant je trouve ça plutôt rafraîchissant.",
        "Les photos que j'ai pris pendant les vacances à {place} sont magnifiques, je "
        "pourrais te montrer celles du marché et du vieux port.",
        "Je me demande souvent si je vais rester en France à long terme ou si je vais "
        "rentrer au Royaume-Uni quand mon contrat se terminera.",
        "Hier soir, j'ai cuisiné {dish} pour des collègues, et même si la sauce était un "
        "peu trop salée, tout le monde a eu l'air de se régaler.",
        "Ce qui m'énerve le plus dans mon travail, ce sont les réunions qui durent une heure "
        "alors qu'on pourrait tout régler en dix minutes.",
        "La réunion que je t'ai parlé la semaine dernière s'est finalement bien passée, et "
        "mon projet a été accepté par la direction.",
        "Il faut que tu viens un jour à {city}, je suis sûr que tu adorerais les petits "
        "restaurants du quartier où j'habite.",
        "Mon colocataire est {job} et il rentre souvent à des heures impossibles, mais "
        "on s'entend très bien et on cuisine souvent ensemble.",
        "Je suis en train de lire un roman de {author}, et même si certains passages sont "
        "difficiles, j'arrive à suivre l'histoire sans dictionnaire.",
        "À mon avis, les villes devraient investir beaucoup plus dans les pistes cyclables, "
        "parce que le vélo est le moyen le plus simple de se déplacer.",
        "L'été prochain, j'aimerais faire une randonnée de plusieurs jours dans {region} "
        "avec {person}, si nous arrivons à trouver des dates qui conviennent.",
        "Après que nous soyons arrivés à la gare, nous avons appris que le train était "
        "annulé, alors nous avons dû prendre un bus pendant quatre heures.",
        "Mes parents viennent me rendre visite le mois prochain, et je dois encore trouver "
        "des activités qui plairont à mon père, qui n'aime pas marcher.",
        "Au travail, je dois de plus en plus présenter nos résultats en français, ce qui me "
        "stresse un peu, même si mes collègues sont très patients.",
        "Je pense que j'ai fait beaucoup de progrès depuis l'année dernière, surtout à "
        "l'oral, mais j'ai encore du mal avec le subjonctif.",
        "Ce week-end, on a prévu d'aller au festival de jazz de {place}, où un ami de "
        "{person} joue du saxophone dans un petit groupe.",
        "Je ne suis pas d'accord avec l'idée que le télétravail rend les gens moins "
        "productifs, en tout cas ce n'est pas du tout mon expérience.",
        "Quand j'étais petit, nous passions toutes nos vacances chez mes grands-parents au "
        "bord de la mer, et j'en garde des souvenirs merveilleux.",
        "J'ai commencé à {hobby} le mardi soir avec des collègues, et c'est une bonne façon "
        "de pratiquer mon français dans un contexte détendu.",
        "Le plus difficile pour moi, ce n'est pas la grammaire, c'est de comprendre les "
        "gens quand ils parlent vite avec beaucoup d'argot.",
        "Ma cheffe m'a proposé de diriger un nouveau projet à partir de janvier, et "
        "j'hésite encore, parce que ça veut dire beaucoup plus de responsabilités.",
        "Tu crois que c'est une bonne idée de changer de travail après seulement deux ans, "
        "ou est-ce que ça donne une mauvaise image aux recruteurs ?",
        "Mon frère veut que je l'aide à préparer son voyage à {place}, alors je lui envoie "
        "des listes de choses à voir et d'endroits où manger.",
        "Il a plu pendant tout le week-end, donc je suis resté chez moi à regarder des "
        "séries françaises avec les sous-titres, ce qui est très utile.",
    ),
    slots={
        "city": ("Lyon",),
        "place": ("Marseille", "Annecy", "Bordeaux", "Nantes", "Grenoble", "Montpellier"),
        "person": ("ma copine", "mon frère", "des amis d'université", "ma collègue Julie"),
        "dish": ("un gratin dauphinois", "un bœuf bourguignon", "une quiche", "un curry"),
        "job": ("infirmier", "cuisinier", "musicien", "médecin urgentiste"),
        "author": ("Annie Ernaux", "Albert Camus", "Amélie Nothomb", "Marcel Pagnol"),
        "region": ("les Alpes", "les Pyrénées", "le Jura", "les Vosges"),
        "hobby": ("jouer au badminton", "faire de l'escalade", "chanter dans une chorale"),
    },
    mistakes=(
        Mistake(
            "Bien que je suis",
            "Bien que je sois",
            "mood",
            "Bien que takes the subjunctive: je sois.",
            "bien que + subjunctive",
        ),
        Mistake(
            "Si j'aurais",
            "Si j'avais",
            "conditional",
            "After si, the imperfect: j'avais.",
            "si + imperfect, not conditional",
        ),
        Mistake(
            "que j'ai pris",
            "que j'ai prises",
            "agreement",
            "The participle agrees with les photos, placed before avoir.",
            "past participle agrees with a preceding object",
        ),
        Mistake(
            "que je t'ai parlé",
            "dont je t'ai parlé",
            "grammar",
            "Parler de quelque chose → dont.",
            "parler de → dont",
        ),
        Mistake(
            "faut que tu viens",
            "faut que tu viennes",
            "mood",
            "Il faut que + subjunctive.",
            "il faut que + subjunctive",
        ),
        Mistake(
            "Après que nous soyons",
            "Après que nous sommes",
            "mood",
            "Après que takes the indicative.",
            "après que + indicative",
        ),
    ),
    replies=(
        "Ça a l'air d'être une semaine bien remplie, Sam !",
        "Moi aussi, j'ai eu beaucoup de travail, mais ce soir je me repose enfin.",
        "J'adore cette idée, ça me semble vraiment chouette.",
        "Ici, il fait encore doux, alors je me promène beaucoup au bord du fleuve.",
        "Le week-end dernier, je suis allée au marché avec une amie.",
        "Ton français devient vraiment naturel, je le remarque chaque semaine.",
        "Je suis sûre que ça va bien se passer, tu as l'air très motivé.",
        "Moi aussi, j'aime cuisiner pour les autres, surtout des plats simples.",
        "Qu'est-ce que tu vas faire ensuite ?",
        "Et comment tu te sens par rapport à ça ?",
        "Qu'est-ce qui te plaît le plus dans ton travail ?",
        "Tu sais déjà avec qui tu vas partir ?",
    ),
)

LEARNERS = (SPANISH, GERMAN, FRENCH)


def word_count(text: str) -> int:
    """Words as a reader counts them."""
    return len(text.split())


def _fill(sentence: str, learner: Learner, rng: random.Random) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: rng.choice(learner.slots[m.group(1)]), sentence)


def learner_messages(learner: Learner, turns: int) -> list[str]:
    """`turns` messages of `min_words`…`max_words` words, the same every run (seeded per
    learner)."""
    rng = random.Random(learner.seed)
    write = _paragraph if learner.paragraphs else _short_message
    return [write(learner, rng) for _ in range(turns)]


def _opened(opener: str, parts: list[str]) -> str:
    if opener and not opener.endswith("!"):  # "Oye, mi perro…", not "Oye, Mi perro…"
        parts = [parts[0][0].lower() + parts[0][1:], *parts[1:]]
    return " ".join([opener, *parts]).strip()


def _short_message(learner: Learner, rng: random.Random) -> str:
    wanted = rng.choices((1, 2, 3, 4), weights=(3, 4, 2, 1))[0]
    parts = [_fill(s, learner, rng) for s in rng.sample(learner.sentences, wanted)]
    opener = rng.choice(learner.openers)
    text = _opened(opener, parts)
    while word_count(text) > learner.max_words:
        parts.pop()
        text = _opened(opener, parts)
    if word_count(text) < learner.min_words:
        text = f"{text} {_fill(rng.choice(learner.sentences), learner, rng)}"
    return text


def _paragraph(learner: Learner, rng: random.Random) -> str:
    # A length first, then sentences until it is reached: B2 learners tell a story or argue a
    # point over several sentences, and their messages vary in length as people's do.
    length = rng.randint(learner.min_words, learner.max_words)
    opener = rng.choice(learner.openers)
    pool = [_fill(s, learner, rng) for s in rng.sample(learner.sentences, len(learner.sentences))]
    parts = [pool.pop()]
    while pool and word_count(_opened(opener, parts)) < length:
        parts.append(pool.pop())
    while word_count(_opened(opener, parts)) > learner.max_words:
        parts.pop()
    return _opened(opener, parts)


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
                    "rule": mistake.rule,
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
