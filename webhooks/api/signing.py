"""The signatures on the API channel's reply callbacks: the Standard Webhooks
`webhook-signature` (standardwebhooks.com), and the older `X-Pam-Signature` kept beside it."""

from __future__ import annotations

import base64
import hashlib
import hmac


def signature(token: str, body: bytes) -> str:
    """The X-Pam-Signature header value for `body` (kept for receivers that check it)."""
    return "sha256=" + hmac.new(token.encode(), body, hashlib.sha256).hexdigest()


def webhook_signature(key: bytes, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The Standard Webhooks `webhook-signature` value: v1 and the base64 HMAC-SHA256, keyed
    with `key`, of "{webhook-id}.{webhook-timestamp}.{body}"."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
