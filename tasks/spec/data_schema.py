"""Druid's dataSchema: timestampSpec, dimensions, metrics, granularitySpec, transformSpec."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tasks.spec.base import DruidModel, check_period
from tasks.spec.errors import field_error
from tasks.spec.names import name_problem

TIMESTAMP_FORMATS = {"auto", "iso", "posix", "millis", "micro", "nano", "ruby"}
_JODA_LETTERS = set("GCYxwweEyDMdaKhHkmsSzZ")
_QUOTED = re.compile(r"'[^']*'")


def is_joda_pattern(value: str) -> bool:
    """Letters outside quotes must all be Joda-Time pattern letters, and there must be some."""
    letters = [c for c in _QUOTED.sub("", value) if c.isascii() and c.isalpha()]
    return bool(letters) and all(c in _JODA_LETTERS for c in letters)


# Standard granularities with their length in milliseconds (month and longer are approximate,
# used only to compare one granularity with another).
GRANULARITIES: dict[str, int] = {
    "none": 1,
    "second": 1_000,
    "minute": 60_000,
    "two_minute": 120_000,
    "three_minute": 180_000,
    "four_minute": 240_000,
    "five_minute": 300_000,
    "ten_minute": 600_000,
    "fifteen_minute": 900_000,
    "thirty_minute": 1_800_000,
    "hour": 3_600_000,
    "six_hour": 21_600_000,
    "eight_hour": 28_800_000,
    "day": 86_400_000,
    "week": 604_800_000,
    "month": 2_592_000_000,
    "quarter": 7_776_000_000,
    "year": 31_536_000_000,
    "all": 2**62,
}

AGGREGATORS_WITH_FIELD = {
    f"{kind}{op}"
    for kind in ("long", "double", "float")
    for op in ("Sum", "Min", "Max", "First", "Last", "Any")
} | {"stringFirst", "stringLast", "stringAny"}
AGGREGATORS = AGGREGATORS_WITH_FIELD | {
    "count",
    "filtered",
    "expression",
    "javascript",
    "cardinality",
    "hyperUnique",
    "thetaSketch",
    "HLLSketchBuild",
    "HLLSketchMerge",
    "quantilesDoublesSketch",
    "arrayOfDoublesSketch",
    "KllDoublesSketch",
    "KllFloatsSketch",
    "tDigestSketch",
    "momentSketch",
    "fixedBucketsHistogram",
    "approxHistogram",
    "approxHistogramFold",
    "variance",
    "varianceFold",
    "bloom",
}


def granularity_millis(name: str, value: str | dict[str, Any]) -> int:
    """Validate a granularity (name or object) and return its approximate length."""
    if isinstance(value, str):
        key = value.strip().lower()
        if key not in GRANULARITIES:
            known = ", ".join(sorted(GRANULARITIES))
            raise field_error(name, f"unknown granularity '{value}'; use one of {known}")
        return GRANULARITIES[key]
    kind = str(value.get("type", "")).lower()
    if kind in GRANULARITIES:
        return GRANULARITIES[kind]
    if kind == "period":
        period = value.get("period")
        if not isinstance(period, str):
            raise field_error(f"{name}.period", "is required for a period granularity")
        check_period(f"{name}.period", period, positive=False)
        from tasks.spec.periods import parse_period

        parsed = parse_period(period)
        approx = parsed.years * GRANULARITIES["year"] + parsed.months * GRANULARITIES["month"]
        return approx + parsed.to_millis() if not parsed.has_calendar_fields else approx
    if kind == "duration":
        duration = value.get("duration")
        if not isinstance(duration, int) or duration <= 0:
            raise field_error(f"{name}.duration", "must be a positive number of milliseconds")
        return duration
    raise field_error(f"{name}.type", f"unknown granularity type '{value.get('type')}'")


class TimestampSpec(DruidModel):
    column: str = "timestamp"
    format: str = "auto"
    missingValue: str | int | None = None

    @field_validator("missingValue")
    @classmethod
    def _a_time(cls, value: str | int | None) -> str | int | None:
        """An ISO-8601 date-time, or epoch milliseconds (as Druid's DateTime takes it)."""
        if isinstance(value, str):
            try:
                datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                raise ValueError(
                    f"'{value}' is not an ISO-8601 date-time (nor epoch milliseconds)"
                ) from None
        return value

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value.lower() in TIMESTAMP_FORMATS or is_joda_pattern(value):
            return value
        known = ", ".join(sorted(TIMESTAMP_FORMATS))
        raise ValueError(f"unknown timestamp format '{value}'; use {known} or a Joda pattern")


class DimensionSchema(DruidModel):
    type: Literal["string", "long", "float", "double", "json", "auto"] = "string"
    name: str = Field(min_length=1)
    createBitmapIndex: bool = True
    multiValueHandling: Literal["SORTED_ARRAY", "SORTED_SET", "ARRAY"] = "SORTED_ARRAY"

    @field_validator("multiValueHandling", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class DimensionsSpec(DruidModel):
    dimensions: list[str | DimensionSchema] = Field(default_factory=list)
    dimensionExclusions: list[str] = Field(default_factory=list)
    spatialDimensions: list[dict[str, Any]] = Field(default_factory=list)
    includeAllDimensions: bool = False
    useSchemaDiscovery: bool = False
    forceSegmentSortByTime: bool = True

    def names(self) -> list[str]:
        return [d if isinstance(d, str) else d.name for d in self.dimensions]

    @model_validator(mode="after")
    def _consistent(self) -> DimensionsSpec:
        seen: set[str] = set()
        for index, name in enumerate(self.names()):
            if not name:
                raise field_error(f"dimensions[{index}]", "a dimension name cannot be empty")
            if name in seen:
                raise field_error(f"dimensions[{index}]", f"dimension '{name}' is listed twice")
            if name in self.dimensionExclusions:
                raise field_error(
                    f"dimensions[{index}]", f"'{name}' is both a dimension and excluded"
                )
            if name == "__time" and self.forceSegmentSortByTime:
                raise field_error(
                    f"dimensions[{index}]",
                    "'__time' may be a dimension only with forceSegmentSortByTime false",
                )
            seen.add(name)
        return self


class Aggregator(DruidModel):
    type: str
    name: str = Field(min_length=1)
    fieldName: str | None = None
    expression: str | None = None

    @model_validator(mode="after")
    def _known(self) -> Aggregator:
        if self.type not in AGGREGATORS:
            known = ", ".join(sorted(AGGREGATORS))
            raise field_error("type", f"unknown aggregator type '{self.type}'; known: {known}")
        if self.type in AGGREGATORS_WITH_FIELD and (self.fieldName is None) == (
            self.expression is None
        ):
            raise field_error(
                "fieldName", f"a {self.type} needs exactly one of fieldName and expression"
            )
        if self.type == "filtered":
            extra = self.model_extra or {}
            if not isinstance(extra.get("aggregator"), dict) or not isinstance(
                extra.get("filter"), dict
            ):
                raise field_error("aggregator", "a filtered aggregator needs aggregator and filter")
        return self


class GranularitySpec(DruidModel):
    type: Literal["uniform", "arbitrary"] = "uniform"
    segmentGranularity: str | dict[str, Any] = "DAY"
    queryGranularity: str | dict[str, Any] = "NONE"
    rollup: bool = True
    intervals: list[str] | None = None

    @model_validator(mode="after")
    def _granularities(self) -> GranularitySpec:
        segment = granularity_millis("segmentGranularity", self.segmentGranularity)
        query = granularity_millis("queryGranularity", self.queryGranularity)
        if segment == GRANULARITIES["none"]:
            raise field_error("segmentGranularity", "NONE is not a segment granularity")
        if query > segment:
            raise field_error("queryGranularity", "must not be coarser than segmentGranularity")
        return self


class Transform(DruidModel):
    type: Literal["expression"] = "expression"
    name: str = Field(min_length=1)
    expression: str = Field(min_length=1)


class TransformSpec(DruidModel):
    transforms: list[Transform] = Field(default_factory=list)
    filter: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _unique(self) -> TransformSpec:
        seen: set[str] = set()
        for index, transform in enumerate(self.transforms):
            if transform.name in seen:
                raise field_error(
                    f"transforms[{index}].name", f"transform '{transform.name}' is defined twice"
                )
            seen.add(transform.name)
        if self.filter is not None and not isinstance(self.filter.get("type"), str):
            raise field_error("filter.type", "a filter needs a type")
        return self


class DataSchema(DruidModel):
    dataSource: str = Field(min_length=1)
    timestampSpec: TimestampSpec = Field(default_factory=TimestampSpec)
    dimensionsSpec: DimensionsSpec = Field(default_factory=DimensionsSpec)
    metricsSpec: list[Aggregator] = Field(default_factory=list)
    granularitySpec: GranularitySpec = Field(default_factory=GranularitySpec)
    transformSpec: TransformSpec = Field(default_factory=TransformSpec)
    parser: dict[str, Any] | None = None

    @field_validator("dataSource")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        problem = name_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _columns_once(self) -> DataSchema:
        dimensions = set(self.dimensionsSpec.names())
        seen: set[str] = set()
        for index, metric in enumerate(self.metricsSpec):
            if metric.name in seen:
                raise field_error(
                    f"metricsSpec[{index}].name", f"metric '{metric.name}' is defined twice"
                )
            if metric.name in dimensions:
                raise field_error(
                    f"metricsSpec[{index}].name",
                    f"'{metric.name}' is both a dimension and a metric",
                )
            seen.add(metric.name)
        return self
