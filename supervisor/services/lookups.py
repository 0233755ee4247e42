"""What the routes read besides their services' work, each on the caller's session: the
datasources a supervisor or a task belongs to (for permission checks), the active
supervisors, the statuses the leader wrote (read on a follower), and the leader-epoch check
inside a route's intent transaction."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from supervisor.db.lease import LeaseRepository
from supervisor.db.models import TaskRow
from supervisor.db.repositories import SpecRepository
from supervisor.db.statuses import StatusRepository
from supervisor.db.tasks import TaskRepository


def supervisor_datasources(session: Session, supervisor_id: str) -> list[str]:
    """Every datasource the supervisor has had (none: it does not exist)."""
    return SpecRepository(session).datasources_of(supervisor_id)


def task(session: Session, task_id: str) -> TaskRow | None:
    return TaskRepository(session).get(task_id)


def task_datasources(session: Session, task_id: str) -> list[str]:
    """The task's datasource (none: it does not exist)."""
    row = TaskRepository(session).get(task_id)
    return [] if row is None else [row.datasource]


def active_states(session: Session) -> list[tuple[str, str, bool]]:
    """(id, datasource, suspended) of every supervisor that is not terminated."""
    return SpecRepository(session).active_states()


def active_ids(session: Session) -> list[str]:
    return SpecRepository(session).active_ids()


def written_status(session: Session, supervisor_id: str) -> dict[str, Any] | None:
    """The status the leader last wrote of the supervisor to a shared metadata DB."""
    return StatusRepository(session).get(supervisor_id)


def written_statuses(session: Session) -> dict[str, dict[str, Any]]:
    return StatusRepository(session).all()


def require_epoch(session: Session, epoch: int) -> None:
    """Inside the caller's transaction: NotLeading unless the lease is still at `epoch`."""
    LeaseRepository(session).require(epoch)
