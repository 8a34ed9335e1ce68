"""The check-in benchmark's learners: who they are (a channel address, the timezone they really
live in, a persona, the local hours they write at, a target language), the chat history each
brings into the simulated month with the dated plans it mentions ("a job interview on
Thursday", "a trip in April"), and what each does during the month (answers check-ins, writes
on its own, opts out, blocks the bot on Telegram). Every choice is seeded: the same run
each time."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

# The simulated month starts on a Friday: the United States change to summer time on its
# second Sunday (8 March 2026), Europe on its 29th, Chile on 4 April and Australia and New
# Zealand back to winter time on 5 April (the 4th in UTC) — all inside its 30 days.
START = datetime(2026, 3, 6, tzinfo=UTC)

# Zones, the WhatsApp country code of each (with a valid local number's first digits), and
# how many learners of a hundred live there.
ZONES: tuple[tuple[str, str, int], ...] = (
    ("Europe/Madrid", "+3461", 12),
    ("Europe/London", "+447700", 8),
    ("Europe/Berlin", "+49151", 8),
    ("Europe/Paris", "+3361", 6),
    ("Europe/Rome", "+39347", 5),
    ("America/New_York", "+1212", 9),
    ("America/Chicago", "+1312", 5),
    ("America/Denver", "+1303", 3),
    ("America/Los_Angeles", "+1415", 6),
    ("America/Mexico_City", "+5255", 5),
    ("America/Sao_Paulo", "+55119", 5),
    ("America/Bogota", "+57310", 3),
    ("America/Santiago", "+5699", 2),
    ("Asia/Tokyo", "+8190", 4),
    ("Asia/Kolkata", "+9198", 4),
    ("Asia/Kathmandu", "+97798", 1),
    ("Asia/Dubai", "+97150", 2),
    ("Europe/Moscow", "+7916", 2),
    ("Africa/Lagos", "+234803", 2),
    ("Australia/Sydney", "+61412", 5),
    ("Pacific/Auckland", "+6421", 2),
)
LANGUAGES = ("Spanish", "French", "German", "Italian", "Portuguese")


@dataclass(frozen=True)
class Persona:
    """How a kind of learner behaves: the chance they answer a check-in, and that they write
    on their own on a given day."""

    name: str
    answers: float
    writes: float
    share: int  # of a hundred learners


PERSONAS = (
    Persona("eager", 0.85, 0.30, 25),
    Persona("casual", 0.55, 0.12, 35),
    Persona("quiet", 0.25, 0.04, 25),
    Persona("gone", 0.0, 0.0, 15),
)

# Plans a learner mentions: what (as the profile keeps it), how they said it (the weekday or
# month filled in), and whether it is for a day or a whole month.
PLANS: tuple[tuple[str, str, bool], ...] = (
    ("job interview", "I have a job interview on {day}, I'm nervous", True),
    ("dentist appointment", "Ugh, dentist appointment on {day}", True),
    ("driving test", "My driving test is on {day}!", True),
    ("sister's wedding", "My sister's wedding is on {day}, so much to do", True),
    ("exam", "I have an important exam on {day}", True),
    ("concert", "Going to a concert on {day} with friends", True),
    ("trip to Oaxaca", "We're planning a trip to Oaxaca in {month}", False),
    ("moving flat", "I'm moving to a new flat in {month}", False),
)
CHAT = (
    "Hoy trabajé mucho y estoy cansado",
    "Ayer fui al cine con mi hermana",
    "Me gusta cocinar los fines de semana",
    "Estoy aprendiendo para mi trabajo",
    "Esta semana hace mucho frío aquí",
    "Leí un libro muy interesante",
    "Mañana voy a correr en el parque",
)
# What Pam said back in the history and to the learners' own messages (no model call: the
# replies' tokens are the token benchmark's).
PAM_SAYS = {
    "Spanish": ("¡Qué bien! ¿Y luego qué hiciste?", "¡Uf, te entiendo! ¿Descansaste un poco?"),
    "French": ("Super ! Et après, tu as fait quoi ?", "Je te comprends ! Tu t'es reposé ?"),
    "German": ("Toll! Und was hast du danach gemacht?", "Verstehe ich! Hast du dich ausgeruht?"),
    "Italian": ("Che bello! E poi cosa hai fatto?", "Ti capisco! Ti sei riposato un po'?"),
    "Portuguese": ("Que legal! E depois, o que você fez?", "Te entendo! Você descansou um pouco?"),
}
SUMMARY = (
    "The learner works in a hospital and studies in the evenings. They talked about their "
    "sister, a nurse, and a cooking class they might join; they were unsure whether to take "
    "a new job offer in another city and said they would decide soon. They like films and "
    "long walks, and practise every few days."
)


@dataclass
class Script:
    """One simulated learner: who they are and what they will do."""

    index: int
    address: str
    channel: str
    zone: str
    persona: Persona
    hour: int  # the local hour they usually write at
    language: str
    stated_zone: bool
    history: list[tuple[datetime, str]]
    plans: list[dict[str, str]]
    summary: bool
    opt_out_at: datetime | None = None
    block_at: datetime | None = None
    # Filled by the simulation.
    learner_id: int = 0
    messages: list[datetime] = field(default_factory=list)

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    @property
    def chat_id(self) -> str:
        """Where the channel's sender is told to deliver (routes' chat_id)."""
        return (
            self.address.removeprefix("telegram:") if self.channel == "telegram" else self.address
        )

    def at_hour(self, day: date, rng: random.Random, spread: int = 1) -> datetime:
        """A moment on the local `day` around their usual hour, in UTC."""
        # Within their day: the quiet hours (21:00 to 9:00) are when they do not write.
        hour = min(20, max(9, self.hour + rng.randint(-spread, spread)))
        local = datetime.combine(day, time(hour, rng.randint(0, 59)), tzinfo=self.tz)
        return local.astimezone(UTC)

    def awake(self, moment: datetime) -> bool:
        """Whether the learner may read and answer at `moment`: in their day (their local
        time), outside the quiet hours, as they never write in them."""
        return 9 <= moment.astimezone(self.tz).hour < 21


def _pick_zone(rng: random.Random) -> tuple[str, str]:
    zone, prefix, _ = rng.choices(ZONES, weights=[w for *_, w in ZONES])[0]
    return zone, prefix


def _plan(rng: random.Random, base: date, mentioned: date, days: int) -> tuple[dict[str, str], str]:
    """A plan mentioned on `mentioned`, for a day from two before `base` to `days` - 3 after
    it, or a month: the profile's entry, and how the learner said it."""
    what, said, on_day = rng.choice(PLANS)
    if on_day:
        when = base + timedelta(days=rng.randint(-2, days - 3))
        when = max(when, mentioned + timedelta(days=1))
        text = said.format(day=f"{when:%A} the {when.day}")
        entry = {"what": what, "when": when.isoformat(), "mentioned": mentioned.isoformat()}
    else:
        month = base + timedelta(days=rng.randint(10, days + 20))
        text = said.format(month=f"{month:%B}")
        entry = {"what": what, "when": f"{month:%Y-%m}", "mentioned": mentioned.isoformat()}
    return entry, text


