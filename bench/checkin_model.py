"""A deterministic chat model for the check-in benchmark: check-ins of a real model's size in
the learner's target language (one or two sentences, a question, 150–300 characters), tutor
replies for the learners who write while a check-in is due, every call counted with real
tiktoken as the ledger records it. Answers the composer turns down (`accept`) are asked for
again, each billed, as the OpenAI client does."""

from __future__ import annotations

import json
import random
import re
import threading
from collections.abc import Callable, Sequence

from memory.llm import Accept, ChatMessage, Completion, JsonSchema, Purpose, Tool, Usage
from memory.tokens import TokenCounter

_PRACTISING = re.compile(r"^- practising: (.+)$", re.MULTILINE)
_PLAN = re.compile(r"^plan: (.+)$", re.MULTILINE)
ATTEMPTS = 3

# Per target language: an opening, a follow-up of a plan ({what}), of a thread, an invitation,
# and closings; combined at random, a check-in is 150–300 characters.
PHRASES: dict[str, dict[str, tuple[str, ...]]] = {
    "Spanish": {
        "open": ("¡Hola!", "¡Hola, qué tal!", "¡Buenas!", "¡Hey!"),
        "plan": (
            "Me acordé de tu plan ({what}). ¿Cómo te fue al final, salió como esperabas?",
            "Ya casi llega lo tuyo ({what}), ¡mucha suerte! ¿Cómo te estás preparando?",
        ),
        "thread": (
            "Me quedé pensando en lo que me contaste la última vez. ¿Al final qué decidiste?",
            "Hace unos días hablamos de tu semana tan llena. ¿Cómo va todo por ahí?",
        ),
        "invitation": (
            "Hoy pensé en ti mientras tomaba un café. ¿Qué tal tu día, hiciste algo bonito?",
            "Aquí llueve desde la mañana y me apetece charlar. ¿Qué planes tienes hoy?",
        ),
        "close": ("Cuéntame un poco cuando puedas.", "Tengo curiosidad.", "Sin prisa."),
    },
    "French": {
        "open": ("Salut !", "Coucou !", "Bonjour !", "Hé !"),
        "plan": (
            "J'ai repensé à ton projet ({what}). Alors, comment ça s'est passé finalement ?",
            "C'est bientôt ton grand jour ({what}), bonne chance ! Tu te prépares comment ?",
        ),
        "thread": (
            "J'ai repensé à ce que tu m'as raconté la dernière fois. Tu as décidé quoi ?",
            "On parlait de ta semaine chargée l'autre jour. Comment ça va de ton côté ?",
        ),
        "invitation": (
            "J'ai pensé à toi en prenant un café ce matin. Ta journée se passe bien ?",
            "Il pleut ici depuis ce matin et j'ai envie de discuter. Tu fais quoi aujourd'hui ?",
        ),
        "close": ("Raconte-moi quand tu peux.", "Je suis curieuse.", "Rien ne presse."),
    },
    "German": {
        "open": ("Hallo!", "Hi!", "Hey du!", "Guten Tag!"),
        "plan": (
            "Ich musste an deinen Plan denken ({what}). Wie ist es am Ende gelaufen?",
            "Bald ist es so weit ({what}), viel Glück! Wie bereitest du dich darauf vor?",
        ),
        "thread": (
            "Ich habe an unser letztes Gespräch gedacht. Wofür hast du dich entschieden?",
            "Neulich hast du von deiner vollen Woche erzählt. Wie läuft es gerade bei dir?",
        ),
        "invitation": (
            "Ich habe beim Kaffee an dich gedacht. Wie ist dein Tag bisher, etwas Schönes?",
            "Hier regnet es seit dem Morgen und ich habe Lust zu plaudern. Was machst du heute?",
        ),
        "close": ("Erzähl mir, wenn du Zeit hast.", "Ich bin neugierig.", "Ganz ohne Eile."),
    },
    "Italian": {
        "open": ("Ciao!", "Ehi!", "Buongiorno!", "Ciao ciao!"),
        "plan": (
            "Ho ripensato al tuo programma ({what}). Allora, com'è andata alla fine?",
            "Manca poco ({what}), in bocca al lupo! Come ti stai preparando?",
        ),
        "thread": (
            "Ho ripensato a quello che mi hai raccontato l'ultima volta. Cosa hai deciso?",
            "L'altro giorno parlavi della tua settimana piena. Come va adesso?",
        ),
        "invitation": (
            "Stamattina ti ho pensato mentre bevevo un caffè. Com'è la tua giornata?",
            "Qui piove da stamattina e ho voglia di chiacchierare. Cosa fai oggi?",
        ),
        "close": ("Raccontami quando puoi.", "Sono curiosa.", "Senza fretta."),
    },
    "Portuguese": {
        "open": ("Olá!", "Oi!", "Oi, tudo bem?", "E aí!"),
        "plan": (
            "Lembrei do teu plano ({what}). E então, como foi no final?",
            "Está quase chegando ({what}), boa sorte! Como você está se preparando?",
        ),
        "thread": (
            "Fiquei pensando no que você me contou da última vez. O que você decidiu?",
            "Outro dia você falou da sua semana cheia. Como estão as coisas agora?",
        ),
        "invitation": (
            "Pensei em você tomando um café hoje. Como está o seu dia, algo de bom?",
            "Aqui chove desde cedo e me deu vontade de conversar. O que você vai fazer hoje?",
        ),
        "close": ("Me conta quando puder.", "Fiquei curiosa.", "Sem pressa."),
    },
}
TOPICS = {"thread": "last week's news", "invitation": "their day"}


