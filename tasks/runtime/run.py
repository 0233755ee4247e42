"""One task's run, wherever it runs: its indexer, its overlord client and its control API.

A task process (tasks/runtime/process.py) holds one; a shared application (tasks/runtime/shared.py)
holds many, each on a thread of its own. Either way the task ends by leaving report.json in its work
directory, which is what the runner reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from tasks.partitions import Offsets, offsets_json
from tasks.protocol import (
    AnyTask,
    IndexKafkaTask,
    PublishAction,
    PublishOutcome,
    PublishResult,
    TaskState,
)
from tasks.runtime.control import EpochFence, TaskControl
from tasks.runtime.indexer import KafkaIndexer
from tasks.runtime.indexer_state import IndexerState
from tasks.runtime.overlord import OverlordClient

log = logging.getLogger("tasks")
REPORT = "report.json"


class TaskRun:
    """`scope`: entered by every thread working for the task (tasks/runtime/indexer.py)."""

    def __init__(
        self,
        task: IndexKafkaTask,
        token: str,
        overlord_url: str,
        work_dir: Path,
        deep_storage: str,
        shared_persists: bool,
        on_last_stretch: Callable[[], None] = lambda: None,
        scope: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        self.task, self.work_dir = task, work_dir
        self.overlord = OverlordClient(overlord_url, task.id, token)
        self.killed: str | None = None  # why, once killed: no call to the overlord starts after

        def checkpoint(start: Offsets) -> None:
            if self.killed is None:
                self.overlord.request_checkpoint(
                    task.supervisor_key, task.ioConfig.taskGroupId, task.ioConfig.topic, start
                )

        self.indexer = KafkaIndexer(
            task,
            None,
            work_dir,
            deep_storage,
            self._publish,
            checkpoint,
            on_last_stretch=on_last_stretch,
            # a cluster's executors may be on other hosts than the task: persists go to deep
            # storage, which every one of them reaches
            shared_persists=shared_persists,
            scope=scope,
        )
        self.indexer.state.status = TaskState.STARTING
        # what its chat API answers with: each newer leader that calls is where it publishes
        self.control = TaskControl(self.indexer, token, EpochFence(self.overlord.point_at))

    def _publish(self, action: PublishAction) -> PublishResult:
        if self.killed is not None:
            return PublishResult(PublishOutcome.FAILED, self.killed)
        return self.overlord.publish(action)

    def kill(self, reason: str) -> None:
        """Fence the task: no publish starts from now on and its loop fails at once. (A publish
        call already on its way may still commit, as one sent just before a SIGKILL may: the
        transaction's offset check keeps it exactly once either way.)"""
        self.killed = reason
        self.indexer.abort(reason)

    def stop(self) -> None:
        """The graceful stop (SIGTERM): publish what was read, then end."""
        self.indexer.stop()

    def log_start(self) -> None:
        io = self.task.ioConfig
        log.info("task %s: %s from %s", self.task.id, io.topic, offsets_json(io.start_offsets()))

    def execute(self, spark: Any) -> IndexerState:
        """Read and publish to the end; leaves report.json. The final state."""
        try:
            self.indexer.spark = spark
            self.indexer.run()
        finally:
            final = self.indexer.snapshot()
            (self.work_dir / REPORT).write_text(final.report().model_dump_json(indent=2))
            self.overlord.close()
        log.info("task %s finished: %s %s", self.task.id, final.status, final.error or "")
        return final

    def close(self) -> None:
        """Let go of what a run that never ran holds (its overlord client)."""
        self.overlord.close()


def fields(task: AnyTask) -> dict[str, Any]:
    """The log fields of a task's lines."""
    return {"supervisor": task.supervisorId, "task": task.id, "group": task.group_id}
