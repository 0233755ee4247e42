"""The supervisor end to end, on a real broker, Spark and metadata DB, with the overlord as a
process of its own (so it can be SIGKILLed and restarted).

A producer writes numbered records to a 3-partition topic without pause; the supervisor runs
taskCount 2, replicas 2. The scenarios run one after another on the same supervisor, and
after each the published segments are checked: per partition, the published offsets are
exactly the offsets below the committed one, once each, except for the ranges a reset or a
resetOffsets told the supervisor to skip.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions
from sqlalchemy import select

from supervisor.db.engine import make_engine
from supervisor.db.models import CommittedOffsetsRow, SegmentRow, TaskRow
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.ports import free_port
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic
from tasks.protocol import TOKEN_HEADER
from tests.conftest import wait_for

BASE = "/druid/indexer/v1/supervisor"
SID = "numbers"
LONG = 900  # seconds: generous bounds for a loaded 2-core machine


class Ledger:
    """Produces {"n": i} for i = 0, 1, 2 ... and remembers where each record landed."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        from confluent_kafka import Producer

        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "topic.metadata.refresh.interval.ms": 1000,  # see added partitions soon
                "log_level": 3,
            }
        )
        self.topic = topic
        self.rate = rate
        self.count = 0
        self.where: dict[int, tuple[int, int]] = {}  # n -> (partition, offset)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: Any, msg: Any) -> None:
        assert err is None, err
        with self.lock:
            self.where[json.loads(msg.value())["n"]] = (msg.partition(), msg.offset())

    def _run(self) -> None:
        while not self.stopping.is_set():
            now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
            value = json.dumps({"ts": now, "n": self.count}).encode()
            self.producer.produce(
                self.topic, value=value, key=str(self.count).encode(), on_delivery=self._delivered
            )
            self.count += 1
            self.producer.poll(0)
            time.sleep(1 / self.rate)

    def start(self) -> Ledger:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        assert self.producer.flush(30) == 0

    def next_offset(self, partition: int) -> int:
        self.producer.flush(10)
        with self.lock:
            return 1 + max(o for p, o in self.where.values() if p == partition)

    def locate(self, numbers: list[int]) -> list[tuple[int, int]]:
        missing = [n for n in numbers if n not in self.where]
        if missing:
            self.producer.flush(10)  # read before its delivery report arrived
        with self.lock:
            return [self.where[n] for n in numbers]


