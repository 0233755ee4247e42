"""What only the leader runs, started when this overlord is elected and stopped when it loses
the lease: it adopts the tasks an earlier leader left running, passes every supervisor
(controller/) and records how task processes end. A follower runs none of it: it answers reads
from the metadata DB and redirects writes to the leader (api/redirect.py)."""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy.orm import Session

from supervisor.api.context import AppContext
from supervisor.clock import Clock
from supervisor.controller.manager import SupervisorManager
from supervisor.db.engine import SessionFactory
from supervisor.db.statuses import StatusRepository
from supervisor.errors import UNREACHABLE, unreachable_reason
from supervisor.loop import Loop
from supervisor.model.fence import UNFENCED, Fence
from supervisor.model.status import SupervisorStatus
from supervisor.runner.protocol import Runner
from supervisor.services.cleanup import Sweeper
from supervisor.services.compaction import CompactionDuty
from supervisor.services.janitor import Janitor
from supervisor.services.leadership import Leadership
from supervisor.services.maintenance import MaintenanceDuty
from supervisor.services.retention import RetentionDuty
from supervisor.services.task_life import TaskLife, Unsettled

log = logging.getLogger(__name__)
SWEEP_S = 5.0


class TaskMonitor(Loop):
    """Records ended task processes in the DB, a few times a second, in a thread."""

    name = "task-monitor"

    def __init__(
        self,
        sessions: SessionFactory,
        clock: Clock,
        runner: Runner,
        manager: SupervisorManager,
        sweep: bool = True,
        unlaunched: list[str] | None = None,
        fence: Fence = UNFENCED,
        unsettled: Unsettled | None = None,
    ) -> None:
        self.sessions = sessions
        self.unsettled = Unsettled() if unsettled is None else unsettled  # the overlord's
        self.clock = clock
        self.runner = runner
        self.manager = manager
        self.sweep = sweep  # every SWEEP_S, a pass for whatever has intents left pending
        self.swept = 0.0
        self.unlaunched = list(unlaunched or [])  # started by the first pass (see recover)
        self.fence = fence
        self.unreachable = False  # the metadata DB, since a run said so: said once, not each run
        super().__init__(every_s=0.25)

    def run_once(self) -> None:
        settling = self.unsettled.take()
        if settling:
            try:
                with self.sessions() as session:
                    self._life(session).settle(settling)
            except BaseException:
                self.unsettled.give_back(settling)  # the DB still away: the next run tries again
                raise
            self.manager.wake_tasks(settling)
        if self.unlaunched:
            with self.sessions() as session:
                tasks = self._life(session)
                tasks.start_unlaunched(self.unlaunched)
            self.manager.wake_tasks(self.unlaunched)
            self.unlaunched = []
        exits = self.runner.exited()
        if exits:
            with self.sessions() as session:
                TaskLife(session, self.clock, self.runner).record_exits(exits)
            self.manager.wake_tasks([exited.task_id for exited in exits])
        now = time.monotonic()
        if self.sweep and now >= self.swept + SWEEP_S:
            # an intent whose wake went nowhere (written while the leader changed) is found
            # here: its owner passes and reads it
            self.swept = now
            self.manager.sync()

    def _life(self, session: Session) -> TaskLife:
        return TaskLife(session, self.clock, self.runner, self.fence, self.unsettled)

    def failed(self, exc: Exception) -> None:
        if not isinstance(exc, UNREACHABLE):
            log.exception("task monitor pass failed", exc_info=exc)
            return
        if not self.unreachable:
            reason = unreachable_reason(exc)
            log.warning("task monitor: the metadata DB cannot be reached: %s", reason)
        self.unreachable = True

    def succeeded(self) -> None:
        if self.unreachable:
            log.info("task monitor: the metadata DB answers again")
        self.unreachable = False


