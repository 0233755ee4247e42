"""Druid's DataSourceCompactionConfig, as Sluicegate runs it: which intervals of a datasource
are compacted (not those ending within `skipOffsetFromLatest` of its newest segment), into
files of at most `maxRowsPerSegment` rows (`tuningConfig.partitionsSpec`, dynamic; or the
top-level deprecated field), at the datasource's own segment granularity.

Fields Druid takes that change nothing here are kept as given (taskPriority, taskContext,
engine, inputSegmentSizeBytes, ioConfig, dimensionsSpec, metricsSpec, transformSpec,
projections); a granularitySpec other than the ingested one is refused, for now."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from supervisor.model.retention import RuleError
from tasks.spec.periods import Period, parse_period

DEFAULT_SKIP = "P1D"
DEFAULT_MAX_ROWS = 5_000_000
_KEPT = {
    "taskPriority",
    "taskContext",
    "engine",
    "inputSegmentSizeBytes",
    "ioConfig",
    "dimensionsSpec",
    "metricsSpec",
    "transformSpec",
    "projections",
}
_FIELDS = {"dataSource", "skipOffsetFromLatest", "maxRowsPerSegment", "tuningConfig"}
_FIELDS |= {"granularitySpec"} | _KEPT


@dataclass(frozen=True)
class CompactionConfig:
    datasource: str
    skip: Period
    max_rows: int
    raw: dict[str, Any]


def parse_config(raw: object, datasource: str | None = None) -> CompactionConfig:
    """A config as the API takes it; RuleError naming the field that is wrong. `datasource`:
    the one the path names, which the body's dataSource must match."""
    if not isinstance(raw, dict):
        raise RuleError("body", "a JSON object: a datasource's compaction config")
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        raise RuleError(unknown[0], "not a field of a datasource's compaction config")
    name = raw.get("dataSource")
    if not isinstance(name, str) or not 0 < len(name) <= 255:
        raise RuleError("dataSource", "a datasource name of 1 to 255 characters")
    if datasource is not None and name != datasource:
        raise RuleError("dataSource", f"'{name}' is not the datasource the path names")
    skip_text = raw.get("skipOffsetFromLatest", DEFAULT_SKIP)
    try:
        skip = parse_period(skip_text)
    except ValueError as exc:
        raise RuleError("skipOffsetFromLatest", str(exc)) from None
    return CompactionConfig(name, skip, _max_rows(raw), dict(raw))


def _max_rows(raw: dict[str, Any]) -> int:
    tuning = raw.get("tuningConfig") or {}
    if not isinstance(tuning, dict):
        raise RuleError("tuningConfig", "a JSON object")
    partitions = tuning.get("partitionsSpec") or {}
    if not isinstance(partitions, dict):
        raise RuleError("tuningConfig.partitionsSpec", "a JSON object")
    kind = partitions.get("type", "dynamic")
    if kind != "dynamic":
        raise RuleError(
            "tuningConfig.partitionsSpec.type", f"'{kind}': only dynamic partitioning is run"
        )
    value = partitions.get("maxRowsPerSegment", raw.get("maxRowsPerSegment", DEFAULT_MAX_ROWS))
    field = "tuningConfig.partitionsSpec.maxRowsPerSegment"
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 2**31 - 1:
        raise RuleError(field, "a positive whole number of rows")
    granularity = raw.get("granularitySpec")
    if granularity is not None and (
        not isinstance(granularity, dict) or granularity.get("segmentGranularity") is not None
    ):
        raise RuleError(
            "granularitySpec.segmentGranularity",
            "compaction keeps the ingested segment granularity; a coarser one is not run yet",
        )
    return value
