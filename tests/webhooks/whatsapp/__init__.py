"""Tests of the WhatsApp channel through Twilio."""
