"""How replicas of a task group agree on end offsets (Druid's checkpointTaskGroup):
pause every replica, take the per-partition maximum of their offsets, set those as end
offsets (finish=true ends the tasks, finish=false closes a sequence), which resumes them.

A pause answered 202 (not yet paused) or 409 because of a race is followed up, not punished:
the replica is polled until it is PAUSED (druid #15468, #17722). Replicas that cannot be paused
or told their end offsets within the deadline are reported, for the caller to replace.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from supervisor.clients.task_api import TaskApiClient, TaskApiError, TaskClient, reachable
from supervisor.db.models import TaskRow
from supervisor.model.fence import Leader
from tasks.protocol import TaskState

log = logging.getLogger(__name__)


@dataclass
class CheckpointResult:
    end_offsets: dict[str, int] | None
    failed: list[str] = field(default_factory=list)


def _pause(
    client: TaskClient,
    deadline: float,
    sleep: Callable[[float], None],
    alive: Callable[[], bool],
) -> dict[str, int]:
    while True:
        if not alive():
            raise TaskApiError(None, "the task process has ended")
        try:
            offsets = client.pause()
            if offsets is not None:
                return offsets
        except TaskApiError as exc:
            if exc.status_code not in (None, 409):
                raise
            # 409: not pausable right now (still starting, or a racing state); unreachable:
            # maybe restarting its control server. Both are retried until the deadline.
        try:
            if client.status() == TaskState.PAUSED:
                return client.current_offsets()
        except TaskApiError:
            pass
        if time.monotonic() >= deadline:
            raise TaskApiError(None, "did not pause in time")
        sleep(0.2)


def _each(
    calls: Mapping[str, Callable[[], dict[str, int]]],
) -> dict[str, dict[str, int] | TaskApiError]:
    """Each call's result or TaskApiError, the calls made at once in threads of their own; a
    single one (replicas 1, the common case) in the caller's thread, no pool started for it."""
    if len(calls) == 1:
        ((task_id, call),) = calls.items()
        try:
            return {task_id: call()}
        except TaskApiError as exc:
            return {task_id: exc}
    outcomes: dict[str, dict[str, int] | TaskApiError] = {}
    with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
        futures = {task_id: pool.submit(call) for task_id, call in calls.items()}
        for task_id, future in futures.items():
            try:
                outcomes[task_id] = future.result()
            except TaskApiError as exc:
                outcomes[task_id] = exc
    return outcomes


def checkpoint_group(
    clients: Mapping[str, TaskClient],
    finish: bool,
    timeout: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    alive: Callable[[str], bool] = lambda _: True,
) -> CheckpointResult:
    """Pause all (at once, so none waits paused on a slow sibling), agree on the maximum, set
    it as end offsets everywhere (which resumes). A replica whose process ended is given up
    at once rather than at the deadline."""
    deadline = time.monotonic() + timeout
    paused: dict[str, dict[str, int]] = {}
    failed: list[str] = []
    pauses = {
        task_id: partial(_pause, client, deadline, sleep, partial(alive, task_id))
        for task_id, client in clients.items()
    }
    for task_id, outcome in _each(pauses).items():
        if isinstance(outcome, TaskApiError):
            log.warning("task %s could not be paused: %s", task_id, outcome)
            failed.append(task_id)
        else:
            paused[task_id] = outcome
    if not paused:
        return CheckpointResult(None, failed)
    end: dict[str, int] = {}
    for offsets in paused.values():
        for partition, offset in offsets.items():
            end[partition] = max(end.get(partition, offset), offset)
    for task_id in paused:
        try:
            clients[task_id].set_end_offsets(end, finish)
        except TaskApiError as exc:
            log.warning("task %s refused its end offsets: %s", task_id, exc)
            failed.append(task_id)
    return CheckpointResult(end, failed)


def checkpoint_requested(
    replicas: list[TaskRow],
    requester: str,
    start: Mapping[str, int],
    alive: Callable[[str], bool] = lambda _: True,
    leader: Leader | None = None,
) -> CheckpointResult | None:
    """A task asked for a checkpoint (checkPointDataSourceMetadata) of the sequence that began
    at `start`: close it on every replica of its group, unless that already happened. None
    when nothing was left to do; else the group's result: no end offsets when no replica
    could be paused (the caller asks again: a pause that came late leaves a task paused until
    then), and the replicas that failed when others closed the sequence (out of step with
    them: the caller replaces them, as Druid kills a task it cannot checkpoint)."""
    located = [r for r in replicas if reachable(r)]
    if requester not in {r.id for r in located}:
        log.warning("checkpoint for %s ignored: the task has no location yet", requester)
        return None
    clients = {r.id: TaskApiClient.for_task(r, leader=leader) for r in located}
    try:
        checkpoints = clients[requester].checkpoints()
    except TaskApiError as exc:
        log.warning("checkpoint for %s failed: %s", requester, exc)
        return CheckpointResult(None, [requester])
    latest = checkpoints[max(checkpoints, key=int)]
    if latest != start:
        log.info("checkpoint of %s ignored: already past %s", requester, start)
        return None
    began = time.monotonic()
    result = checkpoint_group(clients, finish=False, alive=alive)
    log.info(
        "checkpointed %s at %s in %.2f s (failed: %s)",
        list(clients),
        result.end_offsets,
        time.monotonic() - began,
        result.failed,
    )
    return result
