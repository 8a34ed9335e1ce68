"""The message store: the Store and its parts, one per domain."""
