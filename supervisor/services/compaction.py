"""Compaction, Druid's way: a datasource's closed intervals of many small files rewritten into
few large ones, each as one snapshot that replaces them.

An interval is a segment-granularity interval of the datasource's used segments (those its
table holds): their own, or the config's `granularitySpec.segmentGranularity` bucket that
holds them (a month of day segments). It awaits compaction when it has more files than its
rows need at `maxRowsPerSegment`, or segments of another interval than its own, and is
skipped while it ends within `skipOffsetFromLatest` of the datasource's newest segment
(`plan`). Each coordinator period the leader's `CompactionDuty`
gives the newest interval awaiting compaction of each datasource to a `compact` task
(tasks/compaction.py), launched on a task host as any task is: it reads the interval's files
with the host's Spark, writes their rows, unchanged and sorted, into files of at most
`maxRowsPerSegment` rows, and commits them through the overlord's task action endpoint
(services/compaction_commit.py), which checks the leader's epoch, that the files it read are
all still in the table and that its rows equal theirs. One compact task runs per datasource
at a time. An interval whose task failed is tried again after a backoff (`backoff_over`:
FIRST_BACKOFF_S, doubling with each failure of a run of them, at most MAX_BACKOFF_S), older
intervals awaiting compaction meanwhile: a task lost with its task host must not leave its
interval uncompacted while newer ones keep coming."""

from __future__ import annotations

import logging
import math
import secrets
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from supervisor.clock import Clock, druid_timestamp
from supervisor.db.engine import SessionFactory
from supervisor.db.models import SegmentRow
from supervisor.db.retention import CompactionConfigs, DynamicConfigs, SegmentStates
from supervisor.db.tasks import TaskRepository
from supervisor.db.workers import WorkerRepository
from supervisor.errors import NotLeading
from supervisor.lake.holdings import live_files
from supervisor.lake.tables import Lake
from supervisor.loop import Loop
from supervisor.model import compaction_slots
from supervisor.model.compaction import CompactionConfig, parse_config
from supervisor.model.fence import Fence
from supervisor.model.retention import minus
from supervisor.runner.protocol import NoSlot, Runner
from supervisor.services.compaction_commit import union_payload
from supervisor.services.task_life import TaskLife, Unsettled
from tasks import granularity as granularities
from tasks.protocol import CompactTask

log = logging.getLogger(__name__)
Interval = tuple[datetime, datetime]
FIRST_BACKOFF_S = 30.0  # an interval whose compaction failed once waits this long
MAX_BACKOFF_S = 600.0  # and at most this long, however often it failed
FAILURE_RUN_S = 1.5 * MAX_BACKOFF_S  # failures this close to the next are one run of them
FAILURES_LOOKED_BACK_S = 3600.0  # how far back the failures of an interval are read
COMPACT = "compact"


@dataclass
class Plan:
    """A datasource's intervals by what compaction makes of them, newest first."""

    awaiting: list[tuple[Interval, list[SegmentRow]]] = field(default_factory=list)
    compacted: list[tuple[Interval, list[SegmentRow]]] = field(default_factory=list)
    skipped: list[tuple[Interval, list[SegmentRow]]] = field(default_factory=list)

    def status(self, datasource: str) -> dict[str, Any]:
        """Druid's AutoCompactionSnapshot of the datasource."""
        found: dict[str, Any] = {"dataSource": datasource, "scheduleStatus": "RUNNING"}
        for name, part in (
            ("AwaitingCompaction", self.awaiting),
            ("Compacted", self.compacted),
            ("Skipped", self.skipped),
        ):
            rows = [row for _, interval_rows in part for row in interval_rows]
            found[f"bytes{name}"] = sum(row.size_bytes for row in rows)
            found[f"segmentCount{name}"] = len(rows)
            found[f"intervalCount{name}"] = len(part)
        return found


def plan(session: Session, lake: Lake, config: CompactionConfig) -> Plan:
    held = live_files(lake, session, config.datasource) or set()
    by_interval: dict[Interval, list[SegmentRow]] = defaultdict(list)
    for row in SegmentStates(session).of(config.datasource, True):
        if row.path in held:
            by_interval[(row.interval_start, row.interval_end)].append(row)
    found = Plan()
    if not by_interval:
        return found
    newest_end = max(end for _, end in by_interval)
    cutoff = minus(newest_end, config.skip)
    # the intervals compacted: the segments' own, or the buckets of the configured granularity
    # (a bucket holds the segments it holds whole; one it cuts is skipped)
    buckets: dict[Interval, list[SegmentRow]] = defaultdict(list)
    for interval, rows in by_interval.items():
        bucket = interval if config.granularity is None else _bucket(interval, config.granularity)
        if bucket is None:
            found.skipped.append((interval, rows))
        else:
            buckets[bucket] += rows
    for bucket in sorted(buckets, reverse=True):
        rows = buckets[bucket]
        if bucket[1] > cutoff:
            found.skipped.append((bucket, rows))
        elif len(rows) > math.ceil(sum(r.num_rows for r in rows) / config.max_rows) or any(
            (row.interval_start, row.interval_end) != bucket for row in rows
        ):
            found.awaiting.append((bucket, rows))
        else:
            found.compacted.append((bucket, rows))
    found.skipped.sort(key=lambda part: part[0], reverse=True)
    return found


