"""The OpenAI-compatible adapters (chat, audio) and the readers of their answers."""
