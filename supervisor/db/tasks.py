"""The task rows' SQL (supervisor/db/repositories.py holds the rest). Repositories never
commit; the caller commits at its boundary."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from supervisor.db.models import TaskRow
from tasks.protocol import TaskStatusCode

_TASKS_OF_SUPERVISOR = (
    select(TaskRow)
    .where(
        TaskRow.supervisor_id == bindparam("supervisor_id"),
        (TaskRow.status == TaskStatusCode.RUNNING) | (TaskRow.updated_at >= bindparam("since")),
    )
    .order_by(TaskRow.created_at, TaskRow.id)
)


def start_of(task: TaskRow) -> Any:
    """The task's start offsets (JSON form: partition to offset)."""
    return task.payload["ioConfig"]["startSequenceNumbers"]["partitionSequenceNumberMap"]


class TaskRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, task_id: str) -> TaskRow | None:
        return self.session.get(TaskRow, task_id, populate_existing=True)

    def add(self, row: TaskRow) -> None:
        self.session.add(row)
        self.session.flush()

    def find(
        self,
        statuses: tuple[str, ...] | None,
        datasource: str | None,
        limit: int | None,
        task_type: str | None = None,
        created: tuple[datetime, datetime] | None = None,
    ) -> list[TaskRow]:
        """Tasks, newest first; `created`: made in [start, end)."""
        query = select(TaskRow).order_by(TaskRow.created_at.desc(), TaskRow.id)
        if statuses is not None:
            query = query.where(TaskRow.status.in_(statuses))
        if datasource is not None:
            query = query.where(TaskRow.datasource == datasource)
        if task_type is not None:
            query = query.where(TaskRow.type == task_type)
        if created is not None:
            query = query.where(TaskRow.created_at >= created[0], TaskRow.created_at < created[1])
        if limit is not None:
            query = query.limit(limit)
        return list(self.session.scalars(query))

    def running_behind(
        self, supervisor_id: str, task_id: str, start: dict[str, int]
    ) -> TaskRow | None:
        """A running task of the supervisor, other than `task_id`, that starts before `start`
        on one of its partitions: an earlier generation that has not published yet."""
        query = select(TaskRow).where(
            TaskRow.supervisor_id == supervisor_id,
            TaskRow.status == TaskStatusCode.RUNNING,
            TaskRow.id != task_id,
        )
        for row in self.session.scalars(query):
            theirs = start_of(row)
            if any(p in theirs and int(theirs[p]) < offset for p, offset in start.items()):
                return row
        return None

    def replicas(self, task: TaskRow) -> list[TaskRow]:
        """The running replicas of a task: its group's tasks of the same generation (the same
        start offsets, still reading); itself alone when it has no group."""
        if task.group_id is None:
            return [task]
        query = select(TaskRow).where(
            TaskRow.status == TaskStatusCode.RUNNING,
            TaskRow.datasource == task.datasource,
            TaskRow.supervisor_id == task.supervisor_id,
            TaskRow.group_id == task.group_id,
        )
        start = start_of(task)
        return [
            row
            for row in self.session.scalars(query)
            if row.end_offsets is None and start_of(row) == start
        ]

    def finished_since(self, supervisor_id: str, since: datetime | None) -> list[TaskRow]:
        """Ended tasks of a supervisor (those that ended at or after `since`), oldest first."""
        query = select(TaskRow).where(
            TaskRow.supervisor_id == supervisor_id, TaskRow.status != TaskStatusCode.RUNNING
        )
        if since is not None:
            query = query.where(TaskRow.updated_at >= since)
        return list(self.session.scalars(query.order_by(TaskRow.updated_at, TaskRow.id)))

    def counts(self, supervisor_id: str) -> dict[str, int]:
        """How many tasks of a supervisor are reading, publishing, succeeded and failed."""
        publishing = TaskRow.rolled_at.is_not(None)
        query = (
            select(TaskRow.status, publishing, func.count())
            .where(TaskRow.supervisor_id == supervisor_id)
            .group_by(TaskRow.status, publishing)
        )
        counts = {"reading": 0, "publishing": 0, "success": 0, "failed": 0}
        for status, rolled, count in self.session.execute(query):
            name = (
                ("publishing" if rolled else "reading")
                if status == TaskStatusCode.RUNNING
                else status
            )
            counts[name.lower()] = counts.get(name.lower(), 0) + count
        return counts

    def supervisors_of(self, task_ids: list[str]) -> set[str]:
        """The supervisors these tasks belong to (tasks submitted on their own have none)."""
        if not task_ids:
            return set()
        query = select(TaskRow.supervisor_id).where(
            TaskRow.id.in_(task_ids), TaskRow.supervisor_id.is_not(None)
        )
        return {supervisor_id for supervisor_id in self.session.scalars(query) if supervisor_id}

    def of_supervisor(self, supervisor_id: str, finished_since: datetime) -> list[TaskRow]:
        """Running tasks of a supervisor, and those that ended since `finished_since`."""
        parameters = {"supervisor_id": supervisor_id, "since": finished_since}
        return list(self.session.scalars(_TASKS_OF_SUPERVISOR, parameters))

    def compacted_away(self, datasource: str) -> dict[str, str]:
        """The segments compactions of the datasource replaced, and their files (as their
        tasks' reports list them, while those tasks are kept)."""
        query = select(TaskRow.report).where(
            TaskRow.type == "compact", TaskRow.datasource == datasource
        )
        found: dict[str, str] = {}
        for report in self.session.scalars(query):
            found.update((report or {}).get("replaced") or {})
        return found

    def running_of_type(self, task_type: str) -> dict[str, int]:
        """How many tasks of this type run, by datasource."""
        query = (
            select(TaskRow.datasource, func.count())
            .where(TaskRow.type == task_type, TaskRow.status == TaskStatusCode.RUNNING)
            .group_by(TaskRow.datasource)
        )
        return {datasource: int(count) for datasource, count in self.session.execute(query)}

    def failed_compactions(
        self, datasource: str, since: datetime
    ) -> dict[tuple[str, str], list[datetime]]:
        """When the datasource's compact tasks that failed from `since` on ended, by their
        interval (ISO start and end)."""
        query = select(TaskRow.payload, TaskRow.updated_at).where(
            TaskRow.type == "compact",
            TaskRow.datasource == datasource,
            TaskRow.status == TaskStatusCode.FAILED,
            TaskRow.updated_at >= since,
        )
        found: dict[tuple[str, str], list[datetime]] = {}
        for payload, ended in self.session.execute(query):
            interval: Any = (payload or {}).get("interval") or []
            if len(interval) == 2:
                found.setdefault((str(interval[0]), str(interval[1])), []).append(ended)
        return found
