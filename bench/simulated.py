"""The service's side of the simulation in bench/control_plane.py (no Kafka, no Spark):

- `SimulatedStream` is the loops' StreamReader: every topic has the same partitions, whose
  latest offsets grow at a steady rate from a shared epoch (simulated stream metadata).
- `SimulatedRunner` is the service's task runner: instead of starting a process it registers
  the task with the simulated task server (bench/simulated_tasks.py) and asks it which tasks
  ended.
"""

from __future__ import annotations

import queue
import secrets
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench.simulated_tasks import latest_offset
from supervisor.controller.observe import StreamReader
from supervisor.runner.protocol import Exited, Launched
from supervisor.settings import Settings
from tasks.protocol import IndexKafkaTask, TaskReport


class SimulatedStream(StreamReader):
    """Simulated stream metadata: `partitions` partitions per topic, offsets from 0 up to
    `rate` records a second since `epoch` (wall time)."""

    def __init__(self, partitions: int, rate: float, epoch: float) -> None:
        super().__init__()
        self.partitions = tuple(range(partitions))
        self.rate, self.epoch = rate, epoch
        self.calls = 0

    def mirror(self, consumer_properties: Any, group: str, stream: str, committed: Any) -> None:
        """No broker holds the simulated topics' consumer groups."""

    def describe(
        self, consumer_properties: dict[str, Any], stream: str, pattern: bool = False
    ) -> tuple[tuple[int | str, ...], dict[int | str, int], dict[int | str, int]]:
        self.calls += 1
        latest = latest_offset(self.epoch, self.rate, time.time())
        return (
            self.partitions,
            dict.fromkeys(self.partitions, 0),
            dict.fromkeys(self.partitions, latest),
        )


class SimulatedRunner:
    """The service's Runner (supervisor/runner/protocol.py): launches simulated tasks on the
    simulated task server (no process, no Spark)."""

    def __init__(self, settings: Settings, server_url: str) -> None:
        self.settings = settings
        self.lock = threading.Lock()
        parts = urlsplit(server_url)
        self.host, self.port = parts.hostname or "127.0.0.1", int(parts.port or 80)
        self.http = httpx.Client(base_url=server_url, timeout=30)
        self.running: set[str] = set()
        self.reports: dict[str, TaskReport] = {}
        self.launches = 0
        # Launches and kills go to the simulated task server from a thread of their own, in
        # order: like Popen and a signal, they return without waiting for the task.
        self.outbox: queue.SimpleQueue[tuple[str, dict[str, Any]] | None] = queue.SimpleQueue()
        self.sender = threading.Thread(target=self._send, name="sim-runner", daemon=True)
        self.sender.start()

    def _send(self) -> None:
        while (first := self.outbox.get()) is not None:
            batch = [first]
            while not self.outbox.empty() and (more := self.outbox.get()) is not None:
                batch.append(more)
            self.http.post("/sim/batch", json=batch).raise_for_status()

    def launch(self, task: IndexKafkaTask) -> Launched:
        task_id, token = task.id, secrets.token_hex(16)
        start = task.ioConfig.startSequenceNumbers
        body = {
            "id": task_id,
            "supervisor": task.supervisor_key,
            "datasource": task.datasource,
            "stream": start.stream,
            "start": start.partitionSequenceNumberMap,
            "token": token,
        }
        self.outbox.put(("launch", body))
        with self.lock:
            self.running.add(task_id)
            self.launches += 1
        log_path = self.settings.work_dir / "tasks" / task_id / "task.log"
        return Launched(self.host, self.port, str(log_path), token)

    def prepare(self) -> None:
        pass

    def release(self) -> None:
        pass

    def located(self, task_id: str) -> Launched | None:
        return None

    def adopt(self, task_id: str) -> bool:
        return False  # a fresh service: no earlier overlord left tasks behind

    def report(self, task_id: str) -> TaskReport | None:
        with self.lock:
            return self.reports.get(task_id)

    def exited(self) -> list[Exited]:
        ended = self.http.get("/sim/exited").json()
        done = []
        with self.lock:
            for task_id, code, report in ended:
                if task_id not in self.running:
                    continue  # killed meanwhile: its killer recorded it
                self.running.discard(task_id)
                parsed = TaskReport.model_validate(report)
                self.reports[task_id] = parsed
                done.append(Exited(task_id, code, parsed))
        return done

    def is_running(self, task_id: str) -> bool:
        with self.lock:
            return task_id in self.running

    def kill(self, task_id: str) -> bool:
        with self.lock:
            if task_id not in self.running:
                return False
            self.running.discard(task_id)
        self.outbox.put(("kill", {"id": task_id}))
        return True

    def kill_all(self) -> None:
        with self.lock:
            ids, self.running = list(self.running), set()
        for task_id in ids:
            self.outbox.put(("kill", {"id": task_id}))

    def close(self) -> None:
        self.outbox.put(None)
        self.sender.join(30)
        self.http.close()
