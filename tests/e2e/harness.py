"""What the end-to-end tests share: a producer of numbered records that remembers where each
landed, a run of the overlord as a process of its own (supervisor/testkit/overlord.py), and
the exactly-once check over the published segments."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import httpx
import pyarrow.parquet as pq
from sqlalchemy import select

from supervisor.db.models import CommittedOffsetsRow, SegmentRow, TaskRow
from supervisor.testkit.numbers import Numbers
from supervisor.testkit.overlord import Overlord, dev_tls, verifying
from supervisor.testkit.service import BASE as BASE
from supervisor.testkit.waits import wait_for
from tasks.protocol import TOKEN_HEADER
from tasks.storage import LOCAL, Storage

LONG = 900  # seconds: generous bounds for a loaded 2-core machine


# the secure overlords' certificate, which every client here verifies
TLS = dev_tls()
VERIFY = verifying(TLS)


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
    ledger: Numbers
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
