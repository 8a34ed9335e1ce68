"""Tests of the Telegram channel: webhook, update classification, delivery, splitting."""
