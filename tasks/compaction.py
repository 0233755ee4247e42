"""A `compact` task's run (supervisor/services/compaction.py issues them): one interval's
segment files read with Spark, their rows written unchanged, sorted by time then dimensions,
into files of at most maxRowsPerSegment rows (one partition, so the interval ends in exactly as
many files as its rows need), then committed through the overlord as one replace
(ReplaceAction; supervisor/services/compaction_commit.py checks it). It runs where any task
runs: a thread of a host's shared application, or a task process of its own.

A commit the overlord refused deletes what the task wrote; one whose answer never came keeps
it (the commit may have landed: asked again, the overlord says so; if it did not, the
orphan-file removal takes the files)."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from tasks import granularity
from tasks.protocol import (
    CompactTask,
    PublishOutcome,
    PublishResult,
    ReplaceAction,
    SegmentDescriptor,
    TaskReport,
    TaskState,
)
from tasks.runtime.overlord import OverlordClient
from tasks.runtime.run import REPORT
from tasks.storage import Storage, parse, read_parquet

log = logging.getLogger("tasks")
WRITTEN = "chunk long, path string, rows long, size long"
COMMIT_ATTEMPTS_S = 120.0  # how long an unreachable overlord is asked again
COMMIT_RETRY_S = 2.0


class CompactionRun:
    """`control` None: a compact task serves no chat API (its port answers 404)."""

    def __init__(
        self, task: CompactTask, token: str, overlord_url: str, work_dir: Path, deep_storage: str
    ) -> None:
        self.task, self.work_dir = task, work_dir
        self.overlord = OverlordClient(overlord_url, task.id, token)
        self.storage = parse(deep_storage)
        self.killed: str | None = None
        self.control = None
        self.run = secrets.token_hex(4)

    def kill(self, reason: str) -> None:
        """No commit starts from now on (its Spark jobs are cancelled by its host)."""
        self.killed = reason

    def stop(self) -> None:
        self.kill("stopped before it committed")

    def log_start(self) -> None:
        start, end = self.task.interval
        log.info(
            "task %s: compacting %s/%s of %s, %d files",
            self.task.id,
            start,
            end,
            self.task.dataSource,
            len(self.task.inputs),
        )

    def execute(self, spark: Any) -> TaskReport:
        """Rewrite and commit; leaves report.json. The report."""
        written: list[SegmentDescriptor] = []
        keep = False  # the files may be the segments: never deleted then
        try:
            if self.killed is not None:
                raise RuntimeError(self.killed)
            written = self.write(spark)
            result, keep = self._commit(written)
            if result.outcome is PublishOutcome.PUBLISHED:
                report = TaskReport(
                    status=TaskState.SUCCESS,
                    segments=[s.id for s in written],
                    replaced=self.task.inputs,
                )
            else:
                report = TaskReport(status=TaskState.FAILED, errorMsg=result.reason)
        except Exception as exc:
            log.exception("task %s: compaction failed", self.task.id)
            report = TaskReport(status=TaskState.FAILED, errorMsg=f"{type(exc).__name__}: {exc}")
        finally:
            self.overlord.close()
        if report.status is not TaskState.SUCCESS and not keep:
            self._delete(written)
        (self.work_dir / REPORT).write_text(report.model_dump_json(indent=2))
        log.info("task %s finished: %s %s", self.task.id, report.status, report.errorMsg or "")
        return report

    def write(self, spark: Any) -> list[SegmentDescriptor]:
        from pyspark.sql import functions as F

        task = self.task
        paths = [self.storage.fs_path(uri) for uri in task.inputs.values()]
        frame = read_parquet(spark, self.storage, paths)
        order = [c for c in ["__time", *task.dimensions] if c in frame.columns]
        frame = frame.coalesce(1).sortWithinPartitions(
            *[F.col(f"`{name}`").asc_nulls_first() for name in order]
        )
        names = frame.columns
        # mapInArrow resolves columns by unquoted name, so dotted names travel positionally
        frame = frame.toDF(*[f"c{index}" for index in range(len(names))])
        start, end = (_iso(moment) for moment in task.interval)
        folder = f"{start}_{end}".replace(":", "-")
        # a run of its own (the same task started twice never writes over the other's files)
        directory = self.storage.path(task.dataSource, folder, task.version, task.id, self.run)
        prefix = f"{task.dataSource}_{start}_{end}_{task.version}"
        rows = frame.mapInArrow(
            _writer(self.storage, directory, names, task.maxRowsPerSegment, prefix, task.id),
            WRITTEN,
        ).collect()
        return [
            SegmentDescriptor(
                id=f"{prefix}_{row['chunk']}",
                dataSource=task.dataSource,
                intervalStart=task.interval[0],
                intervalEnd=task.interval[1],
                version=task.version,
                partitionNum=row["chunk"],
                path=row["path"],
                size=row["size"],
                numRows=row["rows"],
                dimensions=task.dimensions,
                metrics=task.metrics,
            )
            for row in sorted(rows, key=lambda r: r["chunk"])
        ]

    def _commit(self, written: list[SegmentDescriptor]) -> tuple[PublishResult, bool]:
        """The overlord's answer to the replace, asked again while it cannot be reached; and
        whether the files must be kept (no definite answer came)."""
        action = ReplaceAction(
            supervisorId=self.task.dataSource,
            dataSource=self.task.dataSource,
            replaced=self.task.inputs,
            segments=written,
        )
        deadline = time.monotonic() + COMMIT_ATTEMPTS_S
        uncertain = False  # an attempt went unanswered: it may have committed
        while True:
            if self.killed is not None:
                return PublishResult(PublishOutcome.FAILED, self.killed), uncertain
            result = self.overlord.publish(action)
            if result.outcome is PublishOutcome.PUBLISHED:
                return result, True
            if result.outcome is not PublishOutcome.RETRY:
                # a refusal after an unanswered attempt: the overlord found no commit of these
                # files then, but keeping them costs only what the orphan removal takes later
                return result, uncertain
            uncertain = True
            if time.monotonic() >= deadline:
                return PublishResult(PublishOutcome.FAILED, f"no commit: {result.reason}"), True
            time.sleep(COMMIT_RETRY_S)

    def _delete(self, written: list[SegmentDescriptor]) -> None:
        filesystem = self.storage.filesystem()
        for segment in written:
            try:
                filesystem.delete_file(self.storage.fs_path(segment.path))
            except OSError:
                continue  # an orphan the orphan-file removal takes

    def close(self) -> None:
        self.overlord.close()


def _iso(text: str) -> str:
    """An interval bound as Druid writes it in ids and paths (UTC, milliseconds, Z)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return granularity.iso(int(moment.timestamp() * 1000))


