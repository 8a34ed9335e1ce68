"""Pam's channel-agnostic core: tutor turns, commands, the LLM edge and the terminal."""
