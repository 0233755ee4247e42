"""The Python-worker engine's work inside Spark's Python workers (tasks/reading/engines/
python_workers.py runs it): JSON records are parsed, timed, typed and rolled up with orjson and
Arrow, one mapInArrow and no shuffle, over partition ranges the workers read themselves with
librdkafka (tasks/reading/direct_read.py) or over Kafka rows from Spark's Kafka source; each worker
writes its share of the persist as one Parquet file per segment interval, so that a sequence of
such persists is merged interval by interval (tasks/output/segments.py build_segments_by_interval).

A record the Spark SQL engine might read differently (a JSON number with a fraction for a
string dimension, a number written as text for a metric, a timestamp outside the canonical
`YYYY-MM-DDTHH:MM:SS[.ffffff][Z|±HH:MM]` form, a record orjson rejects that starts like an object
other than by ending too soon, bytes that are not UTF-8) makes the worker give up: it answers a
`giveUp` row instead of its counts, and the batch goes to the Spark SQL engine
(tasks/reading/engines/choice.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tasks import granularity
from tasks.reading import arrow_rows, direct_read, python_worker
from tasks.rows.json_values import CONVERT, GiveUp, time_reader
from tasks.storage import LOCAL, Storage

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


class ResultKind(StrEnum):
    """What a worker's result row is: its counts, a sampled unparseable record, or why it
    gave up (on a value: the batch goes to the Spark SQL engine; on a read: the task retries)."""

    STATS = "stats"
    SAMPLE = "sample"
    GIVE_UP = "giveUp"
    READ_GIVE_UP = "readGiveUp"


@dataclass(frozen=True)
class WorkerResult:
    """A worker's result row (RESULT_FIELDS), as the driver reads it back."""

    kind: ResultKind
    partition: int | None
    offset: int | None
    input: str | None
    message: str | None
    processed: int
    unparseable: int
    thrownAway: int
    processedBytes: int

    @classmethod
    def of(cls, row: Any) -> WorkerResult:
        """From a collected Spark Row (or a dict) of RESULT_SCHEMA."""
        values = {name: row[name] for name, _ in RESULT_FIELDS}
        return cls(**{**values, "kind": ResultKind(values["kind"])})

    def sample(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "offset": self.offset,
            "input": self.input,
            "message": self.message,
        }


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
    storage: Storage = LOCAL  # where persist_path is
    arrow: bool = True  # chunks Arrow reads as the loop does are read by Arrow (arrow_rows.py)


