"""Check-ins: Pam writes first (issue 31) — when, to whom, within each platform's rules,
exactly once, through the outbox (rounds.py, timing.py, routes.py); what she says is
compose.py's, from the learner's memory (through subject.py and answer.py)."""
