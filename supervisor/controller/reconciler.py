"""The reconciler: one pass of one supervisor, observe → plan → execute, and when the next is due.

A pass takes a supervisor id and converges from what it reads (STYLE habits 1-3): it never asks
what woke it. It is stateless between passes but for `Memory`, what earlier passes of the same
supervisor learned (when the partition set was first seen, whether new data stopped coming,
when the periodic pass is due); the work queue runs one pass per supervisor at a time, so a
supervisor's memory has one writer. It publishes the supervisor's status after every pass and
answers with a typed Result that the manager hands to the work queue.
"""

from __future__ import annotations

import logging
import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from supervisor.clock import Clock, druid_timestamp
from supervisor.controller import autoscale
from supervisor.controller.actions import Action, CreateTask, Rollover
from supervisor.controller.execute import Executor
from supervisor.controller.observe import StreamError, StreamReader, TaskProbe, observe
from supervisor.controller.plan import next_deadline, plan
from supervisor.controller.requests import Pending, merge
from supervisor.db.engine import SessionFactory
from supervisor.db.intents import STANDALONE, IntentRepository
from supervisor.db.repositories import (
    AUTOSCALER,
    DECISIONS_KEPT,
    AuditRepository,
    AutoscalerRepository,
)
from supervisor.model.fence import UNFENCED, Fence
from supervisor.model.status import PassError, StatusStore, SupervisorState, SupervisorStatus
from supervisor.model.views import Snapshot
from supervisor.runner.protocol import Runner
from supervisor.schemas.spec import SupervisorSpec
from supervisor.services.supervisors import RESET_REASON
from supervisor.services.tasks import TaskService
from tasks.logs import log_context
from tasks.partitions import Offsets, PartitionKey
from tasks.spec.periods import duration_millis

log = logging.getLogger(__name__)


MIRROR_REFRESH_S = 3600.0  # a consumer group's unchanged offsets written again (Kafka expires
# a memberless group's offsets offsets.retention.minutes, 7 days by default, after their commit)


DEFAULT_GROUP_PREFIX = "sluicegate-"  # Settings.consumer_group_prefix's default


def consumer_group(supervisor_id: str, prefix: str = DEFAULT_GROUP_PREFIX) -> str:
    """The Kafka consumer group that mirrors a supervisor's committed offsets."""
    return f"{prefix}{supervisor_id}"


DEFAULT_PERIOD_S = 30.0  # Druid's ioConfig.period, until the first pass has read the spec
IDLE_AFTER_MS = 600_000  # Druid's default inactiveAfterMillis
SLOW_PASS_S = 1.0  # a pass this long is logged with where its time went
ACTED_S = 0.2  # after a pass that acted: the next one soon, to see what the actions did
AGAIN_S = 1.0  # a checkpoint none of whose replicas could be paused is asked again this soon
SLOT_WAIT_S = 2.0  # tasks no task host had a slot for are asked for again this soon


@dataclass(frozen=True)
class Done:
    """The supervisor is gone (no spec, or terminated and wound down): no more passes."""


@dataclass(frozen=True)
class RequeueAfter:
    """Pass again in `seconds`; `first`: ahead of every pass already due."""

    seconds: float
    first: bool = False


@dataclass(frozen=True)
class Retry:
    """The pass failed: again after the supervisor's backoff, but no later than `at_most`
    seconds (its next periodic pass)."""

    at_most: float


Result = Done | RequeueAfter | Retry