class CheckinModel:
    """A ChatModel for the check-in simulation: `checkin` calls get a check-in, `reply` calls a
    short tutor reply, anything else an empty JSON object (the memory jobs do not run here).
    `during(purpose)` is called as each call runs (the learner writing meanwhile)."""

    def __init__(self, counter: TokenCounter, seed: int = 31) -> None:
        self.counter = counter
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.during: Callable[[Purpose, str], None] | None = None
        self.turned_down = 0

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str,
        max_tokens: int,
        purpose: Purpose,
        schema: JsonSchema | None = None,
        accept: Accept | None = None,
        tools: Sequence[Tool] | None = None,
    ) -> Completion:
        """Answer as a model of realistic size would; an answer `accept` turns down is asked
        for again (at most ATTEMPTS in all), each billed."""
        if self.during is not None:
            self.during(purpose, messages[0]["content"])
        input_tokens = sum(self.counter.count_message(m["content"]) for m in messages)
        billed: list[Usage] = []
        text = ""
        for _ in range(ATTEMPTS):
            text = self.counter.truncate(self._answer(messages, purpose), max_tokens)
            output_tokens = self.counter.count(text)
            if accept is None or accept(text) is None:
                break
            with self.lock:
                self.turned_down += 1
            billed.append(Usage(model, input_tokens, output_tokens))
        return Completion(text, model, input_tokens, output_tokens, billed=tuple(billed))

    def _answer(self, messages: Sequence[ChatMessage], purpose: Purpose) -> str:
        system = messages[0]["content"]
        found = _PRACTISING.search(system)
        language = found.group(1).strip() if found else "Spanish"
        phrases = PHRASES.get(language, PHRASES["Spanish"])
        with self.lock:
            pick = self.rng.choice
            if purpose == "checkin":
                plan = _PLAN.search(messages[-1]["content"])
                kind = (
                    "plan" if plan else ("thread" if "Pick up one open" in system else "invitation")
                )
                body = pick(phrases[kind]).format(what=plan.group(1).strip() if plan else "")
                message = f"{pick(phrases['open'])} {body} {pick(phrases['close'])}"
                topic = plan.group(1).strip() if plan else TOPICS[kind]
                return json.dumps({"message": message, "topic": topic}, ensure_ascii=False)
            if purpose == "reply":
                body = pick(phrases["invitation"])
                reply = f"{pick(phrases['open'])} {body}"
                return json.dumps({"reply": reply, "corrections": []}, ensure_ascii=False)
        return "{}"
