"""The supervisor manager: a work queue of supervisor ids, the workers that pass them through
the reconciler, and what the API asks of them (a pass now, a handoff, a restart, a
checkpoint). A supervisor passes on its `period`, when a task's duration or timeout ends, on
API changes and when its tasks exit; at most one pass per supervisor runs at a time, and the
passes of all supervisors share a few threads (controller/workers.py)."""

from __future__ import annotations

from collections.abc import Iterable

from supervisor.clock import Clock
from supervisor.controller.observe import StreamReader
from supervisor.controller.reconciler import Done, Reconciler, RequeueAfter, Retry
from supervisor.controller.requests import Checkpoint, Handoff, RequestInbox, Restart
from supervisor.controller.workers import Workers
from supervisor.controller.workqueue import WorkQueue
from supervisor.db.engine import SessionFactory
from supervisor.db.repositories import SpecRepository
from supervisor.db.tasks import TaskRepository
from supervisor.model.status import StatusStore
from supervisor.runner.protocol import Runner
from supervisor.settings import Settings

RETRY_BASE_S = 2.0  # a failed pass is retried after this, doubling up to the period


class SupervisorManager:
    def __init__(
        self,
        sessions: SessionFactory,
        clock: Clock,
        runner: Runner,
        settings: Settings,
        stream: StreamReader | None = None,
        statuses: StatusStore | None = None,
    ) -> None:
        self.sessions = sessions
        self.statuses = statuses or StatusStore()
        self.inbox = RequestInbox()
        self.reconciler = Reconciler(
            sessions,
            clock,
            runner,
            stream or StreamReader(),
            self.statuses,
            self.inbox,
            standby_lead_s=settings.standby_lead_s,
        )
        self.queue: WorkQueue[str] = WorkQueue(base_backoff_s=RETRY_BASE_S)
        self.workers = Workers(self.queue, self._pass, settings.supervisor_workers)
        self.known: set[str] = set()  # supervisors with passes queued or running
        self.workers.start()

    def _pass(self, supervisor_id: str) -> None:
        result = self.reconciler.reconcile(supervisor_id)
        if isinstance(result, Done):
            self.known.discard(supervisor_id)
            self.queue.forget(supervisor_id)
            return
        self.known.add(supervisor_id)  # (passed again after a Done: its spec came back)
        if isinstance(result, Retry):
            self.queue.add_rate_limited(supervisor_id, at_most=result.at_most)
        elif isinstance(result, RequeueAfter):
            self.queue.forget(supervisor_id)
            if result.first:
                self.queue.add(supervisor_id, first=True)
            else:
                self.queue.add_after(supervisor_id, result.seconds)

    def sync(self) -> None:
        """Queue a pass of every supervisor that has a spec and none queued or running."""
        with self.sessions() as session:
            ids = SpecRepository(session).active_ids()
        for supervisor_id in ids:
            if supervisor_id not in self.known:
                self.known.add(supervisor_id)
                self.queue.add(supervisor_id)

    def _live(self, supervisor_id: str) -> bool:
        """Whether the supervisor has passes (sync first if not: not on each API write when
        it has them already)."""
        if supervisor_id not in self.known:
            self.sync()
        return supervisor_id in self.known

    def wake(self, supervisor_id: str) -> None:
        """After an API change: a pass now."""
        if self._live(supervisor_id):
            self.queue.add(supervisor_id)

    def wake_all(self) -> None:
        for supervisor_id in list(self.known):
            self.queue.add(supervisor_id)

    def wake_tasks(self, task_ids: Iterable[str]) -> None:
        """After task processes ended: a pass now for the supervisors they belong to (and for
        no other: with a thousand supervisors, waking all of them per exit would make every
        supervisor pass again whenever any task ends)."""
        with self.sessions() as session:
            owners = TaskRepository(session).supervisors_of(list(task_ids))
        for owner in owners & self.known:
            self.queue.add(owner)

    def request_handoff(self, supervisor_id: str, groups: Iterable[int]) -> None:
        """Roll the named task groups over early (best effort, as in Druid)."""
        if self._live(supervisor_id):
            self.inbox.put(supervisor_id, Handoff(frozenset(groups)))
            self.queue.add(supervisor_id)

    def request_restart(self, supervisor_id: str, groups: set[int] | None) -> bool:
        """Kill the tasks of these groups (None: all) at the supervisor's next pass, after a
        reset changed the offsets they started from; False when it has no passes."""
        if not self._live(supervisor_id):
            return False
        self.inbox.put(supervisor_id, Restart(None if groups is None else frozenset(groups)))
        self.queue.add(supervisor_id)
        return True

    def request_checkpoint(self, supervisor_id: str, task_id: str, start: dict[str, int]) -> bool:
        """Queue a task's checkpoint request for its supervisor's next pass; False when the
        supervisor has no passes."""
        if supervisor_id not in self.known:
            return False
        self.inbox.put(supervisor_id, Checkpoint(task_id, dict(start)))
        self.queue.add(supervisor_id)
        return True

    def stop(self) -> None:
        self.workers.stop()
