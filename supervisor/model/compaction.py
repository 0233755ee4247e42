"""Druid's DataSourceCompactionConfig, as Sluicegate runs it: which intervals of a datasource
are compacted (not those ending within `skipOffsetFromLatest` of its newest segment), into
files of at most `maxRowsPerSegment` rows (`tuningConfig.partitionsSpec`, dynamic; or the
top-level deprecated field), at the datasource's own segment granularity or at the one
`granularitySpec.segmentGranularity` names (Druid's: a month's day segments compacted into
month segments; those of a granularity that holds none of its segments whole, a finer one,
are skipped).

Fields Druid takes that change nothing here are kept as given (taskPriority, taskContext,
engine, inputSegmentSizeBytes, ioConfig, dimensionsSpec, metricsSpec, transformSpec,
projections); a granularitySpec's queryGranularity and rollup, which would change the rows,
are refused, for now."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from supervisor.model.retention import RuleError
from tasks import granularity as granularities
from tasks.spec.names import AUTOCOMPACT_PREFIX
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
    # the segment granularity compacted into (tasks/granularity.py's name); None: each
    # interval as it was ingested
    granularity: str | None = None


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
    return CompactionConfig(name, skip, _max_rows(raw), dict(raw), _granularity(raw))


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
    return value


def _granularity(raw: dict[str, Any]) -> str | None:
    """Druid's UserCompactionTaskGranularityConfig: the segment granularity compacted into."""
    spec = raw.get("granularitySpec")
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise RuleError("granularitySpec", "a JSON object")
    unknown = sorted(set(spec) - {"segmentGranularity", "queryGranularity", "rollup"})
    if unknown:
        raise RuleError(f"granularitySpec.{unknown[0]}", "not a field of a granularitySpec")
    for kept in ("queryGranularity", "rollup"):
        if spec.get(kept) is not None:
            raise RuleError(
                f"granularitySpec.{kept}",
                "compaction keeps the rows as ingested; a new one is not run yet",
            )
    given = spec.get("segmentGranularity")
    if given is None:
        return None
    name = granularities.name_of(given) if isinstance(given, str | dict) else None
    if name not in granularities.SUPPORTED_SEGMENT:
        known = ", ".join(sorted(n.upper() for n in granularities.SUPPORTED_SEGMENT))
        raise RuleError(
            "granularitySpec.segmentGranularity",
            f"{json.dumps(given)}: a segment granularity, one of {known} (or its period)",
        )
    return name


# Druid's compaction supervisor (`"type": "autocompact"` on the supervisor API): a datasource's
# compaction config as a supervisor named `autocompact__<dataSource>`, which can be suspended
AUTOCOMPACT = "autocompact"
ID_PREFIX = AUTOCOMPACT_PREFIX
_SUPERVISOR_FIELDS = {"type", "spec", "suspended", "id"}


@dataclass(frozen=True)
class CompactionSupervisor:
    config: CompactionConfig
    suspended: bool

    @property
    def id(self) -> str:
        return supervisor_id(self.config.datasource)


def supervisor_id(datasource: str) -> str:
    return ID_PREFIX + datasource


def datasource_of(supervisor_id: str) -> str | None:
    """The datasource an autocompact supervisor's id names (None: not such an id)."""
    if supervisor_id.startswith(ID_PREFIX) and len(supervisor_id) > len(ID_PREFIX):
        return supervisor_id[len(ID_PREFIX) :]
    return None


def is_autocompact(raw: object) -> bool:
    return isinstance(raw, dict) and raw.get("type") == AUTOCOMPACT


def parse_supervisor(raw: object) -> CompactionSupervisor:
    """An autocompact supervisor spec as the supervisor API takes it; RuleError naming the
    field that is wrong (the config's own fields under `spec.`)."""
    if not isinstance(raw, dict) or raw.get("type") != AUTOCOMPACT:
        raise RuleError("type", f"'{AUTOCOMPACT}' for a compaction supervisor")
    unknown = sorted(set(raw) - _SUPERVISOR_FIELDS)
    if unknown:
        raise RuleError(unknown[0], "not a field of an autocompact supervisor spec")
    if "spec" not in raw:
        raise RuleError("spec", "required: the datasource's compaction config")
    try:
        config = parse_config(raw["spec"])
    except RuleError as exc:
        field = "spec" if exc.field == "body" else f"spec.{exc.field}"
        raise RuleError(field, exc.reason) from None
    suspended = raw.get("suspended", False)
    if suspended is None:
        suspended = False
    if not isinstance(suspended, bool):
        raise RuleError("suspended", "true or false")
    given = raw.get("id")
    if given is not None and given != supervisor_id(config.datasource):
        raise RuleError("id", f"an autocompact supervisor is '{supervisor_id(config.datasource)}'")
    return CompactionSupervisor(config, suspended)


def supervisor_form(config: dict[str, Any], suspended: bool) -> dict[str, Any]:
    """The supervisor spec as Druid answers it."""
    return {"type": AUTOCOMPACT, "spec": config, "suspended": suspended}
