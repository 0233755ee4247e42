"""Execute: carry out a pass's actions. Each is safe to repeat (deterministic task ids)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta

from supervisor.clients.task_api import TaskApiClient, TaskApiError, reachable
from supervisor.controller.actions import Action, CreateTask, KillTasks, Rollover
from supervisor.controller.workers import waits
from supervisor.db.intents import IntentRepository
from supervisor.db.models import IntentRow
from supervisor.db.offsets import OffsetGenerations
from supervisor.db.tasks import TaskRepository
from supervisor.runner.protocol import NoSlot
from supervisor.schemas.spec import SupervisorSpec
from supervisor.services.checkpoint import checkpoint_group, checkpoint_requested
from supervisor.services.task_life import TaskLife
from tasks.logs import log_context
from tasks.partitions import offsets_json
from tasks.protocol import (
    END_OF_PARTITION,
    OFFSETS_GENERATION,
    IndexKafkaTask,
    KafkaIndexTaskIOConfig,
    SequenceNumbers,
    TaskState,
    TaskStatusCode,
)
from tasks.spec.periods import duration_millis

log = logging.getLogger(__name__)


ROLLOVER_TIMEOUT_S = 60.0


def _reading(client: TaskApiClient) -> bool:
    try:
        return client.status() in (TaskState.READING, TaskState.PAUSED)
    except TaskApiError:
        return False


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def index_task(
    spec: SupervisorSpec, spec_version: int, action: CreateTask, now: datetime, generation: int = 0
) -> IndexKafkaTask:
    """Druid's index_kafka task for one replica of a group, from the supervisor spec;
    `generation`: its offsets' (OffsetGenerations), in the context once there was a reset."""
    sid = spec.supervisor_id
    io = spec.spec.ioConfig
    if io.inputFormat is None:  # a stored spec has one: its submission checked
        raise ValueError(f"supervisor {sid}: ioConfig.inputFormat is not set")
    minimum = maximum = None
    if io.lateMessageRejectionStartDateTime:
        minimum = io.lateMessageRejectionStartDateTime
    elif io.lateMessageRejectionPeriod:
        minimum = _iso(now - timedelta(milliseconds=duration_millis(io.lateMessageRejectionPeriod)))
    if io.earlyMessageRejectionPeriod:
        early = duration_millis(io.earlyMessageRejectionPeriod) + duration_millis(io.taskDuration)
        maximum = _iso(now + timedelta(milliseconds=early))
    return IndexKafkaTask(
        type="index_kafka",
        id=action.task_id,
        supervisorId=sid,
        groupId=f"index_kafka_{sid}",
        dataSchema=spec.spec.dataSchema,
        tuningConfig=spec.spec.tuningConfig,
        ioConfig=KafkaIndexTaskIOConfig(
            type="kafka",
            taskGroupId=action.group,
            baseSequenceName=f"index_kafka_{sid}_{action.identity}",
            # a topicPattern's tasks key their partitions "topic:partition"
            startSequenceNumbers=SequenceNumbers(
                type="start",
                stream=io.topic or io.topicPattern or "",
                partitionSequenceNumberMap=offsets_json(action.start),
            ),
            consumerProperties=io.consumerProperties,
            pollTimeout=io.pollTimeout,
            inputFormat=io.inputFormat,
            minimumMessageTime=minimum,
            maximumMessageTime=maximum,
        ),
        context={
            **{k: v for k, v in (spec.context or {}).items() if k != OFFSETS_GENERATION},
            "specVersion": str(spec_version),
            "identity": action.identity,
            **({OFFSETS_GENERATION: generation} if generation else {}),
        },
    )


