"""Indexing tasks as real processes: submitted over HTTP, controlled over their chat API."""

from __future__ import annotations

import json
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from supervisor.db.models import CommittedOffsetsRow, IntentRow, SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic, produce
from supervisor.testkit.service import RunningService, db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for
from tasks.protocol import EPOCH_HEADER, TOKEN_HEADER
from tasks.runtime.priority import PUBLISHING_NICENESS

TASKS = "/druid/indexer/v1"


@pytest.fixture
def overlord(tmp_path: Path, jar_cache: Path) -> Iterator[tuple[RunningService, httpx.Client]]:
    # publish_niceness on: test_pause_set_end_offsets_resume_stops_exactly_there checks it
    with overlord_with_tasks(
        tmp_path,
        jar_cache,
        "local[2]",
        task_runtime="process",
        publish_niceness=PUBLISHING_NICENESS,
    ) as running:
        yield running


def topic_with(kafka: LocalKafka, partitions: int, per_partition: int) -> str:
    topic = f"task-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, partitions)
    for p in range(partitions):
        produce_to(kafka, topic, p, range(per_partition))
    return topic


def produce_to(kafka: LocalKafka, topic: str, partition: int, numbers: range) -> None:
    records = (
        (
            None,
            json.dumps({"ts": "2026-11-22T10:00:00Z", "id": f"{partition}-{i}", "n": 1}).encode(),
        )
        for i in numbers
    )
    produce(kafka.bootstrap_servers, topic, records, partition=partition)


def payload(
    task_id: str,
    topic: str,
    bootstrap: str,
    start: dict[int, int],
    end: dict[int, int] | None = None,
) -> dict[str, Any]:
    io: dict[str, Any] = {
        "type": "kafka",
        "startSequenceNumbers": {
            "type": "start",
            "stream": topic,
            "partitionSequenceNumberMap": {str(p): o for p, o in start.items()},
        },
        "consumerProperties": {"bootstrap.servers": bootstrap, "ssl.key.password": "s3cret"},
        "inputFormat": {"type": "json"},
    }
    if end is not None:
        io["endSequenceNumbers"] = {
            "type": "end",
            "stream": topic,
            "partitionSequenceNumberMap": {str(p): o for p, o in end.items()},
        }
    return {
        "type": "index_kafka",
        "id": task_id,
        "dataSchema": {
            "dataSource": "events",
            "timestampSpec": {"column": "ts", "format": "iso"},
            "dimensionsSpec": {"dimensions": ["id"]},
            "metricsSpec": [{"type": "count", "name": "count"}],
            "granularitySpec": {"segmentGranularity": "HOUR", "rollup": False},
        },
        "tuningConfig": {"type": "kafka", "maxRowsInMemory": 100},
        "ioConfig": io,
    }


def task_status(api: httpx.Client, task_id: str) -> dict[str, Any]:
    return api.get(f"{TASKS}/task/{task_id}/status").json()["status"]


def chat(service: RunningService, task_id: str) -> httpx.Client:
    row = db_rows(
        service, select(TaskRow.location_port, TaskRow.token).where(TaskRow.id == task_id)
    )[0]
    return httpx.Client(
        base_url=f"http://127.0.0.1:{row[0]}/druid/worker/v1/chat/{task_id}",
        headers={TOKEN_HEADER: row[1]},
        timeout=30,
    )


def published(service: RunningService) -> tuple[int, dict[str, int] | None]:
    rows = sum(r[0] for r in db_rows(service, select(SegmentRow.num_rows)))
    offsets = db_rows(service, select(CommittedOffsetsRow.offsets))
    return rows, (dict(offsets[0][0]) if offsets else None)


