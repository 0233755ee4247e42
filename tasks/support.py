"""What of a dataSchema and inputFormat the task pipeline can run. A spec that asks for more is
refused when it is submitted (a 400 naming each field), never silently ignored."""

from __future__ import annotations

from typing import Any

from tasks import granularity
from tasks.rows import aggregators, expression_parser, filters, parsing
from tasks.spec.data_schema import DataSchema
from tasks.spec.errors import FieldError
from tasks.spec.io_config import InputFormat

# A task context key of Sluicegate's: records of persists a task merges into segment chunks
# while it reads (tasks/output/staging.py); 0 never does
STAGE_ROWS_KEY = "stageRows"
STAGE_ROWS = 200_000


def stage_rows(context: dict[str, Any]) -> int:
    """The context's stageRows, else STAGE_ROWS; ValueError for anything but a whole number
    of records."""
    value = context.get(STAGE_ROWS_KEY, STAGE_ROWS)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("a whole number of records (0: never)")
    return value


def context_problems(context: dict[str, Any] | None, prefix: str) -> list[FieldError]:
    """The context keys of Sluicegate's a task cannot run with, with their field paths."""
    try:
        stage_rows(context or {})
    except ValueError as exc:
        return [FieldError(f"{prefix}{STAGE_ROWS_KEY}", str(exc))]
    return []


def unsupported(
    schema: DataSchema, input_format: InputFormat | None, prefix: str
) -> list[FieldError]:
    """Every part of the pipeline's input that is not supported yet, with its field path."""
    problems: list[tuple[str, str]] = []
    ds = "dataSchema"
    if schema.parser is not None and input_format is None:  # a parser is read as one
        problems.append((f"{ds}.parser", "is read only beside the inputFormat it stands for"))
    if input_format is not None:
        problems += parsing.check(input_format, "ioConfig.inputFormat")
    dims = schema.dimensionsSpec
    for index, dim in enumerate(dims.dimensions):
        kind = "string" if isinstance(dim, str) else dim.type
        if kind in ("json", "auto"):
            problems.append(
                (
                    f"{ds}.dimensionsSpec.dimensions[{index}].type",
                    f"'{kind}' dimensions are not supported yet",
                )
            )
    if dims.spatialDimensions:
        problems.append((f"{ds}.dimensionsSpec.spatialDimensions", "not supported yet"))
    for index, metric in enumerate(schema.metricsSpec):
        path = f"{ds}.metricsSpec[{index}]"
        if metric.type not in aggregators.SUPPORTED:
            problems.append(
                (
                    f"{path}.type",
                    f"aggregator '{metric.type}' is not supported yet; "
                    "supported: " + ", ".join(sorted(aggregators.SUPPORTED)),
                )
            )
        elif metric.expression is not None:
            problems.append((f"{path}.expression", "expression inputs are not supported yet"))
    spec = schema.granularitySpec
    query = granularity.name_of(spec.queryGranularity)
    if query not in granularity.SUPPORTED_QUERY:
        problems.append(
            (
                f"{ds}.granularitySpec.queryGranularity",
                "only named granularities (none, second ... year) are supported yet",
            )
        )
    segment = granularity.name_of(spec.segmentGranularity)
    if segment not in granularity.SUPPORTED_SEGMENT:
        problems.append(
            (
                f"{ds}.granularitySpec.segmentGranularity",
                "only named granularities (second ... year) are supported yet",
            )
        )
    for index, transform in enumerate(schema.transformSpec.transforms):
        try:
            expression_parser.parse(transform.expression)
        except expression_parser.ExpressionError as exc:
            problems.append((f"{ds}.transformSpec.transforms[{index}].expression", str(exc)))
    if schema.transformSpec.filter is not None:
        problems += filters.check(schema.transformSpec.filter, f"{ds}.transformSpec.filter")
    return [FieldError(f"{prefix}{field}", reason) for field, reason in problems]