class Overlord:
    """`sluicegate serve` as a child process: started, SIGKILLed, restarted on the same port."""

    def __init__(self, root: Path, jar_cache: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db_url = f"sqlite:///{root / 'meta.db'}"
        self.work = root / "work"
        self.log = root / "overlord.log"
        self.env = {
            **os.environ,
            "SLUICEGATE_PORT": str(self.port),
            "SLUICEGATE_METADATA_URL": self.db_url,
            "SLUICEGATE_DEEP_STORAGE": str(root / "deep"),
            "SLUICEGATE_WORK_DIR": str(self.work),
            "SLUICEGATE_JAR_CACHE": str(jar_cache),
            "SLUICEGATE_TASK_MASTER": "local[1]",
            "SLUICEGATE_KILL_TASKS_ON_EXIT": "true",
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "supervisor.cli", "serve"]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=self.env, stdout=log, stderr=log)
        wait_for(self._up, 60, "the overlord to serve")

    def _up(self) -> bool:
        try:
            return httpx.get(f"{self.url}/status/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # kills its tasks on the way out
            self.process.wait(120)

    def rows(self, query: Any) -> list[Any]:
        engine = make_engine(self.db_url)
        try:
            with engine.connect() as conn:
                return list(conn.execute(query).all())
        finally:
            engine.dispose()


@dataclass
class Task:
    id: str
    group: int
    status: str
    start: dict[str, int]
    end: dict[str, int] | None
    version: str
    created_at: datetime
    updated_at: datetime
    error: str | None
    port: int | None
    token: str | None


@dataclass
class Run:
    overlord: Overlord
    ledger: Ledger
    api: httpx.Client
    topic: str
    restarts: dict[int, set[int]] = field(default_factory=dict)  # partition -> skip targets
    expected_failures: set[str] = field(default_factory=set)  # tasks the test meant to end

    def tasks(self) -> list[Task]:
        found = self.overlord.rows(select(TaskRow).order_by(TaskRow.created_at))
        return [
            Task(
                id=r.id,
                group=r.group_id,
                status=r.status,
                start=r.payload["ioConfig"]["startSequenceNumbers"]["partitionSequenceNumberMap"],
                end=r.end_offsets,
                version=r.payload["context"]["specVersion"],
                created_at=r.created_at,
                updated_at=r.updated_at,
                error=r.error_msg,
                port=r.location_port,
                token=r.token,
            )
            for r in found
        ]

    def reading(self, group: int) -> list[Task]:
        return [t for t in self.tasks() if t.group == group and t.status == "RUNNING" and not t.end]

    def reading_now(self, group: int, count: int) -> list[Task]:
        """Wait for `count` replicas of the group that answer READING."""

        def ready() -> list[Task]:
            tasks = self.reading(group)
            ok = [t for t in tasks if task_status(t) == "READING"]
            return ok if len(ok) >= count and len(ok) == len(tasks) else []

        return list(wait_for(ready, LONG, f"{count} reading replicas of group {group}"))

    def succeeded_from(self, group: int, start: dict[str, int]) -> bool:
        return any(
            t.group == group and t.start == start and t.status == "SUCCESS" for t in self.tasks()
        )

    def committed(self) -> dict[str, int]:
        rows = self.overlord.rows(select(CommittedOffsetsRow.offsets))
        return dict(rows[0][0]) if rows else {}

    def kill9(self, task: Task) -> None:
        pid = int((self.overlord.work / "tasks" / task.id / "pid").read_text())
        os.killpg(pid, signal.SIGKILL)
        self.expected_failures.add(task.id)

    def excuse_failures_since(self, moment: datetime) -> None:
        """A reset kills what runs (some as followers of a generation it voided): every task
        that failed between the reset and the group's restart is the reset's doing."""
        self.expected_failures.update(
            t.id for t in self.tasks() if t.status == "FAILED" and t.updated_at >= moment
        )

    def check(self) -> dict[str, int]:
        """Published offsets per partition are exactly [0, committed) minus skipped ranges."""
        while True:  # committed offsets and segments from one consistent moment
            before = self.committed()
            paths = self.overlord.rows(select(SegmentRow.path).where(SegmentRow.used.is_(True)))
            if self.committed() == before:
                break
        numbers: list[int] = []
        for (path,) in paths:
            numbers.extend(pq.read_table(path, columns=["n"]).column("n").to_pylist())
        twice = [n for n, c in Counter(numbers).items() if c > 1]
        assert not twice, f"published more than once: {twice[:20]}"
        by_partition: dict[int, list[int]] = {}
        for partition, offset in self.ledger.locate(numbers):
            by_partition.setdefault(partition, []).append(offset)
        for key, end in before.items():
            partition = int(key)
            offsets = sorted(by_partition.pop(partition, []))
            allowed = {0} | self.restarts.get(partition, set())
            runs = _runs(offsets)
            for first, _last in runs:
                assert first in allowed, f"partition {partition}: a gap before offset {first}"
            last = runs[-1][1] + 1 if runs else 0
            assert last == end or (not offsets and end in allowed), (
                f"partition {partition}: published up to {last}, committed {end}"
            )
        assert not by_partition, f"published beyond the committed offsets: {list(by_partition)}"
        return before


def _runs(offsets: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for offset in offsets:
        if runs and runs[-1][1] + 1 == offset:
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    return runs


def task_status(task: Task) -> str | None:
    if task.port is None or task.token is None:
        return None
    try:
        url = f"http://127.0.0.1:{task.port}/druid/worker/v1/chat/{task.id}/status"
        response = httpx.get(url, headers={TOKEN_HEADER: task.token}, timeout=5)
        return str(response.json()) if response.status_code == 200 else None
    except httpx.HTTPError:
        return None


def spec(topic: str, bootstrap: str, **io: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "period": "PT2S",
        "completionTimeout": "PT5M",
        "repartitionTransitionDuration": "PT10S",
        "taskCount": 2,
        "replicas": 2,
        "taskDuration": "PT30S",
        **io,
    }
    return supervisor_spec(
        SID,
        topic,
        bootstrap,
        [{"type": "long", "name": "n"}],
        metrics=[{"type": "count", "name": "count"}],
        tuning={"maxRowsInMemory": 5000},
        **settings,
    )


@pytest.fixture
def run(kafka: LocalKafka, jar_cache: Path, tmp_path: Path) -> Iterator[Run]:
    topic = f"numbers-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 3)
    overlord = Overlord(tmp_path, jar_cache)
    overlord.start()
    ledger = Ledger(kafka.bootstrap_servers, topic, rate=40).start()
    try:
        with httpx.Client(base_url=overlord.url, timeout=30) as api:
            yield Run(overlord, ledger, api, topic)
    finally:
        ledger.stop()
        overlord.stop()


def generations(run: Run, group: int) -> set[str]:
    """Rolled generations of a group, by their end offsets."""
    return {json.dumps(t.end, sort_keys=True) for t in run.tasks() if t.group == group and t.end}


@pytest.mark.timeout(3600)
def test_every_scenario_publishes_each_record_exactly_once(run: Run, kafka: LocalKafka) -> None:
    api, topic = run.api, run.topic
    assert api.post(BASE, json=spec(topic, kafka.bootstrap_servers)).json() == {"id": SID}

    # 1. three rollovers in a row per group, successors reading before predecessors publish
    wait_for(
        lambda: all(len(generations(run, g)) >= 3 for g in (0, 1)), LONG, "3 rollovers per group"
    )
    wait_for(lambda: run.committed() and run.check(), LONG, "a consistent published state")
    tasks = run.tasks()
    ended = {t.id: t for t in tasks if t.end and t.status == "SUCCESS"}
    overlapping = [
        t
        for t in tasks
        for p in ended.values()
        if t.group == p.group and t.start == p.end and t.created_at < _ended_at(run, p.id)
    ]
    assert overlapping, "no successor started before its predecessor published"

    # 2. SIGKILL the overlord and restart it: every task is adopted, none is killed
    run.reading_now(0, 2)
    run.reading_now(1, 2)
    alive = [t.id for t in run.tasks() if t.status == "RUNNING"]
    run.overlord.kill9()
    time.sleep(3)
    run.overlord.start()
    wait_for(
        lambda: all(t.status != "RUNNING" for t in run.tasks() if t.id in alive),
        LONG,
        "the adopted tasks to finish",
    )
    assert {t.id: t.status for t in run.tasks() if t.id in alive} == dict.fromkeys(alive, "SUCCESS")
    run.check()

    # 3. partitions added mid-run: partition 3 joins group 1 from its earliest offset
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    wait_for(lambda: run.committed().get("3", 0) > 0, LONG, "partition 3 to be published")
    run.check()

    # 4. suspend: every group publishes and stops; resume: reading goes on from there
    assert api.post(f"{BASE}/{SID}/suspend").status_code == 200
    wait_for(lambda: all(t.status != "RUNNING" for t in run.tasks()), LONG, "all tasks to end")
    suspended_at = run.check()
    assert api.post(f"{BASE}/{SID}/resume").status_code == 200
    for group in (0, 1):
        resumed = run.reading_now(group, 2)[0]
        assert all(resumed.start[p] == suspended_at[p] for p in resumed.start)

    # 5. a spec update rolls every group over gracefully
    updated = spec(topic, kafka.bootstrap_servers, taskDuration="PT10M", useEarliestOffset=False)
    assert api.post(BASE, json=updated).status_code == 200
    old = {t.version for t in run.tasks()}
    wait_for(
        lambda: all(t.status != "RUNNING" for t in run.tasks() if t.version in old),
        LONG,
        "the old version's tasks to publish",
    )
    run.reading_now(0, 2)
    run.reading_now(1, 2)
    run.check()

    # 6. early handoff of group 0 (taskDuration is 10 minutes now)
    start = run.reading(0)[0].start
    assert api.post(f"{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [0]}).is_success
    wait_for(lambda: run.succeeded_from(0, start), LONG, "group 0 to hand off")
    assert not [t for t in run.tasks() if t.group == 1 and t.version not in old and t.end]
    run.check()

    # 7. SIGKILL one replica mid-read (taskDuration is long now, so no rollover is under way):
    # it is replaced from the same start offsets
    victim, sibling = run.reading_now(0, 2)
    run.kill9(victim)
    replacement = wait_for(
        lambda: [
            t
            for t in run.tasks()
            if t.start == victim.start and t.id not in (victim.id, sibling.id)
        ],
        LONG,
        "a replacement replica from the same offsets",
    )
    assert replacement[0].group == 0 and len(replacement) == 1
    run.reading_now(0, 2)
    assert api.post(f"{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [0]}).is_success
    wait_for(lambda: run.succeeded_from(0, victim.start), LONG, "the group to publish")
    run.check()

    # 8. SIGKILL a whole group: it restarts from the same offsets
    victims = run.reading_now(1, 2)
    for victim in victims:
        run.kill9(victim)
    start = victims[0].start
    wait_for(
        lambda: len([t for t in run.tasks() if t.start == start]) == 4,
        LONG,
        "the group to be restarted",
    )
    run.reading_now(1, 2)
    assert api.post(f"{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [1]}).is_success
    wait_for(lambda: run.succeeded_from(1, start), LONG, "the restarted group to publish")
    run.check()

    # 9. resetOffsets: partition 0 skips ahead; its group restarts there
    target = run.ledger.next_offset(0)
    run.restarts.setdefault(0, set()).add(target)
    before = {t.id for t in run.tasks()}
    reset_at = datetime.now(UTC)
    body = {
        "type": "kafka",
        "partitions": {"type": "end", "stream": topic, "partitionOffsetMap": {"0": target}},
    }
    assert api.post(f"{BASE}/{SID}/resetOffsets", json=body).is_success
    restarted = wait_for(
        lambda: [t for t in run.reading_now(0, 2) if t.id not in before], LONG, "a restart"
    )
    assert restarted[0].start["0"] == target
    run.excuse_failures_since(reset_at)
    api.post(f"{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [0]})
    wait_for(lambda: run.committed()["0"] > target, LONG, "partition 0 to publish past the reset")
    run.check()

    # 10. reset: committed offsets forgotten, tasks killed; reading restarts at the latest
    before = {t.id for t in run.tasks()}
    reset_at = datetime.now(UTC)
    assert api.post(f"{BASE}/{SID}/reset").is_success
    for group in (0, 1):
        fresh = [t for t in run.reading_now(group, 2) if t.id not in before]
        assert fresh, f"group {group} was not restarted"
        for key, offset in fresh[0].start.items():
            run.restarts.setdefault(int(key), set()).add(offset)
    run.excuse_failures_since(reset_at)
    api.post(f"{BASE}/{SID}/taskGroups/handoff", json={"taskGroupIds": [0, 1]})
    wait_for(lambda: len(run.committed()) == 4, LONG, "all partitions to publish after reset")
    run.check()

    # 11. terminate: every group publishes, the supervisor is gone
    assert api.post(f"{BASE}/{SID}/terminate").is_success
    wait_for(lambda: all(t.status != "RUNNING" for t in run.tasks()), LONG, "all tasks to end")
    assert api.get(f"{BASE}/{SID}").status_code == 404
    final = run.check()
    assert sum(final.values()) > 0
    # the only failures: the replicas this test SIGKILLed and the tasks the resets killed
    failed = [(t.id, t.error) for t in run.tasks() if t.status == "FAILED"]
    assert [(i, e) for i, e in failed if i not in run.expected_failures] == []


def _ended_at(run: Run, task_id: str) -> datetime:
    rows = run.overlord.rows(select(TaskRow.updated_at).where(TaskRow.id == task_id))
    return rows[0][0]
