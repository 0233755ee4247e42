"""Which engine runs a batch, and which merges a sequence: decided here and nowhere else.

A batch goes to the Python-worker engine unless one of these sends it on:

1. The plan: the Python-worker engine runs a subset of plans (python_workers.unsupported
   names what it lacks); any other plan's batches all go to the Spark SQL engine.
2. The read: the workers read the batch's ranges with librdkafka unless that cannot promise
   what Spark's Kafka source gives (direct_read.ReadGiveUp: consumer properties librdkafka
   refuses, offsets gone from the log, a consumer error, no progress for a while); then
   Spark's Kafka source reads the batch and hands its rows to the same workers.
3. A value: a record the workers cannot promise to read as Spark SQL does (FallBack) sends
   the whole batch to the Spark SQL engine.

A sequence is merged by the Python-worker engine when that engine wrote every one of its
persists (they are split by segment interval), else by the Spark SQL engine, which reads
persists of either kind.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from tasks.output.segments import SegmentContext
from tasks.protocol import SegmentDescriptor
from tasks.reading.combiner import JobCombiner
from tasks.reading.direct_read import ReadGiveUp, RefusedSettings
from tasks.reading.engines.base import BatchEngine, EngineName, FallBack
from tasks.reading.engines.python_workers import PythonWorkerEngine, unsupported
from tasks.reading.engines.spark_sql import SparkSqlEngine
from tasks.reading.reader import KafkaBatch
from tasks.rows.pipeline import BatchResult, RowPlan
from tasks.storage import LOCAL, Storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Persisted:
    result: BatchResult
    engine: EngineName  # which engine wrote the persist
    direct: bool = False  # its records were read by the workers' librdkafka consumers


class Engines:
    def __init__(
        self,
        spark: Any,
        plan: RowPlan,
        storage: Storage = LOCAL,
        combiner: JobCombiner | None = None,
    ) -> None:
        self.storage = storage  # where persists are written
        self.workers = PythonWorkerEngine(spark, plan, storage, combiner)
        self.sql = SparkSqlEngine(spark, plan, storage)
        self.unsupported = unsupported(plan)  # (1)

    def persist(
        self,
        batch: KafkaBatch,
        persist_path: str,
        max_samples: int,
        known: list[tuple[str, str]],
    ) -> Persisted:
        """One micro-batch into a persist, by the first engine that can run it."""
        if self.unsupported is None:
            try:
                direct = True
                try:
                    records = self.workers.read(batch)
                    result = self.workers.persist(records, persist_path, max_samples, known)
                except ReadGiveUp as exc:  # (2)
                    direct = False
                    if not isinstance(exc, RefusedSettings):  # (said once, when found)
                        log.info("batch read by Spark's Kafka source: %s", exc)
                    self.storage.delete_dir(persist_path)
                    records = self.sql.read(batch)
                    result = self.workers.persist(records, persist_path, max_samples, known)
                return Persisted(result, EngineName.PYTHON_WORKERS, direct)
            except FallBack as exc:  # (3)
                log.info("batch handed to the Spark SQL engine: %s", exc)
                # what some workers wrote before the batch was handed on must not stay
                self.storage.delete_dir(persist_path)
        records = self.sql.read(batch)
        result = self.sql.persist(records, persist_path, max_samples, known)
        return Persisted(result, EngineName.SPARK_SQL)

    def merger(self, written_by: Collection[EngineName]) -> BatchEngine:
        """The engine that merges a sequence whose persists these engines wrote."""
        only_workers = set(written_by) <= {EngineName.PYTHON_WORKERS}
        return self.workers if only_workers else self.sql

    def merge(
        self,
        persists: list[str],
        written_by: Collection[EngineName],
        dims: list[str],
        context: SegmentContext,
        max_rows: int,
    ) -> list[SegmentDescriptor]:
        return self.merger(written_by).merge(persists, dims, context, max_rows)
