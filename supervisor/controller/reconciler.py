"""The reconciler: one pass of one supervisor, observe → plan → execute → result, as Druid's
runInternal.

A pass takes a supervisor id and converges from what it reads (STYLE habits 1-3). It is
stateless between passes but for `Memory` (memory.py), what earlier passes of the same
supervisor learned; the work queue runs one pass per supervisor at a time, so a supervisor's
memory has one writer. Each step has a module of its own: the intents (requests.py), the
autoscaler's step (scaling.py), the consumer-group mirror (mirror.py), the pace and the rule
for light passes (pacing.py). A pass publishes the supervisor's status and answers with a
typed Result that the manager hands to the work queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from supervisor.clock import Clock, druid_timestamp
from supervisor.controller.actions import Action, CreateTask, Rollover
from supervisor.controller.execute import Executor
from supervisor.controller.memory import Memory, Seen, remembered
from supervisor.controller.mirror import DEFAULT_GROUP_PREFIX, GroupMirror
from supervisor.controller.observe import StreamError, StreamReader, TaskProbe, observe
from supervisor.controller.pacing import (
    AGAIN_S,
    SLOT_WAIT_S,
    Done,
    Pace,
    Result,
    Retry,
    light,
)
from supervisor.controller.plan import next_deadline, plan
from supervisor.controller.requests import Intents, Pending, merge
from supervisor.controller.scaling import Scaler
from supervisor.db.engine import SessionFactory
from supervisor.db.intents import STANDALONE, IntentRepository
from supervisor.model.fence import UNFENCED, Fence
from supervisor.model.status import PassError, StatusStore, SupervisorState, SupervisorStatus
from supervisor.model.views import Snapshot
from supervisor.runner.protocol import Runner
from supervisor.services.task_life import TaskLife, Unsettled
from tasks.logs import log_context
from tasks.spec.periods import duration_millis

log = logging.getLogger(__name__)

SLOW_PASS_S = 1.0  # a pass this long is logged with where its time went


@dataclass(frozen=True)
class Outcome:
    """What a good pass did, for the status and the next pass's timing."""

    snapshot: Snapshot
    acted: bool  # actions were taken that call for a prompt next pass
    rolled: bool  # a group was rolled over: its successors are created by the next pass
    gone: bool
    light: bool = False  # it made checkpoints only, from what an earlier pass saw