@dataclass
class Memory:
    """What earlier passes of one supervisor learned; touched by its own passes alone."""

    phase: float  # where in each period its periodic pass falls, in (0, 1]
    latest_changed_at: datetime
    period_s: float = DEFAULT_PERIOD_S
    due: float | None = None  # when the next periodic pass is due (monotonic)
    deadline: float | None = None  # when the clock next changes the plan (monotonic)
    adopted: bool = False  # the first pass adopts what an earlier overlord left running
    intents: bool = True  # read the pending intents (the first pass does: a new leader's)
    waiting: int = 0  # intents the last pass left pending
    probe: TaskProbe = field(default_factory=TaskProbe)
    partition_sets: dict[tuple[PartitionKey, ...], datetime] = field(default_factory=dict)
    last_latest: Offsets | None = None  # the first observation is news
    laps: dict[str, float] = field(default_factory=dict)  # where the last pass's time went
    no_slot: str | None = None  # why its tasks wait for a task host's slot, while they do
    # when the last full pass wants the next (monotonic), and what it saw: a pass woken
    # before then by checkpoint requests alone makes just those (light_pass)
    full_at: float | None = None
    snapshot: Snapshot | None = None
    lag: autoscale.LagWindow = field(default_factory=autoscale.LagWindow)  # the autoscaler's
    mirrored: Offsets | None = None  # the committed offsets its consumer group was last given
    mirrored_at: float | None = None  # when (monotonic)
    mirror_failed: bool = False  # the last try to give them failed (logged once)


@dataclass(frozen=True)
class Outcome:
    """What a good pass did, for the status and the next pass's timing."""

    snapshot: Snapshot
    acted: bool  # actions were taken that call for a prompt next pass
    rolled: bool  # a group was rolled over: its successors are created by the next pass
    gone: bool
    light: bool = False  # it made checkpoints only, from what an earlier pass saw


