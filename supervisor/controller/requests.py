"""Requests the API hands to a supervisor's next pass: an early handoff, a reset's restart of
task groups, a task's checkpoint. The pass takes them all at its start (one writer per
supervisor); the API only appends. Until intents move into the metadata DB (so that a change of
overlord loses none), they wait here in memory."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from queue import Empty, SimpleQueue


@dataclass(frozen=True)
class Handoff:
    """Roll these task groups over early (best effort, as in Druid)."""

    groups: frozenset[int]


@dataclass(frozen=True)
class Restart:
    """Kill the tasks of these groups (None: every group): a reset moved their offsets."""

    groups: frozenset[int] | None


@dataclass(frozen=True)
class Checkpoint:
    """A task asked for the sequence that began at `start` to be closed on every replica."""

    task_id: str
    start: Mapping[str, int]


Request = Handoff | Restart | Checkpoint


@dataclass(frozen=True)
class Taken:
    """What a pass took from the inbox, merged."""

    handoffs: frozenset[int] = frozenset()
    restart_groups: frozenset[int] = frozenset()
    restart_all: bool = False
    checkpoints: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


class RequestInbox:
    """Per supervisor, the requests not yet taken by a pass (SimpleQueue: appends and takes
    from any thread without a lock of ours)."""

    def __init__(self) -> None:
        self._queues: dict[str, SimpleQueue[Request]] = {}

    def put(self, supervisor_id: str, request: Request) -> None:
        self._queues.setdefault(supervisor_id, SimpleQueue()).put(request)

    def size(self, supervisor_id: str) -> int:
        queue = self._queues.get(supervisor_id)
        return 0 if queue is None else queue.qsize()

    def take(self, supervisor_id: str) -> Taken:
        queue = self._queues.get(supervisor_id)
        handoffs: set[int] = set()
        restart: set[int] = set()
        restart_all = False
        checkpoints: dict[str, Mapping[str, int]] = {}
        while queue is not None:
            try:
                request = queue.get_nowait()
            except Empty:
                break
            if isinstance(request, Handoff):
                handoffs |= request.groups
            elif isinstance(request, Restart):
                restart_all = restart_all or request.groups is None
                restart |= request.groups or set()
            else:
                checkpoints[request.task_id] = request.start
        return Taken(frozenset(handoffs), frozenset(restart), restart_all, checkpoints)

    def drop(self, supervisor_id: str) -> None:
        self._queues.pop(supervisor_id, None)
