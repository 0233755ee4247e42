"""What the end-to-end tests share: a producer of numbered records that remembers where each
landed, the overlord as a process of its own (so it can be SIGKILLed and restarted), and the
exactly-once check over the published segments."""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
from sqlalchemy import select

from supervisor.db.engine import make_engine
from supervisor.db.models import CommittedOffsetsRow, SegmentRow, TaskRow
from supervisor.devstack.certs import Certs, self_signed
from supervisor.faults import FAULT_FILE_ENV
from supervisor.net import free_port
from tasks.protocol import TOKEN_HEADER
from tasks.storage import LOCAL, Storage
from tests.conftest import wait_for

BASE = "/druid/indexer/v1/supervisor"
LONG = 900  # seconds: generous bounds for a loaded 2-core machine


class Ledger:
    """Produces {"n": i} for i = 0, 1, 2 ... and remembers where each record landed, by the
    supervisor's partition key ("0" for one topic; "topic:0" when `multi`). With several
    topics, records go to each in turn; `add_topic` adds one while it runs."""

    def __init__(self, bootstrap: str, topics: list[str], rate: float, multi: bool = False) -> None:
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
        self.topics = list(topics)
        self.multi = multi
        self.rate = rate
        self.count = 0
        self.where: dict[int, tuple[str, int]] = {}  # n -> (partition key, offset)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def key(self, topic: str, partition: int) -> str:
        return f"{topic}:{partition}" if self.multi else str(partition)

    def _delivered(self, err: Any, msg: Any) -> None:
        assert err is None, err
        with self.lock:
            key = self.key(msg.topic(), msg.partition())
            self.where[json.loads(msg.value())["n"]] = (key, msg.offset())

    def _run(self) -> None:
        while not self.stopping.is_set():
            now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
            value = json.dumps({"ts": now, "n": self.count}).encode()
            with self.lock:
                topic = self.topics[self.count % len(self.topics)]
            self.producer.produce(
                topic, value=value, key=str(self.count).encode(), on_delivery=self._delivered
            )
            self.count += 1
            self.producer.poll(0)
            time.sleep(1 / self.rate)

    def start(self) -> Ledger:
        self.thread.start()
        return self

    def add_topic(self, topic: str) -> None:
        with self.lock:
            self.topics.append(topic)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        assert self.producer.flush(30) == 0

    def next_offset(self, key: str) -> int:
        self.producer.flush(10)
        with self.lock:
            return 1 + max(o for k, o in self.where.values() if k == key)

    def locate(self, numbers: list[int]) -> list[tuple[str, int]]:
        missing = [n for n in numbers if n not in self.where]
        if missing:
            self.producer.flush(10)  # read before its delivery report arrived
        with self.lock:
            return [self.where[n] for n in numbers]


ADMIN = ("admin", "e2e-admin-password")
# Overlords serve HTTPS (and their tasks' chat API) with a dev CA's certificate; every client
# here, the overlords' and the tasks' own, verifies it (SSL_CERT_FILE for the processes).
TLS = self_signed(Path(tempfile.gettempdir()) / "sluicegate-e2e-tls")
VERIFY = ssl.create_default_context(cafile=str(TLS.ca))


class AdminAuth(httpx.Auth):
    """The admin's Basic credentials on every request, again on the leader after a
    follower's redirect (httpx drops them on the way to another address)."""

    def __init__(self) -> None:
        self.header = "Basic " + base64.b64encode(":".join(ADMIN).encode()).decode()

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self.header
        response = yield request
        if response.status_code == 401 and "authorization" not in response.request.headers:
            retry = response.request
            retry.headers["Authorization"] = self.header
            yield retry


