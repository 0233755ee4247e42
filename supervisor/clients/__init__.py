"""Clients of what the overlord talks to: indexing tasks' control APIs, Kafka."""
