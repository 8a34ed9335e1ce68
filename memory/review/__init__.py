"""Review: recurring mistakes as spaced-repetition items, and /progress's data."""