def test_a_task_with_end_offsets_runs_to_success(kafka: LocalKafka, overlord: Any) -> None:
    service, api = overlord
    topic = topic_with(kafka, 2, 150)
    body = payload("t-fixed", topic, kafka.bootstrap_servers, {0: 0, 1: 20}, {0: 150, 1: 100})
    assert api.post(f"{TASKS}/task", json=body).json() == {"task": "t-fixed"}
    assert api.post(f"{TASKS}/task", json=body).status_code == 400  # ids are unique
    status = wait_for(
        lambda: (s := task_status(api, "t-fixed"))["status"] != "RUNNING" and s,
        what="the task to finish",
    )
    assert status["status"] == "SUCCESS", api.get(f"{TASKS}/task/t-fixed/log").text[-3000:]
    assert published(service) == (230, {"0": 150, "1": 100})
    report = api.get(f"{TASKS}/task/t-fixed/reports").json()["ingestionStatsAndErrors"]["payload"]
    assert report["rowStats"]["buildSegments"]["processed"] == 230
    listed = api.get(f"{TASKS}/tasks", params={"state": "complete", "datasource": "events"}).json()
    assert [t["id"] for t in listed] == ["t-fixed"]
    assert api.get(f"{TASKS}/tasks", params={"state": "running"}).json() == []
    shown = api.get(f"{TASKS}/task/t-fixed").json()["payload"]["ioConfig"]["consumerProperties"]
    assert shown["ssl.key.password"] == "<masked>"
    assert "t-fixed" in api.get(f"{TASKS}/task/t-fixed/log").text


def test_pause_set_end_offsets_resume_stops_exactly_there(kafka: LocalKafka, overlord: Any) -> None:
    service, api = overlord
    topic = topic_with(kafka, 2, 300)
    api.post(f"{TASKS}/task", json=payload("t-open", topic, kafka.bootstrap_servers, {0: 0, 1: 0}))
    with chat(service, "t-open") as control:
        wait_for(lambda: _get(control, "/status") == "READING", what="READING")
        wait_for(
            lambda: sum((_get(control, "/offsets/current") or {}).values()) > 0, what="progress"
        )
        response = control.post("/pause")
        assert response.status_code in (200, 202)
        wait_for(lambda: _get(control, "/status") == "PAUSED", what="PAUSED")
        current = control.post("/pause").json()
        assert current == _get(control, "/offsets/current")
        assert _get(control, "/metrics")["currentOffsets"] == current  # one call for the loops
        assert control.post("/offsets/end", json={"0": 0, "1": 0}).status_code == 400  # < current
        end = {"0": min(current["0"] + 50, 300), "1": current["1"]}
        pid = service.app.state.context.runner.local.processes["t-open"].pid
        assert _autogroup_nice(pid) in (None, 0)
        assert control.post("/offsets/end", params={"finish": "true"}, json=end).json() == end
        # its successors read from now on: the task steps back on the CPU
        # (tasks/runtime/priority.py)
        assert _autogroup_nice(pid) in (None, PUBLISHING_NICENESS)
        assert os.getpriority(os.PRIO_PROCESS, pid) == PUBLISHING_NICENESS
        status = wait_for(
            lambda: (s := task_status(api, "t-open"))["status"] != "RUNNING" and s,
            what="the task to finish",
        )
    assert status["status"] == "SUCCESS", status
    assert published(service) == (end["0"] + end["1"], end)


def _autogroup_nice(pid: int) -> int | None:
    """The nice value of the process's session autogroup; None where the kernel has none."""
    try:
        return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])
    except OSError:
        return None


def test_a_task_killed_mid_read_publishes_nothing(kafka: LocalKafka, overlord: Any) -> None:
    service, api = overlord
    topic = topic_with(kafka, 1, 400)
    api.post(f"{TASKS}/task", json=payload("t-kill", topic, kafka.bootstrap_servers, {0: 0}))
    with chat(service, "t-kill") as control:
        wait_for(
            lambda: (
                _get(control, "/status") == "READING" and _get(control, "/offsets/current")["0"] > 0
            ),
            what="reading",
        )

        # fencing: a call from a newer overlord epoch (a read will do) fences the older one,
        # whose commands are then refused; the newer one's, and an operator's (no epoch), pass
        def at(epoch: int) -> dict[str, str]:
            return {EPOCH_HEADER: str(epoch)}

        assert control.get("/status", headers=at(7)).json() == "READING"
        refused = control.post("/pause", headers=at(6))
        assert refused.status_code == 409
        assert "epoch 6 is older than the leader's epoch 7" in refused.json()["error"]
        assert _get(control, "/status") == "READING"  # the stale pause did nothing
        assert control.get("/status", headers=at(6)).status_code == 200  # reads are not fenced
        assert control.post("/pause", headers=at(7)).status_code in (200, 202)
        wait_for(lambda: _get(control, "/status") == "PAUSED", what="paused by epoch 7")
        assert control.post("/resume", headers=at(6)).status_code == 409
        assert control.post("/resume", headers={EPOCH_HEADER: "x"}).status_code == 400
        assert control.post("/resume").is_success  # no epoch: an operator's call
        wait_for(lambda: _get(control, "/status") == "READING", what="reading again")
    process = service.app.state.context.runner.local.processes["t-kill"]
    os.killpg(process.pid, signal.SIGKILL)
    status = wait_for(
        lambda: (s := task_status(api, "t-kill"))["status"] != "RUNNING" and s,
        what="the task to be marked failed",
    )
    assert status["status"] == "FAILED"
    assert "exited with code -9" in status["errorMsg"]
    assert published(service) == (0, None)