class Executor:
    def __init__(self, tasks: TaskLife) -> None:
        """`tasks`: the one owner of tasks' lives, whose launches and kills the actions are."""
        self.tasks = tasks
        self.session, self.clock, self.runner = tasks.session, tasks.clock, tasks.runner
        self.fence = tasks.fence  # checked before each command, which carries its epoch
        self.rolled: set[int] = set()  # groups given final end offsets by this executor
        # handoff intents by group, marked done in the commit of the group's rollover
        self.handoffs: Mapping[int, list[IntentRow]] = {}
        # why the tasks it was to create wait (no task host has a slot), if they do
        self.no_slot: str | None = None
        self.killed_at_checkpoint = False  # a replica its group's checkpoint failed on

    def run(self, actions: list[Action], spec: SupervisorSpec, spec_version: int) -> None:
        own: int | None = None  # the supervisor's offsets generation, read once a task needs it
        for action in actions:
            if isinstance(action, KillTasks):
                for task_id in action.task_ids:
                    with log_context(task=task_id):
                        log.info("killing %s: %s", task_id, action.reason)
                        self.tasks.kill(task_id, action.reason)
            elif isinstance(action, Rollover):
                with log_context(group=action.group):
                    self._rollover(action)
            elif self.no_slot is not None:  # CreateTask: the hosts are full; no use asking
                continue
            elif TaskRepository(self.session).get(action.task_id) is None:  # CreateTask
                with log_context(task=action.task_id, group=action.group):
                    log.info("creating %s from %s", action.task_id, offsets_json(action.start))
                    if action.generation is None and own is None:
                        own = OffsetGenerations(self.session).get(spec.supervisor_id)
                    generation = own if action.generation is None else action.generation
                    task = index_task(spec, spec_version, action, self.clock(), generation or 0)
                    try:
                        self.tasks.launch(task, wait_for_slot=True)
                    except NoSlot as exc:
                        self.no_slot = str(exc)

    def adopt(self, supervisor_id: str) -> None:
        """Take over reading tasks an earlier overlord left: resume the ones left paused
        (druid #9913), and record final end offsets it set but did not write down, which makes
        those tasks a publishing generation."""
        repo = TaskRepository(self.session)
        leader = self.fence.check()
        for row in repo.of_supervisor(supervisor_id, self.clock()):
            if not reachable(row) or row.end_offsets is not None:
                continue
            try:
                client = TaskApiClient.for_task(row, leader=leader)
                if client.status() == TaskState.PAUSED:
                    log.info("resuming %s, left paused by an earlier overlord", row.id)
                    client.resume()
                end = client.end_offsets()
            except TaskApiError as exc:
                log.info("task %s not reachable at adoption: %s", row.id, exc)
                continue
            if end and END_OF_PARTITION not in end.values():
                log.info("task %s adopted as publishing, ending at %s", row.id, end)
                row.end_offsets, row.rolled_at = end, self.clock()
        self.session.commit()

    def checkpoints(
        self, requested: Mapping[str, Mapping[str, int]], skip_groups: set[int]
    ) -> set[str]:
        """Close the current sequence of each requesting task's group (finish=false), unless
        the group was just rolled over, which ends it anyway. The requests to make again (no
        replica could be paused); a replica that failed while others closed it is killed."""
        repo = TaskRepository(self.session)
        again: set[str] = set()
        for task_id, start in requested.items():
            row = repo.get(task_id)
            if row is None or row.status != TaskStatusCode.RUNNING or row.end_offsets is not None:
                continue
            if row.group_id in skip_groups:
                continue
            waits()  # a pause lasts until the task's batch in flight ends
            result = checkpoint_requested(
                repo.replicas(row), task_id, start, self.runner.is_running, self.fence.check()
            )
            if result is None:
                continue
            if result.end_offsets is None:
                again.add(task_id)
                continue
            for failed in result.failed:
                self.tasks.kill(failed, "could not be paused and given end offsets at a checkpoint")
                self.killed_at_checkpoint = True
        return again

    def _rollover(self, action: Rollover) -> None:
        repo = TaskRepository(self.session)
        rows = [row for task_id in action.task_ids if (row := repo.get(task_id)) is not None]
        leader = self.fence.check()
        clients = {row.id: TaskApiClient.for_task(row, leader=leader) for row in rows}
        not_ready = [tid for tid, client in clients.items() if not _reading(client)]
        if not_ready:
            # Still starting (Spark is slow to come up under load): roll over on a later
            # pass instead of killing healthy tasks.
            log.info("group %s: rollover waits for %s to start reading", action.group, not_ready)
            return
        waits()
        result = checkpoint_group(
            clients, finish=True, timeout=ROLLOVER_TIMEOUT_S, alive=self.runner.is_running
        )
        now = self.clock()
        for row in rows:
            if row.id in result.failed or result.end_offsets is None:
                continue
            row.end_offsets = dict(result.end_offsets)
            row.rolled_at = now
        asked = self.handoffs.get(action.group, ())
        if result.end_offsets is not None:
            IntentRepository.done(asked, now, "rolled over")
        self.fence.check()  # a deposed leader records nothing of a rollover the tasks refused
        self.session.commit()
        if result.end_offsets is not None:
            self.rolled.add(action.group)
        log.info("group %s rolled over (%s) at %s", action.group, action.reason, result.end_offsets)
        for task_id in result.failed:
            self.tasks.kill(task_id, "could not be paused and given end offsets at rollover")
        if result.end_offsets is None and result.failed:  # none paused: the group restarts
            IntentRepository.done(asked, self.clock(), "its tasks could not be paused: killed")
            self.session.commit()
