"""Where a check-in may go, by each platform's rules (bot/checkins/routes.py's port): Telegram's
private chats at any time (its group members never: a check-in speaks of what one member told
Pam); WhatsApp freely within 24 hours of the learner's last message and, beyond them, only
through the operator's approved template (PAM_CHECKIN_WHATSAPP_TEMPLATE_SID), with the
timezone the number's country suggests; never the HTTP API's users, whose replies answer
requests. Only to a channel that has a sender here."""

from __future__ import annotations

from collections.abc import Collection
from datetime import timedelta

from bot.checkins.routes import Route
from webhooks.settings import Settings
from webhooks.telegram import CHANNEL as TELEGRAM
from webhooks.telegram.address import MEMBER_SEPARATOR
from webhooks.whatsapp import CHANNEL as WHATSAPP
from webhooks.whatsapp.timezone import number_timezone

# WhatsApp's customer service window is 24 hours from the user's last message. A check-in goes
# free-form only within 23 of when the learner's last message reached the inbox (Twilio's
# delivery, not the turn that ran later): the check-in is sent a while after it was decided (the
# outbox, retries), and the hour is that margin; past it the template (or nothing) carries it.
# A free-form check-in still unsent when the 24 hours are over is not sent at all.
WHATSAPP_WINDOW = timedelta(hours=23)
WHATSAPP_WINDOW_CLOSES = timedelta(hours=24)


class ChannelRoutes:
    """The check-in routes of the channels in `channels` (those with a sender), WhatsApp's
    template being `whatsapp_template_sid` (None: none)."""

    def __init__(self, channels: Collection[str], whatsapp_template_sid: str | None) -> None:
        self.channels = set(channels)
        self.template = bool(whatsapp_template_sid)

    def route(self, address: str) -> Route | None:
        """How a check-in reaches `address`, or None where none may go."""
        channel, _, rest = address.partition(":")
        if channel not in self.channels or not rest:
            return None
        if channel == TELEGRAM:
            if MEMBER_SEPARATOR in rest:  # a member of a group: others read the chat
                return None
            return Route(TELEGRAM, rest)
        if channel == WHATSAPP:
            return Route(
                WHATSAPP,
                address,
                window=WHATSAPP_WINDOW,
                window_closes=WHATSAPP_WINDOW_CLOSES,
                template=self.template,
                timezone=number_timezone(address),
            )
        return None


def configured_routes(settings: Settings) -> ChannelRoutes:
    """The routes of the channels `settings` configure to send (what the worker's senders
    would be), for a process that sends nothing itself: the admin API's outlook."""
    whatsapp = settings.whatsapp
    channels = {TELEGRAM} if settings.telegram.bot_token else set()
    if whatsapp.account_sid and whatsapp.auth_token and whatsapp.number:
        channels.add(WHATSAPP)
    return ChannelRoutes(channels, whatsapp.checkin_template_sid)
