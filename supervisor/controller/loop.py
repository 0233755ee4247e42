"""One reconcile loop per supervisor, and the manager that keeps one running for each.

A loop passes on its `period`, when a task's duration or timeout ends (plan.next_deadline), on
API changes and on exits of its tasks; each pass is
observe → plan → execute, one at a time per supervisor (STYLE habits 1-3). The passes of all
loops run on one small pool of threads (scheduler.PassScheduler), not on a thread per supervisor.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from supervisor.clock import Clock, druid_timestamp
from supervisor.controller.execute import Executor
from supervisor.controller.model import ReserveStandbys, Rollover, Snapshot
from supervisor.controller.observe import StreamError, StreamReader, TaskProbe, observe
from supervisor.controller.plan import next_deadline, plan
from supervisor.controller.scheduler import PassScheduler
from supervisor.db.repositories import SpecRepository, TaskRepository
from supervisor.logs import log_context
from supervisor.runner.local import LocalProcessRunner
from supervisor.schemas.periods import duration_millis
from supervisor.services.supervisors import RESET_REASON
from tasks.partitions import Offsets, PartitionKey

log = logging.getLogger(__name__)
DEFAULT_PERIOD_S = 30.0  # Druid's ioConfig.period, until the first pass has read the spec
IDLE_AFTER_MS = 600_000  # Druid's default inactiveAfterMillis
UNHEALTHY_AFTER = 3  # Druid's unhealthinessThreshold default
ROLLED = 1_000_000  # run_once's answer after a rollover: pass again at once
AHEAD_S = -3600.0  # step's answer after a rollover: the next pass goes ahead of every due one
PASS_SAMPLES = 64  # durations of the most recent passes kept for percentiles
SLOW_PASS_S = 1.0  # a pass this long is logged with where its time went


@dataclass
class LoopStatus:
    state: str = "PENDING"
    detailed_state: str = "PENDING"
    healthy: bool = True
    consecutive_failures: int = 0
    connected_once: bool = False
    passes: int = 0
    partitions: tuple[PartitionKey, ...] = ()
    latest: Offsets = field(default_factory=dict)
    offsets_updated: str | None = None
    recent_errors: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=10))
    current: dict[str, Offsets] = field(default_factory=dict)  # task id -> offsets
    started: dict[str, datetime] = field(default_factory=dict)  # task id -> reading since
    task_metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # task id -> counters
    queue_size: int = 0  # requests waiting for the next pass
    last_pass_s: float = 0.0
    pass_seconds: float = 0.0  # all passes, failed ones too
    pass_count: int = 0
    recent_passes: deque[float] = field(default_factory=lambda: deque(maxlen=PASS_SAMPLES))
    snapshot: Snapshot | None = None  # what the last good pass observed (the status serves it)


def spec_groups(spec: Any) -> int:
    return int(spec.spec.ioConfig.taskCount)


class SupervisorLoop:
    def __init__(
        self,
        supervisor_id: str,
        sessions: Any,
        clock: Clock,
        runner: LocalProcessRunner,
        stream: StreamReader,
        scheduler: PassScheduler | None = None,
    ) -> None:
        self.supervisor_id = supervisor_id
        self.sessions = sessions
        self.clock = clock
        self.runner = runner
        self.stream = stream
        self.status = LoopStatus()
        self.scheduler = scheduler
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.finished = False
        self.period_s = DEFAULT_PERIOD_S
        self.due: float | None = None  # when the next periodic pass is due (monotonic)
        self.deadline: float | None = None  # when the clock next changes the plan (monotonic)
        self.phase = (zlib.crc32(supervisor_id.encode()) % 1000 + 1) / 1000  # in (0, 1]
        self.handoff_requested: set[int] = set()
        self.checkpoints_requested: dict[str, dict[str, int]] = {}  # task id -> sequence start
        self.restart_groups: set[int] = set()  # reset: kill these groups' tasks next pass
        self.restart_all = False
        self.adopted = False  # the first pass adopts what an earlier overlord left running
        self.probe = TaskProbe()
        self.laps: dict[str, float] = {}  # where the last pass's time went (observe, execute)
        self.partition_sets: dict[tuple[PartitionKey, ...], datetime] = {}
        self.last_latest: Offsets | None = None  # the first observation is news
        self.latest_changed_at = clock()

    def start(self) -> None:
        self.wake()

    def wake(self) -> None:
        """A pass now (right after the one running, if one is)."""
        if self.scheduler is not None and not self.stopping.is_set():
            self.scheduler.schedule(self, 0.0)

    def stop(self) -> None:
        self.stopping.set()

    def run_once(self) -> int:
        """One pass; the number of actions taken that call for a prompt next pass (ROLLED after
        a rollover, -1 when the supervisor is gone)."""
        self.deadline = None  # a pass that fails sets none
        laps: dict[str, float] = {}
        self.laps = laps
        with self.sessions() as session:
            executor = Executor(session, self.clock, self.runner)
            if not self.adopted:
                executor.adopt(self.supervisor_id)
                self.adopted = True
            with self.lock:
                groups, every = self.restart_groups, self.restart_all
                self.restart_groups, self.restart_all = set(), False
            if groups or every:
                executor.tasks.kill_running(
                    self.supervisor_id, None if every else groups, RESET_REASON
                )
            asked = frozenset(self.handoff_requested)
            observed = observe(
                session, self.supervisor_id, self.clock(), self.stream, asked, self.probe, laps
            )
            if observed is None:
                return -1
            snapshot, spec, row = observed
            snapshot = self._remembered(snapshot, spec)
            snapshot = replace(snapshot, standby_lead_s=self.runner.settings.standby_lead_s)
            self.period_s = max(1.0, duration_millis(spec.spec.ioConfig.period) / 1000)
            actions = plan(snapshot)
            deadline = next_deadline(snapshot)
            self.deadline = (
                None
                if deadline is None
                else time.monotonic() + (deadline - snapshot.now).total_seconds()
            )
            executing = time.monotonic()
            executor.run(actions, spec, row.id)
            rolling = {a.group for a in actions if isinstance(a, Rollover)}
            executor.checkpoints(self._take_checkpoints(), skip_groups=rolling)
            laps["execute"] = time.monotonic() - executing
            self.handoff_requested -= rolling | {g for g in asked if g >= spec_groups(spec)}
            running = any(t.running for t in snapshot.tasks)
        self._healthy_pass(snapshot)
        self.status.partitions = snapshot.partitions
        self.status.latest = dict(snapshot.latest)
        self.status.current = dict(self.probe.current)
        self.status.started = dict(self.probe.started)
        self.status.task_metrics = dict(self.probe.metrics)
        self.status.offsets_updated = druid_timestamp(snapshot.now)
        self.status.snapshot = snapshot
        if snapshot.terminated and not running and not actions:
            return -1
        if executor.rolled:
            return ROLLED  # the successors are created by a pass right away
        return sum(1 for a in actions if not isinstance(a, ReserveStandbys))

    def _remembered(self, snapshot: Snapshot, spec: Any) -> Snapshot:
        """What the loop knows from earlier passes: when the partition set was first seen,
        and whether the supervisor is idle (idleConfig: all read, nothing new for a while)."""
        now = snapshot.now
        since = self.partition_sets.setdefault(snapshot.partitions, now)
        if snapshot.latest != self.last_latest:
            self.last_latest, self.latest_changed_at = dict(snapshot.latest), now
        config = spec.spec.ioConfig.idleConfig
        idle = False
        if config is not None and config.enabled:
            after = timedelta(milliseconds=config.inactiveAfterMillis or IDLE_AFTER_MS)
            caught_up = all(
                snapshot.committed.get(p, snapshot.earliest.get(p, 0)) >= offset
                for p, offset in snapshot.latest.items()
            )
            idle = caught_up and now >= self.latest_changed_at + after
        return replace(snapshot, partitions_since=since, idle=idle)

    def request_restart(self, groups: set[int] | None) -> None:
        with self.lock:
            if groups is None:
                self.restart_all = True
            else:
                self.restart_groups |= groups
        self.wake()

    def _take_checkpoints(self) -> dict[str, dict[str, int]]:
        with self.lock:
            taken, self.checkpoints_requested = self.checkpoints_requested, {}
        return taken

    def request_checkpoint(self, task_id: str, start: dict[str, int]) -> None:
        with self.lock:
            self.checkpoints_requested[task_id] = start
        self.wake()

    def _healthy_pass(self, snapshot: Snapshot) -> None:
        status = self.status
        status.passes += 1
        status.connected_once = True
        status.consecutive_failures = 0
        status.healthy = True
        suspended = snapshot.suspended and not snapshot.terminated
        state = "SUSPENDED" if suspended else "IDLE" if snapshot.idle else "RUNNING"
        status.state = status.detailed_state = state

    def _timed_pass(self, seconds: float) -> None:
        with self.lock:
            waiting = len(self.checkpoints_requested) + len(self.restart_groups)
            waiting += len(self.handoff_requested) + int(self.restart_all)
        self.status.last_pass_s = seconds
        self.status.pass_seconds += seconds
        self.status.pass_count += 1
        self.status.recent_passes.append(seconds)
        self.status.queue_size = waiting

    def _failed_pass(self, exc: Exception) -> None:
        status = self.status
        status.consecutive_failures += 1
        status.recent_errors.append(
            {
                "timestamp": druid_timestamp(self.clock()),
                "exceptionClass": type(exc).__name__,
                "message": str(exc),
            }
        )
        if status.consecutive_failures < UNHEALTHY_AFTER:
            return
        status.healthy = False
        status.state = "UNHEALTHY_SUPERVISOR"
        if isinstance(exc, StreamError):
            status.detailed_state = (
                "LOST_CONTACT_WITH_STREAM"
                if status.connected_once
                else "UNABLE_TO_CONNECT_TO_STREAM"
            )
        else:
            status.detailed_state = "UNHEALTHY_SUPERVISOR"

    def step(self) -> float | None:
        """One pass, with its timing and failure kept; seconds until the next one is due
        (negative: ahead of the others due), or None once the supervisor is gone."""
        actions = 0
        began = time.monotonic()
        with log_context(supervisor=self.supervisor_id):
            try:
                actions = self.run_once()
            except Exception as exc:
                log.warning("supervisor %s: pass failed: %s", self.supervisor_id, exc)
                self._failed_pass(exc)
        self._timed_pass(seconds := time.monotonic() - began)
        if seconds >= SLOW_PASS_S:
            spent = " ".join(f"{name} {value:.2f} s" for name, value in self.laps.items())
            log.warning("supervisor %s: slow pass %.2f s (%s)", self.supervisor_id, seconds, spent)
        if actions < 0:
            self.finished = True
            return None
        if actions > 0:
            # After a rollover the successors are created by the very next pass, and until then
            # the group has no task reading: that pass must not queue behind every loop that is
            # due (in a wave of a thousand handoffs it waited ~20 s for a worker).
            return AHEAD_S if actions == ROLLED else 0.2
        return self._until_due(time.monotonic())

    def _until_due(self, now: float) -> float:
        """Seconds to the next periodic pass. Periodic passes run every `period`, as Druid runs
        runInternal, each loop at a phase of its own (from a hash of its id), so a thousand
        loops spread their passes over the period instead of passing all at once after a
        restart or a wave; passes woken in between (API changes, task exits) do not move them."""
        if self.due is None or self.due > now + self.period_s:  # new, or the period shrank
            self.due = now + self.phase * self.period_s
        while self.due <= now:
            self.due += self.period_s
        if self.deadline is not None and self.deadline < self.due:
            return max(0.0, self.deadline - now)
        return self.due - now


class SupervisorManager:
    def __init__(
        self,
        sessions: Any,
        clock: Clock,
        runner: LocalProcessRunner,
        stream: StreamReader | None = None,
    ) -> None:
        self.sessions = sessions
        self.clock = clock
        self.runner = runner
        self.stream = stream or StreamReader()
        self.loops: dict[str, SupervisorLoop] = {}
        self.lock = threading.Lock()
        self.scheduler = PassScheduler(runner.settings.supervisor_workers)
        self.scheduler.start()

    def sync(self) -> None:
        """Start a loop for every supervisor that has a spec and none running."""
        with self.sessions() as session:
            ids = SpecRepository(session).active_ids()
        with self.lock:
            for supervisor_id in ids:
                loop = self.loops.get(supervisor_id)
                if loop is None or loop.finished:
                    loop = SupervisorLoop(
                        supervisor_id,
                        self.sessions,
                        self.clock,
                        self.runner,
                        self.stream,
                        self.scheduler,
                    )
                    self.loops[supervisor_id] = loop
                    loop.start()

    def _live(self, supervisor_id: str) -> SupervisorLoop | None:
        """The supervisor's running loop, started first if it has none (sync reads every id:
        not on each API write when the loop is there already)."""
        with self.lock:
            loop = self.loops.get(supervisor_id)
        if loop is None or loop.finished:
            self.sync()
            with self.lock:
                loop = self.loops.get(supervisor_id)
        return None if loop is None or loop.finished else loop

    def wake(self, supervisor_id: str) -> None:
        """After an API change: make sure a loop runs, and run a pass now."""
        loop = self._live(supervisor_id)
        if loop is not None:
            loop.wake()

    def request_handoff(self, supervisor_id: str, groups: list[int]) -> None:
        """Roll the named task groups over early (best effort, as in Druid)."""
        loop = self._live(supervisor_id)
        if loop is not None:
            loop.handoff_requested.update(groups)
            loop.wake()

    def request_restart(self, supervisor_id: str, groups: set[int] | None) -> bool:
        """Kill the tasks of these groups (None: all) at the loop's next pass, after a reset
        changed the offsets they started from; False when no loop runs for the supervisor."""
        loop = self._live(supervisor_id)
        if loop is None:
            return False
        loop.request_restart(groups)
        return True

    def request_checkpoint(self, supervisor_id: str, task_id: str, start: dict[str, int]) -> bool:
        """Queue a task's checkpoint request for its supervisor's loop; False with no loop."""
        with self.lock:
            loop = self.loops.get(supervisor_id)
        if loop is None or loop.finished:
            return False
        loop.request_checkpoint(task_id, start)
        return True

    def wake_tasks(self, task_ids: list[str]) -> None:
        """After task processes ended: a pass now for the supervisors they belong to (and
        for no other: with a thousand supervisors, waking all of them per exit would make every
        loop pass again whenever any task ends)."""
        with self.sessions() as session:
            owners = TaskRepository(session).supervisors_of(task_ids)
        with self.lock:
            loops = [self.loops[owner] for owner in owners if owner in self.loops]
        for loop in loops:
            loop.wake()

    def wake_all(self) -> None:
        with self.lock:
            loops = list(self.loops.values())
        for loop in loops:
            loop.wake()

    def status(self, supervisor_id: str) -> LoopStatus | None:
        with self.lock:
            loop = self.loops.get(supervisor_id)
        return loop.status if loop is not None else None

    def stop(self) -> None:
        with self.lock:
            loops = list(self.loops.values())
        for loop in loops:
            loop.stop()
        self.scheduler.stop()
