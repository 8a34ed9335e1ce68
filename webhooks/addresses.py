"""Channel addresses as an operator types them, read into the form Pam stores them in
(`telegram:777001`, `whatsapp:+34600111222`, `api:alice`): a WhatsApp number with or without
its `whatsapp:` prefix, its `+`, spaces, dashes, dots or brackets."""

from __future__ import annotations

import re

from webhooks.whatsapp import CHANNEL as WHATSAPP

MAX_ADDRESS_CHARS = 200  # the learners table's column
# A phone number as people write one: digits, maybe a leading +, and separators. A `+` in a
# query string that was not percent-encoded arrives as a space, so a leading space counts too.
_PHONE = re.compile(r"[+\d\s().\-]+")
_SEPARATORS = re.compile(r"[\s().\-]")
MIN_PHONE_DIGITS = 6
MAX_PHONE_DIGITS = 15  # E.164


class BadAddress(ValueError):
    """What an operator typed is no address Pam could have stored (the message says why)."""


def stored_address(typed: str) -> str:
    """The address as Pam stores it, for what an operator typed. Raises BadAddress."""
    text = typed.strip()
    if not text:
        raise BadAddress("address is empty")
    if len(text) > MAX_ADDRESS_CHARS or any(ord(c) < 32 for c in text):
        raise BadAddress(f"address must be at most {MAX_ADDRESS_CHARS} printable characters")
    channel, colon, rest = text.partition(":")
    if colon and channel.strip().lower() == WHATSAPP:
        return _whatsapp(rest)
    if not colon and _PHONE.fullmatch(text):
        return _whatsapp(text)
    if not colon or not channel or not rest:
        raise BadAddress(
            "address must be channel:id (telegram:777001, whatsapp:+34600111222, api:alice) "
            "or a phone number"
        )
    return f"{channel.strip().lower()}:{rest.strip()}"


def _whatsapp(number: str) -> str:
    """`whatsapp:+<digits>`, as the WhatsApp webhook stores a sender's number."""
    digits = _SEPARATORS.sub("", number.strip()).removeprefix("+")
    if not digits.isascii() or not digits.isdigit():
        raise BadAddress("a WhatsApp number has digits only (and maybe a leading +)")
    if not MIN_PHONE_DIGITS <= len(digits) <= MAX_PHONE_DIGITS:
        raise BadAddress(f"a WhatsApp number has {MIN_PHONE_DIGITS} to {MAX_PHONE_DIGITS} digits")
    return f"{WHATSAPP}:+{digits}"
