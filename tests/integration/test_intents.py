"""Intents on the real stack: a handoff and a reset answered by an overlord that stops before
acting on them are carried out once by the next one, and only once.

The gap between a request's answer and its effect is made wide and certain: the overlord that
answers runs no supervisor passes (run_supervisors off, as a leader that died right after its
200), then it stops and one that runs them starts on the same metadata DB, tasks and port.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from supervisor.db.intents import IntentKind
from supervisor.db.models import CommittedOffsetsRow, IntentRow, SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.services.supervisors import RESET_REASON
from supervisor.testkit.service import RunningService, db_rows, task_settings
from supervisor.testkit.waits import wait_for
from tests.conftest import words_spec, words_topic

BASE = "/druid/indexer/v1/supervisor"
SID = "intended"
WHO = {"X-Druid-Author": "alice", "X-Druid-Comment": "before the restart"}


def tasks(service: RunningService) -> list[Any]:
    return db_rows(service, select(TaskRow).order_by(TaskRow.created_at))


def intents(service: RunningService) -> list[Any]:
    return db_rows(service, select(IntentRow).order_by(IntentRow.id))


def reading(service: RunningService, api: httpx.Client) -> list[str]:
    """The ids of the tasks the supervisor's status shows reading."""
    payload = api.get(f"{BASE}/{SID}/status").json()["payload"]
    return [t["id"] for t in payload["activeTasks"] if t.get("currentOffsets")]


def test_a_handoff_and_a_reset_survive_a_restart_and_happen_once(
    kafka: LocalKafka, jar_cache: Path, tmp_path: Path
) -> None:
    topic = words_topic(kafka, "intent", 10)
    settings = task_settings(tmp_path, jar_cache)
    spec = words_spec(SID, topic, kafka.bootstrap_servers)
    leader = RunningService(settings)
    port = settings.port = leader.port
    with leader, httpx.Client(base_url=leader.url, timeout=30) as api:
        assert api.post(BASE, json=spec).is_success
        wait_for(lambda: reading(leader, api), 180, "the first task to read")
        (first,) = tasks(leader)

    # 1. a handoff answered by an overlord that does not act on it
    settings.run_supervisors = False
    with (
        RunningService(settings, port=port) as answering,
        httpx.Client(base_url=answering.url, timeout=30) as api,
    ):
        handoff = {"taskGroupIds": [0]}
        assert api.post(f"{BASE}/{SID}/taskGroups/handoff", json=handoff, headers=WHO).json() == {}
        (asked,) = intents(answering)
        assert (asked.kind, asked.payload, asked.author, asked.comment, asked.done_at) == (
            IntentKind.HANDOFF,
            {"group": 0},
            "alice",
            "before the restart",
            None,
        )
        assert [t.end_offsets for t in tasks(answering)] == [None]  # nothing was done

    # the next leader rolls the group over once: the first task publishes to 10, its
    # successor reads on and is not rolled over again
    settings.run_supervisors = True
    with (
        RunningService(settings, port=port) as acting,
        httpx.Client(base_url=acting.url, timeout=30) as api,
    ):
        done = wait_for(
            lambda: [i for i in intents(acting) if i.done_at is not None],
            180,
            "the handoff to be done",
        )
        assert [i.outcome for i in done] == ["rolled over"]
        wait_for(
            lambda: [t.status for t in tasks(acting) if t.id == first.id] == ["SUCCESS"],
            180,
            "the first task to publish",
        )
        successor = wait_for(
            lambda: [t for t in tasks(acting) if t.id != first.id and t.location_port],
            180,
            "a successor",
        )[0]
        assert successor.payload["ioConfig"]["startSequenceNumbers"][
            "partitionSequenceNumberMap"
        ] == {"0": 10}
        wait_for(lambda: successor.id in reading(acting, api), 180, "the successor to read")
        time.sleep(3)  # a few passes (period 1 s): a repeated handoff would roll it over now
        assert [(t.id, t.status, t.end_offsets) for t in tasks(acting)] == [
            (first.id, "SUCCESS", {"0": 10}),
            (successor.id, "RUNNING", None),
        ]

    # 2. a reset answered the same way: the offsets go at once, the kill waits for a leader
    settings.run_supervisors = False
    with (
        RunningService(settings, port=port) as answering,
        httpx.Client(base_url=answering.url, timeout=30) as api,
    ):
        assert api.post(f"{BASE}/{SID}/reset", headers=WHO).json() == {"id": SID}
        assert db_rows(answering, select(CommittedOffsetsRow)) == []
        restart = intents(answering)[-1]
        assert (restart.kind, restart.payload, restart.done_at) == (
            IntentKind.RESTART,
            {"groups": None},
            None,
        )
        assert [t.status for t in tasks(answering)] == ["SUCCESS", "RUNNING"]

    settings.run_supervisors = True
    settings.kill_tasks_on_exit = True
    with (
        RunningService(settings, port=port) as acting,
        httpx.Client(base_url=acting.url, timeout=30) as api,
    ):
        wait_for(
            lambda: all(i.done_at is not None for i in intents(acting)), 120, "the reset's kill"
        )
        killed = next(t for t in tasks(acting) if t.id == successor.id)
        assert (killed.status, killed.error_msg) == ("FAILED", RESET_REASON)
        # the group restarts (from the earliest offset: the committed ones are gone), once
        third = wait_for(
            lambda: [t for t in tasks(acting) if t.id not in (first.id, successor.id)],
            180,
            "the group's new task",
        )
        wait_for(lambda: third[0].id in reading(acting, api), 180, "the new task to read")
        time.sleep(3)  # a repeated restart would kill it now
        statuses = [(t.id, t.status) for t in tasks(acting)]
        assert statuses == [
            (first.id, "SUCCESS"),
            (successor.id, "FAILED"),
            (third[0].id, "RUNNING"),
        ]
        assert [i.outcome for i in intents(acting)] == ["rolled over", "tasks killed"]

        # what the new task reads is the first task's range again (0 to 10): a publish of its
        # own, as Druid's read after a reset is, its segment named anew (the offsets'
        # generation is in its range digest); the same name would make it wait forever
        assert api.post(f"{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [0]}).is_success
        wait_for(
            lambda: [t.status for t in tasks(acting) if t.id == third[0].id] == ["SUCCESS"],
            180,
            "the range read again to publish",
        )
        assert third[0].payload["context"]["offsetsGeneration"] == 1
        segments = db_rows(acting, select(SegmentRow.id, SegmentRow.num_rows, SegmentRow.used))
        assert [(rows, used) for _, rows, used in segments] == [(10, True), (10, True)]
        assert len({segment_id for segment_id, _, _ in segments}) == 2
        assert db_rows(acting, select(CommittedOffsetsRow.offsets)) == [({"0": 10},)]
