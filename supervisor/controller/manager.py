"""The supervisor manager: a work queue of supervisor ids, the workers that pass them through
the reconciler, and a pass now when the API changed something or wrote an intent (a handoff,
a restart, a checkpoint, a shutdown: db/intents.py). A supervisor passes on its `period`, when
a task's duration or timeout ends, on API changes and when its tasks exit; at most one pass
per supervisor runs at a time, and the passes of all supervisors share a few threads
(controller/workers.py). The intents about tasks with no supervisor have a key of their own,
STANDALONE, passed only when one is written."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from supervisor.clock import Clock
from supervisor.controller.observe import StreamReader
from supervisor.controller.pacing import AGAIN_S, DEFAULT_PERIOD_S, Done, RequeueAfter, Retry
from supervisor.controller.reconciler import Reconciler
from supervisor.controller.workers import Workers
from supervisor.controller.workqueue import WorkQueue
from supervisor.db.engine import SessionFactory
from supervisor.db.intents import STANDALONE, IntentRepository
from supervisor.db.repositories import SpecRepository
from supervisor.db.tasks import TaskRepository
from supervisor.model.fence import UNFENCED, Fence
from supervisor.model.status import StatusStore
from supervisor.runner.protocol import Runner
from supervisor.schemas.kafka_access import KafkaAccess
from supervisor.services.task_life import Unsettled
from supervisor.settings import Settings

log = logging.getLogger(__name__)
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
        fence: Fence = UNFENCED,
        unsettled: Unsettled | None = None,
    ) -> None:
        self.sessions = sessions
        self.runner = runner
        self.statuses = statuses or StatusStore()
        self.reconciler = Reconciler(
            sessions,
            clock,
            runner,
            stream or StreamReader(access=KafkaAccess.of(settings)),
            self.statuses,
            fence=fence,
            group_prefix=settings.consumer_group_prefix,
            unsettled=unsettled,
        )
        self.queue: WorkQueue[str] = WorkQueue(base_backoff_s=RETRY_BASE_S)
        self.workers = Workers(self.queue, self._pass, settings.supervisor_workers)
        self.known: set[str] = set()  # supervisors with passes queued or running
        self.workers.start()

    def _pass(self, supervisor_id: str) -> None:
        if supervisor_id == STANDALONE:
            try:
                if self.reconciler.standalone():
                    self.queue.add_after(STANDALONE, AGAIN_S)
            except Exception as exc:
                log.warning("standalone tasks' intents: %s", exc)
                self.queue.add_rate_limited(STANDALONE, at_most=DEFAULT_PERIOD_S)
            return
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
        """Queue a pass of every supervisor that has a spec and none queued or running, and
        of every owner of an intent not yet done (a new leader finds what the last one left)."""
        with self.sessions() as session:
            ids = SpecRepository(session).active_ids()
            owners = IntentRepository(session).owners_pending()
        for owner in owners:
            self.reconciler.hint(owner)
        if STANDALONE in owners:
            self.queue.add(STANDALONE)
        if ids:  # tasks will run: the host's application starts now (not for an idle overlord)
            self.runner.prepare()
        # owners with intents but no spec too (a shutdown of a task whose supervisor is gone)
        for supervisor_id in [*ids, *(o for o in owners if o != STANDALONE)]:
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
        """After an API change: a full pass now."""
        self.reconciler.wake(supervisor_id)
        self._now(supervisor_id)

    def _now(self, supervisor_id: str) -> None:
        if self._live(supervisor_id):
            self.queue.add(supervisor_id)

    def wake_all(self) -> None:
        for supervisor_id in list(self.known):
            self.reconciler.wake(supervisor_id)
            self.queue.add(supervisor_id)

    def wake_tasks(self, task_ids: Iterable[str]) -> None:
        """After task processes ended: a pass now for the supervisors they belong to (and for
        no other: with a thousand supervisors, waking all of them per exit would make every
        supervisor pass again whenever any task ends)."""
        with self.sessions() as session:
            owners = TaskRepository(session).supervisors_of(list(task_ids))
        for owner in owners & self.known:
            self.reconciler.wake(owner)
            self.queue.add(owner)

    def intended(self, owner: str) -> None:
        """An intent for `owner` was committed (STANDALONE: about a task with no supervisor):
        its next pass reads it, now."""
        self.reconciler.hint(owner)
        if owner == STANDALONE:
            self.queue.add(STANDALONE)
        else:
            self._now(owner)

    def stop(self) -> None:
        self.workers.stop()
