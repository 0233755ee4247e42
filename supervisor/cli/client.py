"""The CLI's errors and exit codes; its HTTP client is supervisor/clients/service.py."""

from __future__ import annotations

from supervisor.clients.service import DEFAULT_URL, ServiceError

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

__all__ = ["DEFAULT_URL", "EXIT_REFUSED", "EXIT_UNREACHABLE", "EXIT_USAGE", "CliError", "exit_code"]


class CliError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def exit_code(error: ServiceError) -> int:
    """A refused request exits 1, an unreachable service 3."""
    return EXIT_UNREACHABLE if error.status_code is None else EXIT_REFUSED
