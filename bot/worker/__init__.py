"""The worker runtime: Pam's assembled parts, the lanes, delivery and their helpers."""
