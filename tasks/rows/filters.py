"""Druid's filters as Spark column expressions, over the parsed row (a map of strings).

Supported: selector/equals, in, bound/range, null, like, regex, and/or/not, true/false.
Values compare as strings unless a bound/range says `ordering: numeric` or gives a
`matchValueType` of LONG/DOUBLE/FLOAT.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

SUPPORTED = {
    "selector",
    "equals",
    "in",
    "bound",
    "range",
    "null",
    "like",
    "regex",
    "and",
    "or",
    "not",
    "true",
    "false",
}
NUMERIC_TYPES = {"LONG", "DOUBLE", "FLOAT", "long", "double", "float"}


class FilterError(ValueError):
    """A filter uses a type or shape Sluicegate does not support; the message names it."""


def check(spec: dict[str, Any], path: str = "filter") -> list[tuple[str, str]]:
    """Every unsupported part of a filter, as (field path, reason)."""
    kind = spec.get("type")
    if kind not in SUPPORTED:
        return [
            (
                f"{path}.type",
                f"filter type '{kind}' is not supported yet; supported: "
                + ", ".join(sorted(SUPPORTED)),
            )
        ]
    problems: list[tuple[str, str]] = []
    if kind in ("and", "or"):
        for index, child in enumerate(spec.get("fields", [])):
            problems += check(child, f"{path}.fields[{index}]")
    elif kind == "not":
        problems += check(spec.get("field", {}), f"{path}.field")
    elif kind not in ("true", "false"):
        column = spec.get("dimension", spec.get("column"))
        if not isinstance(column, str):
            problems.append((f"{path}.dimension", "is required"))
        if spec.get("extractionFn") is not None:
            problems.append((f"{path}.extractionFn", "extraction functions are not supported yet"))
    return problems


def to_column(spec: dict[str, Any], field: Callable[[str], Any]) -> Any:
    """Build the Spark Column for a filter; `field(name)` returns the string column of a field."""
    from pyspark.sql import functions as F

    kind = spec["type"]
    if kind == "true":
        return F.lit(True)
    if kind == "false":
        return F.lit(False)
    if kind in ("and", "or"):
        children = [to_column(child, field) for child in spec["fields"]]
        result = children[0]
        for child in children[1:]:
            result = (result & child) if kind == "and" else (result | child)
        return result
    if kind == "not":
        return ~F.coalesce(to_column(spec["field"], field), F.lit(False))
    value = field(str(spec.get("dimension", spec.get("column"))))
    if kind in ("selector", "equals"):
        target = spec.get("value", spec.get("matchValue"))
        if target is None or target == "":
            return value.isNull() | (value == "")
        return F.coalesce(value == F.lit(str(target)), F.lit(False))
    if kind == "null":
        return value.isNull()
    if kind == "in":
        values = [str(v) for v in spec.get("values", []) if v is not None]
        matched = value.isin(values) if values else F.lit(False)
        if any(v is None for v in spec.get("values", [])):
            matched = matched | value.isNull()
        return F.coalesce(matched, F.lit(False))
    if kind == "like":
        return F.coalesce(value.like(spec["pattern"]), F.lit(False))
    if kind == "regex":
        return F.coalesce(value.rlike(spec["pattern"]), F.lit(False))
    return _bound(spec, value)


def _bound(spec: dict[str, Any], value: Any) -> Any:
    from pyspark.sql import functions as F

    numeric = spec.get("ordering") == "numeric" or spec.get("matchValueType") in NUMERIC_TYPES
    column = value.try_cast("double") if numeric else value

    def literal(raw: Any) -> Any:
        return F.lit(float(raw)) if numeric else F.lit(str(raw))

    lower = spec.get("lower")
    upper = spec.get("upper")
    lower_strict = spec.get("lowerStrict", False) or spec.get("lowerOpen", False)
    upper_strict = spec.get("upperStrict", False) or spec.get("upperOpen", False)
    condition = F.lit(True)
    if lower is not None:
        condition = condition & (
            (column > literal(lower)) if lower_strict else (column >= literal(lower))
        )
    if upper is not None:
        condition = condition & (
            (column < literal(upper)) if upper_strict else (column <= literal(upper))
        )
    return F.coalesce(condition & column.isNotNull(), F.lit(False))