def test_shutdown_all_tasks_of_a_datasource_and_druids_older_list_routes(
    kafka: LocalKafka, overlord: Any
) -> None:
    _, api = overlord
    topic = topic_with(kafka, 2, 10)
    for name, partition in (("t-all-0", 0), ("t-all-1", 1)):
        body = payload(name, topic, kafka.bootstrap_servers, {partition: 0})
        assert api.post(f"{TASKS}/task", json=body).status_code == 200
    both = {"t-all-0", "t-all-1"}
    running = api.get(f"{TASKS}/runningTasks").json()
    assert {t["id"] for t in running} == both
    assert running == api.get(f"{TASKS}/tasks", params={"state": "running"}).json()
    assert api.get(f"{TASKS}/waitingTasks").json() == []
    assert api.get(f"{TASKS}/pendingTasks").json() == []
    assert len(api.get(f"{TASKS}/runningTasks", params={"type": "index_kafka"}).json()) == 2
    assert api.get(f"{TASKS}/tasks", params={"type": "index_parallel"}).json() == []
    today = running[0]["createdTime"][:10]
    around = {"createdTimeInterval": f"{today}_{today}T23:59:59.999Z"}
    assert len(api.get(f"{TASKS}/runningTasks", params=around).json()) == 2
    before = {"createdTimeInterval": "2020-01-01_2020-01-02"}
    assert api.get(f"{TASKS}/tasks", params=before).json() == []
    for bad in ("2020-01-01", "yesterday_today", "2020-01-02_2020-01-01"):
        refused = api.get(f"{TASKS}/tasks", params={"createdTimeInterval": bad})
        assert refused.status_code == 400 and "createdTimeInterval" in refused.json()["error"]
    # another datasource's shutdown touches nothing; this one's asks every running task's
    other = api.post(f"{TASKS}/datasources/other/shutdownAllTasks")
    assert other.json() == {"dataSource": "other"}
    assert {t["id"] for t in api.get(f"{TASKS}/runningTasks").json()} == both
    done = api.post(f"{TASKS}/datasources/events/shutdownAllTasks")
    assert done.json() == {"dataSource": "events"}
    wait_for(lambda: api.get(f"{TASKS}/runningTasks").json() == [], what="both shut down")
    complete = api.get(f"{TASKS}/completeTasks", params={"datasource": "events"}).json()
    assert {(t["id"], t["status"], t["errorMsg"]) for t in complete} == {
        (name, "FAILED", "Shutdown request from user") for name in both
    }
    assert len(api.get(f"{TASKS}/completeTasks", params={"max": 1}).json()) == 1


