"""Pam's buttons on WhatsApp, both ways: quick replies through Twilio's Content API — one
content template (`twilio/quick-reply`, its body the variable {{1}}, each action's id a
variable too: {{2}}, {{3}}, {{4}}) per distinct set of button titles, named by a hash of them,
found among the account's templates or created, and kept in memory (`QuickReplies`) — and a
tap coming back in Twilio's webhook
form, whose `ButtonPayload` is the button's id: the command it says (`tapped_command`).

Twilio's limits (docs: twilio/quick-reply, "Using variables with content templates"): in a
WhatsApp session at most three buttons without approval, a quick reply's body at most 1,024
characters, and WhatsApp shows a button's title up to 20 characters; an action's id is at most
200 characters. Where a reply does not fit, it goes as plain text: the learner types the
command (/help lists them)."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from bot.channels import Button

log = logging.getLogger(__name__)

MAX_BUTTONS = 3  # in a WhatsApp session, without template approval
MAX_TITLE_CHARS = 20  # WhatsApp's bound on a reply button's title
MAX_ID_CHARS = 200  # Twilio's bound on an action's id
MAX_BODY_CHARS = 1024  # a quick reply's body, the variable {{1}} included
CONTENT_TYPE = "twilio/quick-reply"
# The variable a reply's text fills, and the sample Twilio asks for at creation.
BODY = "{{1}}"
SAMPLE = "¡Hola!"
# How many of the account's templates a process reads, once, to find the ones it made before.
MAX_LISTED = 1000
NAME_PREFIX = "pam_buttons_"


def actions(buttons: Sequence[Button]) -> list[dict[str, str]]:
    """The quick-reply actions for `buttons`: the first three whose command fits in an id,
    each {"title": label (shortened to what WhatsApp shows), "id": command}."""
    shown = [b for b in buttons if b.label.strip() and 0 < len(b.command) <= MAX_ID_CHARS]
    if len(shown) < len(buttons):
        log.warning("a button was left out: its command is over %d characters", MAX_ID_CHARS)
    if len(shown) > MAX_BUTTONS:
        log.info("only the first %d of %d buttons go to WhatsApp", MAX_BUTTONS, len(shown))
    return [{"title": title(b.label), "id": b.command} for b in shown[:MAX_BUTTONS]]


def title(label: str) -> str:
    """A button's title as WhatsApp shows it whole: the label, or its start and "…"."""
    label = label.strip()
    return label if len(label) <= MAX_TITLE_CHARS else label[: MAX_TITLE_CHARS - 1] + "…"


def template_actions(chosen: list[dict[str, str]]) -> list[dict[str, str]]:
    """The template's actions for `chosen`: their titles, each id the variable that carries
    its command ({{2}} for the first), so that one template serves every reply with buttons of
    these titles — a command names its reply ("/translate 41"), and a template per reply would
    be a Content API call per reply and templates without end."""
    return [{"title": a["title"], "id": f"{{{{{n}}}}}"} for n, a in enumerate(chosen, start=2)]


def variables(text: str, chosen: list[dict[str, str]]) -> dict[str, str]:
    """A message's ContentVariables: the text as {{1}}, each action's command after it."""
    return {"1": text} | {str(n): a["id"] for n, a in enumerate(chosen, start=2)}


def friendly_name(template: list[dict[str, str]]) -> str:
    """The content template's name for these template actions: a hash of them, the same in
    every process (a template is never about one learner: only titles are in it)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return f"{NAME_PREFIX}{digest[:24]}"


class QuickReplies:
    """The content templates of the button sets sent so far, by their friendly name, each
    made once: on the first one a process needs, the account's templates are read (`listed`:
    (friendly name, sid) pairs, at most MAX_LISTED) so that those Pam made before a restart
    are used again; a set not among them is created (`create`: the Content API's create, its
    sid back). The sids are kept in memory."""

    def __init__(
        self,
        create: Callable[[dict[str, Any]], str],
        listed: Callable[[], Iterable[tuple[str, str]]] | None = None,
    ) -> None:
        self.create = create
        self.listed = listed
        self.sids: dict[str, str] = {}
        self.lock = threading.Lock()

    def sid(self, chosen: list[dict[str, str]]) -> str:
        """The sid of the template for `chosen` actions' titles, found or created on first
        use (their commands are the samples Twilio asks for). Raises what `create` raises
        (nothing is kept then: the next reply tries again)."""
        template = template_actions(chosen)
        name = friendly_name(template)
        with self.lock:
            known = self.sids.get(name)
        if known is not None:
            return known
        self._read_listed()
        with self.lock:
            known = self.sids.get(name)
        if known is not None:
            return known
        request = {
            "friendly_name": name,
            "language": "en",  # the template's text is only the variable; no language of its own
            "variables": variables(SAMPLE, chosen),
            "types": {CONTENT_TYPE: {"body": BODY, "actions": template}},
        }
        sid = self.create(request)
        with self.lock:
            self.sids[name] = sid
        return sid

    def _read_listed(self) -> None:
        """Read the account's templates Pam made, once (a failure is logged: the set is
        created instead, and the list not read again)."""
        with self.lock:
            listed, self.listed = self.listed, None
        if listed is None:
            return
        try:
            found = {name: sid for name, sid in listed() if name.startswith(NAME_PREFIX)}
        except Exception as exc:
            log.warning("could not read the account's content templates: %s", type(exc).__name__)
            return
        with self.lock:
            self.sids = found | self.sids


def tapped_command(form: Any) -> str | None:
    """The command a quick-reply tap says: Twilio's `ButtonPayload`, the tapped action's id
    (the form's `Body` and `ButtonText` hold its title, in the learner's language). None for a
    message that is no tap. Only text the learner could have typed."""
    payload = (form.get("ButtonPayload") or "").strip()
    return payload or None
