"""Benchmarks: scripted conversations run through Pam's real code, measured and plotted."""