def test_shutdown_and_task_api_errors(kafka: LocalKafka, overlord: Any) -> None:
    service, api = overlord
    topic = topic_with(kafka, 1, 10)
    api.post(f"{TASKS}/task", json=payload("t-stop", topic, kafka.bootstrap_servers, {0: 0}))
    who = {"X-Druid-Author": "bob", "X-Druid-Comment": "stop it"}
    assert api.post(f"{TASKS}/task/t-stop/shutdown", headers=who).json() == {"task": "t-stop"}
    # as in Druid, the shutdown is asked: the leader's next pass of the task's owner kills it
    status = wait_for(
        lambda: (s := task_status(api, "t-stop"))["status"] != "RUNNING" and s,
        what="the shutdown",
    )
    assert (status["status"], status["errorMsg"]) == ("FAILED", "Shutdown request from user")
    (intent,) = db_rows(service, select(IntentRow))
    assert (intent.kind, intent.task_id, intent.owner) == ("shutdown", "t-stop", "")
    assert (intent.author, intent.comment, intent.outcome) == ("bob", "stop it", "task killed")
    # a task that no longer runs has nothing to shut down: no intent
    assert api.post(f"{TASKS}/task/t-stop/shutdown").json() == {"task": "t-stop"}
    assert len(db_rows(service, select(IntentRow))) == 1
    for path in ("/task/nope", "/task/nope/status", "/task/nope/reports", "/task/nope/log"):
        assert api.get(TASKS + path).status_code == 404
    assert api.post(f"{TASKS}/task/nope/shutdown").status_code == 404
    bad = payload("t-bad", topic, kafka.bootstrap_servers, {0: 5}, {0: 1})
    response = api.post(f"{TASKS}/task", json=bad)
    assert response.status_code == 400
    assert "endSequenceNumbers.partitionSequenceNumberMap.0" in response.json()["error"]
    assert api.post(f"{TASKS}/task", json={"type": "index"}).status_code == 400
    assert api.get(f"{TASKS}/tasks", params={"state": "sleeping"}).status_code == 400
    forged = {
        "task": "t-stop",
        "action": {
            "type": "segmentTransactionalInsert",
            "supervisorId": "events",
            "dataSource": "events",
            "segments": [],
            "startMetadata": {
                "type": "start",
                "stream": topic,
                "partitionSequenceNumberMap": {"0": 0},
            },
            "endMetadata": {
                "type": "end",
                "stream": topic,
                "partitionSequenceNumberMap": {"0": 10},
            },
        },
    }
    assert api.post(f"{TASKS}/action", json=forged).status_code == 403
    assert api.post(f"{TASKS}/action", json=forged, headers={TOKEN_HEADER: "x"}).status_code == 403
    untyped = {
        "task": "t-stop",
        "action": {k: v for k, v in forged["action"].items() if k != "type"},
    }
    response = api.post(f"{TASKS}/action", json=untyped)
    assert response.status_code == 400 and "action" in response.json()["error"]


def _get(control: httpx.Client, path: str) -> Any:
    """A chat GET; None while the task's control API is not up yet."""
    try:
        return control.get(path).json()
    except httpx.TransportError:
        return None


def test_two_replica_processes_publish_once(kafka: LocalKafka, overlord: Any) -> None:
    service, api = overlord
    topic = topic_with(kafka, 2, 120)
    for name in ("r-a", "r-b"):
        body = payload(name, topic, kafka.bootstrap_servers, {0: 0, 1: 0}, {0: 120, 1: 80})
        assert api.post(f"{TASKS}/task", json=body).status_code == 200
    statuses = [
        wait_for(
            lambda n=name: (s := task_status(api, n))["status"] != "RUNNING" and s,
            timeout=240,
            what=f"{name} to finish",
        )
        for name in ("r-a", "r-b")
    ]
    assert [s["status"] for s in statuses] == ["SUCCESS", "SUCCESS"]
    assert published(service) == (200, {"0": 120, "1": 80})
    reports = [
        api.get(f"{TASKS}/task/{n}/reports").json()["ingestionStatsAndErrors"]["payload"]
        for n in ("r-a", "r-b")
    ]
    assert reports[0]["segments"] == reports[1]["segments"] != []


def segment_versions(service: RunningService) -> set[str]:
    return {r[0] for r in db_rows(service, select(SegmentRow.version))}


