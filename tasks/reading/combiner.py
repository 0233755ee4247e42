"""Many tasks' batches in one Spark job: the Python-worker engine's direct reads of every task
of a shared application (tasks/runtime/shared.py) that asks at about the same time run as one job.

At low rates a task's batch is a few records, and its cost is the fixed cost of a Spark job
(scheduling, the Python workers' round trip). A task hands its batch here (`collect`, the ranges it
reads and the plan it writes its persist with) and waits; one thread runs a job whenever batches
wait, over all of them: each Spark partition holds a slice of the ranges, groups them by batch and
runs that batch's own worker function (tasks/reading/worker_batch.py) on its ranges, writing that
batch's persist; each result row names its batch, and the rows go back to the tasks that asked.
Batches that arrive while a job runs go in the next one, so a host with a hundred quiet tasks runs a
few jobs a second, not a hundred, and a lone task waits for nothing.

A job that fails (one batch's ranges broke a worker) is run again batch by batch, each in a
job of its own, so only the batch that broke it fails; first the failed job's Spark tasks are
let end (one still writing would leave a file beside the new ones). JOB_THREADS jobs run at
once, so a batch whose read stalls (up to direct_read.STALL_S) holds up only its own job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tasks.reading import direct_read
from tasks.reading.worker_batch import WorkerPlan, worker_function

log = logging.getLogger(__name__)
MAX_RANGES = 512  # in one job; the rest wait for the next
SLICES_PER_CORE = 2  # Spark partitions per core of the application, at most one per range
JOB_GROUP = "sluicegate-combined"
JOB_THREADS = 2
SETTLE_S = 30.0  # longest wait for a failed job's Spark tasks to end


@dataclass
class _Batch:
    work: WorkerPlan
    reading: direct_read.Reading
    done: threading.Event = field(default_factory=threading.Event)
    rows: list[Any] = field(default_factory=list)
    error: BaseException | None = None


class JobCombiner:
    def __init__(self, spark: Any, start: bool = True, pool: str | None = None) -> None:
        """`start=False`: no job runs until `start()` (a test lines batches up first); `pool`:
        the FAIR scheduler pool of the jobs."""
        self.spark = spark
        self.pool = pool
        self.waiting: list[_Batch] = []
        self.cond = threading.Condition()
        self.closed = False
        self.jobs = 0  # run so far (a benchmark's figure)
        self.batches = 0
        self.threads = [
            threading.Thread(target=self._loop, args=(n,), name=f"job-combiner-{n}", daemon=True)
            for n in range(JOB_THREADS)
        ]
        if start:
            self.start()

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def waiting_count(self) -> int:
        with self.cond:
            return len(self.waiting)

    def collect(self, work: WorkerPlan, reading: direct_read.Reading) -> list[Any]:
        """The result rows of the workers' run of `work` over the ranges of `reading` (dicts
        of worker_batch.RESULT_FIELDS), as a job of their own would give them."""
        batch = _Batch(work, reading)
        with self.cond:
            if self.closed:
                raise RuntimeError("the application is stopping")
            self.waiting.append(batch)
            self.cond.notify_all()
        batch.done.wait()
        if batch.error is not None:
            raise batch.error
        return batch.rows

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def _take(self) -> list[_Batch] | None:
        with self.cond:
            self.cond.wait_for(lambda: self.waiting or self.closed)
            if not self.waiting:
                return None
            taken: list[_Batch] = []
            ranges = 0
            while self.waiting and (
                not taken or ranges + len(self.waiting[0].reading.ranges) <= MAX_RANGES
            ):
                batch = self.waiting.pop(0)
                ranges += len(batch.reading.ranges)
                taken.append(batch)
            return taken

    def _loop(self, number: int) -> None:
        context = self.spark.sparkContext
        group = f"{JOB_GROUP}-{number}"
        context.setJobGroup(group, "batches of many tasks", interruptOnCancel=True)
        if self.pool is not None:
            context.setLocalProperty("spark.scheduler.pool", self.pool)
        while (taken := self._take()) is not None:
            try:
                self._run(taken)
            except Exception as exc:
                if len(taken) == 1:
                    self._fail(taken[0], exc)
                    continue
                log.warning("a job of %d batches failed (%s): each runs alone", len(taken), exc)
                self._settle(group)
                for batch in taken:
                    try:
                        # what the failed job wrote of it must not stay beside the new files
                        batch.work.storage.delete_dir(batch.work.persist_path)
                        self._run([batch])
                    except Exception as alone:
                        self._fail(batch, alone)

    def _settle(self, group: str) -> None:
        """Wait until no Spark task of the group's jobs runs any more."""
        tracker = self.spark.sparkContext.statusTracker()
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            stages = [
                stage
                for job in tracker.getJobIdsForGroup(group)
                if (info := tracker.getJobInfo(job)) is not None
                for stage in info.stageIds
            ]
            active = [s for s in stages if (i := tracker.getStageInfo(s)) and i.numActiveTasks > 0]
            if not active:
                return
            time.sleep(0.1)
        log.warning("a failed job's tasks still run after %.0f s", SETTLE_S)

    def _fail(self, batch: _Batch, exc: BaseException) -> None:
        batch.error = exc
        batch.done.set()

    def _run(self, taken: list[_Batch]) -> None:
        items = [(b, r) for b, batch in enumerate(taken) for r in range(len(batch.reading.ranges))]
        cores = max(1, int(self.spark.sparkContext.defaultParallelism))
        slices = max(1, min(len(items), cores * SLICES_PER_CORE))
        plans = [(batch.work, batch.reading) for batch in taken]
        rows = self._job(plans, items, slices)
        with self.cond:
            self.jobs += 1
            self.batches += len(taken)
        by_batch: list[list[Any]] = [[] for _ in taken]
        for number, row in rows:
            by_batch[number].append(row)
        for batch, found in zip(taken, by_batch, strict=True):
            batch.rows = found
            batch.done.set()

    def _job(
        self,
        plans: list[tuple[WorkerPlan, direct_read.Reading]],
        items: list[tuple[int, int]],
        slices: int,
    ) -> list[tuple[int, dict[str, Any]]]:
        """One Spark job over the items in `slices` partitions: each result row with the
        number of its batch. An RDD job, not a DataFrame's mapInArrow: no query to plan, no
        Arrow stream to the JVM and back for a few result rows. A job of one batch took
        0.2-0.3 s, not 0.3-0.45; of a hundred quiet batches, 0.6-1.1 s, not 0.8-2
        (bench/combined_jobs.py)."""
        indexes = self.spark.sparkContext.parallelize(range(len(items)), slices)
        rows: list[tuple[int, dict[str, Any]]] = indexes.mapPartitions(
            _combined(plans, items)
        ).collect()
        return rows


def _read_slice(
    plans: list[tuple[WorkerPlan, direct_read.Reading]], grouped: dict[int, list[int]]
) -> dict[int, Iterator[Any]]:
    """Every range of the slice read together (one assignment per consumer settings, see
    direct_read.read_together); per batch, its records in range order, then its range's
    ReadGiveUp if one could not be read (the batch's worker function answers it as a read
    of its own would)."""
    by_config: dict[str, list[tuple[int, int]]] = {}
    for number, ranges in grouped.items():
        key = direct_read.settings_key(plans[number][1].config)
        by_config.setdefault(key, []).extend((number, local) for local in ranges)
    found: dict[tuple[int, int], list[Any] | direct_read.ReadGiveUp] = {}
    for members in by_config.values():
        config = plans[members[0][0]][1].config
        try:
            read = direct_read.read_together(
                config, [plans[number][1].ranges[local] for number, local in members]
            )
        except direct_read.ReadGiveUp as exc:
            read = [exc] * len(members)
        found.update(zip(members, read, strict=True))

    def records(number: int) -> Iterator[Any]:
        for local in grouped[number]:
            got = found[(number, local)]
            if isinstance(got, direct_read.ReadGiveUp):
                raise got
            yield from got

    return {number: records(number) for number in grouped}


def _combined(
    plans: list[tuple[WorkerPlan, direct_read.Reading]], items: list[tuple[int, int]]
) -> Any:
    """The partition function of a combined job: its slice's items (batch, range) grouped by
    batch, each group through that batch's worker function, each result row (a dict of
    RESULT_FIELDS) paired with its batch's number."""

    def run(indexes: Iterator[int]) -> Iterator[tuple[int, dict[str, Any]]]:
        grouped: dict[int, list[int]] = {}
        for index in indexes:
            number, local = items[index]
            grouped.setdefault(number, []).append(local)
        read = _read_slice(plans, grouped)
        for number in grouped:
            work, _ = plans[number]
            for result in worker_function(work)(read[number]):
                for row in result.to_pylist():
                    yield number, row

    return run
