"""What a reconcile pass decides: the actions plan() returns and execute carries out."""

from __future__ import annotations

from dataclasses import dataclass

from tasks.partitions import Offsets


@dataclass(frozen=True)
class CreateTask:
    task_id: str
    group: int
    start: Offsets
    identity: str
    # the offsets generation its segments are named with: a replacement replica takes its
    # running siblings' (they must build the same segment ids); None: the supervisor's own now
    generation: int | None = None


@dataclass(frozen=True)
class Rollover:
    """Pause the group's reading replicas, agree on end offsets (finish=true), resume."""

    group: int
    task_ids: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class KillTasks:
    task_ids: tuple[str, ...]
    reason: str


Action = CreateTask | Rollover | KillTasks
