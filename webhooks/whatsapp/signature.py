"""Twilio's request signature: whether a webhook request is Twilio's own, checked against the
URL Twilio called (which a proxy in front of Pam may have rewritten)."""

from __future__ import annotations

from flask import request

from webhooks.web import web

SIGNATURE_HEADER = "X-Twilio-Signature"


def called_url() -> str:
    """The URL Twilio called, as Twilio signed it: from PAM_PUBLIC_URL when set, else the
    request's own, its scheme as the trusted proxies (PAM_PROXY_HOPS) forwarded it."""
    public = web().settings.web.public_url
    path = request.full_path if request.query_string else request.path
    if public:
        return public.rstrip("/") + path
    return f"{request.scheme}://{request.host}{path}"


def called_base() -> str:
    """The URL Twilio called, without its query string: what the log may name."""
    return called_url().split("?", 1)[0]


def signed() -> bool:
    """Whether the request carries Twilio's valid X-Twilio-Signature for the URL it called."""
    from twilio.request_validator import RequestValidator, get_signature_algorithm

    settings = web().settings
    signature = request.headers.get(SIGNATURE_HEADER, "")
    signature_settings = request.headers.get("X-Twilio-Webhooks-Signature-Settings")
    # With signature settings, Twilio signs with the webhook SharedKey secret; otherwise with
    # the account's auth token.
    token = (
        settings.whatsapp.webhook_shared_key if signature_settings else settings.whatsapp.auth_token
    )
    if not token or not signature:
        return False
    algorithm = get_signature_algorithm(signature_settings)
    validator = RequestValidator(token)
    return bool(validator.validate(called_url(), request.form, signature, algorithm=algorithm))