def test_checkpoint_closes_a_sequence_that_publishes_while_reading(
    kafka: LocalKafka, overlord: Any
) -> None:
    service, api = overlord
    # 100 records now and 200 once the first sequence is closed: a task can read all there is
    # before the pause, so the second sequence needs records that come after it
    topic = topic_with(kafka, 1, 100)
    api.post(f"{TASKS}/task", json=payload("t-seq", topic, kafka.bootstrap_servers, {0: 0}))
    with chat(service, "t-seq") as control:
        wait_for(lambda: (_get(control, "/offsets/current") or {}).get("0", 0) > 0, what="reading")
        control.post("/pause")
        wait_for(lambda: _get(control, "/status") == "PAUSED", what="PAUSED")
        first_end = {"0": _get(control, "/offsets/current")["0"]}
        response = control.post("/offsets/end", params={"finish": "false"}, json=first_end)
        assert response.json() == first_end
        assert (
            control.post("/offsets/end", params={"finish": "false"}, json=first_end).json()
            == first_end
        )
        assert _get(control, "/checkpoints") == {"0": {"0": 0}, "1": first_end}
        # the first sequence is published while the task reads on
        wait_for(lambda: published(service)[1] == first_end, what="the first sequence to publish")
        assert task_status(api, "t-seq")["status"] == "RUNNING"
        produce_to(kafka, topic, 0, range(100, 300))
        wait_for(lambda: _get(control, "/offsets/current")["0"] == 300, what="reading the rest")
        control.post("/pause")
        wait_for(lambda: _get(control, "/status") == "PAUSED", what="PAUSED again")
        control.post("/offsets/end", params={"finish": "true"}, json={"0": 300})
        status = wait_for(
            lambda: (s := task_status(api, "t-seq"))["status"] != "RUNNING" and s,
            what="the task to finish",
        )
    assert status["status"] == "SUCCESS", status
    assert published(service) == (300, {"0": 300})
    assert len(segment_versions(service)) == 2  # one per sequence


def test_max_rows_per_segment_triggers_checkpoints(kafka: LocalKafka, overlord: Any) -> None:
    service, api = overlord
    topic = topic_with(kafka, 2, 400)
    body = payload("t-auto", topic, kafka.bootstrap_servers, {0: 0, 1: 0})
    body["tuningConfig"]["maxRowsPerSegment"] = 250
    api.post(f"{TASKS}/task", json=body)
    with chat(service, "t-auto") as control:
        wait_for(
            lambda: len(_get(control, "/checkpoints") or {}) >= 3,
            timeout=240,
            what="the task to be checkpointed twice",
        )
        wait_for(
            lambda: (_get(control, "/offsets/current") or {}) == {"0": 400, "1": 400},
            timeout=240,
            what="everything read",
        )
        wait_for(lambda: _get(control, "/status") == "READING", what="READING")
        control.post("/pause")
        wait_for(lambda: _get(control, "/status") == "PAUSED", what="PAUSED")
        control.post("/offsets/end", params={"finish": "true"}, json={"0": 400, "1": 400})
        status = wait_for(
            lambda: (s := task_status(api, "t-auto"))["status"] != "RUNNING" and s,
            timeout=240,
            what="the task to finish",
        )
    assert status["status"] == "SUCCESS", status
    assert published(service) == (800, {"0": 400, "1": 400})
    # sequences with rows publish separately; one opened after all was read may hold none
    assert len(segment_versions(service)) >= 2
    # the task's checkpoint requests were intents of the tasks with no supervisor, each done
    query = select(IntentRow.kind, IntentRow.owner, IntentRow.done_at)

    def all_done() -> list[Any]:
        rows = db_rows(service, query)
        return rows if all(done for _, _, done in rows) else []

    asked = wait_for(all_done, what="every checkpoint intent to be done")
    assert len(asked) >= 2
    assert all(kind == "checkpoint" and owner == "" for kind, owner, _ in asked)


def test_stop_publishes_what_was_read(kafka: LocalKafka, overlord: Any) -> None:
    service, api = overlord
    topic = topic_with(kafka, 1, 200)
    api.post(f"{TASKS}/task", json=payload("t-graceful", topic, kafka.bootstrap_servers, {0: 0}))
    with chat(service, "t-graceful") as control:
        wait_for(lambda: (_get(control, "/offsets/current") or {}).get("0") == 200, what="reading")
        assert control.post("/stop").json() == {"status": "stopping"}
        status = wait_for(
            lambda: (s := task_status(api, "t-graceful"))["status"] != "RUNNING" and s,
            what="the task to finish",
        )
    assert status["status"] == "SUCCESS", status
    assert published(service) == (200, {"0": 200})