def scripts(learners: int, days: int, seed: int = 31) -> list[Script]:
    """`learners` learners for a month of `days` days from START."""
    rng = random.Random(seed)
    personas = [p for p in PERSONAS for _ in range(p.share)]
    made = []
    for index in range(learners):
        zone, prefix = _pick_zone(rng)
        telegram = rng.random() < 0.6
        if telegram:
            address = f"telegram:{10**9 + index * 7919}"
        else:
            address = f"whatsapp:{prefix}{index:07d}"
        tz = ZoneInfo(zone)
        persona = rng.choice(personas)
        hour = rng.choice((10, 12, 13, 17, 18, 18, 19, 19, 20, 20))
        script = Script(
            index=index,
            address=address,
            channel="telegram" if telegram else "whatsapp",
            zone=zone,
            persona=persona,
            hour=hour,
            language=rng.choice(LANGUAGES),
            stated_zone=rng.random() < (0.4 if telegram else 0.2),
            history=[],
            plans=[],
            summary=rng.random() < 0.5,
        )
        # A history of 6–10 messages over the two weeks before the month, the last of them
        # 0–9 days before it; one or two mention a dated plan.
        last = START.astimezone(tz).date() - timedelta(days=rng.choice((0, 1, 1, 2, 3, 5, 9)))
        count = rng.randint(6, 10)
        history_days = sorted(last - timedelta(days=rng.randint(0, 13)) for _ in range(count - 1))
        history_days.append(last)
        mentions = rng.sample(range(count), k=rng.choice((0, 1, 1, 2, 2)))
        for n, day in enumerate(history_days):
            moment = script.at_hour(day, rng)
            if moment >= START - timedelta(minutes=5 * (count - n)):
                # Their hour today is still ahead: the day before's, not a moment in their night.
                moment = script.at_hour(day - timedelta(days=1), rng)
            if n in mentions:
                entry, text = _plan(rng, START.astimezone(tz).date(), day, days)
                if entry not in script.plans:
                    script.plans.append(entry)
            else:
                text = rng.choice(CHAT)
            script.history.append((moment, text))
        script.history.sort()
        if rng.random() < 0.03:
            script.opt_out_at = START + timedelta(minutes=rng.randint(0, days * 1440))
        if telegram and rng.random() < 0.04:
            script.block_at = START + timedelta(minutes=rng.randint(0, days * 1440))
        made.append(script)
    return made


def new_plan(script: Script, rng: random.Random, today: date) -> tuple[dict[str, str], str]:
    """A plan the learner mentions in a message on `today`, a few days to weeks ahead."""
    return _plan(rng, today + timedelta(days=4), today, 14)