def _writer(
    storage: Storage, directory: str, names: list[str], max_rows: int, prefix: str, task_id: str
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function over the one partition: its rows, in order, in files of at most
    `max_rows` rows named 0.parquet, 1.parquet, ... (`prefix`_n their segment ids)."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        filesystem = storage.filesystem()
        storage.make_dirs(directory)
        writer: Any = None
        chunk, rows, path = -1, 0, ""

        def finish() -> Any:
            writer.close()
            return pa.RecordBatch.from_pydict(
                {
                    "chunk": [chunk],
                    "path": [storage.uri(path)],
                    "rows": [rows],
                    "size": [storage.size(path)],
                }
            )

        for batch in batches:
            table = _utc_time(pa.Table.from_batches([batch]).rename_columns(names))
            offset = 0
            while offset < table.num_rows:
                if writer is None or rows >= max_rows:
                    if writer is not None:
                        yield finish()
                    chunk, rows = chunk + 1, 0
                    path = f"{directory}/{chunk}.parquet"
                    meta = {
                        b"sluicegate.segmentId": f"{prefix}_{chunk}".encode(),
                        b"sluicegate.compactedBy": task_id.encode(),
                    }
                    schema = table.schema.with_metadata(meta)
                    writer = pq.ParquetWriter(
                        path, schema, compression="zstd", filesystem=filesystem
                    )
                take = min(max_rows - rows, table.num_rows - offset)
                writer.write_table(
                    table.slice(offset, take).replace_schema_metadata(writer.schema.metadata)
                )
                rows += take
                offset += take
        if writer is not None:
            yield finish()

    return write


def _utc_time(table: Any) -> Any:
    """__time as the segments write it: microseconds, UTC (Spark hands it in its session's
    zone)."""
    import pyarrow as pa

    if "__time" not in table.column_names:
        return table
    index = table.schema.get_field_index("__time")
    return table.set_column(index, "__time", table["__time"].cast(pa.timestamp("us", tz="UTC")))
