"""Merge a task's persists into segments: one or more Parquet files per segmentGranularity
interval (split at maxRowsPerSegment), rows sorted by time then dimensions, deterministic ids,
written by the executors under a task-specific path with provenance in the footer metadata."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tasks import granularity
from tasks.output.interval_merge import INTERVAL, merge_columns, merged_interval
from tasks.partitions import Offsets, offsets_json
from tasks.protocol import SegmentDescriptor, range_digest
from tasks.reading import python_worker
from tasks.rows import aggregators
from tasks.rows.columns import cols
from tasks.rows.pipeline import RowPlan, rollup
from tasks.storage import LOCAL, Storage, read_parquet

WRITTEN_SCHEMA = (
    "interval_start long, interval_end long, chunk long, path string, rows long, size long"
)


@dataclass(frozen=True)
class SegmentContext:
    task_id: str
    datasource: str
    topic: str
    start: Offsets
    end: Offsets
    spec_version: str
    deep_storage: str  # the segments' root in the storage's file system
    storage: Storage = LOCAL
    generation: int = 0  # the supervisor's offsets generation (range_digest)

    @property
    def version(self) -> str:
        return range_digest(self.topic, self.start, self.end, self.generation)

    def segment_id(self, interval_start: int, interval_end: int, chunk: int) -> str:
        return "_".join(
            [
                self.datasource,
                granularity.iso(interval_start),
                granularity.iso(interval_end),
                self.version,
                str(chunk),
            ]
        )

    def directory(self, interval_start: int, interval_end: int) -> str:
        interval = f"{granularity.iso(interval_start)}_{granularity.iso(interval_end)}".replace(
            ":", "-"
        )
        return f"{self.deep_storage}/{self.datasource}/{interval}/{self.version}/{self.task_id}"


def _open_chunk(
    context: SegmentContext,
    metadata: dict[str, str],
    schema: Any,
    start: int,
    end: int,
    chunk: int,
) -> tuple[str, Any]:
    """A segment's Parquet file (its path, and its writer), its footer naming the segment."""
    import pyarrow.parquet as pq

    directory = context.directory(start, end)
    context.storage.make_dirs(directory)
    path = f"{directory}/{chunk}.parquet"
    segment_meta = {**metadata, "sluicegate.segmentId": context.segment_id(start, end, chunk)}
    footer = {k.encode(): v.encode() for k, v in segment_meta.items()}
    with_footer = schema.with_metadata({**(schema.metadata or {}), **footer})
    filesystem = context.storage.filesystem()
    return path, pq.ParquetWriter(path, with_footer, compression="zstd", filesystem=filesystem)


