"""What a reconcile pass sees of a supervisor, as frozen data: its spec, its tasks, the
stream's offsets. The status API reads the same views."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from supervisor.schemas.spec import SupervisorSpec
from tasks.partitions import Offsets, PartitionKey, offsets_from_json, order
from tasks.protocol import StoredTask, TaskStatusCode, offsets_generation
from tasks.spec.periods import duration_millis


class RecordedTask(Protocol):
    """What a view reads of a task's record (supervisor/db/models.py TaskRow)."""

    @property
    def id(self) -> str: ...
    @property
    def group_id(self) -> int | None: ...
    @property
    def payload(self) -> dict[str, Any]: ...
    @property
    def status(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def end_offsets(self) -> dict[str, Any] | None: ...
    @property
    def rolled_at(self) -> datetime | None: ...


class StoredVersion(Protocol):
    """What a view reads of a stored spec version (supervisor/db/repositories.py)."""

    @property
    def id(self) -> int: ...


@dataclass(frozen=True)
class TaskView:
    id: str
    group: int
    identity: str
    start: Offsets
    status: TaskStatusCode  # as recorded
    created_at: datetime
    end: Offsets | None = None  # final end offsets, once the group was rolled over
    rolled_at: datetime | None = None
    reading_since: datetime | None = None  # the task's time/start; taskDuration counts from it
    current: Offsets | None = None  # where the task said it reads, this pass (None: no answer)
    generation: int = 0  # the offsets generation in its context (range_digest)

    @property
    def running(self) -> bool:
        return self.status == TaskStatusCode.RUNNING

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


def identity(spec_version: int, group: int, start: Offsets) -> str:
    """Who a task is: spec version, group and start offsets. Adoption compares it."""
    text = json.dumps(
        [spec_version, group, sorted(start.items(), key=lambda item: order(item[0]))],
        separators=(",", ":"),
    )
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def spec_view(row: StoredVersion, spec: SupervisorSpec, scaled: int | None = None) -> SpecView:
    """The planner's view of a spec; `scaled`: the task count its autoscaler set, if on."""
    io = spec.spec.ioConfig
    return SpecView(
        version=row.id,
        task_count=effective_task_count(spec, scaled),
        replicas=io.replicas,
        task_duration_s=duration_millis(io.taskDuration) / 1000,
        completion_timeout_s=duration_millis(io.completionTimeout) / 1000,
        use_earliest_offset=io.useEarliestOffset,
        stop_task_count=io.stopTaskCount,
        repartition_transition_s=duration_millis(io.repartitionTransitionDuration) / 1000,
    )


def _offsets(raw: dict[str, Any] | None) -> Offsets | None:
    return None if raw is None else offsets_from_json(raw)


def task_view(row: RecordedTask) -> TaskView:
    stored = StoredTask.model_validate(row.payload)
    return TaskView(
        id=row.id,
        group=row.group_id or 0,
        identity=stored.identity,
        start=stored.start_offsets(),
        status=TaskStatusCode(row.status),
        created_at=row.created_at,
        end=_offsets(row.end_offsets),
        rolled_at=row.rolled_at,
        generation=offsets_generation(stored.context),
    )


def effective_task_count(spec: SupervisorSpec, scaled: int | None) -> int:
    """ioConfig.taskCount, or while the lag-based autoscaler is on the count it set (within
    the spec's bounds; before its first decision, taskCountStart or taskCount bounded)."""
    io = spec.spec.ioConfig
    config = io.autoScalerConfig
    if config is None or not config.enableTaskAutoScaler:
        return io.taskCount
    assert config.taskCountMin is not None and config.taskCountMax is not None
    if scaled is None:
        scaled = config.taskCountStart if config.taskCountStart is not None else io.taskCount
    return max(config.taskCountMin, min(config.taskCountMax, scaled))
