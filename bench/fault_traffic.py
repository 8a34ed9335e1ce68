"""The fault run's traffic: learners on Telegram and WhatsApp, their marked messages, and the
platforms that deliver them as signed webhooks, retrying until acknowledged."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import requests

from loopback import twilio_server

WEBHOOK_SECRET = "fault-run-webhook-secret"
TEMPLATES = [
    "Hola Pam, yo es muy contento hoy porque el sol brilla. ({marker})",
    "Ayer fui al mercado y compré tomates, pan y queso para la cena. ({marker})",
    "Mi hermana trabaja en un hospital grande en Sevilla 🏥 ({marker})",
    "Am Wochenende war ich mit Freunden am See, es war sehr schön. ({marker})",
    "Ich habe gestern einen Kuchen gebacken, aber er war zu süß 😅 ({marker})",
    "¿Tú sabes cocinar paella? Yo no, pero quiero aprender. ({marker})",
]


def progress(message: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- what the learners send ------------------------------------------------------------------


@dataclass(frozen=True)
class Learner:
    key: str  # "L07": the prefix of this learner's markers
    channel: str  # "telegram" or "whatsapp"
    chat: str  # where replies go: the Telegram chat id, or "whatsapp:+<number>"
    address: str  # Pam's external id for the learner
    user: dict[str, Any] = field(hash=False, compare=False)  # Telegram's `from` object


@dataclass(frozen=True)
class Message:
    learner: Learner
    index: int  # 0-based position in the learner's conversation
    marker: str
    text: str
    platform_id: str  # Telegram update_id or Twilio MessageSid: the same on every redelivery


def make_learners(count: int, rng: random.Random) -> list[Learner]:
    """Half on Telegram, half on WhatsApp, alternating."""
    learners = []
    for n in range(1, count + 1):
        key = f"L{n:02d}"
        if n % 2:
            user_id = 500_000_000 + rng.randrange(100_000_000)
            user = {
                "id": user_id,
                "is_bot": False,
                "first_name": f"Learner{n}",
                "language_code": "de",
            }
            learners.append(Learner(key, "telegram", str(user_id), f"telegram:{user_id}", user))
        else:
            number = f"+3461{rng.randrange(10_000_000):07d}"
            chat = f"whatsapp:{number}"
            learners.append(Learner(key, "whatsapp", chat, chat, {"name": f"Learner{n}"}))
    return learners


def make_messages(learners: list[Learner], total: int, rng: random.Random) -> list[Message]:
    """`total` messages spread evenly over the learners, each carrying a unique marker."""
    update_ids = itertools.count(rng.randrange(10_000_000, 900_000_000))
    messages = []
    for n in range(total):
        learner = learners[n % len(learners)]
        index = n // len(learners)
        marker = f"{learner.key}-M{index + 1:02d}"
        text = rng.choice(TEMPLATES).format(marker=marker)
        platform_id = (
            str(next(update_ids))
            if learner.channel == "telegram"
            else f"SM{rng.getrandbits(128):032x}"
        )
        messages.append(Message(learner, index, marker, text, platform_id))
    return messages


# -- the platforms: deliver webhooks, retrying until acknowledged ------------------------------


class Platforms:
    """Telegram and Twilio as Pam's web app sees them: they POST each message (signed) and
    retry with backoff until it is acknowledged with a 2xx, as both platforms do."""

    def __init__(self, base: str, give_up_after: float) -> None:
        self.base = base
        self.give_up_after = give_up_after
        self.local = threading.local()
        self.lock = threading.Lock()
        self.statuses: Counter[str] = Counter()
        self.posts = 0
        self.accepted_at: dict[str, float] = {}

    def _session(self) -> requests.Session:
        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
        return session

    def _post_once(self, message: Message) -> int:
        learner = message.learner
        if learner.channel == "telegram":
            chat = {
                "id": learner.user["id"],
                "first_name": learner.user["first_name"],
                "type": "private",
            }
            update: dict[str, Any] = {
                "update_id": int(message.platform_id),
                "message": {
                    "message_id": message.index + 1,
                    "from": learner.user,
                    "chat": chat,
                    "date": int(time.time()),
                    "text": message.text,
                },
            }
            response = self._session().post(
                f"{self.base}/telegram/webhook",
                json=update,
                headers={"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET},
                timeout=10,
            )
        else:
            form = {
                "SmsMessageSid": message.platform_id,
                "NumMedia": "0",
                "ProfileName": learner.user["name"],
                "MessageType": "text",
                "SmsSid": message.platform_id,
                "WaId": learner.chat.removeprefix("whatsapp:+"),
                "SmsStatus": "received",
                "Body": message.text,
                "To": twilio_server.NUMBER,
                "NumSegments": "1",
                "MessageSid": message.platform_id,
                "AccountSid": twilio_server.ACCOUNT_SID,
                "From": learner.chat,
                "ApiVersion": "2010-04-01",
            }
            url = f"{self.base}/whatsapp/webhook"
            response = self._session().post(
                url,
                data=form,
                headers={"X-Twilio-Signature": twilio_server.sign(url, form)},
                timeout=10,
            )
        return response.status_code

    def deliver(self, message: Message) -> bool:
        """POST until acknowledged; False if the web app never acknowledged it."""
        deadline = time.monotonic() + self.give_up_after
        pause = 0.25
        while True:
            try:
                status = str(self._post_once(message))
            except requests.RequestException as exc:
                status = type(exc).__name__
                self.local.session = None  # a connection the dead server left behind
            with self.lock:
                self.posts += 1
                self.statuses[status] += 1
                if status.startswith("2"):
                    self.accepted_at.setdefault(message.platform_id, time.time())
                    return True
            if time.monotonic() > deadline:
                return False
            time.sleep(pause * random.uniform(0.8, 1.2))
            pause = min(pause * 2, 4.0)