class Overlord:
    """`sluicegate serve` as a child process: started, SIGKILLed, restarted on the same port.
    Several (`name`) may share a PostgreSQL metadata DB (`db_url`) and one task host (the
    work directory under `root`); each reads its fault file (supervisor/faults.py).
    Authentication is on: clients use `auth` (the admin); tasks use their own tokens.
    `address` is where it listens (loopback unless a test's network says otherwise), `tls` the
    certificate it serves (one naming that address), `netns` a network namespace to run in."""

    auth = AdminAuth()

    def __init__(
        self,
        root: Path,
        jar_cache: Path,
        db_url: str | None = None,
        name: str = "overlord",
        runtime: str = "shared",
        address: str = "127.0.0.1",
        tls: Certs = TLS,
        netns: str | None = None,
    ) -> None:
        self.port = free_port()
        self.runtime = runtime
        self.url = f"https://{address}:{self.port}"
        self.verify = VERIFY if tls is TLS else ssl.create_default_context(cafile=str(tls.ca))
        self.netns = netns
        self.db_url = db_url or f"sqlite:///{root / 'meta.db'}"
        self.work = root / "work"
        self.log = root / f"{name}.log"
        self.fault_file = root / f"{name}.fault"
        self.env = {
            **os.environ,
            "SLUICEGATE_HOST": address,
            "SLUICEGATE_PORT": str(self.port),
            "SLUICEGATE_METADATA_URL": self.db_url,
            "SLUICEGATE_DEEP_STORAGE": str(root / "deep"),
            "SLUICEGATE_WORK_DIR": str(self.work),
            "SLUICEGATE_JAR_CACHE": str(jar_cache),
            "SLUICEGATE_TASK_MASTER": "local[1]",
            "SLUICEGATE_TASK_RUNTIME": runtime,
            "SLUICEGATE_KILL_TASKS_ON_EXIT": "true",
            # a SIGKILLed overlord leaves its leader lease behind: its restart waits it out
            "SLUICEGATE_LEASE_S": "3",
            "SLUICEGATE_AUTH": "basic",
            "SLUICEGATE_TLS_CERT": str(tls.cert),
            "SLUICEGATE_TLS_KEY": str(tls.key),
            "SSL_CERT_FILE": str(tls.ca),
            "SLUICEGATE_ADMIN_PASSWORD": ADMIN[1],
            FAULT_FILE_ENV: str(self.fault_file),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "supervisor.cli", "serve"]
        if self.netns is not None:  # `ip netns exec` execs it: the pid stays its own
            command = ["ip", "netns", "exec", self.netns, *command]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, env=self.env, stdout=log, stderr=log)
        wait_for(self._up, 60, "the overlord to serve")

    def _up(self) -> bool:
        try:
            health = httpx.get(f"{self.url}/status/health", timeout=2, verify=self.verify)
            return health.status_code == 200
        except httpx.HTTPError:
            return False

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def arm(self, point: str) -> None:
        """Die (SIGKILL by its own hand) at this fault point; "" disarms."""
        self.fault_file.write_text(point)

    def leads(self) -> bool:
        try:
            answer = httpx.get(
                f"{self.url}/druid/indexer/v1/isLeader",
                timeout=2,
                auth=self.auth,
                verify=self.verify,
            )
        except httpx.HTTPError:
            return False
        return answer.status_code == 200

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

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
    restarts: dict[str, set[int]] = field(default_factory=dict)  # partition key -> skip targets
    expected_failures: set[str] = field(default_factory=set)  # tasks the test meant to end
    storage: Storage = LOCAL  # where the segments are

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

    def publishes(self) -> int:
        """How many publishes committed (the committed offsets' version): one that read
        nothing (its generation was handed off at once) counts, and leaves the offsets alone."""
        rows = self.overlord.rows(select(CommittedOffsetsRow.version))
        return int(rows[0][0]) if rows else 0

    def kill9(self, task: Task) -> None:
        """SIGKILL the task's process: with the shared runtime that is the application, and
        every task running in it fails with it."""
        pid_file = self.overlord.work / "tasks" / task.id / "pid"
        if pid_file.exists():
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
            self.expected_failures.add(task.id)
            return
        if task.id in self.expected_failures:
            return  # gone with the application already
        running = {t.id for t in self.tasks() if t.status == "RUNNING"}
        app = json.loads((self.overlord.work / "host-app" / "app.json").read_text())
        os.killpg(int(app["pid"]), signal.SIGKILL)
        self.expected_failures.update(running)

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
            table = pq.read_table(
                self.storage.fs_path(path), columns=["n"], filesystem=self.storage.filesystem()
            )
            numbers.extend(table.column("n").to_pylist())
        twice = [n for n, c in Counter(numbers).items() if c > 1]
        assert not twice, f"published more than once: {twice[:20]}"
        by_partition: dict[str, list[int]] = {}
        for key, offset in self.ledger.locate(numbers):
            by_partition.setdefault(key, []).append(offset)
        for key, end in before.items():
            offsets = sorted(by_partition.pop(key, []))
            allowed = {0} | self.restarts.get(key, set())
            runs = _runs(offsets)
            for first, _last in runs:
                assert first in allowed, f"partition {key}: a gap before offset {first}"
            last = runs[-1][1] + 1 if runs else 0
            # or a restart began at the committed offset and has read nothing yet: what lies
            # between is its skip, as a gap before a restart's first record is
            assert last == end or (end in allowed and last <= end), (
                f"partition {key}: published up to {last}, committed {end}"
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
        url = f"https://127.0.0.1:{task.port}/druid/worker/v1/chat/{task.id}/status"
        response = httpx.get(url, headers={TOKEN_HEADER: task.token}, timeout=5, verify=VERIFY)
        return str(response.json()) if response.status_code == 200 else None
    except httpx.HTTPError:
        return None


def generations(run: Run, group: int) -> set[str]:
    """Rolled generations of a group, by their end offsets."""
    return {json.dumps(t.end, sort_keys=True) for t in run.tasks() if t.group == group and t.end}


def ended_at(run: Run, task_id: str) -> datetime:
    rows = run.overlord.rows(select(TaskRow.updated_at).where(TaskRow.id == task_id))
    return rows[0][0]
