"""What a reconcile pass sees and what it decides: frozen data, no I/O."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

from tasks.partitions import Offsets, PartitionKey, order

RUNNING, SUCCESS, FAILED = "RUNNING", "SUCCESS", "FAILED"


@dataclass(frozen=True)
class TaskView:
    id: str
    group: int
    identity: str
    start: Offsets
    status: str  # RUNNING, SUCCESS, FAILED (as recorded)
    created_at: datetime
    end: Offsets | None = None  # final end offsets, once the group was rolled over
    rolled_at: datetime | None = None
    reading_since: datetime | None = None  # the task's time/start; taskDuration counts from it
    current: Offsets | None = None  # where the task said it reads, this pass (None: no answer)

    @property
    def running(self) -> bool:
        return self.status == RUNNING

    @property
    def reading(self) -> bool:
        return self.running and self.end is None


@dataclass(frozen=True)
class SpecView:
    """The parts of a supervisor spec the planner needs, with periods in seconds."""

    version: int
    task_count: int
    replicas: int
    task_duration_s: float
    completion_timeout_s: float
    use_earliest_offset: bool
    stop_task_count: int | None = None
    repartition_transition_s: float = 120.0


@dataclass(frozen=True)
class Snapshot:
    supervisor_id: str
    spec: SpecView
    now: datetime
    suspended: bool
    partitions: tuple[PartitionKey, ...]  # in partition order
    earliest: Offsets
    latest: Offsets
    committed: Offsets
    tasks: tuple[TaskView, ...]
    handoff_requested: frozenset[int] = frozenset()
    terminated: bool = False  # a tombstone: wind down like a suspended supervisor, then stop
    partitions_since: datetime | None = None  # when this partition set was first seen
    idle: bool = False  # idleConfig: no new data for a while; running tasks finish, none start
    standby_lead_s: float = 0.0  # warm the successors' processes this long before a rollover


@dataclass(frozen=True)
class CreateTask:
    task_id: str
    group: int
    start: Offsets
    identity: str


@dataclass(frozen=True)
class Rollover:
    """Pause the group's reading replicas, agree on end offsets (finish=true), resume."""

    group: int
    task_ids: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class ReserveStandbys:
    """Keep `count` warm standby processes for the group's next generation (which starts
    where the current one ends; `start` only picks what the standbys warm up on)."""

    group: int
    count: int
    start: Offsets


@dataclass(frozen=True)
class KillTasks:
    task_ids: tuple[str, ...]
    reason: str


Action = CreateTask | Rollover | KillTasks | ReserveStandbys


def identity(spec_version: int, group: int, start: Offsets) -> str:
    """Who a task is: spec version, group and start offsets. Adoption compares it."""
    text = json.dumps(
        [spec_version, group, sorted(start.items(), key=lambda item: order(item[0]))],
        separators=(",", ":"),
    )
    return hashlib.sha1(text.encode()).hexdigest()[:16]
