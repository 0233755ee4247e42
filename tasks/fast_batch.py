"""The common micro-batch without Spark SQL's row pipeline: JSON records are parsed, timed,
typed and rolled up inside Spark's Python workers (orjson and Arrow), one mapInArrow and no
shuffle, over partition ranges the workers read themselves with librdkafka
(tasks/direct_read.py; `process_direct`) or over Kafka rows from Spark's Kafka source
(`process`); each worker writes its share of the persist as one Parquet file per segment
interval, so that a sequence of such persists is merged interval by interval
(tasks/segments.py build_segments_by_interval).

It yields the very persist, counts and samples that tasks/pipeline.py's Spark pipeline does, at
a fraction of the CPU, for the plans and values where that can be guaranteed:

- up front, by the plan (`supports`): JSON input without flattenSpec; an iso, millis, posix or
  auto timestampSpec without missingValue; no transforms and no filter; declared string, long
  and double dimensions; count and long/double Sum, Min and Max metrics; a fixed-length (or
  no) query granularity;
- while running, by value: a record the Spark pipeline might read differently (a JSON number
  with a fraction for a string dimension, a number written as text for a metric, a timestamp
  outside the canonical `YYYY-MM-DDTHH:MM:SS[.ffffff][Z|±HH:MM]` form, a record orjson rejects that
  starts like an object other than by ending too soon, bytes that are not UTF-8) makes the worker
  give up, and the whole batch is run by the Spark pipeline instead (`process` answers None).

tests/integration/test_fast_batch.py runs both on the same records and compares the persists.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks import direct_read, granularity, python_worker
from tasks.json_values import CONVERT, GiveUp, time_reader
from tasks.pipeline import BatchResult, RowPlan, RowStats, process_batch
from tasks.reader import KafkaBatch

log = logging.getLogger(__name__)

TIME_FORMATS = {"iso", "millis", "posix", "auto"}
DIMENSION_TYPES = {"string": "string", "long": "int64", "double": "float64"}
METRIC_OPS = {"Sum": "sum", "Min": "min", "Max": "max"}
METRIC_TYPES = {"long": "int64", "double": "float64"}
# what each worker answers: its counts, its samples, or why it gave up
RESULT_FIELDS = (
    ("kind", "string"),
    ("partition", "int32"),
    ("offset", "int64"),
    ("input", "string"),
    ("message", "string"),
    ("processed", "int64"),
    ("unparseable", "int64"),
    ("thrownAway", "int64"),
    ("processedBytes", "int64"),
)
_SPARK_TYPES = {"string": "string", "int32": "int", "int64": "long"}
RESULT_SCHEMA = ", ".join(f"{name} {_SPARK_TYPES[kind]}" for name, kind in RESULT_FIELDS)


@dataclass(frozen=True)
class Metric:
    name: str
    op: str  # count, sum, min, max
    kind: str  # int64, float64
    field: str | None


@dataclass(frozen=True)
class WorkerPlan:
    """What a Python worker needs, as plain values (it is pickled to every worker)."""

    time_column: str
    time_format: str
    query_ms: int | None  # None: query granularity none
    dimensions: tuple[tuple[str, str], ...]  # (name, Arrow type)
    metrics: tuple[Metric, ...]
    rollup: bool
    min_ms: int | None
    max_ms: int | None
    segment_granularity: str
    persist_path: str
    max_samples: int


def supports(plan: RowPlan) -> bool:
    """Whether this path can run the plan (values may still send a batch to Spark)."""
    schema = plan.schema
    extra = plan.input_format.model_extra or {}
    dims = plan.declared_dimensions()
    return (
        plan.input_format.type == "json"
        and not extra.get("flattenSpec")
        and schema.timestampSpec.format.lower() in TIME_FORMATS
        and schema.timestampSpec.missingValue is None
        and not schema.transformSpec.transforms
        and schema.transformSpec.filter is None
        and bool(dims)
        and all(kind in DIMENSION_TYPES and name != "__time" for name, kind in dims)
        and all(_metric(m) is not None for m in schema.metricsSpec)
        and (plan.query_granularity == "none" or plan.query_granularity in granularity.FIXED_MS)
    )


def _metric(aggregator: Any) -> Metric | None:
    if aggregator.type == "count":
        return Metric(aggregator.name, "count", "int64", None)
    for prefix, kind in METRIC_TYPES.items():
        for op, function in METRIC_OPS.items():
            if aggregator.type == f"{prefix}{op}" and aggregator.fieldName:
                return Metric(aggregator.name, function, kind, aggregator.fieldName)
    return None


def worker_plan(plan: RowPlan, persist_path: str, max_samples: int) -> WorkerPlan:
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
    )


def process(plan: RowPlan, frame: Any, persist_path: str, max_samples: int) -> BatchResult | None:
    """Run one batch of Kafka rows here; None when a worker gave up (what other workers wrote
    is left for the Spark pipeline's write to the same persist path to overwrite)."""
    work = worker_plan(plan, persist_path, max_samples)
    rows = (
        frame.select("value", "partition", "offset")
        .mapInArrow(_worker(work), RESULT_SCHEMA)
        .collect()
    )
    return _outcome(plan, work, rows)


def process_direct(
    plan: RowPlan, batch: KafkaBatch, persist_path: str, max_samples: int
) -> BatchResult | None:
    """Run one batch here, its ranges read by the workers themselves (tasks/direct_read.py);
    None when a worker gave up on a value; ReadGiveUp when one could not read its range as
    the Kafka source would (the persist path may hold other workers' files)."""
    work = worker_plan(plan, persist_path, max_samples)
    ranges = direct_read.ranges(batch.io.topic, batch.start, batch.end)
    if not ranges:
        write_empty(work)
        return BatchResult(RowStats(), [], plan.declared_dimensions())
    config = direct_read.consumer_config(batch.io.consumerProperties)
    direct_read.check(config)
    reading = direct_read.Reading(config, ranges)
    rows = (
        direct_read.ranges_frame(batch.spark, ranges)
        .mapInArrow(_worker(work, reading), RESULT_SCHEMA)
        .collect()
    )
    unread = [r["message"] for r in rows if r["kind"] == "readGiveUp"]
    if unread:
        raise direct_read.ReadGiveUp(unread[0])
    return _outcome(plan, work, rows)


def _outcome(plan: RowPlan, work: WorkerPlan, rows: list[Any]) -> BatchResult | None:
    """The batch's counts and samples from the workers' result rows; None if one gave up."""
    gave_up = [r["message"] for r in rows if r["kind"] == "giveUp"]
    if gave_up:
        log.info("batch handed to the Spark pipeline: %s", gave_up[0])
        return None
    stats = RowStats()
    for row in rows:
        if row["kind"] == "stats":
            stats.add(
                RowStats(
                    processed=row["processed"],
                    processedBytes=row["processedBytes"],
                    unparseable=row["unparseable"],
                    thrownAway=row["thrownAway"],
                )
            )
    if not any(Path(work.persist_path).glob("*.parquet")):  # no Kafka partition had a row
        write_empty(work)
    samples = [
        {name: r[name] for name in ("partition", "offset", "input", "message")}
        for r in rows
        if r["kind"] == "sample"
    ]
    _first(samples, work.max_samples)
    return BatchResult(stats, samples, plan.declared_dimensions())


def persist_batch(
    plan: RowPlan,
    source: KafkaBatch | Any,
    persist_path: str,
    max_samples: int,
    known_dims: list[tuple[str, str]],
) -> tuple[BatchResult, bool]:
    """One micro-batch into a persist: by this path where it can, else by the Spark pipeline;
    and whether this path wrote it (its files are then split by interval). `source` is a
    task's KafkaBatch (read by the workers where they can, else by Spark's Kafka source) or a
    DataFrame of Kafka rows."""

    def frame() -> Any:
        return source.frame() if isinstance(source, KafkaBatch) else source

    result = _by_workers(plan, source, frame, persist_path, max_samples) if supports(plan) else None
    if result is not None:
        return result, True
    return process_batch(plan, frame(), persist_path, max_samples, known_dims), False


def _by_workers(
    plan: RowPlan,
    source: KafkaBatch | Any,
    frame: Callable[[], Any],
    persist_path: str,
    max_samples: int,
) -> BatchResult | None:
    """The batch by this path: read by the workers themselves where they can, else from
    Spark's Kafka source; None when a worker gave up on a value."""
    if isinstance(source, KafkaBatch):
        try:
            return process_direct(plan, source, persist_path, max_samples)
        except direct_read.ReadGiveUp as exc:
            if not isinstance(exc, direct_read.RefusedSettings):  # said once, when found
                log.info("batch read by Spark's Kafka source: %s", exc)
            if Path(persist_path).exists():  # what other workers wrote must not stay
                shutil.rmtree(persist_path)
    return process(plan, frame(), persist_path, max_samples)


# ---- in the Python worker -------------------------------------------------------------------


def _worker(
    work: WorkerPlan, reading: direct_read.Reading | None = None
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function: over Kafka rows (value, partition, offset), or with `reading`
    over the indexes of ranges that it reads itself (tasks/direct_read.py)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import gc

        import pyarrow as pa

        python_worker.settle()

        # the rows are a few hundred thousand small lists kept to the end: a cyclic collection
        # would walk them again and again for nothing (a quarter of the loop's time)
        collecting = gc.isenabled()
        gc.disable()
        if reading is not None:
            batches = direct_read.read_ranges(reading, batches)
        try:
            yield from _run(work, batches)
        except (GiveUp, direct_read.ReadGiveUp) as exc:
            kind = "giveUp" if isinstance(exc, GiveUp) else "readGiveUp"
            yield pa.RecordBatch.from_pylist(
                [_result(kind, message=str(exc))], schema=_result_schema()
            )
        finally:
            if collecting:
                gc.enable()

    return run


def _result_schema() -> Any:
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in RESULT_FIELDS])


