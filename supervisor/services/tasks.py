"""Indexing tasks as the routes see them: submit, list, inspect, read logs and reports, and
ask for a shutdown or a checkpoint (intents the leader's pass acts on). Their life on the
controller side is TaskLife's (task_life.py)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from supervisor.clients.task_api import TaskApiClient, TaskApiError, reachable
from supervisor.clients.worker_api import WorkerApiError, WorkerClient
from supervisor.clock import druid_timestamp
from supervisor.db.intents import STANDALONE, Checkpoint, Shutdown
from supervisor.db.models import TaskRow
from supervisor.db.repositories import SpecRepository
from supervisor.db.workers import WorkerRepository
from supervisor.errors import BadRequestError, NotFoundError, UnavailableError
from supervisor.model.access import Action
from supervisor.schemas.kafka_access import KafkaAccess
from supervisor.schemas.secrets import PROPERTIES, mask_task
from supervisor.services.supervisors import Actor, intend
from supervisor.services.task_life import TaskLife
from tasks.protocol import IndexKafkaTask, StoredTask, TaskStatusCode
from tasks.spec import legacy_parser
from tasks.spec.errors import FieldError, SpecError, from_validation_error
from tasks.support import context_problems, unsupported

log = logging.getLogger(__name__)


MAX_TASKS_LISTED = 100_000  # ?max= at most this
STATE_FILTERS = {
    "running": (TaskStatusCode.RUNNING,),
    "complete": (TaskStatusCode.SUCCESS, TaskStatusCode.FAILED),
    "waiting": (),
    "pending": (),
}


def parse_task(raw: object, access: KafkaAccess) -> IndexKafkaTask:
    if not isinstance(raw, dict):
        raise SpecError.single("", "the body must be a JSON object holding a task")
    if raw.get("type") != "index_kafka":
        raise SpecError.single(
            "type",
            f"unsupported task type '{raw.get('type')}'; Sluicegate runs 'index_kafka' tasks",
        )
    schema, io = legacy_parser.translate(raw.get("dataSchema"), raw.get("ioConfig"))
    if schema is not raw.get("dataSchema"):
        raw = {**raw, "dataSchema": schema, "ioConfig": io}
    try:
        task = IndexKafkaTask.model_validate(raw)
    except ValidationError as exc:
        raise from_validation_error(exc) from None
    problems = unsupported(task.dataSchema, task.ioConfig.inputFormat, "")
    problems += context_problems(task.context, "context.")
    problems += [
        FieldError(f"ioConfig.consumerProperties{e.field[len(PROPERTIES) :]}", e.reason)
        for e in access.problems(task.ioConfig.consumerProperties)
    ]
    given = task.ioConfig.inputFormat
    if given is not None:
        problems += access.format_problems(given.to_json(), "ioConfig.inputFormat")
    if problems:
        raise SpecError(problems)
    return task


def status_of(row: TaskRow, now: datetime) -> dict[str, object]:
    """Druid's TaskStatusPlus."""
    finished = row.status in (TaskStatusCode.SUCCESS, TaskStatusCode.FAILED)
    duration = int(((row.updated_at if finished else now) - row.created_at).total_seconds() * 1000)
    return {
        "id": row.id,
        "groupId": StoredTask.group_id(row.payload) or row.id,
        "type": row.type,
        "createdTime": druid_timestamp(row.created_at),
        "queueInsertionTime": druid_timestamp(row.created_at),
        "statusCode": row.status,
        "status": row.status,
        "runnerStatusCode": "NONE" if finished else "RUNNING",
        "duration": duration if finished else -1,
        "location": {"host": row.location_host, "port": row.location_port or -1, "tlsPort": -1},
        "dataSource": row.datasource,
        "errorMsg": row.error_msg,
    }


def _interval(text: str) -> tuple[datetime, datetime]:
    """Druid's createdTimeInterval: two ISO-8601 times joined by "_" (or "/"); UTC when
    they name no zone."""
    parts = text.replace("/", "_").split("_")
    reason = "must be two ISO-8601 times joined by '_', e.g. 2026-11-01_2026-11-02"
    if len(parts) != 2:
        raise BadRequestError(f"createdTimeInterval: {reason}", field="createdTimeInterval")
    times = []
    for part in parts:
        try:
            moment = datetime.fromisoformat(part.strip().replace("Z", "+00:00"))
            utc = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
        except (ValueError, OverflowError):
            raise BadRequestError(
                f"createdTimeInterval: '{part}' is not an ISO-8601 time in range; {reason}",
                field="createdTimeInterval",
            ) from None
        times.append(utc)
    if times[1] < times[0]:
        raise BadRequestError(
            "createdTimeInterval: its end is before its start", field="createdTimeInterval"
        )
    return times[0], times[1]


