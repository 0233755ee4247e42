"""The lag-based autoscaler on the real stack: a 6-partition topic whose lag rises while a
producer writes scales a supervisor from 1 task to 3, and back to 1 once it stops and the lag
falls; every record is published exactly once, and no group is rolled over but by the two
scale actions (taskDuration is an hour)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer
from sqlalchemy import select

from supervisor.db.models import SegmentRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic
from supervisor.testkit.service import RunningService, db_rows, overlord_with_tasks
from supervisor.testkit.waits import wait_for

BASE = "/druid/indexer/v1/supervisor"
SCALER = {
    "enableTaskAutoScaler": True,
    "taskCountMin": 1,
    "taskCountMax": 3,
    "lagCollectionIntervalMillis": 1000,
    "lagCollectionRangeMillis": 4000,
    "scaleActionStartDelayMillis": 3000,
    "scaleActionPeriodMillis": 1000,
    "minTriggerScaleActionFrequencyMillis": 8000,
    # any lag while the producer writes (a task reads in batches) is lag to act on
    "scaleOutThreshold": 1,
    "triggerScaleOutFractionThreshold": 0.5,
    "scaleInThreshold": 0,
    "triggerScaleInFractionThreshold": 0.9,
    "scaleOutStep": 2,
    "scaleInStep": 2,
}


@pytest.fixture
def engine(tmp_path: Path, jar_cache: Path) -> Iterator[tuple[RunningService, httpx.Client]]:
    with overlord_with_tasks(tmp_path, jar_cache, "local[2]") as running:
        yield running


class Writer(threading.Thread):
    """Records {"ts", "id"} to every partition, about 300 a second, until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.written, self.stopped = topic, 0, threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            for _ in range(30):
                record = {"ts": "2026-11-22T10:00:00Z", "id": f"r{self.written}"}
                self.producer.produce(
                    self.topic, json.dumps(record).encode(), partition=self.written % 6
                )
                self.written += 1
            self.producer.poll(0)
            time.sleep(0.1)
        assert self.producer.flush(30) == 0


def test_lag_scales_out_to_three_and_back_to_one_exactly_once(
    kafka: LocalKafka, engine: tuple[RunningService, httpx.Client]
) -> None:
    service, api = engine
    topic, ds = f"scale-{uuid.uuid4().hex[:8]}", "scaled"
    create_topic(kafka.bootstrap_servers, topic, 6)
    writer = Writer(kafka.bootstrap_servers, topic)
    writer.start()
    body = supervisor_spec(
        ds,
        topic,
        kafka.bootstrap_servers,
        ["id"],
        period="PT1S",
        taskDuration="PT1H",
        autoScalerConfig=SCALER,
    )
    assert api.post(BASE, json=body).is_success

    def status() -> dict[str, Any]:
        payload: dict[str, Any] = api.get(f"{BASE}/{ds}/status").json()["payload"]
        return payload

    def reading(groups: set[int]) -> dict[str, Any] | None:
        payload = status()
        active = {t["taskGroupId"] for t in payload["activeTasks"]}
        return payload if active == groups and not payload["publishingTasks"] else None

    try:
        wait_for(lambda: reading({0}), 300, "the first task")
        scaled = wait_for(lambda: reading({0, 1, 2}), 300, "three task groups")
        assert scaled["autoscaler"]["taskCount"] == 3
        (out,) = scaled["autoscaler"]["decisions"]
        assert (out["from"], out["to"]) == (1, 3) and "scaleOutThreshold 1" in out["reason"]
    finally:
        writer.stopped.set()
        writer.join(60)
    back = wait_for(lambda: reading({0}), 300, "one task group again")
    first, second = back["autoscaler"]["decisions"]
    assert first == out and (second["from"], second["to"]) == (3, 1)
    assert "scaleInThreshold 0" in second["reason"]

    # everything read and published: each record once
    def published() -> bool:
        payload = status()
        latest = payload["latestOffsets"]
        return payload["committedOffsets"] == latest and sum(latest.values()) == writer.written

    wait_for(published, 300, "the last records published")
    assert api.post(f"{BASE}/{ds}/suspend").is_success
    wait_for(lambda: not status()["activeTasks"] and not status()["publishingTasks"], 300, "stop")
    # the history keeps both decisions beside the version they were taken under (not the
    # suspend's)
    suspended, submitted = api.get(f"{BASE}/{ds}/history").json()
    assert "autoscalerDecisions" not in suspended
    assert submitted["autoscalerDecisions"] == [first, second]
    ids: list[str] = []
    for (path,) in db_rows(service, select(SegmentRow.path).where(SegmentRow.datasource == ds)):
        ids += pq.read_table(path).column("id").to_pylist()
    assert len(ids) == writer.written and len(set(ids)) == writer.written
    # tasks: the first, three after scaling out, one after scaling in; no other rollover
    tasks = api.get("/druid/indexer/v1/tasks", params={"datasource": ds}).json()
    assert len(tasks) == 5, [(t["id"], t["status"], t["errorMsg"]) for t in tasks]
    assert {t["status"] for t in tasks} == {"SUCCESS"}
