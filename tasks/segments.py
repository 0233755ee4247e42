"""Merge a task's persists into segments: one or more Parquet files per segmentGranularity
interval (split at maxRowsPerSegment), rows sorted by time then dimensions, deterministic ids,
written by the executors under a task-specific path with provenance in the footer metadata."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks import aggregators, granularity
from tasks.columns import cols
from tasks.partitions import Offsets, offsets_json
from tasks.pipeline import RowPlan, rollup
from tasks.protocol import SegmentDescriptor, range_digest

INTERVAL, CHUNK = "__interval", "__chunk"


@dataclass(frozen=True)
class SegmentContext:
    task_id: str
    datasource: str
    topic: str
    start: Offsets
    end: Offsets
    spec_version: str
    deep_storage: str

    @property
    def version(self) -> str:
        return range_digest(self.topic, self.start, self.end)

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


def _writer(
    context: SegmentContext, plan_granularity: str, metadata: dict[str, str], names: list[str]
) -> Any:
    """The mapInArrow function: write each (interval, chunk) of a partition as one Parquet file."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        open_key: tuple[int, int] | None = None
        writer: Any = None
        rows = 0
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
                    "path": [path],
                    "rows": [rows],
                    "size": [Path(path).stat().st_size],
                }
            )

        for batch in batches:
            table = pa.Table.from_batches([batch]).rename_columns(names)
            intervals = table.column(INTERVAL).to_pylist()
            chunks = table.column(CHUNK).to_pylist()
            index = 0
            while index < len(intervals):
                key = (intervals[index], chunks[index])
                stop = index
                while stop < len(intervals) and (intervals[stop], chunks[stop]) == key:
                    stop += 1
                if key != open_key:
                    if writer is not None:
                        yield finish()
                    open_key, rows = key, 0
                    end = granularity.bucket_end(key[0], plan_granularity)
                    directory = context.directory(key[0], end)
                    Path(directory).mkdir(parents=True, exist_ok=True)
                    path = f"{directory}/{key[1]}.parquet"
                    body = table.drop_columns([INTERVAL, CHUNK])
                    segment_meta = {
                        **metadata,
                        "sluicegate.segmentId": context.segment_id(key[0], end, key[1]),
                    }
                    schema = body.schema.with_metadata(
                        {
                            **(body.schema.metadata or {}),
                            **{k.encode(): v.encode() for k, v in segment_meta.items()},
                        }
                    )
                    writer = pq.ParquetWriter(path, schema, compression="zstd")
                part = table.slice(index, stop - index).drop_columns([INTERVAL, CHUNK])
                writer.write_table(part.replace_schema_metadata(writer.schema.metadata))
                rows += stop - index
                index = stop
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
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not persists:
        return []
    frame = spark.read.option("mergeSchema", "true").parquet(*persists)
    for name in dims:
        if name not in frame.columns:
            frame = frame.withColumn(name, F.lit(None).cast("string"))
    frame = rollup(plan, frame.select("__time", *cols([*dims, *_metric_columns(plan)])), dims)
    order = [F.col("__time"), *[c.asc_nulls_first() for c in cols(dims)]]
    window = Window.partitionBy(INTERVAL).orderBy(*order)
    frame = frame.withColumn(
        INTERVAL, granularity.floor_ms(F.col("__time"), plan.segment_granularity)
    )
    frame = frame.withColumn(
        CHUNK, ((F.row_number().over(window) - 1) / max_rows_per_segment).cast("int")
    )
    helpers = aggregators.helper_columns(plan.schema.metricsSpec)
    frame = frame.drop(*helpers).withColumn("__time", F.timestamp_millis("__time"))
    frame = frame.repartition(INTERVAL, CHUNK).sortWithinPartitions(INTERVAL, CHUNK, *order)
    metadata = {
        "sluicegate.dataSource": context.datasource,
        "sluicegate.topic": context.topic,
        "sluicegate.startOffsets": json.dumps(offsets_json(context.start)),
        "sluicegate.endOffsets": json.dumps(offsets_json(context.end)),
        "sluicegate.taskId": context.task_id,
        "sluicegate.specVersion": context.spec_version,
    }
    # mapInArrow resolves columns by unquoted name, so dotted names travel positionally
    names = frame.columns
    frame = frame.toDF(*[f"c{index}" for index in range(len(names))])
    written = frame.mapInArrow(
        _writer(context, plan.segment_granularity, metadata, names),
        "interval_start long, interval_end long, chunk long, path string, rows long, size long",
    ).collect()
    metrics = plan.metric_names
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


def _metric_columns(plan: RowPlan) -> list[str]:
    return [*plan.metric_names, *aggregators.helper_columns(plan.schema.metricsSpec)]
