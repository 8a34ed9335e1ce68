"""Check-ins: Pam writes first (issue 31) — when, to whom, within each platform's rules,
exactly once, through the outbox; what she says is the composer's (compose.py)."""