class LeaderDuties:
    """Start and stop what the leader runs; both are safe to call again (the lease's thread
    calls them on an election or a loss, the service's lifespan at its start and stop)."""

    def __init__(self, context: AppContext, held: Leadership) -> None:
        self.context = context
        self.held = held
        self.manager: SupervisorManager | None = None
        self.monitor: TaskMonitor | None = None
        self.sweeper: Sweeper | None = None
        self.retention: RetentionDuty | None = None
        self.maintenance: MaintenanceDuty | None = None
        self.janitor: Janitor | None = None
        self.compaction: CompactionDuty | None = None
        self._lock = threading.Lock()

    def start(self, epoch: int) -> None:
        with self._lock:
            if self.manager is not None:
                return
            app = self.context
            sessions, settings = app.sessions, app.settings
            if app.shared:
                app.statuses.sink = StatusWriter(sessions, app.clock, epoch)
            try:
                self.held.check()  # still this epoch's leader (not lost while electing)
                with sessions() as session:  # tasks an earlier leader left running
                    recovered = TaskLife(session, app.clock, app.runner).recover()
                unsettled = app.unsettled
                self.manager = SupervisorManager(
                    sessions,
                    app.clock,
                    app.runner,
                    settings,
                    statuses=app.statuses,
                    fence=self.held,
                    unsettled=unsettled,
                )
                # the routes wake passes from now on; the sync below finds what came before
                app.manager = self.manager
                if settings.run_supervisors:
                    self.manager.sync()
                self.monitor = TaskMonitor(
                    sessions,
                    app.clock,
                    app.runner,
                    self.manager,
                    settings.run_supervisors,
                    recovered.unlaunched,
                    self.held,
                    unsettled,
                )
                self.monitor.start()
                self.sweeper = Sweeper(settings.storage(), sessions)
                self.sweeper.start()
                self.retention = RetentionDuty(
                    sessions, app.tables, self.held, app.clock, settings.coordinator_period_s
                )
                self.retention.start()
                self.maintenance = MaintenanceDuty(
                    sessions, app.tables, self.held, app.clock, settings
                )
                self.maintenance.start()
                self.janitor = Janitor(
                    sessions,
                    app.runner,
                    self.held,
                    app.clock,
                    settings,
                    settings.janitor_period_s,
                )
                self.janitor.start()
                self.compaction = CompactionDuty(
                    sessions,
                    app.tables,
                    self.held,
                    app.clock,
                    app.runner,
                    unsettled,
                    settings.coordinator_period_s,
                    settings.max_compaction_tasks,
                    settings.worker_timeout_s,
                )
                self.compaction.start()
            except BaseException:
                self._stop()
                raise
            log.info("leading at epoch %d: supervisors and task processes are driven here", epoch)

    def stop(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        app = self.context
        monitor, manager = self.monitor, self.manager
        duties = (self.sweeper, self.retention, self.maintenance, self.janitor, self.compaction)
        self.monitor = self.manager = self.sweeper = None
        self.retention = self.maintenance = self.janitor = self.compaction = None
        for duty in duties:
            if duty is not None:
                duty.stop()
        app.manager = None
        if monitor is not None:
            monitor.stop()
        if manager is not None:
            manager.stop()
        app.statuses.sink = None
        app.statuses.clear()


class StatusWriter:
    """The leader's statuses written on to the shared metadata DB, each after its pass, for
    followers to read (a failed write is logged: the next pass writes again)."""

    def __init__(self, sessions: SessionFactory, clock: Clock, epoch: int) -> None:
        self.sessions = sessions
        self.clock = clock
        self.epoch = epoch

    def __call__(self, supervisor_id: str, status: SupervisorStatus | None) -> None:
        try:
            with self.sessions() as session:
                statuses = StatusRepository(session)
                if status is None:
                    statuses.drop(supervisor_id)
                else:
                    statuses.put(supervisor_id, status.to_json(), self.epoch, self.clock())
        except Exception as exc:
            log.warning("supervisor %s: status not written for followers: %s", supervisor_id, exc)
