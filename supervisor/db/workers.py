"""The task hosts' SQL. Repositories never commit; the caller commits at its boundary."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from supervisor.db.models import TaskRow, WorkerRow
from tasks.protocol import TaskStatusCode


class WorkerRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, host: str) -> WorkerRow | None:
        return self.session.get(WorkerRow, host, populate_existing=True)

    def all(self) -> list[WorkerRow]:
        return list(self.session.scalars(select(WorkerRow).order_by(WorkerRow.host)))

    def capacity(self, now: datetime, timeout: timedelta) -> int | None:
        """The task slots of the hosts heard from within `timeout` and enabled (Druid's total
        worker capacity); None when no host was heard from: tasks run on the overlord's own
        host, whose slots have no bound."""
        fresh = [row for row in self.all() if row.heard_within(timeout, now)]
        if not fresh:
            return None
        return sum(row.capacity for row in fresh if row.enabled)

    def add(self, row: WorkerRow) -> None:
        self.session.add(row)
        self.session.flush()

    def running_tasks(self) -> dict[str, list[TaskRow]]:
        """The running tasks placed on task hosts, by host."""
        query = select(TaskRow).where(
            TaskRow.status == TaskStatusCode.RUNNING, TaskRow.worker.is_not(None)
        )
        placed: dict[str, list[TaskRow]] = {}
        for row in self.session.scalars(query):
            placed.setdefault(str(row.worker), []).append(row)
        return placed

    def last_completed(self) -> dict[str, datetime]:
        """Each host's newest finished task's end."""
        query = (
            select(TaskRow.worker, func.max(TaskRow.updated_at))
            .where(TaskRow.status != TaskStatusCode.RUNNING, TaskRow.worker.is_not(None))
            .group_by(TaskRow.worker)
        )
        return {str(host): at for host, at in self.session.execute(query) if at is not None}
