"""The supervisor's planning, table by table: a snapshot in, actions out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from supervisor.controller.actions import CreateTask, KillTasks, Rollover
from supervisor.controller.plan import next_deadline, plan
from supervisor.model.views import Snapshot, SpecView, TaskView, identity
from tasks.protocol import TaskStatusCode

RUNNING, SUCCESS, FAILED = TaskStatusCode.RUNNING, TaskStatusCode.SUCCESS, TaskStatusCode.FAILED

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
SPEC = SpecView(
    version=1,
    task_count=2,
    replicas=2,
    task_duration_s=60,
    completion_timeout_s=300,
    use_earliest_offset=True,
)


def snap(**kw: object) -> Snapshot:
    base = dict(
        supervisor_id="wiki",
        spec=SPEC,
        now=NOW,
        suspended=False,
        partitions=(0, 1, 2),
        earliest={0: 0, 1: 0, 2: 0},
        latest={0: 100, 1: 100, 2: 100},
        committed={},
        tasks=(),
    )
    base.update(kw)
    return Snapshot(**base)  # type: ignore[arg-type]


def task(
    tid: str,
    group: int,
    start: dict[int, int],
    *,
    status: str = RUNNING,
    age_s: float = 10,
    end: dict[int, int] | None = None,
    rolled_ago_s: float | None = None,
    version: int = 1,
) -> TaskView:
    return TaskView(
        id=tid,
        group=group,
        identity=identity(version, group, start),
        start=start,
        status=status,
        created_at=NOW - timedelta(seconds=age_s),
        end=end,
        rolled_at=None if rolled_ago_s is None else NOW - timedelta(seconds=rolled_ago_s),
    )


def creates(actions: list) -> list[tuple[int, dict[int, int]]]:
    return [(a.group, a.start) for a in actions if isinstance(a, CreateTask)]


def test_first_pass_creates_replicas_per_group_from_earliest() -> None:
    actions = plan(snap())
    assert creates(actions) == [(0, {0: 0, 2: 0}), (0, {0: 0, 2: 0}), (1, {1: 0}), (1, {1: 0})]
    ids = [a.task_id for a in actions if isinstance(a, CreateTask)]
    assert len(set(ids)) == 4 and all(i.startswith("index_kafka_wiki_") for i in ids)


def test_latest_when_not_use_earliest_and_nothing_committed() -> None:
    actions = plan(snap(spec=replace(SPEC, use_earliest_offset=False, replicas=1)))
    assert creates(actions) == [(0, {0: 100, 2: 100}), (1, {1: 100})]


def test_committed_offsets_win_and_new_partitions_start_at_earliest() -> None:
    actions = plan(
        snap(
            spec=replace(SPEC, replicas=1, use_earliest_offset=False),
            committed={0: 40, 1: 50},
            earliest={0: 0, 1: 0, 2: 7},
        )
    )
    assert creates(actions) == [(0, {0: 40, 2: 7}), (1, {1: 50})]


def test_healthy_groups_need_nothing() -> None:
    tasks = (
        task("a", 0, {0: 0, 2: 0}),
        task("b", 0, {0: 0, 2: 0}),
        task("c", 1, {1: 0}),
        task("d", 1, {1: 0}),
    )
    assert plan(snap(tasks=tasks)) == []


def test_a_dead_replica_is_replaced_from_the_same_start() -> None:
    tasks = (
        task("a", 0, {0: 5, 2: 5}),
        task("b", 0, {0: 5, 2: 5}, status=FAILED),
        task("c", 1, {1: 0}),
        task("d", 1, {1: 0}),
    )
    actions = plan(snap(tasks=tasks, committed={0: 5, 2: 5}))
    assert creates(actions) == [(0, {0: 5, 2: 5})]


def test_a_replacement_replica_takes_its_siblings_offsets_generation() -> None:
    """(a resetOffsets of another group's partitions began a new generation meanwhile: the
    replacement must name its segments as its sibling does, a new group the generation now)"""
    tasks = (
        replace(task("a", 0, {0: 5, 2: 5}), generation=3),
        task("b", 0, {0: 5, 2: 5}, status=FAILED),
    )
    actions = plan(snap(tasks=tasks, committed={0: 5, 2: 5}))
    assert [(a.group, a.generation) for a in actions if isinstance(a, CreateTask)] == [
        (0, 3),
        (1, None),
        (1, None),
    ]


def test_task_duration_rolls_the_group_over() -> None:
    tasks = (
        task("a", 0, {0: 0, 2: 0}, age_s=61),
        task("b", 0, {0: 0, 2: 0}, age_s=61),
        task("c", 1, {1: 0}),
        task("d", 1, {1: 0}),
    )
    actions = plan(snap(tasks=tasks))
    assert actions == [Rollover(0, ("a", "b"), "taskDuration passed")]


def test_task_duration_counts_from_when_the_first_replica_began_reading() -> None:
    slow = replace(task("a", 0, {0: 0, 2: 0}, age_s=90), reading_since=NOW - timedelta(seconds=59))
    late = replace(task("b", 0, {0: 0, 2: 0}, age_s=90), reading_since=NOW - timedelta(seconds=50))
    tasks = (slow, late, task("c", 1, {1: 0}), task("d", 1, {1: 0}))
    assert plan(snap(tasks=tasks)) == []  # created 90 s ago, reading for 59 s only
    earlier = replace(slow, reading_since=NOW - timedelta(seconds=60))
    actions = plan(snap(tasks=(earlier, *tasks[1:])))
    assert actions == [Rollover(0, ("a", "b"), "taskDuration passed")]


def test_successors_start_at_once_from_the_publishing_end_offsets() -> None:
    end = {0: 30, 2: 31}
    tasks = (
        task("a", 0, {0: 0, 2: 0}, end=end, rolled_ago_s=1),
        task("b", 0, {0: 0, 2: 0}, end=end, rolled_ago_s=1),
        task("c", 1, {1: 0}),
        task("d", 1, {1: 0}),
    )
    assert creates(plan(snap(tasks=tasks))) == [(0, end), (0, end)]


def test_one_success_finishes_a_generation_and_a_slow_sibling_hurts_nobody() -> None:
    end = {1: 40}
    tasks = (
        task("a", 1, {1: 0}, end=end, status=SUCCESS, rolled_ago_s=400),
        task("b", 1, {1: 0}, end=end, rolled_ago_s=400),
        task("c", 1, end),
        task("d", 1, end),
        task("e", 0, {0: 0, 2: 0}),
        task("f", 0, {0: 0, 2: 0}),
    )
    actions = plan(snap(tasks=tasks, committed={1: 40}))
    assert actions == [KillTasks(("b",), "a replica published; this one did not finish in time")]


def test_a_failed_generation_takes_its_successors_down_and_restarts_from_committed() -> None:
    end = {1: 40}
    tasks = (
        task("a", 1, {1: 0}, end=end, status=FAILED, rolled_ago_s=5),
        task("b", 1, {1: 0}, end=end, status=FAILED, rolled_ago_s=5),
        task("c", 1, end),
        task("d", 1, end),
        task("e", 0, {0: 0, 2: 0}),
        task("f", 0, {0: 0, 2: 0}),
    )
    actions = plan(snap(tasks=tasks, committed={1: 0}))
    assert actions[0] == KillTasks(("c", "d"), "its predecessor generation failed")
    assert creates(actions) == [(1, {1: 0}), (1, {1: 0})]


def test_completion_timeout_kills_the_generation_then_its_successors() -> None:
    end = {1: 40}
    tasks = (
        task("a", 1, {1: 0}, end=end, rolled_ago_s=301),
        task("b", 1, {1: 0}, end=end, rolled_ago_s=301),
        task("c", 1, end),
        task("e", 0, {0: 0, 2: 0}),
        task("f", 0, {0: 0, 2: 0}),
    )
    actions = plan(snap(tasks=tasks, committed={1: 0}))
    assert actions[:2] == [
        KillTasks(("a", "b"), "completionTimeout passed before any replica published"),
        KillTasks(("c",), "its predecessor generation failed"),
    ]
    assert creates(actions) == [(1, {1: 0}), (1, {1: 0})]


def test_a_spec_update_rolls_tasks_of_the_old_version_over() -> None:
    tasks = (task("a", 0, {0: 0, 2: 0}), task("c", 1, {1: 0}, version=1))
    actions = plan(snap(spec=replace(SPEC, version=2, replicas=1), tasks=tasks))
    assert actions == [
        Rollover(0, ("a",), "the spec changed"),
        Rollover(1, ("c",), "the spec changed"),
    ]


def test_new_partitions_roll_their_group_over_after_the_transition() -> None:
    tasks = (task("a", 0, {0: 0}), task("c", 1, {1: 0}))
    spec = replace(SPEC, replicas=1, repartition_transition_s=120)
    seen = NOW - timedelta(seconds=119)
    during = plan(snap(spec=spec, partitions=(0, 1, 2), tasks=tasks, partitions_since=seen))
    assert during == []  # the old assignment reads on; no task for the new set yet
    after = snap(
        spec=spec, partitions=(0, 1, 2), tasks=tasks, partitions_since=seen - timedelta(seconds=1)
    )
    assert plan(after) == [Rollover(0, ("a",), "its partitions changed")]
    # the successor reads the new partition from the earliest offset
    rolled = (task("a", 0, {0: 0}, end={0: 40}, rolled_ago_s=1), tasks[1])
    assert creates(plan(replace(after, tasks=rolled))) == [(0, {0: 40, 2: 0})]


def test_a_replica_of_the_old_assignment_is_replaced_during_the_transition() -> None:
    tasks = (task("a", 0, {0: 7}), task("c", 1, {1: 0}), task("d", 1, {1: 0}))
    actions = plan(snap(partitions=(0, 1, 2), tasks=tasks, partitions_since=NOW))
    assert creates(actions) == [(0, {0: 7})]


def test_idle_starts_nothing_but_lets_running_tasks_roll_over() -> None:
    assert plan(snap(idle=True)) == []
    tasks = (task("a", 0, {0: 0, 2: 0}, age_s=61), task("c", 1, {1: 0}, age_s=61))
    actions = plan(snap(spec=replace(SPEC, replicas=1), tasks=tasks, idle=True))
    assert actions == [
        Rollover(0, ("a",), "taskDuration passed"),
        Rollover(1, ("c",), "taskDuration passed"),
    ]
    rolled = tuple(replace(t, end={p: 50 for p in t.start}, rolled_at=NOW) for t in tasks)
    assert plan(snap(spec=replace(SPEC, replicas=1), tasks=rolled, idle=True)) == []


def test_suspended_rolls_over_and_creates_nothing() -> None:
    tasks = (task("a", 0, {0: 0, 2: 0}), task("c", 1, {1: 0}))
    actions = plan(snap(spec=replace(SPEC, replicas=1), suspended=True, tasks=tasks))
    assert actions == [Rollover(0, ("a",), "suspended"), Rollover(1, ("c",), "suspended")]
    assert plan(snap(suspended=True)) == []


def test_handoff_request_and_stop_task_count() -> None:
    tasks = (task("a", 0, {0: 0, 2: 0}, age_s=100), task("c", 1, {1: 0}, age_s=100))
    spec = replace(SPEC, replicas=1, stop_task_count=1)
    assert plan(snap(spec=spec, tasks=tasks)) == [Rollover(0, ("a",), "taskDuration passed")]
    asked = plan(snap(spec=spec, tasks=tasks, handoff_requested=frozenset({1})))
    assert asked == [
        Rollover(0, ("a",), "taskDuration passed"),
        Rollover(1, ("c",), "handoff requested"),
    ]


def test_identity_changes_with_version_group_and_offsets() -> None:
    base = identity(1, 0, {0: 1})
    assert base == identity(1, 0, {0: 1})
    assert len({base, identity(2, 0, {0: 1}), identity(1, 1, {0: 1}), identity(1, 0, {0: 2})}) == 4


def test_after_a_reset_published_generations_do_not_pin_the_start() -> None:
    end = {1: 40}
    tasks = (
        task("a", 1, {1: 0}, end=end, status=SUCCESS, rolled_ago_s=5),
        task("b", 1, {1: 0}, end=end, status=SUCCESS, rolled_ago_s=5),
    )
    spec = replace(SPEC, replicas=1, use_earliest_offset=False)
    actions = plan(snap(spec=spec, tasks=tasks, committed={}, partitions=(1,)))
    assert creates(actions) == [(1, {1: 100})]  # latest, as after Druid's reset


def test_a_task_whose_own_checkpoints_published_reads_on() -> None:
    """An intermediate publish moves the committed offsets past the task's start: still valid
    while they are within what it has read; a committed offset past its reading is not its."""
    mine = replace(task("a", 0, {0: 0, 2: 0}), current={0: 500, 2: 480})
    others = (task("c", 1, {1: 0}), task("d", 1, {1: 0}))
    replica = replace(task("b", 0, {0: 0, 2: 0}), current=None)  # did not answer this pass
    committed = {0: 400, 1: 0, 2: 380}
    assert plan(snap(tasks=(mine, replica, *others), committed=committed)) == []
    behind = replace(mine, current={0: 500, 2: 300})
    actions = plan(snap(tasks=(behind, replica, *others), committed=committed))
    assert KillTasks(("a",), "its predecessor generation failed") in actions


def test_next_deadline_is_the_earliest_duration_end_or_timeout() -> None:
    reading = replace(
        task("r", 0, {0: 5, 2: 5}, age_s=50), reading_since=NOW - timedelta(seconds=40)
    )
    starting = task("s", 1, {1: 5}, age_s=30)  # not reading yet: counts from its creation
    publishing = task("p", 1, {1: 0}, end={1: 5}, rolled_ago_s=200)
    tasks = (reading, starting, publishing)
    # reading ends in 20 s; starting in 30 s; publishing times out in 100 s
    assert next_deadline(snap(tasks=tasks)) == NOW + timedelta(seconds=20)
    # deadlines already past are the plan's business this pass, not the next wake's
    later = NOW + timedelta(seconds=25)
    assert next_deadline(snap(tasks=tasks, now=later)) == NOW + timedelta(seconds=30)
    assert next_deadline(snap(tasks=(publishing,), now=NOW + timedelta(seconds=100))) is None
    assert next_deadline(snap()) is None


SIX = (0, 1, 2, 3, 4, 5)


def six(**kw: object) -> Snapshot:
    return snap(
        partitions=SIX,
        earliest=dict.fromkeys(SIX, 0),
        latest=dict.fromkeys(SIX, 100),
        committed=dict.fromkeys(SIX, 10),
        **kw,
    )


def test_a_task_count_change_rolls_over_only_the_groups_it_moves() -> None:
    """taskCount 4 -> 5 over six partitions: groups 2 and 3 keep theirs ({2}, {3}); 0 and 1
    lose 4 and 5 to the new group 4 (and 5 to 0): they are rolled over; the new group waits
    for them, then starts where they end."""
    spec = replace(SPEC, task_count=5, replicas=1)
    old = {0: {0: 10, 4: 10}, 1: {1: 10, 5: 10}, 2: {2: 10}, 3: {3: 10}}
    tasks = tuple(task(f"t{g}", g, start) for g, start in old.items())
    actions = plan(six(spec=spec, tasks=tasks))
    rolled = sorted(t for a in actions if isinstance(a, Rollover) for t in a.task_ids)
    assert rolled == ["t0", "t1"]
    assert creates(actions) == []  # 0, 1 and 4 wait: their partitions are still read
    # the next pass: t0 and t1 publish up to 50; groups 0, 1 and 4 start there
    ends = {"t0": {0: 50, 4: 50}, "t1": {1: 50, 5: 50}}
    rolled_over = tuple(
        replace(t, end=ends[t.id], rolled_at=NOW) if t.id in ends else t for t in tasks
    )
    actions = plan(six(spec=spec, tasks=rolled_over))
    assert sorted(creates(actions), key=lambda c: c[0]) == [
        (0, {0: 50, 5: 50}),
        (1, {1: 50}),
        (4, {4: 50}),
    ]
    assert not [a for a in actions if isinstance(a, Rollover | KillTasks)]


def test_a_task_count_change_does_not_wait_out_the_repartition_transition() -> None:
    """The partition set was first seen a moment ago (a young supervisor): the autoscaler's
    new count still rolls the moved groups over at once, as Druid's scale action stops its
    tasks; only a grown partition set waits for repartitionTransitionDuration."""
    spec = replace(SPEC, task_count=3, replicas=1, repartition_transition_s=120)
    tasks = (task("t0", 0, dict.fromkeys(SIX, 10)),)
    actions = plan(six(spec=spec, tasks=tasks, partitions_since=NOW))
    assert actions == [Rollover(0, ("t0",), "the task count changed")]
    # scaling in: group 0 keeps its partitions and takes those of groups 1 and 2
    spec = replace(spec, task_count=1)
    tasks = tuple(task(f"t{g}", g, {g: 10, g + 3: 10}) for g in range(3))
    actions = plan(six(spec=spec, tasks=tasks, partitions_since=NOW))
    assert actions == [Rollover(g, (f"t{g}",), "the task count changed") for g in range(3)]
    # the other groups' tasks failed: group 0 still takes their (published) partitions at once
    failed = (tasks[0], *(replace(t, status=FAILED) for t in tasks[1:]))
    actions = plan(six(spec=spec, tasks=failed, partitions_since=NOW))
    assert actions == [Rollover(0, ("t0",), "the task count changed")]


def test_scaling_in_rolls_the_groups_that_go_and_waits_for_them() -> None:
    spec = replace(SPEC, task_count=1, replicas=1)
    tasks = tuple(task(f"t{g}", g, {g: 10, g + 3: 10}) for g in range(3))
    actions = plan(six(spec=spec, tasks=tasks))
    assert sorted(t for a in actions if isinstance(a, Rollover) for t in a.task_ids) == [
        "t0",
        "t1",
        "t2",
    ]
    assert creates(actions) == []
    published = tuple(replace(t, end={p: 40 + p for p in t.start}, rolled_at=NOW) for t in tasks)
    assert creates(plan(six(spec=spec, tasks=published))) == [(0, {p: 40 + p for p in SIX})]
