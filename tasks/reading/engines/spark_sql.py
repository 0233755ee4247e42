"""The Spark SQL engine: Spark's Kafka source reads the range, the row pipeline in Spark SQL
(tasks/rows/pipeline.py) parses and rolls it up, and a shuffle merges persists into segments. It
runs every plan the task accepts and reads anything the Kafka source reads."""

from __future__ import annotations

from typing import Any

from tasks.output.segments import SegmentContext, build_segments
from tasks.protocol import SegmentDescriptor
from tasks.reading.engines.base import EngineName
from tasks.reading.reader import KafkaBatch
from tasks.rows.pipeline import BatchResult, RowPlan, process_batch
from tasks.storage import LOCAL, Storage


class SparkSqlEngine:
    name = EngineName.SPARK_SQL

    def __init__(self, spark: Any, plan: RowPlan, storage: Storage = LOCAL) -> None:
        self.spark = spark
        self.plan = plan
        self.storage = storage  # where persists are

    def read(self, batch: KafkaBatch) -> Any:
        """A DataFrame of the batch's Kafka records, from Spark's Kafka source."""
        return batch.frame()

    def persist(
        self, records: Any, persist_path: str, max_samples: int, known: list[tuple[str, str]]
    ) -> BatchResult:
        return process_batch(self.plan, records, persist_path, max_samples, known, self.storage)

    def merge(
        self, persists: list[str], dims: list[str], context: SegmentContext, max_rows: int
    ) -> list[SegmentDescriptor]:
        return build_segments(self.spark, self.plan, persists, dims, context, max_rows)
