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
