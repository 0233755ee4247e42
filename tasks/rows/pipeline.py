"""The row pipeline of one micro-batch, all in Spark: parse, timestamp, filter, dimensions,
metrics, query granularity, rollup; rows that fail are counted and sampled; the result is
written as an intermediate persist (Parquet) under the task's work directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tasks import granularity
from tasks.rows import aggregators, expressions, filters, parsing, timestamps
from tasks.rows.columns import cols
from tasks.spec.data_schema import DataSchema
from tasks.spec.io_config import InputFormat
from tasks.storage import LOCAL, Storage, write_parquet

OK, UNPARSEABLE, THROWN_AWAY = "ok", "unparseable", "thrownAway"
_SPARK_TYPES = {"string": "string", "long": "bigint", "float": "float", "double": "double"}


@dataclass(frozen=True)
class RowPlan:
    schema: DataSchema
    input_format: InputFormat
    min_time_ms: int | None = None
    max_time_ms: int | None = None

    @property
    def rollup(self) -> bool:
        return self.schema.granularitySpec.rollup

    @property
    def query_granularity(self) -> str:
        return granularity.name_of(self.schema.granularitySpec.queryGranularity) or "none"

    @property
    def segment_granularity(self) -> str:
        return granularity.name_of(self.schema.granularitySpec.segmentGranularity) or "day"

    @property
    def metric_names(self) -> list[str]:
        return [m.name for m in self.schema.metricsSpec]

    def declared_dimensions(self) -> list[tuple[str, str]]:
        dims = self.schema.dimensionsSpec.dimensions
        return [(d, "string") if isinstance(d, str) else (d.name, d.type) for d in dims]

    def transform_column(self, name: str) -> str | None:
        for index, transform in enumerate(self.schema.transformSpec.transforms):
            if transform.name == name:
                return f"__tf{index}"
        return None

    def field(self, name: str) -> Any:
        """A field's string column: a transform's output if one has the name, else the input."""
        from pyspark.sql import functions as F

        column = self.transform_column(name)
        return F.col(column) if column is not None else _input(name)

    def discovers(self) -> bool:
        """Whether dimensions are found in the rows: none declared, or includeAllDimensions
        or useSchemaDiscovery (then after the declared ones)."""
        dims = self.schema.dimensionsSpec
        return not dims.dimensions or dims.includeAllDimensions or dims.useSchemaDiscovery

    def schemaless_exclusions(self) -> set[str]:
        metric_inputs = {m.fieldName for m in self.schema.metricsSpec if m.fieldName}
        return {
            self.schema.timestampSpec.column,
            *metric_inputs,
            *self.schema.dimensionsSpec.dimensionExclusions,
            *self.metric_names,
        }


@dataclass
class RowStats:
    processed: int = 0
    processedBytes: int = 0
    processedWithError: int = 0
    unparseable: int = 0
    thrownAway: int = 0

    def add(self, other: RowStats) -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass
class BatchResult:
    stats: RowStats
    samples: list[dict[str, Any]] = field(default_factory=list)
    dimensions: list[tuple[str, str]] = field(default_factory=list)


def _input(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("__fields").getItem(name)


def _expression_input(name: str) -> Any:
    """What an expression sees: input fields, and __time as the row's epoch millis."""
    from pyspark.sql import functions as F

    return F.col("__ts") if name == "__time" else _input(name)


def with_transforms(plan: RowPlan, base: Any) -> Any:
    """Add each transform as a string column; a transform named __time replaces the time."""
    transforms = plan.schema.transformSpec.transforms
    timed = None
    for index, transform in enumerate(transforms):
        column = expressions.compile_expression(transform.expression, _expression_input)
        data_type = base.select(column).schema.fields[0].dataType
        base = base.withColumn(f"__tf{index}", expressions.render(column, data_type))
        if transform.name == "__time":
            timed = column
    if timed is not None:
        base = base.withColumn("__ts", timed.try_cast("long"))
    return base


def _typed(plan: RowPlan, name: str, kind: str) -> Any:
    value = plan.field(name)
    return value if kind == "string" else value.try_cast(_SPARK_TYPES[kind])


