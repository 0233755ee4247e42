"""The Python-worker engine: a batch parsed, typed, rolled up and written inside Spark's Python
workers (tasks/reading/worker_batch.py) in one mapInArrow with no shuffle, its ranges read by the
workers themselves with librdkafka (tasks/reading/direct_read.py) or handed to them as rows of
Spark's Kafka source; a sequence's persists are merged interval by interval, again in the workers.

It yields the very persist, counts and samples the Spark SQL engine does, at a fraction of the
CPU, for the plans and values where that can be guaranteed: `unsupported` names what of a plan
it does not cover; a value it cannot promise to read alike makes `persist` raise FallBack.
tests/integration/test_python_worker_engine.py runs both engines on the same records and compares.
"""

from __future__ import annotations

from typing import Any

from tasks import granularity
from tasks.output.segments import SegmentContext, build_segments_by_interval
from tasks.protocol import SegmentDescriptor
from tasks.reading import direct_read
from tasks.reading.combiner import JobCombiner
from tasks.reading.engines.base import EngineName, FallBack
from tasks.reading.reader import KafkaBatch
from tasks.reading.worker_batch import (
    DIMENSION_TYPES,
    METRIC_OPS,
    METRIC_TYPES,
    RESULT_SCHEMA,
    TIME_FORMATS,
    Metric,
    ResultKind,
    WorkerPlan,
    WorkerResult,
    first_samples,
    worker_function,
    write_empty,
)
from tasks.rows.pipeline import BatchResult, RowPlan, RowStats
from tasks.storage import LOCAL, Storage

INLINE_MERGE_BYTES = 8 * 1024 * 1024  # a shared application's sequences up to this merge inline


def unsupported(plan: RowPlan) -> str | None:
    """What of the plan this engine does not run, None when it runs it all: JSON input without
    flattenSpec; an iso, millis, posix or auto timestampSpec without missingValue; no
    transforms and no filter; declared string, long and double dimensions; count and
    long/double Sum, Min and Max metrics; a fixed-length (or no) query granularity."""
    schema = plan.schema
    extra = plan.input_format.model_extra or {}
    dims = plan.declared_dimensions()
    checks = (
        (plan.input_format.type == "json", f"inputFormat {plan.input_format.type}"),
        (not extra.get("flattenSpec"), "a flattenSpec"),
        (
            schema.timestampSpec.format.lower() in TIME_FORMATS,
            f"timestamp format {schema.timestampSpec.format}",
        ),
        (schema.timestampSpec.missingValue is None, "a timestamp missingValue"),
        (not schema.transformSpec.transforms, "transforms"),
        (schema.transformSpec.filter is None, "a filter"),
        (
            not plan.discovers(),
            "dimensions found in the rows (schemaless, includeAllDimensions, useSchemaDiscovery)",
        ),
        (
            all(kind in DIMENSION_TYPES and name != "__time" for name, kind in dims),
            "a dimension type other than string, long and double",
        ),
        (
            all(_metric(m) is not None for m in schema.metricsSpec),
            "an aggregator other than count and long/double sum, min and max",
        ),
        (
            plan.query_granularity == "none" or plan.query_granularity in granularity.FIXED_MS,
            f"query granularity {plan.query_granularity}",
        ),
    )
    return next((reason for ok, reason in checks if not ok), None)


def _metric(aggregator: Any) -> Metric | None:
    if aggregator.type == "count":
        return Metric(aggregator.name, "count", "int64", None)
    for prefix, kind in METRIC_TYPES.items():
        for op, function in METRIC_OPS.items():
            if aggregator.type == f"{prefix}{op}" and aggregator.fieldName:
                return Metric(aggregator.name, function, kind, aggregator.fieldName)
    return None


