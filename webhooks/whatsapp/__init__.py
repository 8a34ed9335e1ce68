"""The WhatsApp channel through Twilio: the webhook form read into an inbound message
(payload), Twilio's request signature (signature), the webhook and delivery-status routes
(route), replies through Twilio's REST API (sender), and its TWILIO_* settings (settings)."""

CHANNEL = "whatsapp"