def _writer(
    context: SegmentContext,
    plan_granularity: str,
    metadata: dict[str, str],
    names: list[str],
    max_rows: int,
) -> Any:
    """The mapInArrow function over a partition holding whole intervals, rows sorted by interval
    then time and dimensions: each interval's rows in chunks of up to max_rows, one Parquet
    file a chunk (chunk n holds rows n*max_rows+1 .. (n+1)*max_rows of the interval)."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        python_worker.settle()
        storage = context.storage

        open_key: tuple[int, int] | None = None
        writer: Any = None
        rows = 0  # rows in the open file
        interval: int | None = None
        interval_rows = 0  # rows of the current interval written so far, in all its chunks
        path = ""

        def finish() -> Any:
            writer.close()
            start, chunk = open_key  # type: ignore[misc]
            end = granularity.bucket_end(start, plan_granularity)
            return pa.RecordBatch.from_pydict(
                {
                    "interval_start": [start],
                    "interval_end": [end],
                    "chunk": [chunk],
                    "path": [storage.uri(path)],
                    "rows": [rows],
                    "size": [storage.size(path)],
                }
            )

        for batch in batches:
            table = pa.Table.from_batches([batch]).rename_columns(names)
            runs = pc.run_end_encode(batch.column(names.index(INTERVAL)))
            body = table.drop_columns([INTERVAL])
            index = 0
            for value, stop in zip(runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True):
                if value != interval:
                    interval, interval_rows = value, 0
                while index < stop:
                    chunk = interval_rows // max_rows
                    take = min(stop - index, (chunk + 1) * max_rows - interval_rows)
                    key = (value, chunk)
                    if key != open_key:
                        if writer is not None:
                            yield finish()
                        open_key, rows = key, 0
                        end = granularity.bucket_end(value, plan_granularity)
                        path, writer = _open_chunk(
                            context, metadata, body.schema, value, end, chunk
                        )
                    part = body.slice(index, take)
                    writer.write_table(part.replace_schema_metadata(writer.schema.metadata))
                    rows += take
                    interval_rows += take
                    index += take
        if writer is not None:
            yield finish()

    return write


def build_segments(
    spark: Any,
    plan: RowPlan,
    persists: list[str],
    dims: list[str],
    context: SegmentContext,
    max_rows_per_segment: int,
) -> list[SegmentDescriptor]:
    """Merge persists into segments with one shuffle: rows are partitioned by their segment
    interval, rolled up within the partition, sorted and written a chunk at a time."""
    from pyspark.sql import functions as F

    if not persists:
        return []
    frame = read_parquet(spark, context.storage, persists)
    for name in dims:
        if name not in frame.columns:
            frame = frame.withColumn(name, F.lit(None).cast("string"))
    frame = frame.select("__time", *cols([*dims, *_metric_columns(plan)])).withColumn(
        INTERVAL, granularity.floor_ms(F.col("__time"), plan.segment_granularity)
    )
    # Grouping by the interval too keeps the rollup inside these partitions: no second shuffle.
    frame = rollup(plan, frame.repartition(INTERVAL), [INTERVAL, *dims])
    order = [F.col("__time"), *[c.asc_nulls_first() for c in cols(dims)]]
    helpers = aggregators.helper_columns(plan.schema.metricsSpec)
    frame = frame.drop(*helpers).withColumn("__time", F.timestamp_millis("__time"))
    frame = frame.select("__time", *cols(dims), *cols(plan.metric_names), INTERVAL)
    frame = frame.sortWithinPartitions(INTERVAL, *order)
    metadata = _metadata(context)
    # mapInArrow resolves columns by unquoted name, so dotted names travel positionally
    names = frame.columns
    frame = frame.toDF(*[f"c{index}" for index in range(len(names))])
    written = frame.mapInArrow(
        _writer(context, plan.segment_granularity, metadata, names, max_rows_per_segment),
        WRITTEN_SCHEMA,
    ).collect()
    return descriptors(written, context, dims, plan.metric_names)


def descriptors(
    written: list[Any], context: SegmentContext, dims: list[str], metrics: list[str]
) -> list[SegmentDescriptor]:
    segments = [
        SegmentDescriptor(
            id=context.segment_id(r["interval_start"], r["interval_end"], r["chunk"]),
            dataSource=context.datasource,
            intervalStart=granularity.iso(r["interval_start"]),
            intervalEnd=granularity.iso(r["interval_end"]),
            version=context.version,
            partitionNum=r["chunk"],
            path=r["path"],
            size=r["size"],
            numRows=r["rows"],
            dimensions=dims,
            metrics=metrics,
        )
        for r in written
    ]
    return sorted(segments, key=lambda s: s.id)


def _metadata(context: SegmentContext) -> dict[str, str]:
    """The provenance every segment file carries in its footer."""
    return {
        **provenance(context.datasource, context.topic, context.task_id, context.spec_version),
        "sluicegate.startOffsets": json.dumps(offsets_json(context.start)),
        "sluicegate.endOffsets": json.dumps(offsets_json(context.end)),
    }


def provenance(datasource: str, topic: str, task_id: str, spec_version: str) -> dict[str, str]:
    """The footer provenance known before a segment's offsets are (staged chunks carry only
    this, tasks/output/staging.py)."""
    return {
        "sluicegate.dataSource": datasource,
        "sluicegate.topic": topic,
        "sluicegate.taskId": task_id,
        "sluicegate.specVersion": spec_version,
    }


def interval_files(persists: list[str], storage: Storage = LOCAL) -> dict[int, list[str]]:
    """The files of persists written by interval (tasks/reading/worker_batch.py), by
    interval start."""
    files: dict[int, list[str]] = {}
    for persist in persists:
        for path in storage.files(persist):
            head = path.rsplit("/", 1)[-1].split(".")[0]
            if head.lstrip("-").isdigit():
                files.setdefault(int(head), []).append(path)
    return files


def build_segments_by_interval(
    spark: Any,
    plan: RowPlan,
    persists: list[str],
    dims: list[str],
    context: SegmentContext,
    max_rows_per_segment: int,
    inline_bytes: int = 0,
) -> list[SegmentDescriptor]:
    """Merge persists whose files are split by segment interval (tasks/reading/worker_batch.py) into
    the same segments build_segments makes, without a shuffle: one Spark job whose Python workers
    each take whole intervals, read their files with Arrow, roll up, sort and write. When the files
    add up to at most `inline_bytes`, the same merge runs here, on the caller's thread."""
    by_interval = sorted(interval_files(persists, context.storage).items())
    if not by_interval:
        return []
    names, combine = merge_columns(plan, dims)
    merge = _merger(
        _writer(context, plan.segment_granularity, _metadata(context), names, max_rows_per_segment),
        by_interval,
        names,
        dims,
        combine,
        context.storage,
    )
    if inline_bytes and _total_size(by_interval, context.storage) <= inline_bytes:
        import pyarrow as pa

        indexes = pa.RecordBatch.from_arrays(
            [pa.array(range(len(by_interval)), pa.int64())], ["id"]
        )
        written: list[Any] = [row for out in merge(iter([indexes])) for row in out.to_pylist()]
        return descriptors(written, context, dims, plan.metric_names)
    # the intervals' indexes, made in the JVM (a DataFrame of Python rows took a second Python
    # pass per Spark task); each task looks its intervals up
    jobs = spark.range(0, len(by_interval), 1, min(len(by_interval), 64))
    written = jobs.mapInArrow(merge, WRITTEN_SCHEMA).collect()
    return descriptors(written, context, dims, plan.metric_names)


def _total_size(by_interval: list[tuple[int, list[str]]], storage: Storage) -> int:
    return sum(storage.size(path) for _, files in by_interval for path in files)


def _merger(
    write: Any,
    by_interval: list[tuple[int, list[str]]],
    names: list[str],
    dims: list[str],
    combine: list[tuple[str, str]] | None,
    storage: Storage = LOCAL,
) -> Any:
    """The mapInArrow function over indexes into `by_interval` ((interval start, its files)):
    each interval's rows rolled up (`combine`: each metric's combining aggregation, None
    without rollup), sorted by time then dimensions (nulls first) and handed to the segment
    writer as the columns `names`."""

    def merge(batches: Iterator[Any]) -> Iterator[Any]:
        python_worker.settle()

        for batch in batches:
            for index in batch.column(0).to_pylist():
                start, files = by_interval[index]
                table = merged_interval(start, files, names, dims, combine, storage)
                positional = table.rename_columns([f"c{i}" for i in range(len(names))])
                yield from write(iter(positional.to_batches()))

    return merge


def _metric_columns(plan: RowPlan) -> list[str]:
    return [*plan.metric_names, *aggregators.helper_columns(plan.schema.metricsSpec)]
