"""The embedded development stack, reached from the CLI alone: a local Kafka broker,
PostgreSQL for tests, sample data and the quickstart."""

from __future__ import annotations


class DevstackError(Exception):
    """A dev-stack command cannot go on. `usage`: the caller's mistake (a bad file, a taken
    port), which the CLI answers with its usage exit code."""

    def __init__(self, message: str, usage: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage
