"""The reading loop of a Kafka indexing task: micro-batches over exact offset ranges into persists,
grouped in sequences that are published in order (tasks/runtime/sequences.py). Control calls (pause,
end offsets, stop) arrive from other threads; the loop applies them between batches."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from tasks.kafka_offsets import KAFKA_ERRORS, OffsetReader, transient
from tasks.partitions import Offsets, PartitionKey, sorted_keys
from tasks.protocol import IndexKafkaTask, TaskState
from tasks.reading.combiner import JobCombiner
from tasks.reading.engines.base import EngineName
from tasks.reading.engines.choice import Engines
from tasks.reading.reader import KafkaBatch
from tasks.rows.pipeline import RowPlan, RowStats
from tasks.runtime.indexer_control import IndexerControls
from tasks.runtime.indexer_state import ControlError, IndexerState
from tasks.runtime.rates import MovingRates
from tasks.runtime.sequences import Publisher, Sequence, SequencePublisher, TaskFailedError
from tasks.spec.periods import duration_millis
from tasks.spec.tuning_config import DEFAULT_MAX_TOTAL_ROWS
from tasks.storage import LOCAL, Storage, parse

log = logging.getLogger(__name__)
# A batch of at least this many records is a busy task's: the next one starts at once, not
# after min_batch_interval_s (at 20,000 records/s the interval's second was half a second of
# freshness p99; a quiet task's batch of a few records still waits it out)
BUSY_BATCH_RECORDS = 2_000
CHECKPOINT_RETRY_S = 5.0  # an idle task asks again this long after a failed request
BROKER_AWAY_WAIT_S = 1.0  # between asks while the broker cannot say where partitions end
Checkpointer = Callable[[Offsets], None]


class KafkaIndexer(IndexerControls):
    def __init__(
        self,
        task: IndexKafkaTask,
        spark: Any,
        work_dir: Path,
        deep_storage: str | Path | Storage,
        publisher: Publisher,
        checkpointer: Checkpointer | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        on_last_stretch: Callable[[], None] = lambda: None,
        shared_persists: bool = False,
        scope: Callable[[], AbstractContextManager[object]] = nullcontext,
        combiner: JobCombiner | None = None,
        min_batch_interval_s: float = 0.0,
    ) -> None:
        """`on_last_stretch` runs once, when the task is given its final end offsets (its
        successors start reading then) or else when its reading ends: a task process steps
        back on the CPU there (tasks/runtime/priority.py); in-process users need not.

        Persists go to the task's work directory, or to deep storage (under
        `_tasks/<task id>/`, deleted once published) when it is S3 or `shared_persists` says
        the executors writing and merging them may be on other hosts (a spark:// master).

        `scope` is entered by each thread that works for the task besides the caller's (the
        sequence publisher): a shared application gives it the task's Spark job group, pool
        and log context there (tasks/runtime/shared.py), and a `combiner` that runs its batches'
        reads in jobs shared with its other tasks (tasks/reading/combiner.py).

        `min_batch_interval_s`: after a quiet batch (fewer than BUSY_BATCH_RECORDS records)
        the next starts at least this long after it, unless the sequence has its end (a
        persist per poll is a file and a job per task per 100 ms), and Kafka's latest offsets
        are not asked for meanwhile, nor more often than this while nothing new comes: a
        hundred quiet tasks cost the broker a hundred requests a second, not a thousand. A
        busy task reads on at once: its batches' fixed cost is small beside their records,
        and waiting would add the interval to its records' freshness."""
        self.task = task
        self.checkpointer = checkpointer
        self.spark = spark
        self.work_dir = work_dir
        self.storage = deep_storage if isinstance(deep_storage, Storage) else parse(deep_storage)
        self.shared_persists = shared_persists or self.storage.is_s3
        self.publisher = publisher
        self.clock = clock
        self.sleep = sleep
        self.on_last_stretch = on_last_stretch
        self.scope = scope
        self.combiner = combiner
        self.min_batch_interval_s = min_batch_interval_s
        self.last_batch_at = float("-inf")
        self.last_batch_s = 0.0  # how long the last batch took
        self.checkpoint_retry_at = 0.0  # an idle task's next checkpoint request, after a failed one
        self.last_batch_busy = False  # it read BUSY_BATCH_RECORDS or more: read on at once
        self.last_stretch = False  # on_last_stretch has run (under the lock)
        self.lock = threading.Condition()
        io = task.ioConfig
        self.state = IndexerState(current=io.start_offsets(), end=io.end_offsets())
        self.rates = MovingRates(list(RowStats().as_dict()), self.clock())  # under the lock
        self.start = io.start_offsets()
        # the admin client is shared with the host application's other tasks on the cluster;
        # made (or found) now, so a config Kafka refuses is the task's refusal to start, and
        # its first batch does not wait for a client to connect
        self.offsets = OffsetReader(io.consumerProperties, retry_transient=True, shared=True)
        self.offsets.connect()
        self.broker_away: float | None = None  # since when Kafka could not say where it ends
        self.plan = RowPlan(task.dataSchema, io.inputFormat, *_time_window(task))
        self.dimensions: list[tuple[str, str]] = []
        first = Sequence(0, dict(self.start), opened_at=self.clock())
        if io.endSequenceNumbers is not None:
            first.end = io.end_offsets()
        self.sequences = [first]
        self.sequence_publisher: SequencePublisher | None = None
        self.engines: Engines | None = None  # once Spark runs (run())
        self.pause_requested = False
        self.stop_requested = False
        self.aborted: str | None = None  # killed: why; nothing more is read or published
        self.in_flight: Offsets | None = None  # the end of the batch being read, if one is
        self.state.end_is_final = task.ioConfig.endSequenceNumbers is not None

    # ---- the loop -------------------------------------------------------------------------

    def run(self) -> IndexerState:
        persists = self.storage if self.shared_persists else LOCAL
        engines = self.engines = Engines(self.spark, self.plan, persists, self.combiner)
        publisher = SequencePublisher(
            self.task,
            engines,
            self.plan,
            self.storage,
            self.publisher,
            self.shared_persists,
            self.clock,
            self.sleep,
            on_published=self._count_handoff,
            scope=self.scope,
        )
        self.sequence_publisher = publisher
        try:
            with self.lock:
                self.state.started_at = time.time()
            self._set_status(TaskState.READING)
            self._read_until_end()
            self._set_status(TaskState.PUBLISHING)
            self._last_stretch()
            segments = publisher.drain()
            with self.lock:
                self.state.segments = segments
            self._set_status(TaskState.SUCCESS)
        except TaskFailedError as exc:
            self._fail(str(exc))
        except Exception as exc:  # a failed task records why rather than dying silently
            log.exception("task %s failed", self.task.id)
            self._fail(f"{type(exc).__name__}: {exc}")
        finally:
            if publisher.thread.is_alive():
                publisher.queue.put(None)
        return self.state

    def _finished_reading(self) -> bool:
        return all(self.state.current[p] >= self.state.end[p] for p in self.state.current)

    def _read_until_end(self) -> None:
        topic = self.task.ioConfig.topic
        partitions = sorted_keys(self.start)
        budget = max(1, self.task.tuningConfig.maxRowsInMemory // len(partitions))
        self._check_log_start(topic, partitions)
        poll = self.task.ioConfig.pollTimeout / 1000
        while True:
            with self.lock:
                self._honour_pause()
                if self.aborted is not None:
                    raise TaskFailedError(self.aborted)
                if self.stop_requested and not self._finished_reading():
                    self.state.end = dict(self.state.current)
                    self.state.end_is_final = True
                    self.sequences[-1].end = dict(self.state.current)
                self._close_reached_sequence()
                if self._finished_reading():
                    return
                current = dict(self.state.current)
                limit = self.sequences[-1].end or self.state.end
                closing = self._closing()
            self._raise_if_publish_failed()
            interval = self._batch_interval_s()
            early = interval - (self.clock() - self.last_batch_at)
            if early > 0 and not closing:
                # a quiet task: its next batch waits, and Kafka is not asked until then
                self._wait_for_a_request(early, or_closing=True)
                continue
            latest = self._latest(topic, partitions)
            if latest is None:  # the broker is away: no batch until it answers again
                self._wait_for_a_request(max(poll, BROKER_AWAY_WAIT_S))
                continue
            batch_end = {
                p: min(limit[p], latest[p], current[p] + budget)
                if latest[p] > current[p]
                else current[p]
                for p in partitions
            }
            if batch_end == current:
                # nothing new: what it holds is handed off on time all the same (as Druid's
                # loop checks intermediateHandoffPeriod at every poll); then ask again after
                # pollTimeout (and no sooner than a batch could start: a busy task's at once)
                self._maybe_request_checkpoint(idle=True)
                self._wait_for_a_request(max(poll, interval))
                continue
            with self.lock:
                if self.pause_requested or self.stop_requested or self.aborted is not None:
                    continue  # asked since the top of the loop: honoured before a batch
                self.in_flight = batch_end
            records = sum(batch_end[p] - current[p] for p in partitions)
            self.last_batch_busy = records >= BUSY_BATCH_RECORDS or any(
                batch_end[p] - current[p] >= budget for p in partitions
            )
            try:
                self._read_batch(current, batch_end)
            finally:
                with self.lock:
                    self.in_flight = None
            self._maybe_request_checkpoint()

    def _latest(self, topic: str, partitions: list[PartitionKey]) -> dict[PartitionKey, int] | None:
        """Where the partitions end now; None while the broker cannot say for an error that
        passes (down, restarting, electing leaders) past the offset reader's own retries. The
        task waits for it as Druid's consumer does, still answering the overlord, instead of
        failing: one line when the broker goes away, one when it is back."""
        try:
            latest = self.offsets.latest(topic, partitions)
        except KAFKA_ERRORS as exc:
            if not transient(exc):
                raise
            if self.broker_away is None:
                self.broker_away = self.clock()
                log.warning("Kafka cannot say where %s ends (%s): waiting for it", topic, exc)
            return None
        if self.broker_away is not None:
            log.info("Kafka answers again after %.1f s", self.clock() - self.broker_away)
            self.broker_away = None
        return latest

    def _batch_interval_s(self) -> float:
        """The least time from one batch's start to the next one's: none after a busy batch."""
        return 0.0 if self.last_batch_busy else self.min_batch_interval_s

    def _wait_for_a_request(self, seconds: float, or_closing: bool = False) -> None:
        """Up to `seconds`, or until a pause, a stop or an abort comes (`or_closing`: or the
        sequence's end)."""
        with self.lock:
            self.lock.wait_for(
                lambda: (
                    self.pause_requested
                    or self.stop_requested
                    or self.aborted
                    or (or_closing and self._closing())
                ),
                seconds,
            )

    def _closing(self) -> bool:
        """Under the lock: the current sequence has its end (or the task its final end)."""
        return self.sequences[-1].end is not None or self.state.end_is_final

    def _close_reached_sequence(self) -> None:
        """Under the lock: hand a sequence whose end is read to the publisher, open the next."""
        sequence = self.sequences[-1]
        if sequence.end is None or any(
            self.state.current[p] < sequence.end[p] for p in sequence.end
        ):
            return
        # Even a sequence without rows is published: its offsets must move for the next one.
        sequence.dimensions = list(self.dimensions)
        assert self.sequence_publisher is not None
        self.sequence_publisher.submit(sequence)
        if not self._finished_reading():
            opened = sequence.requested_at if sequence.requested_at is not None else self.clock()
            self.sequences.append(
                Sequence(sequence.index + 1, dict(sequence.end), opened_at=opened)
            )

    def _raise_if_publish_failed(self) -> None:
        if self.sequence_publisher is not None and self.sequence_publisher.failed():
            raise TaskFailedError(str(self.sequence_publisher.failed()))

    def _maybe_request_checkpoint(self, idle: bool = False) -> None:
        """Past maxRowsPerSegment, maxTotalRows or intermediateHandoffPeriod, ask for a
        checkpoint; the overlord pauses the group's replicas and closes their sequence. `idle`
        (no new record): only a sequence that holds rows (an empty one waits for records)."""
        if self.checkpointer is None:
            return
        tuning = self.task.tuningConfig
        with self.lock:
            sequence = self.sequences[-1]
            if sequence.end is not None or sequence.requested_at is not None:
                return
            if idle and (sequence.rows == 0 or self.clock() < self.checkpoint_retry_at):
                return
            # asked for at the batch end nearest the period's end: the next chance comes a
            # batch later, and asking only past the period made handoffs a batch late on
            # average (every 5-6 s at PT5S with batches of ~1 s)
            step_ms = max(self.last_batch_s, self._batch_interval_s()) * 1000
            age_ms = (self.clock() - sequence.opened_at) * 1000 + step_ms / 2
            due = (
                sequence.rows >= tuning.maxRowsPerSegment
                or sequence.rows >= (tuning.maxTotalRows or DEFAULT_MAX_TOTAL_ROWS)
                or age_ms >= duration_millis(tuning.intermediateHandoffPeriod, longest=None)
            )
            if not due:
                return
            sequence.requested_at = self.clock()
            start = dict(sequence.start)
        try:
            self.checkpointer(start)
        except Exception:  # asked again after the next batch (an idle task: 5 s later)
            log.exception("checkpoint request failed")
            with self.lock:
                sequence.requested_at = None
                self.checkpoint_retry_at = self.clock() + CHECKPOINT_RETRY_S

    def _check_log_start(self, topic: str, partitions: list[PartitionKey]) -> None:
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

    def _read_batch(self, current: Offsets, batch_end: Offsets) -> None:
        batch = KafkaBatch(self.spark, self.task.ioConfig, current, batch_end)
        sequence = self.sequences[-1]
        name = f"{sequence.index:04d}-{len(sequence.persists):06d}"
        if self.shared_persists:
            persist = self.storage.path("_tasks", self.task.id, "persists", name)
        else:
            persist = str(self.work_dir / "persists" / name)
        tuning = self.task.tuningConfig
        remaining = max(0, tuning.maxSavedParseExceptions - len(self.state.samples))
        began = self.last_batch_at = self.clock()
        with self.lock:
            if self.state.first_read_at is None:
                self.state.first_read_at = time.time()
        assert self.engines is not None
        persisted = self.engines.persist(batch, persist, remaining, self.dimensions)
        self.last_batch_s = self.clock() - began
        result = persisted.result
        with self.lock:
            self._count("persists", 1)
            self._count("fastPersists", int(persisted.engine is EngineName.PYTHON_WORKERS))
            self._count("directReads", int(persisted.direct))
            self._count("persistSeconds", self.last_batch_s)
            sequence.persists.append(persist)
            sequence.written_by.add(persisted.engine)
            publisher = self.sequence_publisher
            assert publisher is not None
            publisher.persisted(sequence, persist, persisted.engine, result.stats.processed)
            sequence.rows += result.stats.processed + result.stats.processedWithError
            self.dimensions = result.dimensions
            self.state.stats.add(result.stats)
            self.rates.add(result.stats.as_dict(), self.clock())
            self.state.samples.extend(result.samples)
            self.state.current = {**self.state.current, **batch_end}
            if self.state.first_persist_at is None:
                self.state.first_persist_at = time.time()
            failures = self.state.stats.unparseable + self.state.stats.processedWithError
            self.lock.notify_all()
        if failures > tuning.maxParseExceptions:
            raise TaskFailedError(
                f"Max parse exceptions [{tuning.maxParseExceptions}] exceeded: {failures} rows "
                "failed to parse"
            )


def _time_window(task: IndexKafkaTask) -> tuple[int | None, int | None]:
    from datetime import datetime

    def millis(text: str | None) -> int | None:
        if text is None:
            return None
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)

    return millis(task.ioConfig.minimumMessageTime), millis(task.ioConfig.maximumMessageTime)


__all__ = ["ControlError", "IndexerState", "KafkaIndexer", "TaskFailedError"]
