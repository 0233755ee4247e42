"""plan(snapshot) -> actions: Druid's supervisor mechanics as a pure function.

Per task group (partition % taskCount; topicPattern: see tasks/partitions.py):
1. Publishing generations (replicas given final end offsets): once one replica succeeded the
   generation is done, and a slow sibling is killed at its deadline without touching anyone
   else (druid #15944). With no success by `completionTimeout` its replicas are killed.
2. A reading task is valid while its start offsets follow what is committed or a live
   publishing generation; one that follows a failed generation is killed, and the group
   restarts from the committed offsets.
3. Reading tasks made for another spec version, or whose partitions the task count moved to
   other groups (autoscale.py), are rolled over gracefully at once, as Druid's scale action
   stops them; those made for a partition set that grew or shrank are rolled over
   `repartitionTransitionDuration` after the new set was first seen.
4. When `taskDuration` has passed since the group's first replica began reading (or a handoff
   is asked for, or the supervisor is suspended) the group is rolled over: pause, agree on the
   maximum offsets, finish. `stopTaskCount`
   bounds how many groups publish at once (asked-for handoffs skip the bound).
5. A group short of `replicas` reading tasks gets new ones: from the newest live publishing
   generation's end offsets, else the committed offsets, else earliest/latest. Replacements
   of dead replicas start where their siblings started. An idle supervisor (idleConfig)
   lets its tasks finish and starts none. A partition another group's task still reads (the
   task count changed: autoscale.py) is waited for until that task is rolled over.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from supervisor.controller.actions import Action, CreateTask, KillTasks, Rollover
from supervisor.model.views import Snapshot, TaskView, identity
from tasks.partitions import Offsets, PartitionKey, order, sorted_keys, task_group
from tasks.protocol import TaskStatusCode


def groups_of(
    partitions: tuple[PartitionKey, ...], task_count: int
) -> dict[int, list[PartitionKey]]:
    """Druid's assignment: partition % taskCount (a topicPattern hashes topic and partition)."""
    groups: dict[int, list[PartitionKey]] = {}
    for partition in sorted_keys(partitions):
        groups.setdefault(task_group(partition, task_count), []).append(partition)
    return groups


def _generations(
    tasks: list[TaskView],
) -> dict[tuple[tuple[PartitionKey, int], ...], list[TaskView]]:
    gens: dict[tuple[tuple[PartitionKey, int], ...], list[TaskView]] = {}
    for task in tasks:
        if task.end is not None:
            ends = sorted(task.end.items(), key=lambda item: order(item[0]))
            gens.setdefault(tuple(ends), []).append(task)
    return gens


def _follows(task: TaskView, committed: Offsets, ends: list[Offsets]) -> bool:
    """Each partition starts where the committed offsets or a live generation end it, or the
    task's own intermediate publishes (checkpoints) have moved the committed offset past its
    start, no further than it has read. (The publish transaction refuses anything else.)"""
    for partition, offset in task.start.items():
        allowed = {end[partition] for end in ends if partition in end}
        if partition in committed:
            allowed.add(committed[partition])
        if not allowed or offset in allowed:
            continue
        done = committed.get(partition)
        if done is None or done < offset:
            return False  # behind its start: what it followed did not publish
        read = None if task.current is None else task.current.get(partition)
        if read is not None and done > read:
            return False  # (a task that did not answer this pass is given the benefit)
    return True


def _task_id(supervisor_id: str, ident: str, taken: set[str]) -> str:
    slot = 0
    while f"index_kafka_{supervisor_id}_{ident}_{slot}" in taken:
        slot += 1
    return f"index_kafka_{supervisor_id}_{ident}_{slot}"