class TaskService:
    def __init__(self, life: TaskLife) -> None:
        """What it reads, it reads through the one owner of tasks' lives, which it asks to
        launch a submitted task."""
        self.life = life
        self.session, self.clock, self.tasks = life.session, life.clock, life.tasks

    def require(self, task_id: str) -> TaskRow:
        row = self.tasks.get(task_id)
        if row is None:
            raise NotFoundError(f"Cannot find any task with id: [{task_id}]")
        return row

    def submit(self, raw: object, access: KafkaAccess, actor: Actor) -> str:
        task = parse_task(raw, access)
        actor.require(task.datasource, Action.WRITE)
        # the task's publish moves the committed offsets of its supervisor (or of its
        # datasource's name): one of another datasource is not a user's task to move
        owner = SpecRepository(self.session).latest(task.supervisor_key)
        if owner is not None and owner.datasource != task.datasource:
            raise BadRequestError(
                f"supervisorId: [{task.supervisor_key}] is a supervisor of another "
                "dataSource; a task publishes for its own dataSource's offsets",
                field="supervisorId",
            )
        if self.tasks.get(task.id) is not None:
            raise BadRequestError(f"Task [{task.id}] already exists", field="id")
        return self.life.launch(task)

    def list_tasks(
        self,
        state: str | None,
        datasource: str | None,
        limit: int | None,
        task_type: str | None = None,
        created_interval: str | None = None,
    ) -> list[dict[str, object]]:
        """Druid's task list (GET /tasks and its runningTasks, completeTasks, waitingTasks,
        pendingTasks aliases), newest first."""
        if state is not None and state not in STATE_FILTERS:
            raise BadRequestError(
                f"state: must be one of {', '.join(STATE_FILTERS)}", field="state"
            )
        if limit is not None and limit < 0:
            raise BadRequestError("max: must not be negative", field="max")
        statuses = STATE_FILTERS[state] if state else None
        created = None if created_interval is None else _interval(created_interval)
        now = self.clock()
        found = self.tasks.find(statuses, datasource, limit, task_type, created)
        return [status_of(r, now) for r in found]

    def request_shutdown_all(self, datasource: str, actor: Actor) -> set[str]:
        """Druid's shutdownAllTasks: a shutdown asked of every running task of the datasource.
        Returns whose passes carry them out. A supervisor's tasks are replaced by its next
        pass, as in Druid (suspend or terminate the supervisor to stop its ingestion)."""
        actor.require(datasource, Action.WRITE)
        owners = set()
        for row in self.tasks.find((TaskStatusCode.RUNNING,), datasource, None):
            owner = self.request_shutdown(row.id, actor)
            if owner is not None:
                owners.add(owner)
        return owners

    def payload(self, task_id: str) -> dict[str, object]:
        row = self.require(task_id)
        return {"task": row.id, "payload": mask_task(row.payload)}

    def status(self, task_id: str) -> dict[str, object]:
        return {"task": task_id, "status": status_of(self.require(task_id), self.clock())}

    def _live(self, row: TaskRow) -> dict[str, Any] | None:
        if not reachable(row):
            return None
        try:
            client = TaskApiClient.for_task(row)
            return {
                "status": client.status(),
                "rowStats": client.row_stats(),
                "unparseableEvents": client.unparseable_events(),
                "errorMsg": None,
            }
        except TaskApiError:
            return None

    def reports(self, task_id: str) -> dict[str, object]:
        """Druid's task reports: a running task's live one (its rowStats moving averages and
        totals), else the one it left (its rowStats the totals)."""
        row = self.require(task_id)
        live = self._live(row)
        report = live or row.report or {}
        row_stats = live["rowStats"] if live else {"buildSegments": report.get("rowStats", {})}
        return {
            "ingestionStatsAndErrors": {
                "type": "ingestionStatsAndErrors",
                "taskId": row.id,
                "payload": {
                    "ingestionState": report.get("status", row.status),
                    "rowStats": row_stats,
                    "unparseableEvents": {"buildSegments": report.get("unparseableEvents", [])},
                    "errorMsg": report.get("errorMsg") or row.error_msg,
                    "segments": report.get("segments", []),
                },
            }
        }

    def log_text(self, task_id: str) -> str:
        row = self.require(task_id)
        if row.worker is not None:  # on a task host: its API has the log
            host = WorkerRepository(self.session).get(row.worker)
            text = None
            if host is not None:
                client = WorkerClient(host)
                try:
                    text = client.log(task_id)
                except WorkerApiError as exc:
                    raise UnavailableError(f"No log for task [{task_id}]: {exc}") from None
                finally:
                    client.close()
            if text is None:
                raise NotFoundError(f"No log for task [{task_id}]")
            return text
        if row.log_path is None or not Path(row.log_path).exists():
            raise NotFoundError(f"No log for task [{task_id}]")
        return Path(row.log_path).read_text(errors="replace")

    def request_shutdown(self, task_id: str, actor: Actor) -> str | None:
        """Druid's task shutdown, asked: an intent for the leader's pass of the task's
        supervisor (or of the tasks with none), which kills it. Returns whose pass that is;
        None when the task does not run."""
        row = self.require(task_id)
        if row.status != TaskStatusCode.RUNNING:
            return None
        owner = row.supervisor_id or STANDALONE
        intend(self.session, owner, Shutdown(), actor, self.clock(), task_id)
        return owner

    def request_checkpoint(self, row: TaskRow, start: dict[str, int]) -> str:
        """A task's checkpoint request, as an intent for its supervisor's pass (or the pass
        of the tasks with none). Returns whose pass that is."""
        owner = row.supervisor_id or STANDALONE
        asker = Actor(author=row.id)
        intend(self.session, owner, Checkpoint(start=start), asker, self.clock(), row.id)
        return owner
