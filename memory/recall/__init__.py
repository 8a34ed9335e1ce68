"""Recall: full-text search over a learner's folded-out past."""
