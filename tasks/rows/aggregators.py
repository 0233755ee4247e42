"""Druid aggregators as Spark columns. Each metric has a per-row input column; rollup applies a
function that is also its own combiner, so merging persists uses the same expressions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tasks.protocol import TIME_SUFFIX
from tasks.rows.columns import col
from tasks.spec.data_schema import Aggregator

_TYPES = {"long": "bigint", "double": "double", "float": "float", "string": "string"}
SUPPORTED = (
    {"count"}
    | {
        f"{kind}{op}"
        for kind in ("long", "double", "float")
        for op in ("Sum", "Min", "Max", "First", "Last")
    }
    | {"stringFirst", "stringLast"}
)


def value_type(metric: Aggregator) -> str:
    if metric.type == "count":
        return "bigint"
    for prefix, spark_type in _TYPES.items():
        if metric.type.startswith(prefix):
            return spark_type
    raise ValueError(f"unsupported aggregator {metric.type}")


def op_of(metric: Aggregator) -> str:
    if metric.type == "count":
        return "Sum"
    for op in ("Sum", "Min", "Max", "First", "Last"):
        if metric.type.endswith(op):
            return op
    raise ValueError(f"unsupported aggregator {metric.type}")


def row_columns(metric: Aggregator, field: Callable[[str], Any], time_ms: Any) -> list[Any]:
    """The per-row columns of a metric (its value, and its event time for first/last)."""
    from pyspark.sql import functions as F

    if metric.type == "count":
        return [F.lit(1).cast("bigint").alias(metric.name)]
    assert metric.fieldName is not None
    raw = field(metric.fieldName)
    typed = raw if value_type(metric) == "string" else raw.try_cast(value_type(metric))
    columns = [typed.alias(metric.name)]
    if op_of(metric) in ("First", "Last"):
        columns.append(F.when(typed.isNotNull(), time_ms).alias(metric.name + TIME_SUFFIX))
    return columns


def rollup_columns(metric: Aggregator) -> list[Any]:
    """Aggregations over row (or already rolled-up) columns; also their own combiners."""
    from pyspark.sql import functions as F

    name = metric.name
    value = col(name)
    op = op_of(metric)
    if op == "Sum":
        return [F.sum(value).cast(value_type(metric)).alias(name)]
    if op == "Min":
        return [F.min(value).alias(name)]
    if op == "Max":
        return [F.max(value).alias(name)]
    time = name + TIME_SUFFIX
    if op == "First":
        return [F.min_by(value, col(time)).alias(name), F.min(col(time)).alias(time)]
    return [F.max_by(value, col(time)).alias(name), F.max(col(time)).alias(time)]


def helper_columns(metrics: list[Aggregator]) -> list[str]:
    return [m.name + TIME_SUFFIX for m in metrics if op_of(m) in ("First", "Last")]