def _bucket(interval: Interval, granularity: str) -> Interval | None:
    """The bucket of the granularity holding the interval whole (None: none does)."""
    start = granularities.bucket_start(_ms(interval[0]), granularity)
    end = granularities.bucket_end(start, granularity)
    if _ms(interval[1]) > end:
        return None
    return _moment(start), _moment(end)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _moment(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


class CompactionDuty(Loop):
    """Each run: for each datasource whose compaction runs and has no compact task running,
    its newest interval awaiting compaction (not one whose compaction failed within its
    backoff) given to a compact task on a task host, as Druid's coordinator submits compact
    tasks; at most the cluster compaction config's task slots run at once (a share of the
    task hosts' slots, at most `max_tasks` unless it sets its own), the datasources taking
    turns."""

    name = "compaction"

    def __init__(
        self,
        sessions: SessionFactory,
        lake: Lake,
        fence: Fence,
        clock: Clock,
        runner: Runner,
        unsettled: Unsettled,
        every_s: float,
        max_tasks: int = 2,
        worker_timeout_s: float = 30.0,
    ) -> None:
        self.sessions = sessions
        self.max_tasks = max_tasks  # maxCompactionTaskSlots unless the cluster config sets it
        self.worker_timeout = timedelta(seconds=worker_timeout_s)
        self.lake = lake
        self.fence = fence
        self.clock = clock
        self.runner = runner
        self.unsettled = unsettled
        self.last = ""  # the datasource last given a compact task: the next run starts after it
        super().__init__(every_s)

    def run_once(self) -> None:
        self.compact_all()

    def compact_all(self) -> dict[str, str]:
        """One run: the compact task launched for each datasource that had an interval."""
        with self.sessions() as session:
            configs = CompactionConfigs(session).all(running=True)
            running = TaskRepository(session).running_of_type(COMPACT)
            cluster = compaction_slots.stored(DynamicConfigs(session).get(compaction_slots.NAME))
            capacity = WorkerRepository(session).capacity(self.clock(), self.worker_timeout)
        done: dict[str, str] = {}
        slots = compaction_slots.task_slots(cluster, capacity, self.max_tasks)
        slots -= sum(running.values())
        for datasource, raw in self._in_turn(configs, cluster.priority):
            if slots <= len(done):
                break
            if datasource in running:
                continue
            self.fence.check()  # NotLeading: the run ends
            try:
                task_id = self._launch_one(parse_config(raw))
            except NoSlot as exc:  # no task host has a slot: the next run asks again
                log.info("compaction waits for a task slot: %s", exc)
                break
            except NotLeading:
                raise
            except Exception:  # the others go on; this one is tried again next run
                log.exception("%s: compaction could not be started", datasource)
                continue
            if task_id is not None:
                done[datasource] = task_id
                self.last = datasource
        return done

    def _in_turn(
        self, configs: dict[str, dict[str, Any]], priority: str | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """The datasources in name order, from the one after the last given a task: with
        fewer slots than datasources awaiting, each has its turn (from the first each run,
        the last ones waited for good while the first kept having new intervals). The
        cluster config's priorityDatasource comes before every other, every run."""
        ordered = sorted(configs.items())
        start = next((i for i, (name, _) in enumerate(ordered) if name > self.last), 0)
        turns = ordered[start:] + ordered[:start]
        first = [item for item in turns if item[0] == priority]
        return first + [item for item in turns if item[0] != priority]

    def _launch_one(self, config: CompactionConfig) -> str | None:
        """The compact task of the newest interval awaiting compaction that is not within
        the backoff of a failure; its id (None: nothing to compact)."""
        with self.sessions() as session:
            now = self.clock()
            failed = TaskRepository(session).failed_compactions(
                config.datasource, now - timedelta(seconds=FAILURES_LOOKED_BACK_S)
            )
            for interval, rows in plan(session, self.lake, config).awaiting:
                if not backoff_over(failed.get(_iso(interval), []), now):
                    continue
                task = compact_task(config, interval, rows, now)
                life = TaskLife(session, self.clock, self.runner, self.fence, self.unsettled)
                life.launch(task, wait_for_slot=True)
                log.info(
                    "%s: compacting %s (%d files): %s",
                    task.dataSource,
                    task.interval,
                    len(rows),
                    task.id,
                )
                return task.id
        return None


def backoff_over(failures: list[datetime], now: datetime) -> bool:
    """Whether an interval whose compaction failed at these times may be tried again:
    FIRST_BACKOFF_S after its last failure, doubled for each one before it in the same run of
    failures (each within FAILURE_RUN_S of the next), at most MAX_BACKOFF_S."""
    if not failures:
        return True
    times = sorted(failures, reverse=True)
    run = 1
    while run < len(times) and times[run - 1] - times[run] <= timedelta(seconds=FAILURE_RUN_S):
        run += 1
    wait = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (run - 1))
    return now >= times[0] + timedelta(seconds=wait)


def compact_task(
    config: CompactionConfig, interval: Interval, rows: list[SegmentRow], now: datetime
) -> CompactTask:
    suffix = secrets.token_hex(4)
    payload = union_payload(rows)
    return CompactTask(
        type=COMPACT,
        id=f"{COMPACT}_{config.datasource}_{druid_timestamp(now)}_{suffix}",
        dataSource=config.datasource,
        interval=_iso(interval),
        version=f"{druid_timestamp(now)}-compact-{suffix}",
        inputs={row.id: row.path for row in rows},
        maxRowsPerSegment=config.max_rows,
        dimensions=list(payload.get("dimensions") or []),
        metrics=list(payload.get("metrics") or []),
    )


def _iso(interval: Interval) -> tuple[str, str]:
    return interval[0].isoformat(), interval[1].isoformat()