def worker_plan(
    plan: RowPlan, persist_path: str, max_samples: int, storage: Storage = LOCAL
) -> WorkerPlan:
    metrics = tuple(m for m in map(_metric, plan.schema.metricsSpec) if m is not None)
    query = plan.query_granularity
    return WorkerPlan(
        time_column=plan.schema.timestampSpec.column,
        time_format=plan.schema.timestampSpec.format.lower(),
        query_ms=None if query == "none" else granularity.FIXED_MS[query],
        dimensions=tuple(
            (name, DIMENSION_TYPES[kind]) for name, kind in plan.declared_dimensions()
        ),
        metrics=metrics,
        rollup=plan.rollup,
        min_ms=plan.min_time_ms,
        max_ms=plan.max_time_ms,
        segment_granularity=plan.segment_granularity,
        persist_path=persist_path,
        max_samples=max_samples,
        storage=storage,
    )


class PythonWorkerEngine:
    name = EngineName.PYTHON_WORKERS

    def __init__(
        self,
        spark: Any,
        plan: RowPlan,
        storage: Storage = LOCAL,
        combiner: JobCombiner | None = None,
    ) -> None:
        self.spark = spark
        self.plan = plan
        self.storage = storage  # where persists are
        self.combiner = combiner  # runs the direct reads of many tasks' batches in one job

    def read(self, batch: KafkaBatch) -> direct_read.Reading:
        """The batch's ranges and consumer settings, for the workers to read with librdkafka;
        RefusedSettings (a ReadGiveUp) for settings librdkafka does not take."""
        config = direct_read.consumer_config(batch.io.consumerProperties)
        direct_read.check(config)
        return direct_read.Reading(
            config, direct_read.ranges(batch.io.topic, batch.start, batch.end)
        )

    def persist(
        self, records: Any, persist_path: str, max_samples: int, known: list[tuple[str, str]]
    ) -> BatchResult:
        """`records`: a Reading (the workers read its ranges; ReadGiveUp when one cannot read
        its range as the Kafka source would), or a DataFrame of Kafka rows. FallBack when a
        worker gave up on a value. Either way the persist path may hold other workers' files."""
        work = worker_plan(self.plan, persist_path, max_samples, self.storage)
        if isinstance(records, direct_read.Reading):
            if not records.ranges:
                write_empty(work)
                return BatchResult(RowStats(), [], self.plan.declared_dimensions())
            if self.combiner is not None:
                rows = self.combiner.collect(work, records)
            else:
                frame = direct_read.ranges_frame(self.spark, records.ranges)
                rows = frame.mapInArrow(worker_function(work, records), RESULT_SCHEMA).collect()
            results = [WorkerResult.of(r) for r in rows]
            unread = [r.message for r in results if r.kind is ResultKind.READ_GIVE_UP]
            if unread:
                raise direct_read.ReadGiveUp(str(unread[0]))
        else:
            rows = (
                records.select("value", "partition", "offset")
                .mapInArrow(worker_function(work), RESULT_SCHEMA)
                .collect()
            )
            results = [WorkerResult.of(r) for r in rows]
        return self._outcome(work, results)

    def _outcome(self, work: WorkerPlan, results: list[WorkerResult]) -> BatchResult:
        """The batch's counts and samples from the workers' result rows."""
        gave_up = [r.message for r in results if r.kind is ResultKind.GIVE_UP]
        if gave_up:
            raise FallBack(str(gave_up[0]))
        stats = RowStats()
        for result in results:
            if result.kind is ResultKind.STATS:
                stats.add(
                    RowStats(
                        processed=result.processed,
                        processedBytes=result.processedBytes,
                        unparseable=result.unparseable,
                        thrownAway=result.thrownAway,
                    )
                )
        if not work.storage.files(work.persist_path):  # no Kafka partition had a row
            write_empty(work)
        samples = [r.sample() for r in results if r.kind is ResultKind.SAMPLE]
        first_samples(samples, work.max_samples)
        return BatchResult(stats, samples, self.plan.declared_dimensions())

    def merge(
        self, persists: list[str], dims: list[str], context: SegmentContext, max_rows: int
    ) -> list[SegmentDescriptor]:
        """Persists this engine wrote (split by interval) into segments, interval by interval.
        In a shared application a small sequence is merged on the task's own thread: a Spark
        job for a few thousand rows costs more than the merge (tasks/output/segments.py)."""
        inline = INLINE_MERGE_BYTES if self.combiner is not None else 0
        return build_segments_by_interval(
            self.spark, self.plan, persists, dims, context, max_rows, inline
        )
