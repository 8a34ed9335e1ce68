"""Pam's memory: storage, the rolling summary, the learned profile and their background jobs."""
