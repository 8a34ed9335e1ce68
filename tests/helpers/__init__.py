"""Helpers shared by tests of more than one package (tests/support.py holds the older ones)."""