def worker_function(
    work: WorkerPlan, reading: direct_read.Reading | None = None
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function: over Kafka rows (value, partition, offset), or with `reading`
    over the indexes of ranges that it reads itself (tasks/reading/direct_read.py)."""

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
            kind = ResultKind.GIVE_UP if isinstance(exc, GiveUp) else ResultKind.READ_GIVE_UP
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


def _result(kind: ResultKind, **fields: Any) -> dict[str, Any]:
    counts = ("processed", "unparseable", "thrownAway", "processedBytes")
    return {"kind": str(kind), **{name: 0 for name in counts}, **fields}


def _run(work: WorkerPlan, batches: Iterator[Any]) -> Iterator[Any]:
    import orjson
    import pyarrow as pa
    import pyarrow.compute as pc

    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    read_time = time_reader(work.time_format)
    rows: list[list[Any]] = []  # each row's field values, then its time
    counts = {"processed": 0, "unparseable": 0, "thrownAway": 0, "processedBytes": 0}
    samples: list[dict[str, Any]] = []
    query, low, high = work.query_ms, work.min_ms, work.max_ms
    column = work.time_column
    typed = _typed(work)
    fields = [(name, CONVERT[kind]) for name, kind in typed]
    fast = arrow_rows.arrow_plan(column, work.time_format, typed) if work.arrow else None
    chunks: list[list[Any]] = []  # the fast path's columns, chunk by chunk

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
            _result(
                ResultKind.SAMPLE, partition=partition, offset=offset, input=text, message=message
            )
        )
        if len(samples) > 2 * work.max_samples:
            first_samples(samples, work.max_samples)

    for batch in batches:
        values = batch.column(0)
        counts["processedBytes"] += pc.sum(pc.binary_length(values)).as_py() or 0
        if fast is not None and (chunk := arrow_rows.read_chunk(fast, values)) is not None:
            for index in chunk.untimed:
                message = f"Timestamp[{column}=null] is unparseable"
                unparseable(batch, index, values[index].as_py(), message)
            chunks.append(_kept(chunk, low, high, query, counts))
            continue
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
    columns = _columns(rows, chunks, typed)
    counts["processed"] = len(columns[0])
    _write(work, columns, counts["processed"])
    first_samples(samples, work.max_samples)
    yield pa.RecordBatch.from_pylist(
        [_result(ResultKind.STATS, **counts), *samples], schema=_result_schema()
    )


def _typed(work: WorkerPlan) -> list[tuple[str, str]]:
    """The fields a record's values are read from, with their Arrow types: the dimensions,
    then the metrics' inputs."""
    typed = [(name, kind) for name, kind in work.dimensions]
    return typed + [(m.field, m.kind) for m in work.metrics if m.field is not None]


def _columns(rows: list[list[Any]], chunks: list[list[Any]], typed: list[Any]) -> list[Any]:
    """The loop's rows (each its fields, then its time) and the fast path's chunks as the
    persist's columns: times, then the fields; Python sequences when there are no chunks."""
    import pyarrow as pa

    transposed = list(zip(*rows, strict=True)) if rows else [() for _ in range(len(typed) + 1)]
    columns: list[Any] = [transposed[-1], *transposed[:-1]]
    if not chunks:
        return columns
    types = [pa.int64(), *(getattr(pa, kind)() for _, kind in typed)]
    return [
        pa.chunked_array([*(c[i] for c in chunks), pa.array(columns[i], kind)], kind)
        for i, kind in enumerate(types)
    ]


def _kept(
    chunk: arrow_rows.Chunk, low: int | None, high: int | None, query: int | None, counts: Any
) -> list[Any]:
    """A fast chunk's columns without the rows outside [low, high] (counted thrown away), its
    times floored to the query granularity, as the loop keeps them."""
    import numpy as np
    import pyarrow as pa

    millis = chunk.columns[0]
    keep = np.ones(len(millis), bool)
    if low is not None:
        keep &= millis >= low
    if high is not None:
        keep &= millis <= high
    counts["thrownAway"] += int(len(keep) - keep.sum())
    millis = millis[keep]
    if query is not None:
        millis = millis // query * query
    mask = pa.array(keep)
    fields = (column.filter(mask).combine_chunks() for column in chunk.columns[1:])
    return [pa.array(millis, pa.int64()), *fields]


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


def first_samples(samples: list[dict[str, Any]], limit: int) -> None:
    samples.sort(key=lambda sample: (sample["partition"], sample["offset"]))
    del samples[limit:]


def _write(work: WorkerPlan, columns: list[Any], rows: int) -> None:
    """The worker's rows, rolled up per the plan, as one Parquet file per segment interval,
    named `<interval start>.<Spark partition>.parquet` (a retried task overwrites its own):
    tasks/output/segments.py merges a sequence's files interval by interval."""
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
        _write_file(work, table.slice(begin, end - begin), f"{start}.{part:05d}")
        begin = end


def write_empty(work: WorkerPlan) -> None:
    """A persist without rows still has a file, for Spark to read its schema from."""
    _write_file(work, persist_table(work, [], 0), "empty")


def _write_file(work: WorkerPlan, table: Any, name: str) -> None:
    import pyarrow.parquet as pq

    work.storage.make_dirs(work.persist_path)
    path = f"{work.persist_path}/{name}.parquet"
    pq.write_table(table, path, compression="snappy", filesystem=work.storage.filesystem())


def persist_table(work: WorkerPlan, columns: list[Any], rows: int) -> Any:
    """Rows as columns ([times, dimensions..., metric inputs...]) -> the persist's table."""
    import pyarrow as pa

    def column(index: int, kind: Any) -> Any:
        values = columns[index] if columns else []
        return values if isinstance(values, pa.ChunkedArray) else pa.array(values, kind)

    names = [name for name, _ in work.dimensions]
    data: dict[str, Any] = {"__time": column(0, pa.int64())}
    for index, (name, kind) in enumerate(work.dimensions, 1):
        data[name] = column(index, getattr(pa, kind)())
    aggregations = []
    inputs = len(work.dimensions) + 1
    for metric in work.metrics:
        if metric.op == "count":
            data[metric.name] = pa.array([1] * rows, pa.int64())
            aggregations.append((metric.name, "sum", metric.name))
            continue
        source = f"__in{inputs}"
        data[source] = column(inputs, getattr(pa, metric.kind)())
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
