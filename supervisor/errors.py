"""Domain errors that carry the HTTP status a route answers with, and the errors that say the
metadata DB cannot be reached (a 503 with Retry-After, never a 500)."""

from __future__ import annotations

from sqlalchemy.exc import InterfaceError, OperationalError

# what a metadata DB that cannot be reached (down, restarting, refusing connections) raises:
# a 503 to try again in the API, one line (not a traceback a pass) in a background loop
UNREACHABLE = (OperationalError, InterfaceError)


def unreachable_reason(exc: OperationalError | InterfaceError) -> str:
    """The first line of what the DB driver said (for a log: it names the DB's address)."""
    return str(exc.orig or exc).splitlines()[0][:300]


class DomainError(Exception):
    status_code = 400

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class BadRequestError(DomainError):
    status_code = 400


class ForbiddenError(DomainError):
    """Authenticated, but the identity lacks the permission (or a task its token)."""

    status_code = 403


class NotFoundError(DomainError):
    status_code = 404


class PayloadTooLargeError(DomainError):
    status_code = 413


class NotLeading(DomainError):
    """This overlord does not hold the leader lease (any more): it may not act."""

    status_code = 503


class Raced(DomainError):
    """Another request changed the same thing first: the request's transaction is tried again
    on what it wrote (a 409 if that keeps happening)."""

    status_code = 409


class ConflictError(DomainError):
    """The request contradicts what is recorded (and trying again will not change that)."""

    status_code = 409


class UnavailableError(DomainError):
    """Something this request needs (a task host) does not answer right now."""

    status_code = 503
