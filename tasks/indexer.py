"""The reading loop of a Kafka indexing task: micro-batches over exact offset ranges, persists,
then segments and the publish. Control calls (pause, end offsets, stop) arrive from other
threads; the loop applies them between batches."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tasks.kafka_offsets import OffsetReader
from tasks.pipeline import RowPlan, RowStats, process_batch
from tasks.protocol import (
    END_OF_PARTITION,
    IndexKafkaTask,
    PublishAction,
    SequenceNumbers,
    TaskState,
    offsets_json,
)
from tasks.reader import read_range
from tasks.segments import SegmentContext, build_segments

log = logging.getLogger(__name__)


class PublishOutcome(Protocol):
    @property
    def outcome(self) -> str: ...

    @property
    def reason(self) -> str: ...


Publisher = Callable[[PublishAction], PublishOutcome]


class TaskFailedError(RuntimeError):
    """The task cannot go on; the message is recorded as its failure reason."""


class ControlError(Exception):
    """A control request that cannot be honoured now; carries the HTTP status to answer."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


@dataclass
class IndexerState:
    """Everything the control API reports; changed only under the indexer's lock."""

    status: TaskState = TaskState.NOT_STARTED
    current: dict[int, int] = field(default_factory=dict)
    end: dict[int, int] = field(default_factory=dict)
    stats: RowStats = field(default_factory=RowStats)
    samples: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, int]] = field(default_factory=list)
    error: str | None = None
    segments: list[str] = field(default_factory=list)
    end_is_final: bool = False
    started_at: float | None = None


