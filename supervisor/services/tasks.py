"""Indexing tasks: submit, inspect, shut down; record how their processes ended."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from supervisor.clients.task_api import TaskApiClient, TaskApiError, reachable
from supervisor.clients.worker_api import WorkerApiError, WorkerClient
from supervisor.clock import Clock, druid_timestamp
from supervisor.db.engine import UNREACHABLE
from supervisor.db.intents import STANDALONE, IntentKind
from supervisor.db.models import TaskRow
from supervisor.db.repositories import SpecRepository
from supervisor.db.tasks import TaskRepository
from supervisor.db.workers import WorkerRepository
from supervisor.errors import BadRequestError, NotFoundError, UnavailableError
from supervisor.model.access import Action
from supervisor.model.fence import UNFENCED, Fence
from supervisor.runner.protocol import Exited, NoSlot, Runner
from supervisor.schemas.kafka_access import KafkaAccess
from supervisor.schemas.secrets import PROPERTIES, mask_task
from supervisor.services.supervisors import Actor, intend
from tasks.protocol import IndexKafkaTask, TaskReport, TaskState, TaskStatusCode
from tasks.spec import legacy_parser
from tasks.spec.errors import FieldError, SpecError, from_validation_error
from tasks.support import unsupported

log = logging.getLogger(__name__)


class _Unsettled:
    """Tasks whose launch this process began but did not see through to a record (the
    metadata DB went away between recording the task and recording where it serves, or that
    it could not start): the leader's task monitor settles them (TaskService.settle) once
    the DB answers. Without this a recorded, never-started task stayed "running" for as long
    as this overlord led: its group waited for it to read, forever (bench/chaos.py seed 33:
    PostgreSQL stopped during a resume's launches)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: set[str] = set()

    def hold(self, task_id: str) -> None:
        with self.lock:
            self.ids.add(task_id)

    def take(self) -> list[str]:
        with self.lock:
            taken, self.ids = sorted(self.ids), set()
        return taken

    def give_back(self, task_ids: list[str]) -> None:
        with self.lock:
            self.ids.update(task_ids)


UNSETTLED = _Unsettled()
MAX_TASKS_LISTED = 100_000  # ?max= at most this
STATE_FILTERS = {
    "running": (TaskStatusCode.RUNNING,),
    "complete": (TaskStatusCode.SUCCESS, TaskStatusCode.FAILED),
    "waiting": (),
    "pending": (),
}


@dataclass
class Recovered:
    """What `recover` found: tasks adopted, and tasks recorded but never started."""

    adopted: list[str]
    unlaunched: list[str]


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
        "groupId": row.payload.get("groupId") or row.id,
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
    def __init__(
        self, session: Session, clock: Clock, runner: Runner, fence: Fence = UNFENCED
    ) -> None:
        self.session = session
        self.clock = clock
        self.runner = runner
        self.fence = fence  # checked before a task is launched or killed
        self.tasks = TaskRepository(session)

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
        return self.launch(task)

    def launch(self, task: IndexKafkaTask, wait_for_slot: bool = False) -> str:
        """Record a task and start it (the supervisors' tasks come here directly, built by
        their reconciler; a user's through `submit`). `wait_for_slot`: when no task host can
        take it now, raise NoSlot and leave no record (the caller asks again later) instead
        of recording a failed task."""
        row = self.record(task)
        self._start(row, task, wait_for_slot)
        return task.id

    def record(self, task: IndexKafkaTask) -> TaskRow:
        """A launch's first commit point: the task recorded as running, not yet started.
        Recorded before the process starts, so no write lock of the metadata DB is held while
        it does (SQLite's is one for the whole DB: every other writer would wait)."""
        self.fence.check()
        payload = task.to_json()
        now = self.clock()
        row = TaskRow(
            id=task.id,
            type=task.type,
            supervisor_id=task.supervisorId,
            datasource=task.datasource,
            group_id=task.ioConfig.taskGroupId,
            payload=payload,
            status=TaskStatusCode.RUNNING,
            created_at=now,
            updated_at=now,
        )
        self.tasks.add(row)
        self.session.commit()
        return row

    def _start(self, row: TaskRow, task: IndexKafkaTask, wait_for_slot: bool = False) -> None:
        """Start a recorded task and record where it serves (or why it could not start); when
        that cannot be seen through (the metadata DB went away), it is left to `settle`."""
        try:
            self._start_recorded(row, task, wait_for_slot)
        except NoSlot:
            raise  # its record deleted: the caller asks again later
        except BaseException:
            UNSETTLED.hold(row.id)
            raise

    def _start_recorded(self, row: TaskRow, task: IndexKafkaTask, wait_for_slot: bool) -> None:
        try:
            launched = self.runner.launch(task)
        except Exception as exc:
            if wait_for_slot and isinstance(exc, NoSlot):
                self.session.delete(row)
                self.session.commit()
                raise
            if isinstance(exc, UNREACHABLE):  # not the task's fault: started once it answers
                raise
            self._finish(
                row, TaskStatusCode.FAILED, f"the task process could not be started: {exc}", None
            )
            self.session.commit()
            if not isinstance(exc, OSError):
                raise
            return
        row.location_host, row.location_port = launched.host, launched.port
        row.location_scheme, row.worker = launched.scheme, launched.worker
        row.token, row.log_path = launched.token, launched.log_path
        self.session.commit()
        where = f" (task host {launched.worker})" if launched.worker else ""
        log.info("task %s launched on %s:%s%s", task.id, launched.host, launched.port, where)

    def start_unlaunched(self, task_ids: list[str]) -> None:
        """Start the recorded tasks `recover` found never started (an earlier overlord died
        after recording each and before its runner had it), from their recorded payloads, as
        Druid's task queue runs the active tasks of its metadata store that no runner has."""
        for task_id in task_ids:
            row = self.tasks.get(task_id)
            if row is None or row.status != TaskStatusCode.RUNNING or row.location_port is not None:
                continue
            self.fence.check()
            log.info("task %s: starting it (its launch never happened)", task_id)
            try:
                task = IndexKafkaTask.model_validate(row.payload)
            except ValidationError as exc:
                self._finish(row, TaskStatusCode.FAILED, f"its payload is not a task: {exc}", None)
                self.session.commit()
                continue
            self._start(row, task)

    def settle(self, task_ids: list[str]) -> None:
        """The tasks UNSETTLED holds: each still recorded as running without a location is
        located when its runner has it (killed and recorded failed when it cannot be), recorded
        ended when it left a report, else started (start_unlaunched)."""
        gone: list[Exited] = []
        unlaunched: list[str] = []
        for task_id in task_ids:
            row = self.tasks.get(task_id)
            if row is None or row.status != TaskStatusCode.RUNNING or row.location_port is not None:
                continue
            if self.runner.is_running(task_id):
                if not self._placed(row):
                    gone.append(Exited(task_id, None, None, "its launch could not be recorded"))
                continue
            ended = self._ended(row)
            if ended is None:
                unlaunched.append(task_id)
            else:
                gone.append(ended)
        self.session.commit()
        self.record_exits(gone)
        self.start_unlaunched(unlaunched)

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

    def kill(self, task_id: str, reason: str) -> None:
        """Kill a running task and record why (the supervisor's kills, a user's shutdown)."""
        if self._kill(self.require(task_id), reason):
            self.session.commit()

    def kill_running(self, supervisor_id: str, groups: set[int] | None, reason: str) -> None:
        """Kill the running tasks of a supervisor's groups (None: every group), and commit
        once, with whatever else the session holds (the intent that asked for it)."""
        self.fence.check()
        for row in self.tasks.of_supervisor(supervisor_id, self.clock()):
            if row.status == TaskStatusCode.RUNNING and (groups is None or row.group_id in groups):
                log.info("killing %s: %s", row.id, reason)
                self._kill(row, reason)
        self.session.commit()

    def request_shutdown(self, task_id: str, actor: Actor) -> str | None:
        """Druid's task shutdown, asked: an intent for the leader's pass of the task's
        supervisor (or of the tasks with none), which kills it. Returns whose pass that is;
        None when the task does not run."""
        row = self.require(task_id)
        if row.status != TaskStatusCode.RUNNING:
            return None
        owner = row.supervisor_id or STANDALONE
        intend(self.session, owner, IntentKind.SHUTDOWN, {}, actor, self.clock(), task_id)
        return owner

    def request_checkpoint(self, row: TaskRow, start: dict[str, int]) -> str:
        """A task's checkpoint request, as an intent for its supervisor's pass (or the pass
        of the tasks with none). Returns whose pass that is."""
        owner = row.supervisor_id or STANDALONE
        payload = {"start": dict(start)}
        asker = Actor(author=row.id)
        intend(self.session, owner, IntentKind.CHECKPOINT, payload, asker, self.clock(), row.id)
        return owner

    def shut_down(self, task_id: str) -> None:
        """Carry out a user's shutdown (the pass that read the intent calls this)."""
        row = self.tasks.get(task_id)
        if row is not None and row.status == TaskStatusCode.RUNNING:
            log.info("killing %s: shutdown request from user", task_id)
            self._kill(row, "Shutdown request from user")
        self.session.commit()

    def _kill(self, row: TaskRow, reason: str) -> bool:
        """Kill the row's task if it runs (only while this overlord leads) and record why, for
        the caller to commit; whether it ran."""
        if row.status != TaskStatusCode.RUNNING:
            return False
        self.fence.check()
        self.runner.kill(row.id)
        self._finish(row, TaskStatusCode.FAILED, reason, None)
        return True

    def _finish(
        self, row: TaskRow, status: TaskStatusCode, error: str | None, report: TaskReport | None
    ) -> None:
        if row.status != TaskStatusCode.RUNNING:
            return
        row.status, row.error_msg, row.updated_at = status, error, self.clock()
        if report is not None:
            row.report = report.model_dump(mode="json")

    def recover(self) -> Recovered:
        """At start-up: adopt the task processes an earlier overlord left running, record the
        ones that ended meanwhile, and find the ones it recorded but never started (it died
        in between: no runner has them, none left a report or a location); those are for
        `start_unlaunched`, off the lease's thread."""
        recovered, gone = Recovered([], []), []
        for row in self.tasks.find((TaskStatusCode.RUNNING,), None, None):
            if self.runner.is_running(row.id):
                continue
            if not self.runner.adopt(row.id):
                ended = self._ended(row)
                if ended is None:
                    recovered.unlaunched.append(row.id)
                else:
                    gone.append(ended)
            elif self._placed(row):
                recovered.adopted.append(row.id)
            else:
                reason = "its launch was never recorded (the overlord stopped during it)"
                gone.append(Exited(row.id, None, None, reason))
        self.record_exits(gone)
        if recovered.adopted:
            log.info(
                "adopted %s running task processes: %s",
                len(recovered.adopted),
                recovered.adopted,
            )
        return recovered

    def _ended(self, row: TaskRow) -> Exited | None:
        """A task recorded as running that no runner has: how it ended (its report, or none),
        or None when it never started (no report and no location: the overlord that recorded
        it stopped before launching it)."""
        report = self.runner.report(row.id)
        if report is None and row.location_port is None:
            return None
        return Exited(row.id, None, report)

    def _placed(self, row: TaskRow) -> bool:
        """A task a runner has: True when where it serves is recorded, or found now."""
        return (row.location_port is not None and row.token is not None) or self._locate(row)

    def _locate(self, row: TaskRow) -> bool:
        """An adopted task whose launch an earlier overlord never recorded (it died between
        starting the task and writing where it serves): recorded now from its work directory.
        One that cannot be found there is killed (no pass could pause or stop it; its group
        replaces it): False."""
        where = self.runner.located(row.id)
        if where is None:
            self.runner.kill(row.id)
            return False
        row.location_host, row.location_port = where.host, where.port
        row.location_scheme, row.worker = where.scheme, where.worker
        row.token, row.log_path = where.token, where.log_path
        log.info("task %s: its unrecorded launch found at %s:%s", row.id, where.host, where.port)
        return True

    def record_exits(self, exits: list[Exited]) -> None:
        """Write how task processes ended; the runner tells which did."""
        for exited in exits:
            row = self.tasks.get(exited.task_id)
            if row is None:
                continue
            report = exited.report
            if (
                report is not None
                and report.status is TaskState.SUCCESS
                and exited.exit_code in (0, None)
            ):
                self._finish(row, TaskStatusCode.SUCCESS, None, report)
            else:
                reason = (
                    (report and report.errorMsg)
                    or exited.reason
                    or (
                        "task process ended without a report"
                        if exited.exit_code is None
                        else f"task process exited with code {exited.exit_code}"
                    )
                )
                self._finish(row, TaskStatusCode.FAILED, reason, report)
            log.info("task %s ended: %s", row.id, row.status)
        self.session.commit()
