"""The reconciler's states over a real metadata DB: the stream unreachable from the start
or lost later, idleness, and what a pass starts meanwhile. The runner is a fake that records
launches (no Spark here); the dead-port case uses the real Kafka client."""

from __future__ import annotations

import logging
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from supervisor.controller.observe import StreamError, StreamReader
from supervisor.controller.pacing import SLOT_WAIT_S, Done, RequeueAfter, Retry
from supervisor.controller.reconciler import SLOW_PASS_S, Reconciler
from supervisor.db.intents import Checkpoint, IntentRepository
from supervisor.db.models import TaskRow
from supervisor.db.offsets import OffsetGenerations, OffsetsRepository
from supervisor.model.status import StatusStore, SupervisorStatus
from supervisor.net import free_port
from supervisor.runner.protocol import Launched, NoSlot
from supervisor.services.checkpoint import CheckpointResult
from supervisor.services.supervisors import Actor, SupervisorService
from tasks.protocol import IndexKafkaTask, offsets_generation


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class ScriptedStream(StreamReader):
    """Three partitions whose latest offsets the test sets; `down` makes describe fail."""

    def __init__(self) -> None:
        self.latest = {0: 10, 1: 10, 2: 10}
        self.down = False
        self.asked = 0  # describe calls
        self.mirrored: list[tuple[str, str, dict[Any, int]]] = []  # (group, stream, offsets)
        self.mirror_down = False

    def mirror(
        self, consumer_properties: Any, group: str, stream: str, committed: dict[Any, int]
    ) -> None:
        if self.mirror_down:
            raise StreamError("cannot reach Kafka at 127.0.0.1:1: broker down")
        self.mirrored.append((group, stream, dict(committed)))

    def describe(
        self, consumer_properties: dict[str, Any], stream: str, pattern: bool = False
    ) -> tuple[tuple[int, ...], dict[int, int], dict[int, int]]:
        self.asked += 1
        if self.down:
            raise StreamError("cannot reach Kafka at 127.0.0.1:1: broker down")
        return (0, 1, 2), {0: 0, 1: 0, 2: 0}, dict(self.latest)


class RecordingRunner:
    """The parts of supervisor.runner.protocol.Runner a pass uses here: launches, recorded."""

    def __init__(self) -> None:
        self.launched: list[str] = []

    def launch(self, task: IndexKafkaTask) -> Launched:
        self.launched.append(task.id)
        return Launched("127.0.0.1", free_port(), "/dev/null", "token")


def submit(sessions: sessionmaker[Session], clock: Clock, bootstrap: str, **io: Any) -> None:
    spec = {
        "type": "kafka",
        "spec": {
            "dataSchema": {
                "dataSource": "events",
                "timestampSpec": {"column": "ts"},
                "dimensionsSpec": {"dimensions": ["a"]},
                "granularitySpec": {"segmentGranularity": "HOUR"},
            },
            "ioConfig": {
                "topic": "events",
                "consumerProperties": {"bootstrap.servers": bootstrap},
                "inputFormat": {"type": "json"},
                **io,
            },
        },
    }
    with sessions() as session:
        SupervisorService(session, clock).submit(spec, Actor())
        session.commit()


class Passes:
    """A supervisor's passes through the reconciler, and its status after each."""

    def __init__(self, sessions: Any, clock: Clock, stream: StreamReader, runner: Any) -> None:
        self.statuses = StatusStore()
        self.reconciler = Reconciler(sessions, clock, runner, stream, self.statuses)

    def run(self) -> RequeueAfter | Retry:
        result = self.reconciler.reconcile("events")
        assert isinstance(result, RequeueAfter | Retry)
        return result

    @property
    def status(self) -> SupervisorStatus:
        status = self.statuses.get("events")
        assert status is not None
        return status


def test_stream_lost_after_a_healthy_pass_then_back(sessions: Any) -> None:
    clock, stream, runner = Clock(), ScriptedStream(), RecordingRunner()
    submit(sessions, clock, "127.0.0.1:1")
    passes = Passes(sessions, clock, stream, runner)
    passes.run()
    assert passes.status.state == "RUNNING" and len(runner.launched) == 1
    stream.down = True
    for expected in ("RUNNING", "RUNNING", "UNHEALTHY_SUPERVISOR"):
        passes.run()
        assert passes.status.state == expected  # Druid's unhealthinessThreshold is 3
    assert passes.status.detailed_state == "LOST_CONTACT_WITH_STREAM"
    assert not passes.status.healthy
    assert "broker down" in passes.status.recent_errors[-1].message
    assert passes.status.recent_errors[-1].to_json()["streamException"] is True
    stream.down = False
    passes.run()
    assert passes.status.state == passes.status.detailed_state == "RUNNING"
    assert passes.status.healthy and len(runner.launched) == 1  # the task is still there