def _error_flag(plan: RowPlan, dims: list[tuple[str, str]]) -> Any:
    """A row with a value that does not fit its declared type: ingested, counted as error."""
    from pyspark.sql import functions as F

    flag = F.lit(False)
    checks = [(name, _SPARK_TYPES[kind]) for name, kind in dims if kind != "string"]
    checks += [
        (m.fieldName, aggregators.value_type(m))
        for m in plan.schema.metricsSpec
        if m.fieldName and aggregators.value_type(m) != "string"
    ]
    for name, spark_type in checks:
        value = plan.field(name)
        flag = flag | (value.isNotNull() & value.try_cast(spark_type).isNull())
    return flag


def _status(plan: RowPlan) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    keep = F.lit(True)
    if plan.schema.transformSpec.filter is not None:
        keep = filters.to_column(plan.schema.transformSpec.filter, plan.field)
    if plan.min_time_ms is not None:
        keep = keep & (F.col("__ts") >= F.lit(plan.min_time_ms))
    if plan.max_time_ms is not None:
        keep = keep & (F.col("__ts") <= F.lit(plan.max_time_ms))
    status = (
        F.when(F.col("__fields").isNull(), F.lit(UNPARSEABLE))
        .when(F.col("__ts").isNull(), F.lit(UNPARSEABLE))
        .when(keep, F.lit(OK))
        .otherwise(F.lit(THROWN_AWAY))
    )
    column = plan.schema.timestampSpec.column
    reason = F.when(F.col("__fields").isNull(), F.lit("Unable to parse row")).when(
        F.col("__ts").isNull(),
        F.concat(
            F.lit(f"Timestamp[{column}="),
            F.coalesce(_input(column), F.lit("null")),
            F.lit("] is unparseable"),
        ),
    )
    return status, reason


_LONG = r"^-?[0-9]{1,18}$"
_DOUBLE = r"^-?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$"


def _dimensions(plan: RowPlan, base: Any, known: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The batch's dimensions: the declared ones, then (with none declared, or with
    includeAllDimensions or useSchemaDiscovery) those found in its rows, after the ones
    earlier batches of the sequence found (`known`), which keep their types. Found ones are
    strings; with useSchemaDiscovery a field whose every value in the batch it is first found
    in is a whole number is a long, a number a double (later values that are not are null)."""
    declared = plan.declared_dimensions()
    if not plan.discovers():
        return declared
    from pyspark.sql import functions as F

    excluded = plan.schemaless_exclusions() | {name for name, _ in declared}
    ok = base.where(F.col("__status") == OK)
    keys = ok.select(F.explode(F.map_keys("__fields")).alias("k"))
    seen = {name for name, _ in known} | {name for name, _ in declared}
    found = sorted(r["k"] for r in keys.distinct().collect() if r["k"] not in excluded)
    new = [name for name in found if name not in seen]
    types = dict.fromkeys(new, "string")
    if new and plan.schema.dimensionsSpec.useSchemaDiscovery:
        values = ok.select(F.explode("__fields").alias("k", "v")).where(F.col("k").isin(new))
        counted = (
            values.where(F.col("v").isNotNull())
            .groupBy("k")
            .agg(
                F.count("*").alias("n"),
                F.count_if(F.col("v").rlike(_LONG)).alias("longs"),
                F.count_if(F.col("v").rlike(_DOUBLE)).alias("doubles"),
            )
        )
        for row in counted.collect():
            if row["longs"] == row["n"]:
                types[row["k"]] = "long"
            elif row["doubles"] == row["n"]:
                types[row["k"]] = "double"
    later = [dim for dim in known if dim[0] not in {name for name, _ in declared}]
    return declared + later + [(name, types[name]) for name in new]


def _row_columns(plan: RowPlan, dims: list[tuple[str, str]]) -> list[Any]:
    """A parsed row's columns as ingested: __time at query granularity, typed dimensions, the
    metrics' inputs."""
    from pyspark.sql import functions as F

    ts = F.col("__ts")
    columns = [granularity.floor_ms(ts, plan.query_granularity).alias("__time")]
    columns += [_typed(plan, name, kind).alias(name) for name, kind in dims]
    for metric in plan.schema.metricsSpec:
        columns += aggregators.row_columns(metric, plan.field, ts)
    return columns