def _result(kind: str, **fields: Any) -> dict[str, Any]:
    counts = ("processed", "unparseable", "thrownAway", "processedBytes")
    return {"kind": kind, **{name: 0 for name in counts}, **fields}


def _run(work: WorkerPlan, batches: Iterator[Any]) -> Iterator[Any]:
    import orjson
    import pyarrow as pa
    import pyarrow.compute as pc

    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    read_time = time_reader(work.time_format)
    fields = [(name, CONVERT[kind]) for name, kind in work.dimensions]
    fields += [(m.field, CONVERT[m.kind]) for m in work.metrics if m.field is not None]
    rows: list[list[Any]] = []  # each row's field values, then its time
    counts = {"processed": 0, "unparseable": 0, "thrownAway": 0, "processedBytes": 0}
    samples: list[dict[str, Any]] = []
    query, low, high = work.query_ms, work.min_ms, work.max_ms
    column = work.time_column

    def unparseable(batch: Any, index: int, raw: bytes | None, message: str) -> None:
        """Count the row; keep it as a sample while it is among the first by partition and
        offset (rows need not arrive in that order)."""
        counts["unparseable"] += 1
        if work.max_samples <= 0:
            return
        try:
            text = "" if raw is None else raw.decode()[:1024]
        except UnicodeDecodeError as exc:
            raise GiveUp("a record that is not UTF-8") from exc
        partition, offset = _where(batch, index)
        samples.append(
            _result("sample", partition=partition, offset=offset, input=text, message=message)
        )
        if len(samples) > 2 * work.max_samples:
            _first(samples, work.max_samples)

    for batch in batches:
        values = batch.column(0)
        counts["processedBytes"] += pc.sum(pc.binary_length(values)).as_py() or 0
        for index, raw in enumerate(values.to_pylist()):
            if raw is None or not raw.lstrip(b" ").startswith(b"{"):
                unparseable(batch, index, raw, "Unable to parse row")
                continue
            try:
                record = loads(raw)
            except decode_error as exc:
                if _cut_short(exc, raw):
                    unparseable(batch, index, raw, "Unable to parse row")
                    continue
                where = "partition {} offset {}".format(*_where(batch, index))
                raise GiveUp(f"{where}: orjson: {exc}") from exc
            stamp = record.get(column)
            if stamp is None:
                unparseable(batch, index, raw, f"Timestamp[{column}=null] is unparseable")
                continue
            try:
                millis = read_time(stamp)
                row = [convert(record.get(name)) for name, convert in fields]
            except GiveUp as exc:
                where = "partition {} offset {}".format(*_where(batch, index))
                raise GiveUp(f"{where}: {exc}") from exc
            if (low is not None and millis < low) or (high is not None and millis > high):
                counts["thrownAway"] += 1
                continue
            row.append(millis if query is None else millis // query * query)
            rows.append(row)
    counts["processed"] = len(rows)
    transposed = list(zip(*rows, strict=True)) if rows else [() for _ in range(len(fields) + 1)]
    _write(work, [transposed[-1], *transposed[:-1]], len(rows))
    _first(samples, work.max_samples)
    yield pa.RecordBatch.from_pylist(
        [_result("stats", **counts), *samples], schema=_result_schema()
    )


def _cut_short(error: Any, raw: bytes) -> bool:
    """Whether orjson read all of `raw` as strict JSON and found it ended inside the object.
    Spark's more lenient parser (single quotes, NaN) reads everything strict JSON does, so it
    cannot finish the object either: the record is unparseable on both paths. Any other
    rejection (or another orjson's wording) is left to Spark's judgement."""
    try:
        length = len(raw.decode())
    except UnicodeDecodeError:
        return False
    return bool(error.msg == "unexpected end of data" and error.pos == length)


def _where(batch: Any, index: int) -> tuple[int, int]:
    """The Kafka partition and offset of a batch's row."""
    return batch.column(1)[index].as_py(), batch.column(2)[index].as_py()


def _first(samples: list[dict[str, Any]], limit: int) -> None:
    samples.sort(key=lambda sample: (sample["partition"], sample["offset"]))
    del samples[limit:]


def _write(work: WorkerPlan, columns: list[Any], rows: int) -> None:
    """The worker's rows, rolled up per the plan, as one Parquet file per segment interval,
    named `<interval start>.<Spark partition>.parquet` (a retried task overwrites its own):
    tasks/segments.py merges a sequence's files interval by interval."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark import TaskContext

    table = persist_table(work, columns, rows)
    if table.num_rows == 0:
        return
    times = table["__time"].to_numpy()
    if work.segment_granularity in granularity.FIXED_MS:
        size = granularity.FIXED_MS[work.segment_granularity]
        intervals = pa.array(times // size * size)
    else:
        listed = times.tolist()
        starts = {t: granularity.bucket_start(t, work.segment_granularity) for t in set(listed)}
        intervals = pa.array([starts[t] for t in listed], pa.int64())
    order = pc.sort_indices(intervals)
    table, intervals = table.take(order), pc.take(intervals, order)
    runs = pc.run_end_encode(intervals)
    context = TaskContext.get()
    part = 0 if context is None else context.partitionId()
    begin = 0
    for start, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True):
        _write_file(table.slice(begin, end - begin), work.persist_path, f"{start}.{part:05d}")
        begin = end


def write_empty(work: WorkerPlan) -> None:
    """A persist without rows still has a file, for Spark to read its schema from."""
    _write_file(persist_table(work, [], 0), work.persist_path, "empty")


def _write_file(table: Any, directory: str, name: str) -> None:
    import pyarrow.parquet as pq

    Path(directory).mkdir(parents=True, exist_ok=True)
    pq.write_table(table, f"{directory}/{name}.parquet", compression="snappy")


def persist_table(work: WorkerPlan, columns: list[Any], rows: int) -> Any:
    """Rows as columns ([times, dimensions..., metric inputs...]) -> the persist's table."""
    import pyarrow as pa

    names = [name for name, _ in work.dimensions]
    data: dict[str, Any] = {"__time": pa.array(columns[0] if columns else [], pa.int64())}
    for index, (name, kind) in enumerate(work.dimensions, 1):
        data[name] = pa.array(columns[index] if columns else [], getattr(pa, kind)())
    aggregations = []
    inputs = len(work.dimensions) + 1
    for metric in work.metrics:
        if metric.op == "count":
            data[metric.name] = pa.array([1] * rows, pa.int64())
            aggregations.append((metric.name, "sum", metric.name))
            continue
        source = f"__in{inputs}"
        data[source] = pa.array(columns[inputs] if columns else [], getattr(pa, metric.kind)())
        inputs += 1
        aggregations.append((source, metric.op, metric.name))
    table = pa.table(data)
    keys = ["__time", *names]
    if work.rollup:
        return rollup(table, keys, aggregations)
    return table.rename_columns([*keys, *(name for _, _, name in aggregations)])


def rollup(table: Any, keys: list[str], aggregations: list[tuple[str, str, str]]) -> Any:
    """Group by time and dimensions; each metric's aggregation under the metric's name."""
    import pyarrow as pa

    grouped = table.group_by(keys, use_threads=False).aggregate(
        [(source, op) for source, op, _ in aggregations]
    )
    result = {key: grouped[key] for key in keys}
    for source, op, name in aggregations:
        column = grouped[f"{source}_{op}"]
        result[name] = column.cast(table.schema.field(source).type)
    return pa.table(result)
