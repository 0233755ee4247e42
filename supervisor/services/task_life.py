"""The owner of a task's life on the controller side: record -> start -> locate -> settle ->
recover -> kill -> exit. Each step's commit is named here, and every crash window of a launch
is in this file:

- `record` commits the task as running with no location, before anything starts (the fault
  point `task.recorded` sits right after it: supervisor/testkit/faults.py);
- `_start_recorded` commits where it serves, or that it failed to start; when that commit
  cannot happen (the metadata DB went away in between), the task is held as unsettled and the
  leader's task monitor settles it (`settle`) once the DB answers;
- `recover` (a new leader) adopts what its runners still run, records what ended, and finds
  what was recorded but never started (`start_unlaunched`);
- `record_exits` records how each process ended.

The routes' read and request side is TaskService (tasks.py)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy.orm import Session

from supervisor.clock import Clock
from supervisor.db.models import TaskRow
from supervisor.db.tasks import TaskRepository
from supervisor.errors import UNREACHABLE, NotFoundError
from supervisor.model.fence import UNFENCED, Fence
from supervisor.runner.protocol import Exited, NoSlot, Runner
from tasks.protocol import AnyTask, TaskReport, TaskState, TaskStatusCode, parse_task

log = logging.getLogger(__name__)


class Unsettled:
    """Tasks whose launch this process began but did not see through to a record (the
    metadata DB went away between recording the task and recording where it serves, or that
    it could not start): the leader's task monitor settles them (TaskLife.settle) once
    the DB answers. Without this a recorded, never-started task stayed "running" for as long
    as this overlord led: its group waited for it to read, forever (bench/chaos.py seed 33:
    PostgreSQL stopped during a resume's launches). One per overlord, its AppContext's."""

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


@dataclass
class Recovered:
    """What `recover` found: tasks adopted, and tasks recorded but never started."""

    adopted: list[str]
    unlaunched: list[str]


class TaskLife:
    def __init__(
        self,
        session: Session,
        clock: Clock,
        runner: Runner,
        fence: Fence = UNFENCED,
        unsettled: Unsettled | None = None,
    ) -> None:
        """`unsettled`: where launches not seen through are held for the leader's task monitor
        (the overlord's own, AppContext.unsettled; none given: this TaskLife's alone)."""
        self.session = session
        self.clock = clock
        self.runner = runner
        self.fence = fence  # checked before a task is launched or killed
        self.unsettled = Unsettled() if unsettled is None else unsettled
        self.tasks = TaskRepository(session)

    def launch(self, task: AnyTask, wait_for_slot: bool = False) -> str:
        """Record a task and start it (the supervisors' tasks come here directly, built by
        their reconciler; a user's through `submit`). `wait_for_slot`: when no task host can
        take it now, raise NoSlot and leave no record (the caller asks again later) instead
        of recording a failed task."""
        row = self.record(task)
        self._start(row, task, wait_for_slot)
        return task.id

    def record(self, task: AnyTask) -> TaskRow:
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
            group_id=task.group_id,
            payload=payload,
            status=TaskStatusCode.RUNNING,
            created_at=now,
            updated_at=now,
        )
        self.tasks.add(row)
        self.session.commit()
        return row

    def _start(self, row: TaskRow, task: AnyTask, wait_for_slot: bool = False) -> None:
        """Start a recorded task and record where it serves (or why it could not start); when
        that cannot be seen through (the metadata DB went away), it is left to `settle`."""
        try:
            self._start_recorded(row, task, wait_for_slot)
        except NoSlot:
            raise  # its record deleted: the caller asks again later
        except BaseException:
            self.unsettled.hold(row.id)
            raise

    def _start_recorded(self, row: TaskRow, task: AnyTask, wait_for_slot: bool) -> None:
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
                task = parse_task(row.payload)
            except ValidationError as exc:
                self._finish(row, TaskStatusCode.FAILED, f"its payload is not a task: {exc}", None)
                self.session.commit()
                continue
            self._start(row, task)

    def settle(self, task_ids: list[str]) -> None:
        """The tasks held as unsettled: each still recorded as running without a location is
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

    def kill(self, task_id: str, reason: str) -> None:
        """Kill a running task and record why (the supervisor's kills, a user's shutdown)."""
        row = self.tasks.get(task_id)
        if row is None:
            raise NotFoundError(f"Cannot find any task with id: [{task_id}]")
        if self._kill(row, reason):
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
            if row.type == "compact" and (row.report or {}).get("replaced"):
                # its commit landed (services/compaction_commit.py wrote this report): the
                # compaction is done whatever the task said after (an answer it never got)
                self._finish(row, TaskStatusCode.SUCCESS, None, None)
            elif (
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
