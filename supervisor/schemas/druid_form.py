"""A stored spec in Druid's serialized form: what Druid's Overlord returns when a spec is read
(GET /supervisor/{id}, ?full, history, the suspend and resume answers).

Druid writes the spec it parsed, not the body it was given: every default filled in, nulls
written out, `spec`'s three sections repeated at the top level (Druid's web console reads
those), bare dimension names expanded, granularities and periods in Joda's forms
(`"HOUR"`, `{"type": "none"}`, `"PT3600S"`), `dimensionExclusions` with the columns a
dimension can never be. The shape is the one Druid's documentation shows (its supervisor API
reference); fields Druid added later, and Sluicegate's own, are written only when a spec sets
them. Fields Sluicegate does not know are kept as given, after the known ones.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from tasks.granularity import STANDARD_PERIODS, standard_period
from tasks.partitions import java_string_hash
from tasks.spec.periods import parse_period
from tasks.spec.tuning_config import INT_MAX
from tasks.spec.written import derived_exclusions, written_dimension

log = logging.getLogger(__name__)
_SIMPLE_AGGREGATORS = {
    f"{kind}{op}" for kind in ("long", "double", "float") for op in ("Sum", "Min", "Max")
}
_INDEX_SPEC = {
    "bitmap": {"type": "roaring"},
    "dimensionCompression": "lz4",
    "stringDictionaryEncoding": {"type": "utf8"},
    "metricCompression": "lz4",
    "longEncoding": "longs",
}


def druid_form(payload: dict[str, Any]) -> dict[str, Any]:
    """A stored (normalized, masked) supervisor spec as Druid serializes it; as stored when it
    cannot be (a read never fails for its form: a spec stored by an older version)."""
    if payload.get("type") != "kafka" or not isinstance(payload.get("spec"), dict):
        return payload  # a tombstone (NoopSupervisorSpec) is written as stored
    try:
        return _druid_form(payload)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        log.warning("a spec of %s is read as stored: %s", payload.get("id"), exc)
        return payload


def _druid_form(payload: dict[str, Any]) -> dict[str, Any]:
    body = payload["spec"]
    data_schema = _data_schema(body["dataSchema"])
    io_config = _io_config(body["ioConfig"])
    tuning_config = _tuning_config(body.get("tuningConfig") or {})
    known = {"type", "id", "spec", "context", "suspended"}
    return {
        "type": "kafka",
        "id": payload.get("id") or data_schema["dataSource"],
        "spec": {
            "dataSchema": data_schema,
            "ioConfig": io_config,
            "tuningConfig": tuning_config,
            **_rest(body, {"dataSchema", "ioConfig", "tuningConfig"}),
        },
        "dataSchema": data_schema,
        "tuningConfig": tuning_config,
        "ioConfig": io_config,
        "context": payload.get("context"),
        "suspended": bool(payload.get("suspended", False)),
        **_rest(payload, known | {"dataSchema", "ioConfig", "tuningConfig"}),
    }


def _rest(given: dict[str, Any], known: set[str]) -> dict[str, Any]:
    """The fields of `given` not written already: kept as given, after the known ones."""
    return {key: value for key, value in given.items() if key not in known}


def joda_duration(period: str | None) -> str | None:
    """A fixed-length period as Joda writes a Duration: whole seconds ("PT3600S"), or with
    three decimals when it has milliseconds ("PT1.500S")."""
    if period is None:
        return None
    millis = parse_period(period).to_millis()
    seconds, rest = divmod(millis, 1000)
    return f"PT{seconds}S" if not rest else f"PT{seconds}.{rest:03d}S"


def joda_datetime(value: str | int | None) -> str | None:
    """An ISO-8601 date-time (or epoch millis) as Joda writes a DateTime: with milliseconds,
    in the offset it was given in ("Z" for UTC)."""
    if value is None:
        return None
    if isinstance(value, int):
        moment = datetime.fromtimestamp(value / 1000, tz=UTC)
    else:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    offset = moment.utcoffset()
    assert offset is not None
    minutes = int(offset.total_seconds()) // 60
    zone = "Z" if minutes == 0 else f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02d}:"
    zone += "" if minutes == 0 else f"{abs(minutes) % 60:02d}"
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}" + zone


def granularity(value: str | dict[str, Any]) -> str | dict[str, Any]:
    """Druid's serialized granularity: a standard one by its upper-case name, none and all as
    objects, any other period granularity as {type, period, timeZone, origin}."""
    if isinstance(value, str):
        name = value.strip().upper()
        return {"type": name.lower()} if name in ("NONE", "ALL") else name
    kind = str(value.get("type", "")).lower()
    if kind in ("none", "all"):
        return {"type": kind}
    if kind == "period":
        standard = standard_period(value)
        if standard is not None:
            return standard.upper()
        origin = value.get("origin")
        return {
            "type": "period",
            "period": str(value.get("period", "")).upper(),
            "timeZone": value.get("timeZone") or "UTC",
            "origin": joda_datetime(origin) if origin is not None else None,
        }
    if kind in STANDARD_PERIODS.values():
        return kind.upper()
    return value


def java_hash_set_order(items: list[str]) -> list[str]:
    """`items` (distinct, in insertion order) in the order a java.util.HashSet built from them
    iterates: by bucket of the spread String.hashCode, insertion order within a bucket."""
    capacity = 16
    while capacity < len(items) * 4 // 3 + 1:
        capacity *= 2

    def bucket(text: str) -> int:
        code = java_string_hash(text) & 0xFFFFFFFF
        return (code ^ (code >> 16)) & (capacity - 1)

    return [item for _, _, item in sorted((bucket(t), i, t) for i, t in enumerate(items))]


def _aggregator(metric: dict[str, Any]) -> dict[str, Any]:
    kind = metric["type"]
    if kind == "count":
        return {"type": "count", "name": metric["name"], **_rest(metric, {"type", "name"})}
    if kind in _SIMPLE_AGGREGATORS:
        written = {
            "type": kind,
            "name": metric["name"],
            "fieldName": metric.get("fieldName"),
            "expression": metric.get("expression"),
        }
        return {**written, **_rest(metric, set(written))}
    return metric


def _data_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # A legacy parser's parseSpec holds them when the dataSchema does not: Druid's DataSchema
    # reads them from there (getTimestampSpec, getDimensionsSpec) and from then on writes them,
    # with their defaults, beside the parser (which it keeps as given)
    parser = schema.get("parser")
    parse_spec = (parser.get("parseSpec") if isinstance(parser, dict) else None) or {}
    timestamp = schema.get("timestampSpec") or parse_spec.get("timestampSpec") or {}
    dims = schema.get("dimensionsSpec") or parse_spec.get("dimensionsSpec") or {}
    metrics = [_aggregator(m) for m in schema.get("metricsSpec") or []]
    dimensions = [written_dimension(d) for d in dims.get("dimensions") or []]
    names = {d["name"] for d in dimensions}
    column = timestamp.get("column", "timestamp")
    excluded: list[str] = []
    for name in [
        *(dims.get("dimensionExclusions") or []),
        *derived_exclusions(column, metrics),
    ]:
        if name not in names and name not in excluded:
            excluded.append(name)
    dimensions_spec: dict[str, Any] = {
        "dimensions": dimensions,
        "dimensionExclusions": java_hash_set_order(excluded),
        "includeAllDimensions": bool(dims.get("includeAllDimensions", False)),
        "useSchemaDiscovery": bool(dims.get("useSchemaDiscovery", False)),
    }
    if dims.get("forceSegmentSortByTime") is False:  # written only when set (Druid 31+)
        dimensions_spec["forceSegmentSortByTime"] = False
    dimensions_spec.update(
        _rest(dims, {*dimensions_spec, "forceSegmentSortByTime", "spatialDimensions"})
    )
    spatial = dims.get("spatialDimensions")
    if spatial:  # Druid turns them into dimensions of type spatial
        dimensions_spec["dimensions"] += [{"type": "spatial", **s} for s in spatial]
    granularity_spec = schema.get("granularitySpec") or {}
    transform = schema.get("transformSpec") or {}
    written: dict[str, Any] = {
        "dataSource": schema["dataSource"],
        "timestampSpec": {
            "column": column,
            "format": timestamp.get("format", "auto"),
            "missingValue": joda_datetime(timestamp.get("missingValue")),
            **_rest(timestamp, {"column", "format", "missingValue"}),
        },
        "dimensionsSpec": dimensions_spec,
        "metricsSpec": metrics,
        "granularitySpec": {
            "type": granularity_spec.get("type", "uniform"),
            "segmentGranularity": granularity(granularity_spec.get("segmentGranularity", "DAY")),
            "queryGranularity": granularity(granularity_spec.get("queryGranularity", "NONE")),
            "rollup": granularity_spec.get("rollup", True),
            "intervals": granularity_spec.get("intervals") or [],
            **_rest(
                granularity_spec,
                {"type", "segmentGranularity", "queryGranularity", "rollup", "intervals"},
            ),
        },
        "transformSpec": {
            "filter": transform.get("filter"),
            "transforms": [
                {"type": t.get("type", "expression"), **_rest(t, {"type"})}
                for t in transform.get("transforms") or []
            ],
            **_rest(transform, {"filter", "transforms"}),
        },
    }
    if isinstance(parser, dict):
        written["parser"] = parser
    return {**written, **_rest(schema, set(written))}


def _input_format(given: dict[str, Any] | None) -> dict[str, Any] | None:
    if given is None or given.get("type") != "json":
        return given
    written: dict[str, Any] = {"type": "json"}
    for key in ("flattenSpec", "keepNullColumns"):  # written when given
        if given.get(key) is not None:
            written[key] = given[key]
    if given.get("featureSpec"):
        written["featureSpec"] = given["featureSpec"]
    for key in ("assumeNewlineDelimited", "useJsonNodeReader"):  # written when true
        if given.get(key):
            written[key] = True
    known = {"featureSpec", "assumeNewlineDelimited", "useJsonNodeReader", *written}
    return {**written, **_rest(given, known)}


_IO_LATER = ("stopTaskCount", "emitTimeLagMetrics", "lagAggregator")  # newer Druid: when set


def _io_config(io: dict[str, Any]) -> dict[str, Any]:
    stream = io.get("topic") or io.get("topicPattern")
    written: dict[str, Any] = {"topic": io.get("topic")}
    if io.get("topicPattern") is not None:
        written["topicPattern"] = io["topicPattern"]
    written |= {
        "inputFormat": _input_format(io.get("inputFormat")),
        "replicas": io.get("replicas", 1),
        "taskCount": io.get("taskCount", 1),
        "taskDuration": joda_duration(io.get("taskDuration", "PT1H")),
        "consumerProperties": io.get("consumerProperties"),
        "autoScalerConfig": io.get("autoScalerConfig"),
        "pollTimeout": io.get("pollTimeout", 100),
        "startDelay": joda_duration(io.get("startDelay", "PT5S")),
        "period": joda_duration(io.get("period", "PT30S")),
        "useEarliestOffset": io.get("useEarliestOffset", False),
        "completionTimeout": joda_duration(io.get("completionTimeout", "PT30M")),
        "lateMessageRejectionPeriod": joda_duration(io.get("lateMessageRejectionPeriod")),
        "earlyMessageRejectionPeriod": joda_duration(io.get("earlyMessageRejectionPeriod")),
        "lateMessageRejectionStartDateTime": joda_datetime(
            io.get("lateMessageRejectionStartDateTime")
        ),
        "configOverrides": io.get("configOverrides"),
        "idleConfig": io.get("idleConfig"),
    }
    for key in _IO_LATER:
        if io.get(key) not in (None, False):
            written[key] = io[key]
    transition = io.get("repartitionTransitionDuration", "PT2M")
    if parse_period(transition).to_millis() != 120_000:  # Sluicegate's: written when set
        written["repartitionTransitionDuration"] = joda_duration(transition)
    if io.get("consumerGroupOffsets") is False:  # Sluicegate's: written when off
        written["consumerGroupOffsets"] = False
    written |= {"stream": stream, "useEarliestSequenceNumber": written["useEarliestOffset"]}
    known = {
        "type",
        "useEarliestSequenceNumber",
        "repartitionTransitionDuration",
        "consumerGroupOffsets",
        *written,
    }
    return {**written, **_rest(io, known | set(_IO_LATER))}


def _index_spec(given: dict[str, Any] | None) -> dict[str, Any]:
    return {**_INDEX_SPEC, **(given or {})}


def _tuning_config(tuning: dict[str, Any]) -> dict[str, Any]:
    index_spec = _index_spec(tuning.get("indexSpec"))
    intermediate = tuning.get("indexSpecForIntermediatePersists")
    appendable = tuning.get("appendableIndexSpec") or {"type": "onheap"}
    if appendable.get("type") == "onheap":
        appendable = {"type": "onheap", "preserveExistingMetrics": False, **appendable}
    written: dict[str, Any] = {
        "type": "kafka",
        "appendableIndexSpec": appendable,
        "maxRowsInMemory": tuning.get("maxRowsInMemory", 150_000),
        "maxBytesInMemory": tuning.get("maxBytesInMemory", 0),
        "skipBytesInMemoryOverheadCheck": tuning.get("skipBytesInMemoryOverheadCheck", False),
        "maxRowsPerSegment": tuning.get("maxRowsPerSegment", 5_000_000),
        "maxTotalRows": tuning.get("maxTotalRows"),
        "intermediatePersistPeriod": str(tuning.get("intermediatePersistPeriod", "PT10M")).upper(),
        "maxPendingPersists": tuning.get("maxPendingPersists", 0),
        "indexSpec": index_spec,
        "indexSpecForIntermediatePersists": _index_spec(intermediate)
        if intermediate
        else index_spec,
        "reportParseExceptions": tuning.get("reportParseExceptions", False),
        "handoffConditionTimeout": tuning.get("handoffConditionTimeout", 900_000),
        "resetOffsetAutomatically": tuning.get("resetOffsetAutomatically", False),
        "segmentWriteOutMediumFactory": tuning.get("segmentWriteOutMediumFactory"),
        "workerThreads": tuning.get("workerThreads"),
        "chatRetries": tuning.get("chatRetries", 8),
        "httpTimeout": joda_duration(tuning.get("httpTimeout", "PT10S")),
        "shutdownTimeout": joda_duration(tuning.get("shutdownTimeout", "PT80S")),
        "offsetFetchPeriod": joda_duration(tuning.get("offsetFetchPeriod", "PT30S")),
        "intermediateHandoffPeriod": str(
            tuning.get("intermediateHandoffPeriod", f"P{INT_MAX}D")
        ).upper(),
        "logParseExceptions": tuning.get("logParseExceptions", False),
        "maxParseExceptions": tuning.get("maxParseExceptions", INT_MAX),
        "maxSavedParseExceptions": tuning.get("maxSavedParseExceptions", 0),
    }
    later = {"numPersistThreads": 1, "maxColumnsToMerge": -1, "releaseLocksOnHandoff": False}
    for key, default in later.items():  # newer Druid's: written when not the default
        if tuning.get(key, default) != default:
            written[key] = tuning[key]
    written["skipSequenceNumberAvailabilityCheck"] = False  # Kafka's, always
    written["repartitionTransitionDuration"] = "PT120S"  # Kafka's constant
    return {**written, **_rest(tuning, {*written, *later})}
