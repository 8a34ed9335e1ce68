"""Check-ins: Pam writes first, as a friend would. When, to whom, within each platform's rules
and exactly once is rounds.py's (with timing.py and routes.py); what a check-in says is
compose.py's (from the learner's memory, through subject.py and answer.py)."""
