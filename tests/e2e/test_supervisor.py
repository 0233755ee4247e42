"""The supervisor end to end: a continuous numbered stream, taskCount 2, replicas 2, short
taskDuration; every produced record is published exactly once."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from sqlalchemy import select

from supervisor.db.models import CommittedOffsetsRow, SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic
from tests.conftest import RunningService, overlord_with_tasks, wait_for
from tests.integration.test_api_supervisors import db_rows

BASE = "/druid/indexer/v1/supervisor"


class NumberedProducer:
    """Produces {"n": i} for i = 0, 1, 2 ... across the topic's partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "log_level": 3,
            }
        )
        self.topic = topic
        self.rate = rate
        self.count = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopping.is_set():
            now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
            value = json.dumps({"ts": now, "n": self.count}).encode()
            self.producer.produce(self.topic, value=value, key=str(self.count).encode())
            self.count += 1
            self.producer.poll(0)
            time.sleep(1 / self.rate)

    def __enter__(self) -> NumberedProducer:
        self.thread.start()
        return self

    def stop(self) -> int:
        self.stopping.set()
        self.thread.join(10)
        assert self.producer.flush(30) == 0
        return self.count

    def __exit__(self, *_: object) -> None:
        if not self.stopping.is_set():
            self.stop()


@pytest.fixture
def engine(tmp_path: Path, jar_cache: Path) -> Iterator[tuple[RunningService, httpx.Client]]:
    with overlord_with_tasks(tmp_path, jar_cache, "local[1]") as running:
        yield running


def spec(topic: str, bootstrap: str, **io: Any) -> dict[str, Any]:
    return {
        "type": "kafka",
        "spec": {
            "dataSchema": {
                "dataSource": "numbers",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": [{"type": "long", "name": "n"}]},
                "metricsSpec": [{"type": "count", "name": "count"}],
                "granularitySpec": {"segmentGranularity": "HOUR", "rollup": False},
            },
            "ioConfig": {
                "topic": topic,
                "consumerProperties": {"bootstrap.servers": bootstrap},
                "inputFormat": {"type": "json"},
                "useEarliestOffset": True,
                "period": "PT2S",
                "completionTimeout": "PT5M",
                **io,
            },
            "tuningConfig": {"type": "kafka", "maxRowsInMemory": 5000},
        },
    }


def published_numbers(service: RunningService) -> list[int]:
    numbers: list[int] = []
    for (path,) in db_rows(service, select(SegmentRow.path).where(SegmentRow.used.is_(True))):
        numbers.extend(pq.read_table(path, columns=["n"]).column("n").to_pylist())
    return sorted(numbers)


def rolled_generations(service: RunningService) -> int:
    rows = db_rows(
        service,
        select(TaskRow.group_id, TaskRow.end_offsets).where(TaskRow.end_offsets.is_not(None)),
    )
    return len({(g, json.dumps(e, sort_keys=True)) for g, e in rows})


def test_rollovers_with_replicas_ingest_every_record_exactly_once(
    kafka: LocalKafka, engine: Any
) -> None:
    service, api = engine
    topic = f"numbers-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 3)
    with NumberedProducer(kafka.bootstrap_servers, topic, rate=40) as producer:
        body = spec(topic, kafka.bootstrap_servers, taskCount=2, replicas=2, taskDuration="PT30S")
        assert api.post(BASE, json=body).json() == {"id": "numbers"}
        # three rollovers of each group in a row, with successors reading while they publish
        wait_for(lambda: rolled_generations(service) >= 6, 600, "three rollovers per group")
        status = api.get(f"{BASE}/numbers/status").json()["payload"]
        assert status["state"] == "RUNNING", status
        produced = producer.stop()
    # suspend: every group rolls over and publishes what it has read so far
    assert api.post(f"{BASE}/numbers/suspend").status_code == 200
    wait_for(no_running_tasks(service), 600, "every task to publish and stop")
    numbers = published_numbers(service)
    assert len(numbers) == len(set(numbers)) == committed_total(service) <= produced
    # resume: ingestion continues from the committed offsets and catches up
    assert api.post(f"{BASE}/numbers/resume").status_code == 200
    wait_for(lambda: committed_total(service) == produced, 600, "the rest to be published")
    assert api.post(f"{BASE}/numbers/suspend").status_code == 200
    wait_for(no_running_tasks(service), 600, "every task to stop again")
    assert published_numbers(service) == list(range(produced))
    failed = db_rows(
        service, select(TaskRow.id, TaskRow.error_msg).where(TaskRow.status == "FAILED")
    )
    assert failed == []


def committed_total(service: RunningService) -> int:
    rows = db_rows(service, select(CommittedOffsetsRow.offsets))
    return sum(rows[0][0].values()) if rows else 0


def no_running_tasks(service: RunningService) -> Any:
    return lambda: not db_rows(service, select(TaskRow.id).where(TaskRow.status == "RUNNING"))