class KafkaIndexer:
    def __init__(
        self,
        task: IndexKafkaTask,
        spark: Any,
        work_dir: Path,
        deep_storage: Path,
        publisher: Publisher,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.task = task
        self.spark = spark
        self.work_dir = work_dir
        self.deep_storage = deep_storage
        self.publisher = publisher
        self.clock = clock
        self.sleep = sleep
        self.lock = threading.Condition()
        io = task.ioConfig
        self.state = IndexerState(current=io.start_offsets(), end=io.end_offsets())
        self.start = io.start_offsets()
        self.offsets = OffsetReader(io.consumerProperties)
        self.plan = RowPlan(task.dataSchema, io.inputFormat, *_time_window(task))
        self.persists: list[str] = []
        self.dimensions: list[tuple[str, str]] = []
        self.pause_requested = False
        self.stop_requested = False
        self.state.end_is_final = task.ioConfig.endSequenceNumbers is not None

    # ---- control, called from the control server's threads --------------------------------

    def snapshot(self) -> IndexerState:
        with self.lock:
            return IndexerState(
                **{
                    **vars(self.state),
                    "current": dict(self.state.current),
                    "end": dict(self.state.end),
                    "samples": list(self.state.samples),
                }
            )

    def pause(self, timeout: float) -> dict[int, int] | None:
        """Ask the loop to pause; the current offsets once paused, None if not yet."""
        with self.lock:
            if self.state.status not in (TaskState.READING, TaskState.PAUSED):
                raise ControlError(
                    409,
                    f"Can't pause, task is not in a pausable state (state: [{self.state.status}])",
                )
            self.pause_requested = True
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.state.status is not TaskState.READING, timeout)
            if self.state.status is TaskState.PAUSED:
                return dict(self.state.current)
            return None

    def resume(self, timeout: float = 5.0) -> None:
        with self.lock:
            self.pause_requested = False
            self.lock.notify_all()
            self.lock.wait_for(lambda: self.state.status is not TaskState.PAUSED, timeout)
            if self.state.status is TaskState.PAUSED:
                raise ControlError(500, "the task did not resume in time")

    def set_end_offsets(self, offsets: dict[int, int], finish: bool) -> dict[int, int]:
        """Druid's POST offsets/end: only while paused, each offset >= current; resumes."""
        with self.lock:
            if finish and self.state.end_is_final and offsets == self.state.end:
                return dict(self.state.end)  # a repeat of the same request
            if self.state.status is not TaskState.PAUSED:
                raise ControlError(400, "Task must be paused before changing the end offsets")
            if not finish:
                raise ControlError(
                    400,
                    "finish=false (incremental checkpoints) is not supported yet; send finish=true",
                )
            if set(offsets) != set(self.state.current):
                raise ControlError(
                    400,
                    f"end offsets must name partitions {sorted(self.state.current)}, "
                    f"got {sorted(offsets)}",
                )
            for partition, offset in offsets.items():
                current = self.state.current[partition]
                if offset < current:
                    raise ControlError(
                        400,
                        f"partition {partition}: end offset {offset} is before the current "
                        f"offset {current}",
                    )
            self.state.end = dict(offsets)
            self.state.end_is_final = True
            self.pause_requested = False
            self.lock.notify_all()
            return dict(self.state.end)

    def stop(self) -> None:
        """Graceful stop: finish the batch in flight, then publish what was read and exit."""
        with self.lock:
            self.stop_requested = True
            self.pause_requested = False
            self.lock.notify_all()

    # ---- the loop -------------------------------------------------------------------------

    def run(self) -> IndexerState:
        try:
            with self.lock:
                self.state.started_at = time.time()
            self._set_status(TaskState.READING)
            self._read_until_end()
            self._set_status(TaskState.PUBLISHING)
            self._build_and_publish()
            self._set_status(TaskState.SUCCESS)
        except TaskFailedError as exc:
            self._fail(str(exc))
        except Exception as exc:  # a failed task records why rather than dying silently
            log.exception("task %s failed", self.task.id)
            self._fail(f"{type(exc).__name__}: {exc}")
        return self.state

    def _fail(self, reason: str) -> None:
        with self.lock:
            self.state.error = reason
            self.state.status = TaskState.FAILED
            self.lock.notify_all()

    def _set_status(self, status: TaskState) -> None:
        with self.lock:
            self.state.status = status
            self.lock.notify_all()

    def _finished_reading(self) -> bool:
        return all(self.state.current[p] >= self.state.end[p] for p in self.state.current)

    def _read_until_end(self) -> None:
        topic = self.task.ioConfig.topic
        partitions = sorted(self.start)
        budget = max(1, self.task.tuningConfig.maxRowsInMemory // len(partitions))
        self._check_log_start(topic, partitions)
        poll = self.task.ioConfig.pollTimeout / 1000
        while True:
            with self.lock:
                self._honour_pause()
                if self.stop_requested:
                    self.state.end = dict(self.state.current)
                    self.state.end_is_final = True
                if self._finished_reading():
                    return
                current, end = dict(self.state.current), dict(self.state.end)
            latest = self.offsets.latest(topic, partitions)
            batch_end = {
                p: min(end[p], latest[p], current[p] + budget)
                if latest[p] > current[p]
                else current[p]
                for p in partitions
            }
            if batch_end == current:
                with self.lock:
                    self.lock.wait_for(lambda: self.pause_requested or self.stop_requested, poll)
                continue
            self._read_batch(topic, current, batch_end)

    def _honour_pause(self) -> None:
        """Under the lock: sit PAUSED while a pause is asked for (and no stop)."""
        while self.pause_requested and not self.stop_requested:
            if self.state.status is not TaskState.PAUSED:
                self.state.status = TaskState.PAUSED
                self.lock.notify_all()
            self.lock.wait(0.5)
        if self.state.status is TaskState.PAUSED:
            self.state.status = TaskState.READING
            self.lock.notify_all()

    def _check_log_start(self, topic: str, partitions: list[int]) -> None:
        earliest = self.offsets.earliest(topic, partitions)
        for partition in partitions:
            start = self.state.current[partition]
            if start >= earliest[partition]:
                continue
            if not self.task.tuningConfig.resetOffsetAutomatically:
                raise TaskFailedError(
                    f"partition {partition}: start offset {start} is below the log start offset "
                    f"{earliest[partition]}: records {start}..{earliest[partition] - 1} were "
                    "deleted before they were read. Reset the supervisor's offsets, or set "
                    "resetOffsetAutomatically to skip them."
                )
            with self.lock:
                self.state.skipped.append(
                    {"partition": partition, "from": start, "to": earliest[partition]}
                )
                self.state.current[partition] = earliest[partition]
            log.warning(
                "partition %s: skipped lost offsets %s..%s", partition, start, earliest[partition]
            )

    def _read_batch(self, topic: str, current: dict[int, int], batch_end: dict[int, int]) -> None:
        io = self.task.ioConfig
        frame = read_range(
            self.spark,
            str(io.consumerProperties["bootstrap.servers"]),
            topic,
            current,
            batch_end,
            _kafka_options(io.consumerProperties),
        )
        persist = str(self.work_dir / "persists" / f"{len(self.persists):06d}")
        tuning = self.task.tuningConfig
        remaining = max(0, tuning.maxSavedParseExceptions - len(self.state.samples))
        result = process_batch(self.plan, frame, persist, remaining, self.dimensions)
        with self.lock:
            self.persists.append(persist)
            self.dimensions = result.dimensions
            self.state.stats.add(result.stats)
            self.state.samples.extend(result.samples)
            self.state.current = {**self.state.current, **batch_end}
            failures = self.state.stats.unparseable + self.state.stats.processedWithError
            self.lock.notify_all()
        if failures > tuning.maxParseExceptions:
            raise TaskFailedError(
                f"Max parse exceptions [{tuning.maxParseExceptions}] exceeded: {failures} rows "
                "failed to parse"
            )

    # ---- segments and publish -------------------------------------------------------------

    def _build_and_publish(self) -> None:
        task = self.task
        with self.lock:
            end = dict(self.state.current)
        context = SegmentContext(
            task_id=task.id,
            datasource=task.datasource,
            topic=task.ioConfig.topic,
            start=self.start,
            end=end,
            spec_version=str(task.context.get("specVersion", "")),
            deep_storage=str(self.deep_storage),
        )
        dims = [name for name, _ in self.dimensions or self.plan.declared_dimensions()]
        segments = build_segments(
            self.spark, self.plan, self.persists, dims, context, task.tuningConfig.maxRowsPerSegment
        )
        action = PublishAction(
            supervisorId=task.supervisor_key,
            dataSource=task.datasource,
            segments=segments,
            startMetadata=_sequence("start", task.ioConfig.topic, self.start),
            endMetadata=_sequence("end", task.ioConfig.topic, end),
        )
        outcome = self._publish_with_retries(action)
        if outcome == "alreadyPublished":
            for segment in segments:
                shutil.rmtree(Path(segment.path).parent, ignore_errors=True)
        with self.lock:
            self.state.segments = [s.id for s in segments]

    def _publish_with_retries(self, action: PublishAction) -> str:
        timeout_ms = self.task.tuningConfig.handoffConditionTimeout
        deadline = None if timeout_ms == 0 else self.clock() + timeout_ms / 1000
        delay = 0.2
        while True:
            result = self.publisher(action)
            if result.outcome in ("published", "alreadyPublished"):
                return str(result.outcome)
            if result.outcome != "retry":
                raise TaskFailedError(f"publish failed: {result.reason}")
            if deadline is not None and self.clock() >= deadline:
                raise TaskFailedError(
                    f"publish not possible within handoffConditionTimeout: {result.reason}"
                )
            self.sleep(delay)
            delay = min(delay * 2, 5.0)


def _sequence(kind: str, topic: str, offsets: dict[int, int]) -> SequenceNumbers:
    return SequenceNumbers(
        type=kind, stream=topic, partitionSequenceNumberMap=offsets_json(offsets)
    )


def _kafka_options(props: dict[str, Any]) -> dict[str, str]:
    skip = (
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "auto.offset.reset",
        "key.deserializer",
        "value.deserializer",
        "isolation.level",
    )
    return {k: str(v) for k, v in props.items() if k not in skip and not k.startswith("druid.")}


def _time_window(task: IndexKafkaTask) -> tuple[int | None, int | None]:
    from datetime import datetime

    def millis(text: str | None) -> int | None:
        if text is None:
            return None
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)

    return millis(task.ioConfig.minimumMessageTime), millis(task.ioConfig.maximumMessageTime)


__all__ = ["END_OF_PARTITION", "IndexerState", "KafkaIndexer", "TaskFailedError"]