def test_a_dead_broker_address_is_unable_to_connect(sessions: Any) -> None:
    clock, runner = Clock(), RecordingRunner()
    dead = f"127.0.0.1:{free_port()}"
    submit(sessions, clock, dead)
    passes = Passes(sessions, clock, StreamReader(timeout_s=1.0), runner)
    for _ in range(3):
        passes.run()
    assert passes.status.detailed_state == "UNABLE_TO_CONNECT_TO_STREAM"
    assert passes.status.state == "UNHEALTHY_SUPERVISOR"
    assert dead in passes.status.recent_errors[-1].message
    assert runner.launched == []


def test_a_terminated_supervisor_winds_down_and_is_done_without_asking_kafka(
    sessions: Any,
) -> None:
    """Terminate with the broker unreachable: the pass rolls the running task over without
    asking Kafka, and once no task runs the supervisor is done at once (it went on passing,
    logging "cannot reach Kafka", for a minute and more)."""
    clock, stream, runner = Clock(), ScriptedStream(), RecordingRunner()
    submit(sessions, clock, "127.0.0.1:1")
    passes = Passes(sessions, clock, stream, runner)
    passes.run()
    assert len(runner.launched) == 1 and stream.asked == 1
    stream.down = True
    with sessions() as session:
        SupervisorService(session, clock).terminate("events", Actor())
        session.commit()
    result = passes.reconciler.reconcile("events")  # the task still runs: it is wound down
    assert isinstance(result, RequeueAfter), result
    assert stream.asked == 1 and len(runner.launched) == 1  # no Kafka asked, nothing started
    with sessions() as session:
        session.execute(update(TaskRow).values(status="SUCCESS"))
        session.commit()
    assert isinstance(passes.reconciler.reconcile("events"), Done)
    assert stream.asked == 1


def test_idle_after_inactivity_starts_nothing_and_new_data_wakes_it(sessions: Any) -> None:
    clock, stream, runner = Clock(), ScriptedStream(), RecordingRunner()
    idle = {"enabled": True, "inactiveAfterMillis": 60000}
    submit(sessions, clock, "127.0.0.1:1", idleConfig=idle)
    with sessions() as session:  # everything was read and published already
        OffsetsRepository(session).insert("events", "events", "events", stream.latest, clock())
        session.commit()
    passes = Passes(sessions, clock, stream, runner)
    passes.run()  # new to this reconciler: not idle yet
    assert passes.status.state == "RUNNING" and len(runner.launched) == 1
    with sessions() as session:  # that task ends, having found nothing to read
        session.execute(update(TaskRow).values(status="SUCCESS"))
        session.commit()
    clock.now += timedelta(seconds=59)
    passes.run()
    assert passes.status.state == "RUNNING" and len(runner.launched) == 2
    with sessions() as session:
        session.execute(update(TaskRow).values(status="SUCCESS"))
        session.commit()
    clock.now += timedelta(seconds=2)
    passes.run()
    assert passes.status.state == "IDLE" and len(runner.launched) == 2
    stream.latest = {0: 11, 1: 10, 2: 10}  # new data
    passes.run()
    assert passes.status.state == "RUNNING" and len(runner.launched) == 3


def test_a_slow_pass_is_logged_with_where_its_time_went(
    sessions: Any, caplog: pytest.LogCaptureFixture
) -> None:
    class SlowStream(ScriptedStream):
        def describe(
            self, consumer_properties: dict[str, Any], stream: str, pattern: bool = False
        ) -> tuple[tuple[int, ...], dict[int, int], dict[int, int]]:
            time.sleep(SLOW_PASS_S)
            return super().describe(consumer_properties, stream, pattern)

    clock, runner = Clock(), RecordingRunner()
    submit(sessions, clock, "127.0.0.1:1")
    passes = Passes(sessions, clock, SlowStream(), runner)
    with caplog.at_level(logging.WARNING, logger="supervisor.controller.reconciler"):
        passes.run()
    assert runner.launched  # the pass did its work
    [line] = [r.getMessage() for r in caplog.records if "slow pass" in r.getMessage()]
    laps = dict(re.findall(r"(\w+) (\d+\.\d+) s", line.split("(", 1)[1]))
    assert set(laps) == {"db", "kafka", "tasks", "execute"}
    assert float(laps["kafka"]) >= SLOW_PASS_S > float(laps["db"])


