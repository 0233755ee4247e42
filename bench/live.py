"""What the live benchmarks (handoff, freshness) share: a real broker, the service in this
process with real task processes, a producer at a steady rate, and the task table."""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import select  # noqa: E402

from bench.common import stop_on_sigterm  # noqa: E402
from bench.common import write_results as write_results  # noqa: E402
from supervisor.db.models import TaskRow  # noqa: E402
from supervisor.devstack.kafka import LocalKafka  # noqa: E402
from supervisor.settings import Settings, default_jar_cache  # noqa: E402
from supervisor.testkit.service import BASE as BASE  # noqa: E402
from supervisor.testkit.service import RunningService  # noqa: E402


class Producer:
    """Produces `make(n, now)` at `rate` records a second, in bursts of 1 ms or more."""

    def __init__(
        self, bootstrap: str, topic: str, rate: float, make: Callable[[int, float], bytes]
    ) -> None:
        from confluent_kafka import Producer as KafkaProducer

        self.producer = KafkaProducer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 1e6}
        )
        self.topic, self.rate, self.make = topic, rate, make
        self.sent = 0
        self.began = time.monotonic()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="producer", daemon=True)

    def start(self) -> Producer:
        self.thread.start()
        return self

    def _run(self) -> None:
        self.began = time.monotonic()
        while not self.stopping.is_set():
            due = int((time.monotonic() - self.began) * self.rate)
            now = time.time()
            while self.sent < due:
                try:
                    self.producer.produce(self.topic, self.make(self.sent, now))
                except BufferError:
                    self.producer.poll(0.05)
                    continue
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.001)

    def achieved_rate(self) -> float:
        """Records a second actually handed to the client since the start."""
        return self.sent / max(1e-9, time.monotonic() - self.began)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.producer.flush(30)


class Stack:
    """A broker and the service (uvicorn in a thread) under one temporary directory; or the
    service only, on another stack's broker (`broker`)."""

    def __init__(self, root: Path, broker: LocalKafka | None = None, **settings: Any) -> None:
        jars = default_jar_cache()
        self.owns_broker = broker is None
        self.broker = broker or LocalKafka(root / "kafka", jars)
        self.settings = Settings(
            metadata_url=settings.pop("metadata_url", None) or f"sqlite:///{root / 'meta.db'}",
            deep_storage=root / "deep",
            work_dir=root / "work",
            jar_cache=jars,
            kill_tasks_on_exit=True,
            log_level="warning",
            **settings,
        )
        self.service = RunningService(self.settings)
        self.url = self.service.url
        self.app = self.service.app

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap_servers

    def rows(self, query: Any) -> list[Any]:
        return self.service.rows(query)

    def tasks(self) -> list[Any]:
        return self.rows(select(TaskRow).order_by(TaskRow.created_at))


@contextmanager
def running(
    prefix: str, keep: str | None, broker: LocalKafka | None = None, **settings: Any
) -> Iterator[Stack]:
    """The stack in a fresh workspace (see `workspace`), stopped on the way out; on `broker`
    (started by another stack) when given."""
    with workspace(prefix, keep) as root:
        yield from _running(root, broker, **settings)


def _running(root: Path, broker: LocalKafka | None, **settings: Any) -> Iterator[Stack]:
    stack = Stack(root, broker, **settings)
    if stack.owns_broker:
        stack.broker.start()
    stack.service.start()
    try:
        # a host's application is long-lived: it runs before the measured work, as on a host
        # that has run tasks before (the service itself starts it with its first supervisor)
        stack.app.state.context.runner.prepare()
        yield stack
    finally:
        stack.service.stop()
        if stack.owns_broker:
            stack.broker.stop()


@contextmanager
def workspace(prefix: str, keep: str | None) -> Iterator[Path]:
    """A temporary directory for one run; kept (and named) under `keep` when given (created if
    missing). A SIGTERM to the benchmark unwinds it like Ctrl-C, so what it started stops."""
    stop_on_sigterm()
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=keep))
    try:
        yield root
    finally:
        if keep:
            print(f"the run's files are in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def parse_time(moment: str | None) -> float | None:
    """Epoch seconds of a task report's ISO time."""
    if moment is None:
        return None
    return datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()


def epoch(moment: datetime) -> float:
    """Epoch seconds of a DB time (stored naive in UTC by SQLite)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