class _Planner:
    def __init__(self, snapshot: Snapshot) -> None:
        self.s = snapshot
        self.actions: list[Action] = []
        self.taken = {t.id for t in snapshot.tasks}
        self.killed: set[str] = set()
        self.publishing_groups = {
            t.group for t in snapshot.tasks if t.running and t.end is not None
        }

    def kill(self, tasks: list[TaskView], reason: str) -> None:
        ids = tuple(t.id for t in tasks if t.running and t.id not in self.killed)
        if ids:
            self.killed.update(ids)
            self.actions.append(KillTasks(ids, reason))

    def live_ends(self, tasks: list[TaskView]) -> list[Offsets]:
        """End offsets of generations still publishing (and not past their deadline)."""
        timeout = timedelta(seconds=self.s.spec.completion_timeout_s)
        ends = []
        for gen in _generations(tasks).values():
            succeeded = any(t.status == TaskStatusCode.SUCCESS for t in gen)
            running = [t for t in gen if t.running]
            rolled = min((t.rolled_at or t.created_at) for t in gen)
            if succeeded:
                if running and self.s.now >= rolled + timeout:
                    self.kill(running, "a replica published; this one did not finish in time")
            elif running and self.s.now >= rolled + timeout:
                self.kill(running, "completionTimeout passed before any replica published")
                continue
            if running and not succeeded:
                # A published generation is in the committed offsets already; counting it
                # here would resurrect its offsets after a reset.
                ends.append(dict(gen[0].end or {}))
        return ends

    def start_for(self, partitions: list[PartitionKey], ends: list[Offsets]) -> Offsets:
        s = self.s
        start: Offsets = {}
        for partition in partitions:
            published = [end[partition] for end in ends if partition in end]
            if published:
                start[partition] = max(published)
            elif partition in s.committed:
                start[partition] = s.committed[partition]
            elif s.committed or s.spec.use_earliest_offset:
                start[partition] = s.earliest.get(partition, 0)  # a new partition: from the start
            else:
                start[partition] = s.latest.get(partition, 0)
        return start

    def group(
        self,
        group: int,
        partitions: list[PartitionKey],
        tasks: list[TaskView],
        ends: list[Offsets],
    ) -> None:
        s = self.s
        reading = [t for t in tasks if t.reading and t.id not in self.killed]
        valid = [t for t in reading if _follows(t, s.committed, ends)]
        self.kill([t for t in reading if t not in valid], "its predecessor generation failed")
        same_spec = [t for t in valid if t.identity == identity(s.spec.version, group, t.start)]
        current = [t for t in same_spec if sorted_keys(t.start) == partitions]
        moved = [t for t in same_spec if t not in current]
        stale, reason = [t for t in valid if t not in same_spec], "the spec changed"
        recounted = [t for t in moved if self._recounted(t, partitions)]
        if recounted:
            stale, reason = stale + recounted, reason if stale else "the task count changed"
        elif moved and self._transition_over():
            stale, reason = stale + moved, "its partitions changed"
        elif moved and not current:
            current = moved  # the old assignment reads on until the transition is over
        if stale:
            self.actions.append(Rollover(group, tuple(t.id for t in stale), reason))
            self.publishing_groups.add(group)
            return
        if current and self._due(group, current):
            return
        if s.suspended or s.idle or not partitions:
            return
        if self._read_elsewhere(partitions, current):
            return  # until those tasks are rolled over: the new ones start where they end
        start = current[0].start if current else self.start_for(partitions, ends)
        ident = identity(s.spec.version, group, start)
        generation = current[0].generation if current else None
        for _ in range(s.spec.replicas - len(current)):
            task_id = _task_id(s.supervisor_id, ident, self.taken)
            self.taken.add(task_id)
            self.actions.append(CreateTask(task_id, group, start, ident, generation))

    def _read_elsewhere(self, partitions: list[PartitionKey], current: list[TaskView]) -> bool:
        """Whether a reading task other than the group's own reads one of its partitions (a
        task count change moved them here from another group): new tasks wait for its
        rollover, to start from its end offsets rather than read the same records."""
        mine = {t.id for t in current}
        wanted = set(partitions)
        return any(
            t.reading and t.id not in mine and t.id not in self.killed and wanted & set(t.start)
            for t in self.s.tasks
        )

    def _recounted(self, task: TaskView, partitions: list[PartitionKey]) -> bool:
        """Whether the task count (not the partition set) moved the task's partitions: one of
        them now belongs to another group, or its group now takes a partition that is not new:
        one already published, or one another group's task reads (a new partition is neither)."""
        if any(task_group(p, self.s.spec.task_count) != task.group for p in task.start):
            return True
        taken = set(partitions) - set(task.start)
        if taken & set(self.s.committed):
            return True
        return any(
            t.running and t.group != task.group and taken & set(t.start) for t in self.s.tasks
        )

    def _transition_over(self) -> bool:
        since = self.s.partitions_since
        wait = timedelta(seconds=self.s.spec.repartition_transition_s)
        return since is None or self.s.now >= since + wait

    def _due(self, group: int, current: list[TaskView]) -> bool:
        """Roll the group over if it is time; True when it was rolled."""
        s = self.s
        began = min(t.reading_since or t.created_at for t in current)
        asked = group in s.handoff_requested
        reason = (
            "suspended"
            if s.suspended
            else "handoff requested"
            if asked
            else "taskDuration passed"
            if s.now >= began + timedelta(seconds=s.spec.task_duration_s)
            else None
        )
        if reason is None:
            return False
        limit = s.spec.stop_task_count
        if limit is not None and not asked and len(self.publishing_groups) >= limit:
            return True  # over the stopTaskCount bound: wait, and create nothing meanwhile
        self.actions.append(Rollover(group, tuple(t.id for t in current), reason))
        self.publishing_groups.add(group)
        return True


def plan(snapshot: Snapshot) -> list[Action]:
    """The actions that bring the supervisor's tasks towards its spec, from what was observed."""
    planner = _Planner(snapshot)
    groups = groups_of(snapshot.partitions, snapshot.spec.task_count)
    by_group: dict[int, list[TaskView]] = {}
    for task in snapshot.tasks:
        by_group.setdefault(task.group, []).append(task)
    # generations publish per partition range, which a change of taskCount moves across groups
    ends = planner.live_ends(list(snapshot.tasks))
    for group in sorted(set(groups) | set(by_group)):
        planner.group(group, groups.get(group, []), by_group.get(group, []), ends)
    return planner.actions


def next_deadline(snapshot: Snapshot) -> datetime | None:
    """The next time after `now` at which the clock alone changes the plan: a reading task's
    taskDuration end; a publishing generation's completionTimeout. The loop passes then, not
    only every `period` (Druid checks the task duration in its periodic pass: a rollover is up
    to `period` late)."""
    s = snapshot
    duration = timedelta(seconds=s.spec.task_duration_s)
    timeout = timedelta(seconds=s.spec.completion_timeout_s)
    times: list[datetime] = []
    for task in s.tasks:
        if task.reading:
            times.append((task.reading_since or task.created_at) + duration)
        elif task.running:
            times.append((task.rolled_at or task.created_at) + timeout)
    return min((t for t in times if t > s.now), default=None)