def checkpoints_only(pending: Pending) -> bool:
    """Whether the pending intents ask checkpoints and nothing else."""
    return bool(pending.checkpoints) and not (
        pending.handoffs or pending.restarts or pending.shutdowns
    )


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
    ) -> None:
        self.sessions = sessions
        self.group_prefix = group_prefix  # of the consumer groups mirroring committed offsets
        self.clock = clock
        self.runner = runner
        self.stream = stream
        self.statuses = statuses
        self.hinted: set[str] = set()  # supervisors with an intent written since their pass
        self.woken: set[str] = set()  # ... with something else changed: a full pass next
        self.monotonic = monotonic
        self.fence = fence  # a pass acts only while this overlord leads
        self.memories: dict[str, Memory] = {}

    def memory(self, supervisor_id: str) -> Memory:
        memory = self.memories.get(supervisor_id)
        if memory is None:
            phase = (zlib.crc32(supervisor_id.encode()) % 1000 + 1) / 1000
            memory = Memory(phase=phase, latest_changed_at=self.clock())
            self.memories[supervisor_id] = memory
        return memory

    def forget(self, supervisor_id: str) -> None:
        self.memories.pop(supervisor_id, None)
        self.statuses.drop(supervisor_id)
        self.hinted.discard(supervisor_id)
        self.woken.discard(supervisor_id)

    def wake(self, supervisor_id: str) -> None:
        """Something other than an intent changed for the supervisor (its spec, a task's
        exit): its next pass observes and plans in full."""
        self.woken.add(supervisor_id)

    def hint(self, supervisor_id: str) -> None:
        """An intent for the supervisor was committed: its next pass reads the pending ones
        (a pass reads them only when told, or when one is left pending: not a query per
        pass of every supervisor)."""
        self.hinted.add(supervisor_id)

    def standalone(self) -> bool:
        """The intents about tasks with no supervisor (submitted with POST /task): their
        shutdowns and checkpoint requests, each marked done with its effect. Whether a checkpoint
        must be asked again (its intent stays pending, for a pass soon)."""
        self.hinted.discard(STANDALONE)
        with self.sessions() as session:
            pending = merge(IntentRepository(session).pending(STANDALONE))
            executor = Executor(session, self.clock, self.runner, self.fence)
            self._shut_down(executor.tasks, pending)
            again = self._checkpoint(executor, pending, skip_groups=set())
            session.commit()
        if again:
            self.hinted.add(STANDALONE)
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
            memory.intents = True  # whatever it took is still pending: read it again
            memory.full_at = None
            log.warning("supervisor %s: pass failed: %s", supervisor_id, exc)
            stream = isinstance(exc, StreamError)
            error = PassError(druid_timestamp(self.clock()), type(exc).__name__, str(exc), stream)
            failed = status.failed(error, stream)
            self._publish(supervisor_id, memory, failed, began)
            return Retry(self.until_due(memory))
        if outcome is None or outcome.gone:
            self.forget(supervisor_id)
            return Done()
        self._publish(supervisor_id, memory, self._healthy(status, outcome.snapshot, memory), began)
        now = self.monotonic()
        if outcome.light:  # the full pass stays where the last one put it
            assert memory.full_at is not None
            return RequeueAfter(max(0.0, min(self.until_due(memory), memory.full_at - now)))
        memory.snapshot = outcome.snapshot
        if outcome.rolled:
            # After a rollover the successors are created by the very next pass, and until
            # then the group has no task reading: that pass must not queue behind every
            # supervisor that is due (in a wave of a thousand handoffs it waited ~20 s).
            memory.full_at = now
            return RequeueAfter(0.0, first=True)
        seconds = ACTED_S if outcome.acted else self.until_due(memory)
        memory.full_at = now + seconds
        return RequeueAfter(seconds)

    def _publish(
        self, supervisor_id: str, memory: Memory, status: SupervisorStatus, began: float
    ) -> None:
        """The pass's status, with its time; a slow pass says where its time went."""
        seconds = self.monotonic() - began
        if seconds >= SLOW_PASS_S:
            spent = " ".join(f"{name} {value:.2f} s" for name, value in memory.laps.items())
            log.warning("supervisor %s: slow pass %.2f s (%s)", supervisor_id, seconds, spent)
        self.statuses.put(supervisor_id, status.timed(seconds, memory.waiting))

    def run_pass(self, supervisor_id: str, memory: Memory) -> Outcome | None:
        """Observe, plan, execute; None when the supervisor has no spec at all. A light pass
        (light_pass) makes checkpoints only."""
        laps: dict[str, float] = {}
        memory.laps = laps
        memory.probe.leader = self.fence.check()
        woken = supervisor_id in self.woken
        self.woken.discard(supervisor_id)  # before the reads: a later change wakes it again
        with self.sessions() as session:
            pending = self._pending(session, supervisor_id, memory)
            executor = Executor(session, self.clock, self.runner, self.fence)
            if not woken and self._between_passes(memory) and checkpoints_only(pending):
                return self.light_pass(session, executor, pending, memory)
            memory.deadline = None  # a pass that fails sets none
            if not memory.adopted:
                executor.adopt(supervisor_id)
                memory.adopted = True
            self._restart(executor.tasks, supervisor_id, pending)
            asked = frozenset(pending.handoffs)
            observed = observe(
                session, supervisor_id, self.clock(), self.stream, asked, memory.probe, laps
            )
            if observed is None:  # no spec: what was asked of its tasks is moot now
                left = [
                    *(r for rows in pending.handoffs.values() for r in rows),
                    *(r for _, rows in pending.checkpoints.values() for r in rows),
                ]
                IntentRepository.done(left, self.clock(), "the supervisor has no spec")
                session.commit()
                return None
            snapshot, spec, row = observed
            snapshot = self._remembered(snapshot, spec, memory)
            snapshot = self._autoscaled(session, snapshot, spec, memory)
            memory.period_s = max(1.0, duration_millis(spec.spec.ioConfig.period) / 1000)
            actions = plan(snapshot)
            deadline = next_deadline(snapshot)
            if deadline is not None:
                memory.deadline = self.monotonic() + (deadline - snapshot.now).total_seconds()
            executing = self.monotonic()
            rolling = {a.group for a in actions if isinstance(a, Rollover)}
            executor.handoffs = {g: rows for g, rows in pending.handoffs.items() if g in rolling}
            executor.run(actions, spec, row.id)
            self._supervisor_checkpoints(executor, pending, rolling, memory)
            self._wait_for_slots(supervisor_id, executor.no_slot, actions, memory)
            laps["execute"] = self.monotonic() - executing
            self._settle(session, pending, snapshot, rolling, memory)
            running = any(t.running for t in snapshot.tasks)
        self._mirror(snapshot, spec, memory)
        waited = executor.no_slot is not None  # its CreateTasks wait for a slot: not acted on
        acted = any(not (waited and isinstance(a, CreateTask)) for a in actions)
        gone = snapshot.terminated and not running and not actions
        return Outcome(snapshot, acted, bool(executor.rolled), gone)

    def _between_passes(self, memory: Memory) -> bool:
        """Before the full pass the last one asked for (nothing it planned by is due)."""
        return (
            memory.snapshot is not None
            and memory.full_at is not None
            and self.monotonic() < memory.full_at
        )

    def light_pass(
        self, session: Session, executor: Executor, pending: Pending, memory: Memory
    ) -> Outcome:
        """Checkpoint requests between full passes (a task's intermediateHandoffPeriod or
        maxRowsPerSegment), with nothing else changed: made without observing the stream
        and the tasks or planning again. A group rolled over since has its tasks' end
        offsets set, which ends their requests (Executor.checkpoints). With a hundred
        supervisors checkpointing every 5 s, full passes were most of the overlord's work."""
        began = self.monotonic()
        self._supervisor_checkpoints(executor, pending, set(), memory)
        session.commit()
        memory.laps["execute"] = self.monotonic() - began
        if executor.killed_at_checkpoint:  # its replacement is planned by a full pass, now
            memory.full_at = self.monotonic()
        assert memory.snapshot is not None
        return Outcome(memory.snapshot, acted=False, rolled=False, gone=False, light=True)

    def _supervisor_checkpoints(
        self, executor: Executor, pending: Pending, skip_groups: set[int], memory: Memory
    ) -> None:
        """A supervisor's checkpoints (_checkpoint); one to ask again is read again by a pass
        within AGAIN_S."""
        if self._checkpoint(executor, pending, skip_groups):
            memory.intents = True
            self._pass_within(memory, AGAIN_S)

    def _pass_within(self, memory: Memory, seconds: float) -> None:
        """The next pass no later than `seconds` from now."""
        memory.deadline = min(memory.deadline or math.inf, self.monotonic() + seconds)

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
            self._pass_within(memory, SLOT_WAIT_S)
        elif memory.no_slot is not None and any(isinstance(a, CreateTask) for a in actions):
            log.info("supervisor %s: task hosts have slots again", supervisor_id)
            memory.no_slot = None

    def _pending(self, session: Session, supervisor_id: str, memory: Memory) -> Pending:
        if not memory.intents and supervisor_id not in self.hinted:
            return Pending()
        self.hinted.discard(supervisor_id)  # before the read: a later write hints again
        memory.intents = False
        return merge(IntentRepository(session).pending(supervisor_id))

    def _restart(self, tasks: TaskService, supervisor_id: str, pending: Pending) -> None:
        """Before observing: kill what a reset restarts, and the tasks users shut down. Each
        intent is marked done in the commit that records the kills, so a repeat (the overlord
        died between the kills and that commit) finds the same tasks, none newer: no pass
        launches anything before its intents are done."""
        if pending.restarts:
            IntentRepository.done(pending.restarts, self.clock(), "tasks killed")
            groups = pending.restart_groups
            tasks.kill_running(supervisor_id, None if groups is None else set(groups), RESET_REASON)
        self._shut_down(tasks, pending)

    def _shut_down(self, tasks: TaskService, pending: Pending) -> None:
        """The tasks users shut down, each intent done in the commit of its kill."""
        now = self.clock()
        for task_id, rows in pending.shutdowns.items():
            IntentRepository.done(rows, now, "task killed")
            tasks.shut_down(task_id)

    def _checkpoint(self, executor: Executor, pending: Pending, skip_groups: set[int]) -> bool:
        """Close the sequences tasks asked to (safe to repeat: done for the caller's commit).
        Whether some must be asked again (none of a group's replicas could be paused): their
        intents stay pending, for a pass soon."""
        again = executor.checkpoints(
            {task_id: start for task_id, (start, _) in pending.checkpoints.items()},
            skip_groups,
        )
        asked = [
            row
            for task_id, (_, rows) in pending.checkpoints.items()
            if task_id not in again
            for row in rows
        ]
        IntentRepository.done(asked, self.clock(), "checkpoint asked of the group")
        return bool(again)

    def _settle(
        self,
        session: Session,
        pending: Pending,
        snapshot: Snapshot,
        rolling: set[int],
        memory: Memory,
    ) -> None:
        """Mark done the handoffs of groups with nothing reading (Druid ignores them), and
        commit what the pass did that carries no commit of its own (its checkpoints). A
        handoff whose rollover waits for its tasks to read stays pending."""
        now = self.clock()
        reading = {t.group for t in snapshot.tasks if t.reading}
        for group, rows in pending.handoffs.items():
            if group not in rolling and group not in reading:
                IntentRepository.done(rows, now, "no task of the group was reading")
        session.commit()
        left = [r for rows in pending.handoffs.values() for r in rows if r.done_at is None]
        memory.waiting = len(left)
        memory.intents = memory.intents or bool(left)

    def _remembered(self, snapshot: Snapshot, spec: SupervisorSpec, memory: Memory) -> Snapshot:
        """What earlier passes know: when the partition set was first seen, and whether the
        supervisor is idle (idleConfig: all read, nothing new for a while)."""
        now = snapshot.now
        since = memory.partition_sets.setdefault(snapshot.partitions, now)
        if snapshot.latest != memory.last_latest:
            memory.last_latest, memory.latest_changed_at = dict(snapshot.latest), now
        config = spec.spec.ioConfig.idleConfig
        idle = False
        if config is not None and config.enabled:
            after = timedelta(milliseconds=config.inactiveAfterMillis or IDLE_AFTER_MS)
            caught_up = all(
                snapshot.committed.get(p, snapshot.earliest.get(p, 0)) >= offset
                for p, offset in snapshot.latest.items()
            )
            idle = caught_up and now >= memory.latest_changed_at + after
        return replace(
            snapshot,
            partitions_since=since,
            idle=idle,
        )

    def _autoscaled(
        self, session: Session, snapshot: Snapshot, spec: SupervisorSpec, memory: Memory
    ) -> Snapshot:
        """The lag-based autoscaler's sample, and its scale action when one is due: recorded
        (fenced), and the snapshot planned with the new task count (autoscale.py)."""
        config = spec.spec.ioConfig.autoScalerConfig
        if config is None or not autoscale.enabled(config) or snapshot.suspended:
            return snapshot
        now = self.monotonic()
        if memory.lag.started is None:  # a new leader: its last action counts from when it was
            found = AutoscalerRepository(session).get(snapshot.supervisor_id)
            if found is not None:
                ago = (self.clock() - found.updated_at).total_seconds()
                memory.lag.last_changed = now - max(0.0, ago)
        autoscale.sample(memory.lag, config, now, autoscale.partition_lags(snapshot))
        publishing = any(t.running and t.end is not None for t in snapshot.tasks)
        decision = autoscale.decide(
            memory.lag,
            config,
            now,
            snapshot.spec.task_count,
            len(snapshot.partitions),
            publishing,
        )
        if decision is None:
            return snapshot
        self.fence.check()  # a deposed leader decides nothing
        at = self.clock()
        entry = decision.to_json(druid_timestamp(at))
        AutoscalerRepository(session).record(
            snapshot.supervisor_id, decision.after, entry, at, DECISIONS_KEPT
        )
        AuditRepository(session).add(
            snapshot.supervisor_id,
            "supervisor",
            AUTOSCALER,
            AUTOSCALER,
            decision.reason,
            None,
            entry,
            at,
        )  # every decision, for the history (the status keeps the newest)
        session.commit()
        autoscale.changed(memory.lag, now)
        log.info(
            "supervisor %s: autoscaler: taskCount %d -> %d: %s",
            snapshot.supervisor_id,
            decision.before,
            decision.after,
            decision.reason,
        )
        return replace(snapshot, spec=replace(snapshot.spec, task_count=decision.after))

    def _mirror(self, snapshot: Snapshot, spec: SupervisorSpec, memory: Memory) -> None:
        """The committed offsets, when they changed (and every MIRROR_REFRESH_S, before Kafka
        expires a memberless group's offsets), as the offsets of the consumer group
        `<consumer_group_prefix><id>`, `sluicegate-<id>` by default (ioConfig.
        consumerGroupOffsets, default on), so Kafka's own lag tools
        (kafka-consumer-groups.sh, Burrow, exporters) see the supervisor; partitions the topic
        no longer has are left out. Reset, terminated or turned off: the group is deleted. A
        mirror: the metadata DB decides; Kafka being away costs the mirror, never the pass
        (tried again by the next)."""
        io = spec.spec.ioConfig
        present = set(snapshot.partitions)
        wanted: Offsets = (
            {}
            if snapshot.terminated or not io.consumerGroupOffsets
            else {p: offset for p, offset in snapshot.committed.items() if p in present}
        )
        now = self.monotonic()
        if memory.mirrored == wanted and (
            not wanted
            or (memory.mirrored_at is not None and now - memory.mirrored_at < MIRROR_REFRESH_S)
        ):
            return
        group = consumer_group(snapshot.supervisor_id, self.group_prefix)
        self.fence.check()  # a deposed leader writes nothing
        try:
            self.stream.mirror(
                io.consumerProperties, group, str(io.topic or io.topicPattern), wanted
            )
        except Exception as exc:
            if not memory.mirror_failed:
                log.warning(
                    "supervisor %s: consumer group %s not updated: %s",
                    snapshot.supervisor_id,
                    group,
                    exc,
                )
            memory.mirror_failed = True
            return
        if memory.mirror_failed:
            log.info(
                "supervisor %s: consumer group %s updated again", snapshot.supervisor_id, group
            )
        memory.mirrored, memory.mirrored_at, memory.mirror_failed = dict(wanted), now, False

    def _healthy(
        self, status: SupervisorStatus, snapshot: Snapshot, memory: Memory
    ) -> SupervisorStatus:
        suspended = snapshot.suspended and not snapshot.terminated
        state = (
            SupervisorState.SUSPENDED
            if suspended
            else SupervisorState.IDLE
            if snapshot.idle
            else SupervisorState.RUNNING
        )
        probe = memory.probe
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

    def until_due(self, memory: Memory) -> float:
        """Seconds to the next periodic pass. Periodic passes run every `period`, as Druid runs
        runInternal, each supervisor at a phase of its own (from a hash of its id), so a
        thousand spread their passes over the period instead of passing all at once after a
        restart or a wave; passes woken in between (API changes, task exits) do not move them.
        A deadline (a taskDuration's end) sooner than that comes first."""
        now = self.monotonic()
        period = memory.period_s
        if memory.due is None or memory.due > now + period:  # new, or the period shrank
            memory.due = now + memory.phase * period
        while memory.due <= now:
            memory.due += period
        if memory.deadline is not None and memory.deadline < memory.due:
            return max(0.0, memory.deadline - now)
        return memory.due - now