class Reconciler:
    def __init__(
        self,
        sessions: SessionFactory,
        clock: Clock,
        runner: Runner,
        stream: StreamReader,
        statuses: StatusStore,
        monotonic: Callable[[], float] = time.monotonic,
        fence: Fence = UNFENCED,
        group_prefix: str = DEFAULT_GROUP_PREFIX,
        unsettled: Unsettled | None = None,
    ) -> None:
        self.sessions = sessions
        self.clock = clock
        self.runner = runner
        self.stream = stream
        self.statuses = statuses
        self.monotonic = monotonic
        self.fence = fence  # a pass acts only while this overlord leads
        # launches the passes began and could not see through: the overlord's task monitor's
        self.unsettled = unsettled
        self.intents = Intents(clock)
        self.mirror = GroupMirror(fence, monotonic, group_prefix)
        self.scaler = Scaler(clock, monotonic, fence)
        # supervisors whose last full pass's snapshot no longer stands (a spec change, a
        # task's exit): their next pass observes and plans in full
        self.changed: set[str] = set()
        self.memories: dict[str, Memory] = {}

    def memory(self, supervisor_id: str) -> Memory:
        memory = self.memories.get(supervisor_id)
        if memory is None:
            memory = Memory(Pace.of(supervisor_id), Seen(latest_changed_at=self.clock()))
            self.memories[supervisor_id] = memory
        return memory

    def forget(self, supervisor_id: str) -> None:
        self.memories.pop(supervisor_id, None)
        self.statuses.drop(supervisor_id)
        self.intents.forget(supervisor_id)
        self.changed.discard(supervisor_id)

    def wake(self, supervisor_id: str) -> None:
        """Something the last snapshot holds changed for the supervisor (its spec, a task's
        exit): that snapshot no longer stands, and its next pass is a full one."""
        self.changed.add(supervisor_id)

    def _executor(self, session: Session) -> Executor:
        life = TaskLife(session, self.clock, self.runner, self.fence, self.unsettled)
        return Executor(life)

    def hint(self, supervisor_id: str) -> None:
        self.intents.hint(supervisor_id)

    def standalone(self) -> bool:
        """The intents about tasks with no supervisor (submitted with POST /task): their
        shutdowns and checkpoint requests, each marked done with its effect. Whether a checkpoint
        must be asked again (its intent stays pending, for a pass soon)."""
        self.intents.forget(STANDALONE)  # taken now: a later write hints again
        with self.sessions() as session:
            pending = merge(IntentRepository(session).pending(STANDALONE))
            executor = self._executor(session)
            self.intents.shut_down(executor.tasks, pending)
            again = self.intents.checkpoint(executor, pending, skip_groups=set())
            session.commit()
        if again:
            self.intents.hint(STANDALONE)
        return again

    def reconcile(self, supervisor_id: str) -> Result:
        """One pass, its timing and failure kept in the supervisor's status."""
        memory = self.memory(supervisor_id)
        status = self.statuses.get(supervisor_id) or SupervisorStatus()
        began = self.monotonic()
        try:
            with log_context(supervisor=supervisor_id):
                outcome = self.run_pass(supervisor_id, memory)
        except Exception as exc:
            memory.asked.read = True  # whatever it took is still pending: read it again
            memory.pace.full_at = None
            log.warning("supervisor %s: pass failed: %s", supervisor_id, exc)
            stream = isinstance(exc, StreamError)
            error = PassError(druid_timestamp(self.clock()), type(exc).__name__, str(exc), stream)
            self._publish(supervisor_id, memory, status.failed(error, stream), began)
            return Retry(memory.pace.until_due(self.monotonic()))
        if outcome is None or outcome.gone:
            self.forget(supervisor_id)
            return Done()
        self._publish(supervisor_id, memory, healthy(status, outcome.snapshot, memory.probe), began)
        now = self.monotonic()
        if outcome.light:
            return memory.pace.after_light(now)
        memory.snapshot = outcome.snapshot
        return memory.pace.after_full(now, outcome.acted, outcome.rolled)

    def _publish(
        self, supervisor_id: str, memory: Memory, status: SupervisorStatus, began: float
    ) -> None:
        """The pass's status, with its time; a slow pass says where its time went."""
        seconds = self.monotonic() - began
        if seconds >= SLOW_PASS_S:
            spent = " ".join(f"{name} {value:.2f} s" for name, value in memory.laps.items())
            log.warning("supervisor %s: slow pass %.2f s (%s)", supervisor_id, seconds, spent)
        self.statuses.put(supervisor_id, status.timed(seconds, memory.asked.waiting))

    def run_pass(self, supervisor_id: str, memory: Memory) -> Outcome | None:
        """Observe, plan, execute; None when the supervisor has no spec at all. A light pass
        (pacing.light) makes checkpoints only."""
        laps: dict[str, float] = {}
        memory.laps = laps
        memory.probe.leader = self.fence.check()
        stands = memory.snapshot is not None and supervisor_id not in self.changed
        self.changed.discard(supervisor_id)  # before the reads: a later change is seen again
        with self.sessions() as session:
            pending = self.intents.pending(session, supervisor_id, memory.asked)
            executor = self._executor(session)
            if light(memory.pace, self.monotonic(), stands, pending):
                return self.light_pass(session, executor, pending, memory)
            memory.pace.deadline = None  # a pass that fails sets none
            if not memory.adopted:
                executor.adopt(supervisor_id)
                memory.adopted = True
            self.intents.restart(executor.tasks, supervisor_id, pending)
            asked = frozenset(pending.handoffs)
            observed = observe(
                session, supervisor_id, self.clock(), self.stream, asked, memory.probe, laps
            )
            if observed is None:
                self.intents.moot(pending)
                session.commit()
                return None
            snapshot, spec, row = observed
            snapshot = remembered(snapshot, spec, memory.seen)
            snapshot = self.scaler.scaled(session, snapshot, spec, memory.lag)
            memory.pace.period_s = max(1.0, duration_millis(spec.spec.ioConfig.period) / 1000)
            actions = plan(snapshot)
            deadline = next_deadline(snapshot)
            if deadline is not None:
                seconds = (deadline - snapshot.now).total_seconds()
                memory.pace.deadline = self.monotonic() + seconds
            executing = self.monotonic()
            rolling = {a.group for a in actions if isinstance(a, Rollover)}
            executor.handoffs = {g: rows for g, rows in pending.handoffs.items() if g in rolling}
            executor.run(actions, spec, row.id)
            self._checkpoints(executor, pending, rolling, memory)
            self._wait_for_slots(supervisor_id, executor.no_slot, actions, memory)
            laps["execute"] = self.monotonic() - executing
            self.intents.settle(session, pending, snapshot, rolling, memory.asked)
            running = any(t.running for t in snapshot.tasks)
        self.mirror.write(self.stream, snapshot, spec, memory.mirrored)
        waited = executor.no_slot is not None  # its CreateTasks wait for a slot: not acted on
        acted = any(not (waited and isinstance(a, CreateTask)) for a in actions)
        gone = snapshot.terminated and not running and not actions
        return Outcome(snapshot, acted, bool(executor.rolled), gone)

    def light_pass(
        self, session: Session, executor: Executor, pending: Pending, memory: Memory
    ) -> Outcome:
        """Checkpoint requests between full passes (a task's intermediateHandoffPeriod or
        maxRowsPerSegment), with nothing else changed: made without observing the stream
        and the tasks or planning again. A group rolled over since has its tasks' end
        offsets set, which ends their requests (Executor.checkpoints)."""
        began = self.monotonic()
        self._checkpoints(executor, pending, set(), memory)
        session.commit()
        memory.laps["execute"] = self.monotonic() - began
        if executor.killed_at_checkpoint:  # its replacement is planned by a full pass, now
            memory.pace.full_at = self.monotonic()
        assert memory.snapshot is not None
        return Outcome(memory.snapshot, acted=False, rolled=False, gone=False, light=True)

    def _checkpoints(
        self, executor: Executor, pending: Pending, skip_groups: set[int], memory: Memory
    ) -> None:
        """A supervisor's checkpoints (Intents.checkpoint); one to ask again is read again by
        a pass within AGAIN_S."""
        if self.intents.checkpoint(executor, pending, skip_groups):
            memory.asked.read = True
            memory.pace.within(self.monotonic(), AGAIN_S)

    def _wait_for_slots(
        self, supervisor_id: str, no_slot: str | None, actions: list[Action], memory: Memory
    ) -> None:
        """Tasks no task host had a slot for are not created (nor recorded as failed): the
        supervisor asks again every SLOT_WAIT_S, saying once that they wait and once that
        they no longer do."""
        if no_slot is not None:
            if memory.no_slot is None:
                log.warning(
                    "supervisor %s: its new tasks wait for a slot: %s", supervisor_id, no_slot
                )
            memory.no_slot = no_slot
            memory.pace.within(self.monotonic(), SLOT_WAIT_S)
        elif memory.no_slot is not None and any(isinstance(a, CreateTask) for a in actions):
            log.info("supervisor %s: task hosts have slots again", supervisor_id)
            memory.no_slot = None


def healthy(status: SupervisorStatus, snapshot: Snapshot, probe: TaskProbe) -> SupervisorStatus:
    """The status after a good pass."""
    suspended = snapshot.suspended and not snapshot.terminated
    state = (
        SupervisorState.SUSPENDED
        if suspended
        else SupervisorState.IDLE
        if snapshot.idle
        else SupervisorState.RUNNING
    )
    return replace(
        status,
        passes=status.passes + 1,
        connected_once=True,
        consecutive_failures=0,
        healthy=True,
        state=state,
        detailed_state=state,
        partitions=snapshot.partitions,
        latest=dict(snapshot.latest),
        current=dict(probe.current),
        started=dict(probe.started),
        task_metrics=dict(probe.metrics),
        offsets_updated=druid_timestamp(snapshot.now),
        snapshot=snapshot,
    )
