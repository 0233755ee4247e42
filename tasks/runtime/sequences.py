"""Sequences of a task: offset ranges published one by one, in order, in the background.

A checkpoint (end offsets with finish=false) closes the current sequence and opens the next at
those offsets; each closed sequence is built into segments and published on its own while
the task reads on. Replicas close their sequences at the same offsets, so they build the same
segment ids.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from tasks.output import staging
from tasks.output.segments import SegmentContext, provenance
from tasks.partitions import Offsets, offsets_json
from tasks.protocol import (
    IndexKafkaTask,
    PublishAction,
    PublishOutcome,
    PublishResult,
    SequenceNumbers,
    offsets_generation,
)
from tasks.reading.engines.base import EngineName
from tasks.reading.engines.choice import Engines
from tasks.rows.pipeline import RowPlan
from tasks.storage import LOCAL, Storage
from tasks.support import stage_rows

log = logging.getLogger(__name__)


class TaskFailedError(RuntimeError):
    """The task cannot go on; the message is recorded as its failure reason."""


Publisher = Callable[[PublishAction], PublishResult]


@dataclass
class Sequence:
    index: int
    start: Offsets
    end: Offsets | None = None  # None while open-ended
    persists: list[str] = field(default_factory=list)
    dimensions: list[tuple[str, str]] = field(default_factory=list)
    rows: int = 0
    opened_at: float = field(default_factory=time.monotonic)
    # when this task asked for the checkpoint that ends it (None: not asked): its successor's
    # clock starts there, so a time-based checkpoint is asked every intermediateHandoffPeriod
    # (as Druid's nextCheckpointTime) and not that period plus each checkpoint's round trip
    requested_at: float | None = None
    written_by: set[EngineName] = field(default_factory=set)  # the engines of its persists


def sequence_numbers(kind: str, topic: str, offsets: Offsets) -> SequenceNumbers:
    return SequenceNumbers(
        type=kind,
        stream=topic,
        partitionSequenceNumberMap=offsets_json(offsets),
    )


class SequencePublisher:
    """One worker thread: build and publish closed sequences in the order they closed."""

    def __init__(
        self,
        task: IndexKafkaTask,
        engines: Engines,
        plan: RowPlan,
        storage: Storage,
        publisher: Publisher,
        shared_persists: bool,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        on_published: Callable[[float], None] = lambda seconds: None,
        scope: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        self.task = task
        self.engines = engines
        self.on_published = on_published  # told how long each sequence took to hand off
        self.scope = scope  # entered by the worker thread (the task's job group, log context)
        self.plan = plan
        self.storage = storage
        self.shared_persists = shared_persists  # persists in deep storage (else local)
        self.publisher = publisher
        self.clock = clock
        self.sleep = sleep
        self.queue: queue.Queue[Sequence | None] = queue.Queue()
        spec_version = str(task.context.get("specVersion", ""))
        footer = provenance(task.datasource, task.ioConfig.topic, task.id, spec_version)
        root = storage.path("_tasks", task.id, "staged")
        rows = stage_rows(task.context)
        max_rows = task.tuningConfig.maxRowsPerSegment
        self.stager = staging.Stager(plan, storage, root, footer, rows, max_rows, scope)
        self.segments: list[str] = []
        self.error: str | None = None
        self.thread = threading.Thread(target=self._work, name="sequence-publisher", daemon=True)
        self.thread.start()

    def submit(self, sequence: Sequence) -> None:
        self.queue.put(sequence)

    def persisted(self, sequence: Sequence, persist: str, engine: EngineName, records: int) -> None:
        """A persist of the open `sequence`: the Python workers' are staged in the background
        (tasks/output/staging.py)."""
        if engine is EngineName.PYTHON_WORKERS:
            self.stager.add(sequence.index, persist, records)

    def failed(self) -> str | None:
        return self.error

    def drain(self) -> list[str]:
        """Wait for every submitted sequence; the published segment ids, or the failure."""
        self.queue.put(None)
        self.thread.join()
        self.stager.close()
        if self.error is not None:
            raise TaskFailedError(self.error)
        return self.segments

    def _work(self) -> None:
        with self.scope():
            self._work_through()

    def _work_through(self) -> None:
        while (sequence := self.queue.get()) is not None:
            if self.error is not None:
                continue
            try:
                began = self.clock()
                self.segments += self._publish(sequence)
                self.on_published(self.clock() - began)
            except TaskFailedError as exc:
                self.error = str(exc)
            except Exception as exc:  # recorded as the task's failure reason
                log.exception("publishing sequence %s failed", sequence.index)
                self.error = f"{type(exc).__name__}: {exc}"

    def _publish(self, sequence: Sequence) -> list[str]:
        assert sequence.end is not None
        task = self.task
        topic = task.ioConfig.topic
        context = SegmentContext(
            task_id=task.id,
            datasource=task.datasource,
            topic=topic,
            start=sequence.start,
            end=sequence.end,
            spec_version=str(task.context.get("specVersion", "")),
            deep_storage=self.storage.path(),
            storage=self.storage,
            generation=offsets_generation(task.context),
        )
        declared = sequence.dimensions or self.plan.declared_dimensions()
        dims = [name for name, _ in declared]
        began = self.clock()
        staged, held = self.stager.take(sequence.index)
        rest = [persist for persist in sequence.persists if persist not in held]
        segments = []
        if rest or not staged:
            max_rows = task.tuningConfig.maxRowsPerSegment
            segments = self.engines.merge(rest, sequence.written_by, dims, context, max_rows)
        if staged:
            segments = staging.place(staged, segments, context, self.plan, dims)
        merged = self.clock()
        action = PublishAction(
            supervisorId=task.supervisor_key,
            dataSource=task.datasource,
            segments=segments,
            startMetadata=sequence_numbers("start", topic, sequence.start),
            endMetadata=sequence_numbers("end", topic, sequence.end),
        )
        if self._publish_with_retries(action) is PublishOutcome.ALREADY_PUBLISHED:
            for segment in segments:  # a replica won: our copies are not needed
                path = self.storage.fs_path(segment.path)
                self.storage.delete_dir(path.rsplit("/", 1)[0])
        # its persists, in deep storage or the task's work directory: the segments hold their
        # rows now (local ones kept made a work directory ~260 KB a task until its retention)
        persists = self.storage if self.shared_persists else LOCAL
        for persist in sequence.persists:
            persists.delete_dir(persist)
        log.info(
            "sequence %s published: %s segments (merge %.2f s, publish %.2f s)",
            sequence.index,
            len(segments),
            merged - began,
            self.clock() - merged,
        )
        return [s.id for s in segments]

    def _publish_with_retries(self, action: PublishAction) -> PublishOutcome:
        timeout_ms = self.task.tuningConfig.handoffConditionTimeout
        deadline = None if timeout_ms == 0 else self.clock() + timeout_ms / 1000
        delay = 0.2
        while True:
            result = self.publisher(action)
            if result.success:
                return result.outcome
            if result.outcome is not PublishOutcome.RETRY:
                raise TaskFailedError(f"publish failed: {result.reason}")
            if deadline is not None and self.clock() >= deadline:
                raise TaskFailedError(
                    f"publish not possible within handoffConditionTimeout: {result.reason}"
                )
            self.sleep(delay)
            delay = min(delay * 2, 5.0)