def test_tasks_no_host_has_a_slot_for_wait_and_are_created_once_one_frees(
    sessions: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Every task host full: the supervisor's tasks are neither created nor recorded as failed
    (before, a pass every 0.2 s recorded a FAILED task each time: 350 in 4 minutes); it asks
    again in SLOT_WAIT_S, says once that they wait, and creates them once a slot frees."""

    class FullRunner(RecordingRunner):
        def __init__(self) -> None:
            super().__init__()
            self.slots = 0

        def launch(self, task: IndexKafkaTask) -> Launched:
            if self.slots == 0:
                raise NoSlot("no task host has free capacity (1 alive, all full)")
            self.slots -= 1
            return super().launch(task)

    clock, runner = Clock(), FullRunner()
    submit(sessions, clock, "127.0.0.1:1", taskCount=3)
    passes = Passes(sessions, clock, ScriptedStream(), runner)
    with caplog.at_level(logging.INFO, logger="supervisor.controller.reconciler"):
        for _ in range(3):
            result = passes.run()
            assert isinstance(result, RequeueAfter) and 0 < result.seconds <= SLOT_WAIT_S
        with sessions() as session:
            assert session.query(TaskRow).count() == 0  # nothing created, nothing failed
        assert passes.status.state == "RUNNING" and runner.launched == []
        runner.slots = 2
        passes.run()
        runner.slots = 1
        passes.run()
    assert len(runner.launched) == 3
    with sessions() as session:
        assert {r.status for r in session.query(TaskRow)} == {"RUNNING"}
    said = [r.getMessage() for r in caplog.records if "slot" in r.getMessage()]
    assert len(said) == 2 and "wait for a slot: no task host has free capacity" in said[0]
    assert said[1] == "supervisor events: task hosts have slots again"


def test_checkpoints_between_full_passes_are_made_by_light_passes(
    sessions: Any, monkeypatch: Any
) -> None:
    """A pass woken by checkpoint requests alone, before the full pass the last one asked for,
    makes them without asking Kafka or the tasks again; a change, a due pass or a replica
    killed at the checkpoint brings the full pass back."""
    made: list[str] = []

    def checkpoint(replicas: Any, task_id: str, *_: Any) -> CheckpointResult:
        made.append(task_id)
        return CheckpointResult({"0": 5, "1": 5, "2": 5}, failed=killed)

    killed: list[str] = []
    monkeypatch.setattr("supervisor.controller.execute.checkpoint_requested", checkpoint)

    class Runner(RecordingRunner):
        def is_running(self, task_id: str) -> bool:
            return True

        def kill(self, task_id: str) -> bool:
            return True

    clock, runner = Clock(), Runner()
    now = [1000.0]

    class CountingStream(ScriptedStream):
        asked = 0

        def describe(self, *args: Any, **kwargs: Any) -> Any:
            CountingStream.asked += 1
            return super().describe(*args, **kwargs)

    submit(sessions, clock, "127.0.0.1:1")
    statuses = StatusStore()
    reconciler = Reconciler(
        sessions, clock, runner, CountingStream(), statuses, monotonic=lambda: now[0]
    )

    def ask() -> None:
        [task_id] = runner.launched
        with sessions() as session:
            start = Checkpoint(start={"0": 0, "1": 0, "2": 0})
            IntentRepository(session).add("events", start, clock(), task_id=task_id)
            session.commit()
        reconciler.hint("events")

    first = reconciler.reconcile("events")
    assert isinstance(first, RequeueAfter) and runner.launched and CountingStream.asked == 1
    full_in = first.seconds
    now[0] += 0.1  # the task runs a while, then asks for a checkpoint: a light pass
    ask()
    light = reconciler.reconcile("events")
    assert made == runner.launched and len(made) == 1 and CountingStream.asked == 1
    assert isinstance(light, RequeueAfter) and light.seconds == pytest.approx(full_in - 0.1)
    with sessions() as session:
        assert IntentRepository(session).pending("events") == []  # done
    reconciler.wake("events")  # a spec change, say: the next pass is full
    ask()
    reconciler.reconcile("events")
    assert len(made) == 2 and CountingStream.asked == 2
    now[0] += 3600  # past the full pass the last one asked for
    ask()
    reconciler.reconcile("events")
    assert len(made) == 3 and CountingStream.asked == 3
    now[0] += 0.1
    killed.append(runner.launched[-1])  # a replica failed the checkpoint: a full pass at once
    ask()
    at_once = reconciler.reconcile("events")
    assert len(made) == 4 and CountingStream.asked == 3 and at_once == RequeueAfter(0.0)
    reconciler.reconcile("events")
    assert CountingStream.asked == 4 and len(runner.launched) == 2  # its replacement


def test_the_autoscaler_scales_out_on_lag_records_why_and_keeps_the_count(
    sessions: Any,
) -> None:
    """Lag above the threshold in every sample: after the start delay the task count goes
    from 1 to 3 (scaleOutStep 2), recorded in the metadata DB with its reason and shown in the
    status; the next pass (a new reconciler: another overlord) plans with 3."""
    from supervisor.db.repositories import AutoscalerRepository
    from supervisor.services.status import status_report

    class SixPartitions(ScriptedStream):
        def describe(
            self, consumer_properties: dict[str, Any], stream: str, pattern: bool = False
        ) -> tuple[tuple[int, ...], dict[int, int], dict[int, int]]:
            self.asked += 1
            six = tuple(range(6))
            return six, dict.fromkeys(six, 0), dict.fromkeys(six, 5000)

    clock, stream, runner = Clock(), SixPartitions(), RecordingRunner()
    scaler = {
        "enableTaskAutoScaler": True,
        "taskCountMin": 1,
        "taskCountMax": 6,
        "lagCollectionIntervalMillis": 1000,
        "lagCollectionRangeMillis": 3000,
        "scaleActionStartDelayMillis": 2000,
        "scaleActionPeriodMillis": 1000,
        "scaleOutThreshold": 1000,
    }
    submit(sessions, clock, "127.0.0.1:1", autoScalerConfig=scaler)
    with sessions() as session:
        OffsetsRepository(session).insert(
            "events", "events", "events", dict.fromkeys(range(6), 0), clock()
        )
        session.commit()
    seconds = [0.0]
    reconciler = Reconciler(
        sessions, clock, runner, stream, StatusStore(), monotonic=lambda: seconds[0]
    )
    reconciler.reconcile("events")
    assert len(runner.launched) == 1  # taskCount 1 to begin with
    for _ in range(3):
        seconds[0] += 1.0
        reconciler.reconcile("events")
    with sessions() as session:
        row = AutoscalerRepository(session).get("events")
        assert row is not None and row.task_count == 3
        (decision,) = row.decisions["decisions"]
        assert (decision["from"], decision["to"]) == (1, 3)
        assert "scaleOutThreshold 1000" in decision["reason"]
        report = status_report(session, None, clock(), "events")
        assert report["payload"]["autoscaler"]["taskCount"] == 3  # type: ignore[index]
        assert report["payload"]["autoscaler"]["decisions"] == [decision]  # type: ignore[index]
    # the first group's task reads partitions now of groups 1 and 2: none start beside it
    assert len(runner.launched) == 1
    # the history shows the decision beside the version it was taken under, not a later one
    clock.now += timedelta(minutes=1)
    submit(sessions, clock, "127.0.0.1:1", autoScalerConfig={**scaler, "scaleOutStep": 1})
    with sessions() as session:
        newer, older = SupervisorService(session, clock).history("events", None).versions["events"]
        everyone = SupervisorService(session, clock).all_history(None, lambda _: True)
    assert "autoscalerDecisions" not in newer
    assert older["autoscalerDecisions"] == [decision]
    assert everyone.versions["events"] == [newer, older]


def test_the_committed_offsets_are_mirrored_to_the_consumer_group_when_they_change(
    sessions: Any,
) -> None:
    """Each pass that finds the committed offsets changed gives them to the consumer group
    sluicegate-<id> (partitions the topic no longer has left out); unchanged, nothing is asked
    of Kafka until MIRROR_REFRESH_S has passed; Kafka away costs the mirror, not the pass,
    and the next pass tries again; a reset (no committed offsets) deletes the group (an empty
    mirror), and so does consumerGroupOffsets false."""
    from supervisor.controller.mirror import MIRROR_REFRESH_S

    clock, stream, runner = Clock(), ScriptedStream(), RecordingRunner()
    submit(sessions, clock, "127.0.0.1:1")
    with sessions() as session:  # no tasks: the offsets below change under none
        SupervisorService(session, clock).set_suspended("events", True, Actor())
        session.commit()
    seconds = [0.0]
    reconciler = Reconciler(
        sessions, clock, runner, stream, StatusStore(), monotonic=lambda: seconds[0]
    )
    reconciler.reconcile("events")
    assert stream.mirrored == [("sluicegate-events", "events", {})]  # a new leader's first pass
    reconciler.reconcile("events")
    assert len(stream.mirrored) == 1  # unchanged: not asked again

    def commit(offsets: dict[int, int]) -> None:
        with sessions() as session:
            repo = OffsetsRepository(session)
            row = repo.get("events")
            if row is None:
                repo.insert("events", "events", "events", offsets, clock())
            else:
                repo.compare_and_swap("events", row.version, offsets, clock())
            session.commit()

    commit({0: 4, 1: 5, 2: 6, 5: 9})  # partition 5: not (any longer) in the topic
    stream.mirror_down = True
    reconciler.reconcile("events")
    assert len(stream.mirrored) == 1
    assert reconciler.statuses.get("events").healthy  # type: ignore[union-attr]
    stream.mirror_down = False
    reconciler.reconcile("events")
    assert stream.mirrored[-1] == ("sluicegate-events", "events", {0: 4, 1: 5, 2: 6})
    reconciler.reconcile("events")
    assert len(stream.mirrored) == 2
    seconds[0] += MIRROR_REFRESH_S  # written again before Kafka expires them
    reconciler.reconcile("events")
    assert len(stream.mirrored) == 3 and stream.mirrored[-1] == stream.mirrored[-2]
    with sessions() as session:
        SupervisorService(session, clock).reset("events", Actor())
        session.commit()
    reconciler.reconcile("events")
    assert stream.mirrored[-1] == ("sluicegate-events", "events", {})
    commit({0: 7, 1: 7, 2: 7})
    reconciler.reconcile("events")
    assert stream.mirrored[-1] == ("sluicegate-events", "events", {0: 7, 1: 7, 2: 7})
    submit(sessions, clock, "127.0.0.1:1", consumerGroupOffsets=False)
    with sessions() as session:
        SupervisorService(session, clock).set_suspended("events", True, Actor())
        session.commit()
    reconciler.reconcile("events")
    assert stream.mirrored[-1] == ("sluicegate-events", "events", {})  # off: deleted
    asked = len(stream.mirrored)
    reconciler.reconcile("events")
    assert len(stream.mirrored) == asked


def test_a_replacement_replica_keeps_its_siblings_offsets_generation(sessions: Any) -> None:
    """A reset of other partitions (resetOffsets) begins a new offsets generation while a
    group reads on: a replica of that group that dies is replaced with its sibling's
    generation, so the two still build the same segment ids; a group whose replicas all died
    starts again with the generation now."""

    class GenerationRunner(RecordingRunner):
        def __init__(self) -> None:
            super().__init__()
            self.generations: dict[str, int] = {}

        def launch(self, task: IndexKafkaTask) -> Launched:
            self.generations[task.id] = offsets_generation(task.context)
            return super().launch(task)

    clock, runner = Clock(), GenerationRunner()
    submit(sessions, clock, "127.0.0.1:1", taskCount=2, replicas=2)
    passes = Passes(sessions, clock, ScriptedStream(), runner)
    passes.run()
    assert len(runner.launched) == 4 and set(runner.generations.values()) == {0}
    with sessions() as session:
        assert OffsetGenerations(session).advance("events", clock()) == 1
        by_group = {0: [], 1: []}
        for row in session.query(TaskRow).order_by(TaskRow.id):
            by_group[row.group_id].append(row.id)
        dead = [by_group[0][0], *by_group[1]]  # one replica of group 0, both of group 1
        session.execute(update(TaskRow).where(TaskRow.id.in_(dead)).values(status="FAILED"))
        session.commit()
    passes.run()
    made = {task_id: runner.generations[task_id] for task_id in runner.launched[4:]}
    with sessions() as session:
        groups = {r.id: r.group_id for r in session.query(TaskRow) if r.id in made}
    assert sorted((groups[t], g) for t, g in made.items()) == [(0, 0), (1, 1), (1, 1)]
