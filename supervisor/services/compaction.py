"""Compaction, Druid's way: a datasource's closed intervals of many small files rewritten into
few large ones, each as one snapshot that replaces them.

An interval is a segment-granularity interval of the datasource's used segments (those its
table holds). It awaits compaction when it has more files than its rows need at
`maxRowsPerSegment`, and is skipped while it ends within `skipOffsetFromLatest` of the
datasource's newest segment. A compaction (`Compactor.compact`) reads the interval's files as
the table holds them, writes their rows, unchanged, into files of at most `maxRowsPerSegment`
rows, then commits in one transaction that checks the leader's epoch: a snapshot that removes
exactly the files it read and adds its own (lake/rewrite.py `replace`: it gives up if one of
them left the table meanwhile, and keeps every file a streaming publish appended to the same
interval while it ran), the new segment rows, the old rows deleted (their files go when the
last snapshot naming them expires), and a `compact` task row with its report. A compaction
that does not commit deletes what it wrote. Its rows equal the rows it replaced: it checks the
count before committing.

The compactor runs on the leader (`CompactionDuty`, every coordinator period, an interval per
datasource, newest first as Druid's policy), reading and writing with Arrow."""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy.orm import Session

from supervisor.clock import Clock, druid_timestamp
from supervisor.db.engine import SessionFactory
from supervisor.db.lease import LeaseRepository
from supervisor.db.models import SegmentRow, TaskRow
from supervisor.db.retention import CompactionConfigs, SegmentStates
from supervisor.lake.holdings import live_files
from supervisor.lake.rewrite import Replaced, replace
from supervisor.lake.tables import SUMMARY_EPOCH, SUMMARY_OPERATION, SUMMARY_TASK, Lake, published
from supervisor.loop import Loop
from supervisor.model.compaction import CompactionConfig, parse_config
from supervisor.model.fence import Fence
from supervisor.model.retention import minus
from tasks.protocol import TaskStatusCode
from tasks.storage import Storage

log = logging.getLogger(__name__)
Interval = tuple[datetime, datetime]
FAILED_BACKOFF_S = 600.0  # an interval whose compaction failed waits this long to be tried


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
    for interval in sorted(by_interval, reverse=True):
        rows = by_interval[interval]
        if interval[1] > cutoff:
            found.skipped.append((interval, rows))
        elif len(rows) > math.ceil(sum(r.num_rows for r in rows) / config.max_rows):
            found.awaiting.append((interval, rows))
        else:
            found.compacted.append((interval, rows))
    return found


@dataclass(frozen=True)
class Written:
    uri: str
    size: int
    rows: int


class Compactor:
    def __init__(self, sessions: SessionFactory, lake: Lake, storage: Storage, clock: Clock):
        self.sessions = sessions
        self.lake = lake
        self.storage = storage
        self.clock = clock

    def compact(
        self,
        config: CompactionConfig,
        interval: Interval,
        rows: list[SegmentRow],
        epoch: int | None,
    ) -> str:
        """Rewrite the interval's files (`rows`, as planned) and commit; the compact task's id.
        Raises what stopped it (Replaced, NotLeading, ...) after deleting what it wrote."""
        now = self.clock()
        suffix = secrets.token_hex(4)
        task_id = f"compact_{config.datasource}_{druid_timestamp(now)}_{suffix}"
        version = f"{druid_timestamp(now)}-compact-{suffix}"
        written = self._write(config, interval, rows, version, task_id)
        with self.sessions() as session:
            try:
                if sum(w.rows for w in written) != sum(r.num_rows for r in rows):
                    raise RuntimeError("the files written do not hold the rows they replace")
                self._commit(session, config, interval, rows, written, version, task_id, epoch)
            except BaseException:
                self._delete(written)
                raise
            # a commit that fails may still have landed: its files stay (the table names them
            # if it did; orphan-file removal takes them if it did not)
            session.commit()
        log.info(
            "%s: %s compacted, %d files into %d (%s)",
            config.datasource,
            interval,
            len(rows),
            len(written),
            task_id,
        )
        return task_id

    def _commit(
        self,
        session: Session,
        config: CompactionConfig,
        interval: Interval,
        rows: list[SegmentRow],
        written: list[Written],
        version: str,
        task_id: str,
        epoch: int | None,
    ) -> None:
        if epoch is not None:
            LeaseRepository(session).require(epoch)
        summary = {SUMMARY_OPERATION: "compact", SUMMARY_TASK: task_id}
        if epoch is not None:
            summary[SUMMARY_EPOCH] = str(epoch)
        start, end = (t.isoformat() for t in interval)
        files = [(w.uri, w.size, start, end) for w in written]
        replace(
            self.lake, session, published(config.datasource, files, summary), {r.path for r in rows}
        )
        now = self.clock()
        ids = [
            self._segment_id(config.datasource, interval, version, n) for n in range(len(written))
        ]
        session.add_all(
            SegmentRow(
                id=ids[n],
                datasource=config.datasource,
                interval_start=interval[0],
                interval_end=interval[1],
                version=version,
                partition_num=n,
                path=w.uri,
                size_bytes=w.size,
                num_rows=w.rows,
                used=True,
                payload=_union_payload(rows),
                created_at=now,
            )
            for n, w in enumerate(written)
        )
        SegmentStates(session).forget([r.id for r in rows])
        session.add(
            TaskRow(
                id=task_id,
                type="compact",
                supervisor_id=None,
                datasource=config.datasource,
                group_id=None,
                payload={"type": "compact", "id": task_id, "dataSource": config.datasource},
                status=TaskStatusCode.SUCCESS,
                created_at=now,
                updated_at=now,
                report={
                    "status": "SUCCESS",
                    "segments": ids,
                    "replaced": {r.id: r.path for r in rows},
                },
            )
        )
        session.flush()

    @staticmethod
    def _segment_id(datasource: str, interval: Interval, version: str, n: int) -> str:
        start, end = (druid_timestamp(t) for t in interval)
        return f"{datasource}_{start}_{end}_{version}_{n}"

    def _write(
        self,
        config: CompactionConfig,
        interval: Interval,
        rows: list[SegmentRow],
        version: str,
        task_id: str,
    ) -> list[Written]:
        """The rows of the input files, as they are, in files of at most max_rows rows."""
        filesystem = self.storage.filesystem()
        inputs = [
            pq.ParquetFile(filesystem.open_input_file(self.storage.fs_path(r.path))) for r in rows
        ]
        schema = pa.unify_schemas([f.schema_arrow.remove_metadata() for f in inputs])
        start, end = (druid_timestamp(t).replace(":", "-") for t in interval)
        directory = self.storage.path(config.datasource, f"{start}_{end}", version, task_id)
        self.storage.make_dirs(directory)
        written: list[Written] = []
        writer: Any = None
        in_file = 0
        try:
            for source in inputs:
                for batch in source.iter_batches(batch_size=65_536):
                    table = _conform(pa.Table.from_batches([batch]), schema)
                    offset = 0
                    while offset < table.num_rows:
                        if writer is None or in_file >= config.max_rows:
                            if writer is not None:
                                writer.close()
                                written[-1] = self._closed(written[-1], in_file)
                            path = f"{directory}/{len(written)}.parquet"
                            meta = {b"sluicegate.compactedBy": task_id.encode()}
                            writer = pq.ParquetWriter(
                                path,
                                schema.with_metadata(meta),
                                compression="zstd",
                                filesystem=filesystem,
                            )
                            written.append(Written(self.storage.uri(path), 0, 0))
                            in_file = 0
                        take = min(config.max_rows - in_file, table.num_rows - offset)
                        writer.write_table(table.slice(offset, take))
                        in_file += take
                        offset += take
            if writer is not None:
                writer.close()
                written[-1] = self._closed(written[-1], in_file)
        except BaseException:
            self._delete(written)
            raise
        return written

    def _closed(self, file: Written, rows: int) -> Written:
        return Written(file.uri, self.storage.size(self.storage.fs_path(file.uri)), rows)

    def _delete(self, written: list[Written]) -> None:
        filesystem = self.storage.filesystem()
        for file in written:
            try:
                filesystem.delete_file(self.storage.fs_path(file.uri))
            except OSError:
                continue  # an orphan the orphan-file removal takes


