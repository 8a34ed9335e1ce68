"""The durable queues: the inbox and the outbox, claimed under renewed leases."""
