"""Druid's SQL error shape: `error`, `errorCode`, `persona`, `category`, `errorMessage`,
`context`, with the HTTP status of its category (never a 500: bad SQL is the asker's)."""

from __future__ import annotations

from typing import Any


class SqlError(Exception):
    """A query refused or stopped: its HTTP status and Druid's error object."""

    def __init__(self, status: int, code: str, category: str, message: str, **context: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.category = category
        self.message = message
        self.context = context

    def body(self) -> dict[str, Any]:
        return {
            "error": "druidException",
            "errorCode": self.code,
            "persona": "USER",
            "category": self.category,
            "errorMessage": self.message,
            "context": {key: str(value) for key, value in self.context.items()},
        }


def invalid(message: str, **context: Any) -> SqlError:
    """The SQL or the request is wrong (a 400)."""
    return SqlError(400, "invalidInput", "INVALID_INPUT", message, **context)


def unsupported(message: str, **context: Any) -> SqlError:
    """Druid SQL this service does not carry out (a 400: the README lists what it does)."""
    return SqlError(400, "invalidInput", "UNSUPPORTED", message, **context)


def forbidden(message: str) -> SqlError:
    return SqlError(403, "forbidden", "FORBIDDEN", message)


def timed_out(timeout_ms: int) -> SqlError:
    return SqlError(504, "timeout", "TIMEOUT", f"Query did not finish within {timeout_ms} ms")


def cancelled(query_id: str) -> SqlError:
    """Cancelled by DELETE /druid/v2/sql/{id}; a 409 here, where Druid answers 500 (no request
    ends in a 500 here)."""
    return SqlError(409, "canceled", "CANCELED", f"Query [{query_id}] was cancelled")


def too_big(message: str) -> SqlError:
    """A result or a query over a bound (Druid's ResourceLimitExceeded: a 400)."""
    return SqlError(400, "resourceLimitExceeded", "CAPACITY_EXCEEDED", message)


def busy(limit: int) -> SqlError:
    return SqlError(
        429,
        "capacityExceeded",
        "CAPACITY_EXCEEDED",
        f"Too many concurrent queries: at most {limit} run at once; try again",
    )
