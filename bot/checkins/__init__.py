"""Check-ins: Pam writes first, as a friend would. What a check-in says is compose.py's (from
the learner's memory, through subject.py and answer.py)."""