def rollup(plan: RowPlan, rows: Any, dims: list[str]) -> Any:
    if not plan.rollup:
        return rows
    aggs = [agg for metric in plan.schema.metricsSpec for agg in aggregators.rollup_columns(metric)]
    if not aggs:
        return rows.select("__time", *cols(dims)).distinct()
    return rows.groupBy("__time", *cols(dims)).agg(*aggs)


def parse_batch(plan: RowPlan, frame: Any) -> Any:
    """Kafka source rows -> one row each with its fields (__fields), epoch millis (__ts),
    transforms, and its __status (ok, unparseable, thrownAway), __reason and __error flag."""
    from pyspark.sql import functions as F

    binary = parsing.binary(plan.input_format) is not None
    if binary:
        frame = parsing.decoded(frame, plan.input_format)
    fields = parsing.record_fields(frame, plan.input_format)
    size = F.col("__size") if binary else F.coalesce(F.length("value"), F.lit(0))
    raw = F.col("value").cast("string")
    base = frame.select(
        "partition",
        "offset",
        size.alias("__bytes"),
        (F.coalesce(raw, F.col("__encoded")) if binary else raw).alias("__raw"),
        fields.alias("__fields"),
        *(["__decode_error"] if binary else []),
    ).withColumn("__ts", timestamps.time_ms(plan.schema.timestampSpec, _input))
    base = with_transforms(plan, base)
    status, reason = _status(plan)
    if binary:  # why a record could not be decoded, first
        reason = F.coalesce(F.col("__decode_error"), reason)
    return base.select(
        "*",
        status.alias("__status"),
        reason.alias("__reason"),
        _error_flag(plan, plan.declared_dimensions()).alias("__error"),
    )


def _observed_counts() -> list[Any]:
    """The batch's row counts as aggregates (RowStats' fields), for Dataset.observe."""
    from pyspark.sql import functions as F

    status, error = F.col("__status"), F.col("__error")
    return [
        F.count_if((status == OK) & ~error).alias("processed"),
        F.count_if((status == OK) & error).alias("processedWithError"),
        F.count_if(status == UNPARSEABLE).alias("unparseable"),
        F.count_if((status != OK) & (status != UNPARSEABLE)).alias("thrownAway"),
        F.coalesce(F.sum("__bytes"), F.lit(0)).alias("processedBytes"),
    ]


def _samples(base: Any, limit: int) -> list[dict[str, Any]]:
    """The first unparseable rows of the batch, by partition and offset."""
    from pyspark.sql import functions as F

    failed = base.where(F.col("__status") == UNPARSEABLE).orderBy("partition", "offset")
    return [
        {
            "partition": row["partition"],
            "offset": row["offset"],
            "input": (row["__raw"] or "")[:1024],
            "message": row["__reason"],
        }
        for row in failed.select("partition", "offset", "__raw", "__reason").limit(limit).collect()
    ]


def process_batch(
    plan: RowPlan,
    frame: Any,
    persist_path: str,
    max_samples: int,
    known_dims: list[tuple[str, str]],
    storage: Storage = LOCAL,
) -> BatchResult:
    """Parse one batch of Kafka rows, count and sample failures, write the persist.

    One Spark job reads, parses, rolls up and writes the batch; the counts ride along with it
    (Dataset.observe), which also keeps the optimizer from pushing the status filter below the
    parse (that would parse every record twice). Only a batch with unparseable rows is read
    again, for its samples. Schemaless dimensions are found in a pass over the parsed batch of
    its own, which is cached for it."""
    from pyspark import StorageLevel
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    base = parse_batch(plan, frame)
    schemaless = plan.discovers()
    if schemaless:
        base = base.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        dims = _dimensions(plan, base, known_dims)
        counts = Observation()
        observed = base.observe(counts, *_observed_counts())
        rows = observed.where(F.col("__status") == OK).select(*_row_columns(plan, dims))
        write_parquet(rollup(plan, rows, [name for name, _ in dims]), storage, persist_path)
        stats = RowStats(**{name: int(value or 0) for name, value in counts.get.items()})
        samples = _samples(base, max_samples) if max_samples > 0 and stats.unparseable else []
        return BatchResult(stats, samples, dims)
    finally:
        if schemaless:
            base.unpersist()