def _union_payload(rows: list[SegmentRow]) -> dict[str, Any]:
    """The replaced segments' payload, their dimensions and metrics all named (in order)."""
    payload = dict(rows[0].payload or {})
    for key in ("dimensions", "metrics"):
        names: list[str] = []
        for row in rows:
            names += [n for n in (row.payload or {}).get(key, []) if n not in names]
        payload[key] = names
    return payload


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with `schema`'s columns in its order: a column it lacks (a dimension discovered
    after it was written) as nulls."""
    columns = []
    for field_ in schema:
        if field_.name in table.column_names:
            columns.append(table.column(field_.name).cast(field_.type))
        else:
            columns.append(pa.nulls(table.num_rows, field_.type))
    return pa.Table.from_arrays(columns, schema=schema)


class CompactionDuty(Loop):
    """Every configured datasource's newest interval awaiting compaction, compacted, each run."""

    name = "compaction"

    def __init__(
        self,
        sessions: SessionFactory,
        lake: Lake,
        storage: Storage,
        fence: Fence,
        clock: Clock,
        every_s: float,
    ) -> None:
        self.sessions = sessions
        self.lake = lake
        self.fence = fence
        self.compactor = Compactor(sessions, lake, storage, clock)
        self.failing: dict[tuple[str, Interval], float] = {}  # not tried again before then
        super().__init__(every_s)

    def run_once(self) -> None:
        self.compact_all()

    def compact_all(self) -> dict[str, str]:
        """One run: the compact task of each datasource that had an interval to compact."""
        with self.sessions() as session:
            configs = CompactionConfigs(session).all(running=True)
        done: dict[str, str] = {}
        for datasource, raw in configs.items():
            leader = self.fence.check()
            epoch = None if leader is None else leader.epoch
            try:
                task_id = self._compact_one(parse_config(raw), epoch)
            except Exception:  # the others go on; this one is tried again next run
                log.exception("%s: compaction failed", datasource)
                continue
            if task_id is not None:
                done[datasource] = task_id
        return done

    def _compact_one(self, config: CompactionConfig, epoch: int | None) -> str | None:
        """The newest interval awaiting compaction that has not failed lately, compacted."""
        with self.sessions() as session:
            awaiting = plan(session, self.lake, config).awaiting
            session.expunge_all()
        now = time.monotonic()
        for interval, rows in awaiting:
            key = (config.datasource, interval)
            if self.failing.get(key, 0.0) > now:
                continue
            try:
                return self.compactor.compact(config, interval, rows, epoch)
            except Replaced as exc:  # planned again on what the table holds next run
                log.info("%s: compaction of %s gave up: %s", config.datasource, interval, exc)
                return None
            except Exception:
                self.failing[key] = now + FAILED_BACKOFF_S
                raise
        return None
