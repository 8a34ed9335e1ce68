"""The Telegram channel: the Bot API update read into an inbound message (payload), the
webhook route (route), long polling (poll), replies (sender) and the Bot API's other calls
(client), over a synchronous transport (transport); its TELEGRAM_* settings (settings)."""

CHANNEL = "telegram"
