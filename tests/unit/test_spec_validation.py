"""Every validation rule of the supervisor spec, as a table: mutation → field and reason."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.schemas.spec import parse_supervisor_spec
from tasks.spec.errors import SpecError
from tests.specs import set_path, spec

IO = "spec.ioConfig"
TUNING = "spec.tuningConfig"
DS = "spec.dataSchema"

INVALID: list[tuple[str, Any, str, str]] = [
    ("type", ..., "type", "is required"),
    ("type", "kinesis", "type", "unsupported supervisor type 'kinesis'"),
    ("id", "", "id", "cannot be empty"),
    ("id", "a/b", "id", "may hold only letters"),
    ("id", "a\nb", "id", "may hold only letters"),  # a newline forged log lines
    ("id", "a\x00b", "id", "may hold only letters"),
    ("id", "\u202e", "id", "may hold only letters"),
    ("id", " ", "id", "may hold only letters"),
    ("id", "x" * 201, "id", "longer than 200"),
    ("id", "history", "id", "name of a route"),  # GET /supervisor/history shadowed it
    ("id", "suspendAll", "id", "name of a route"),
    ("id", "-rf", "id", "start with a letter"),
    (f"{IO}.taskCount", True, f"{IO}.taskCount", "not true or false"),
    (f"{IO}.replicas", True, f"{IO}.replicas", "not true or false"),
    (f"{IO}.replicas", 10**6, f"{IO}.replicas", "less than or equal to 32"),
    (f"{IO}.taskCount", 10**18, f"{IO}.taskCount", "less than or equal to 10000"),
    (f"{IO}.taskDuration", "P2147483647D", f"{IO}.taskDuration", "longer than 36500 days"),
    (f"{IO}.taskDuration", "PT99999999999999999999S", f"{IO}.taskDuration", "longer than"),
    (f"{IO}.startDelay", "P99999999D", f"{IO}.startDelay", "longer than"),
    (f"{IO}.topic", "a\nb", f"{IO}.topic", "not a Kafka topic name"),
    (f"{IO}.topic", "t" * 250, f"{IO}.topic", "not a Kafka topic name"),
    (f"{DS}.dataSource", ..., f"{DS}.dataSource", "Field required"),
    (f"{DS}.dataSource", "", f"{DS}.dataSource", "at least 1 character"),
    (f"{DS}.dataSource", ".hidden", f"{DS}.dataSource", "start with a letter"),
    (f"{DS}.dataSource", "a/b", f"{DS}.dataSource", "may hold only letters"),
    (f"{DS}.dataSource", "a\tb", f"{DS}.dataSource", "may hold only letters"),
    (f"{DS}.dataSource", "terminateAll", f"{DS}.dataSource", "name of a route"),
    (f"{DS}.dataSource", "_tasks", f"{DS}.dataSource", "folder of tasks' persists"),
    (
        f"{DS}.timestampSpec.format",
        "sometimes",
        f"{DS}.timestampSpec.format",
        "unknown timestamp format",
    ),
    (
        f"{DS}.dimensionsSpec.dimensions",
        ["a", "a"],
        f"{DS}.dimensionsSpec.dimensions[1]",
        "listed twice",
    ),
    (
        f"{DS}.dimensionsSpec.dimensions",
        [{"type": "blob", "name": "x"}],
        f"{DS}.dimensionsSpec.dimensions[0].type",
        "Input should be",
    ),
    (
        f"{DS}.dimensionsSpec.dimensions",
        [{"type": "long"}],
        f"{DS}.dimensionsSpec.dimensions[0].name",
        "Field required",
    ),
    (
        f"{DS}.dimensionsSpec.dimensionExclusions",
        ["channel"],
        f"{DS}.dimensionsSpec.dimensions[0]",
        "both a dimension and excluded",
    ),
    (
        f"{DS}.dimensionsSpec.dimensions",
        ["__time"],
        f"{DS}.dimensionsSpec.dimensions[0]",
        "forceSegmentSortByTime",
    ),
    (
        f"{DS}.metricsSpec",
        [{"type": "longSum", "name": "x"}],
        f"{DS}.metricsSpec[0].fieldName",
        "exactly one of fieldName and expression",
    ),
    (
        f"{DS}.metricsSpec",
        [{"type": "hyperLogLogPlus", "name": "x"}],
        f"{DS}.metricsSpec[0].type",
        "unknown aggregator type",
    ),
    (f"{DS}.metricsSpec", [{"type": "count"}], f"{DS}.metricsSpec[0].name", "Field required"),
    (
        f"{DS}.metricsSpec",
        [{"type": "count", "name": "c"}, {"type": "count", "name": "c"}],
        f"{DS}.metricsSpec[1].name",
        "defined twice",
    ),
    (
        f"{DS}.metricsSpec",
        [{"type": "count", "name": "channel"}],
        f"{DS}.metricsSpec[0].name",
        "both a dimension and a metric",
    ),
    (
        f"{DS}.metricsSpec",
        [{"type": "filtered", "name": "f"}],
        f"{DS}.metricsSpec[0].aggregator",
        "needs aggregator and filter",
    ),
    (
        f"{DS}.granularitySpec.segmentGranularity",
        "fortnight",
        f"{DS}.granularitySpec.segmentGranularity",
        "unknown granularity 'fortnight'",
    ),
    (
        f"{DS}.granularitySpec.segmentGranularity",
        "none",
        f"{DS}.granularitySpec.segmentGranularity",
        "not a segment granularity",
    ),
    (
        f"{DS}.granularitySpec.queryGranularity",
        "DAY",
        f"{DS}.granularitySpec.queryGranularity",
        "coarser than segmentGranularity",
    ),
    (
        f"{DS}.granularitySpec.queryGranularity",
        {"type": "period"},
        f"{DS}.granularitySpec.queryGranularity.period",
        "is required",
    ),
    (
        f"{DS}.granularitySpec.queryGranularity",
        {"type": "duration", "duration": -5},
        f"{DS}.granularitySpec.queryGranularity.duration",
        "positive",
    ),
    (f"{DS}.granularitySpec.rollup", "maybe", f"{DS}.granularitySpec.rollup", "valid boolean"),
    (
        f"{DS}.transformSpec.transforms",
        [
            {"type": "expression", "name": "x", "expression": "1"},
            {"type": "expression", "name": "x", "expression": "2"},
        ],
        f"{DS}.transformSpec.transforms[1].name",
        "defined twice",
    ),
    (
        f"{DS}.transformSpec.transforms",
        [{"type": "javascript", "name": "x", "expression": "1"}],
        f"{DS}.transformSpec.transforms[0].type",
        "Input should be 'expression'",
    ),
    (
        f"{DS}.transformSpec.filter",
        {"dimension": "x"},
        f"{DS}.transformSpec.filter.type",
        "needs a type",
    ),
    (f"{IO}.topic", ..., f"{IO}.topic", "exactly one of topic and topicPattern"),
    (f"{IO}.topicPattern", "wiki-.*", f"{IO}.topic", "exactly one of topic and topicPattern"),
    (f"{IO}.topic", "", f"{IO}.topic", "not a Kafka topic name"),
    (f"{IO}.consumerProperties", ..., f"{IO}.consumerProperties", "Field required"),
    (
        f"{IO}.consumerProperties",
        {"group.id": "x"},
        f"{IO}.consumerProperties.bootstrap.servers",
        "must hold bootstrap.servers",
    ),
    (
        f"{IO}.consumerProperties",
        {"bootstrap.servers": " "},
        f"{IO}.consumerProperties.bootstrap.servers",
        "must hold bootstrap.servers",
    ),
    (f"{IO}.inputFormat", ..., f"{IO}.inputFormat", "is required"),
    (f"{IO}.inputFormat", {"type": "xml"}, f"{IO}.inputFormat.type", "unknown input format 'xml'"),
    (f"{IO}.inputFormat", {"type": "csv"}, f"{IO}.inputFormat.columns", "needs its columns"),
    (
        f"{IO}.inputFormat",
        {"type": "kafka"},
        f"{IO}.inputFormat.valueFormat",
        "needs a valueFormat",
    ),
    (f"{IO}.taskCount", 0, f"{IO}.taskCount", "greater than or equal to 1"),
    (f"{IO}.taskCount", "two", f"{IO}.taskCount", "valid integer"),
    (f"{IO}.replicas", -1, f"{IO}.replicas", "greater than or equal to 1"),
    (f"{IO}.pollTimeout", 0, f"{IO}.pollTimeout", "greater than 0"),
    (f"{IO}.taskDuration", "1 hour", f"{IO}.taskDuration", "not an ISO-8601 period"),
    (f"{IO}.taskDuration", "PT0S", f"{IO}.taskDuration", "longer than zero"),
    (f"{IO}.taskDuration", "P1M", f"{IO}.taskDuration", "years or months"),
    (f"{IO}.period", "often", f"{IO}.period", "not an ISO-8601 period"),
    (f"{IO}.completionTimeout", "PT", f"{IO}.completionTimeout", "not an ISO-8601 period"),
    (f"{IO}.startDelay", "soon", f"{IO}.startDelay", "not an ISO-8601 period"),
    (f"{IO}.lateMessageRejectionPeriod", "P1X", f"{IO}.lateMessageRejectionPeriod", "ISO-8601"),
    (f"{IO}.earlyMessageRejectionPeriod", "x", f"{IO}.earlyMessageRejectionPeriod", "ISO-8601"),
    (
        f"{IO}.lateMessageRejectionStartDateTime",
        "yesterday",
        f"{IO}.lateMessageRejectionStartDateTime",
        "not an ISO-8601 date-time",
    ),
    (f"{IO}.topicPattern", "wiki-(", f"{IO}.topic", "exactly one of topic and topicPattern"),
    (f"{IO}.stopTaskCount", 0, f"{IO}.stopTaskCount", "greater than 0"),
    (
        f"{IO}.autoScalerConfig",
        {"enableTaskAutoScaler": True, "taskCountMin": 1},
        f"{IO}.autoScalerConfig.taskCountMax",
        "is required",
    ),
    (
        f"{IO}.autoScalerConfig",
        {"enableTaskAutoScaler": True, "taskCountMax": 2},
        f"{IO}.autoScalerConfig.taskCountMin",
        "is required",
    ),
    (
        f"{IO}.autoScalerConfig",
        {"enableTaskAutoScaler": True, "taskCountMax": 2, "taskCountMin": 3},
        f"{IO}.autoScalerConfig.taskCountMin",
        "not be greater than taskCountMax",
    ),
    (
        f"{IO}.autoScalerConfig",
        {"enableTaskAutoScaler": True, "taskCountMax": 4, "taskCountMin": 2, "taskCountStart": 5},
        f"{IO}.autoScalerConfig.taskCountStart",
        "between taskCountMin and taskCountMax",
    ),
    (
        f"{IO}.autoScalerConfig",
        {"triggerScaleOutFractionThreshold": 1.5},
        f"{IO}.autoScalerConfig.triggerScaleOutFractionThreshold",
        "less than or equal to 1",
    ),
    (
        f"{IO}.autoScalerConfig",
        {"stopTaskCountRatio": 0},
        f"{IO}.autoScalerConfig.stopTaskCountRatio",
        "greater than 0",
    ),
    (
        f"{IO}.autoScalerConfig",
        {"lagAggregate": "MEDIAN"},
        f"{IO}.autoScalerConfig.lagAggregate",
        "Input should be",
    ),
    (
        f"{IO}.idleConfig",
        {"enabled": True, "inactiveAfterMillis": 0},
        f"{IO}.idleConfig.inactiveAfterMillis",
        "greater than 0",
    ),
    (f"{IO}.type", "kinesis", f"{IO}.type", "Input should be 'kafka'"),
    (f"{TUNING}.maxRowsInMemory", 0, f"{TUNING}.maxRowsInMemory", "greater than 0"),
    (f"{TUNING}.maxRowsPerSegment", -3, f"{TUNING}.maxRowsPerSegment", "greater than 0"),
    (f"{TUNING}.maxTotalRows", 0, f"{TUNING}.maxTotalRows", "greater than 0"),
    (
        f"{TUNING}.intermediatePersistPeriod",
        "10m",
        f"{TUNING}.intermediatePersistPeriod",
        "ISO-8601",
    ),
    (
        f"{TUNING}.handoffConditionTimeout",
        -1,
        f"{TUNING}.handoffConditionTimeout",
        "greater than or equal to 0",
    ),
    (
        f"{TUNING}.maxParseExceptions",
        -1,
        f"{TUNING}.maxParseExceptions",
        "greater than or equal to 0",
    ),
    (f"{TUNING}.httpTimeout", "ten seconds", f"{TUNING}.httpTimeout", "ISO-8601"),
    (f"{TUNING}.offsetFetchPeriod", "PT0S", f"{TUNING}.offsetFetchPeriod", "longer than zero"),
    (f"{TUNING}.numPersistThreads", 0, f"{TUNING}.numPersistThreads", "greater than or equal to 1"),
    (f"{TUNING}.type", "index_parallel", f"{TUNING}.type", "Input should be 'kafka'"),
    ("spec", "nope", "spec", "valid dictionary"),
]


@pytest.mark.parametrize(
    ("path", "value", "field", "reason"), INVALID, ids=[f"{r[0]}={r[1]!r}"[:60] for r in INVALID]
)
def test_invalid_specs_name_the_field_and_reason(
    path: str, value: Any, field: str, reason: str
) -> None:
    body = set_path(spec(), path, value)
    with pytest.raises(SpecError) as raised:
        parse_supervisor_spec(body)
    fields = {error.field: error.reason for error in raised.value.errors}
    assert field in fields, fields
    assert reason in fields[field]


def test_druid_defaults_are_filled_in() -> None:
    parsed = parse_supervisor_spec(spec())
    io, tuning = parsed.spec.ioConfig, parsed.spec.tuningConfig
    assert (io.taskCount, io.replicas, io.taskDuration, io.startDelay) == (1, 1, "PT1H", "PT5S")
    assert (io.period, io.completionTimeout, io.useEarliestOffset, io.pollTimeout) == (
        "PT30S",
        "PT30M",
        False,
        100,
    )
    # maxTotalRows: null, as Druid writes it; the task applies Druid's 20,000,000 then
    assert (tuning.maxRowsInMemory, tuning.maxRowsPerSegment, tuning.maxTotalRows) == (
        150_000,
        5_000_000,
        None,
    )
    assert (tuning.intermediatePersistPeriod, tuning.intermediateHandoffPeriod) == (
        "PT10M",
        "P2147483647D",
    )
    assert (tuning.handoffConditionTimeout, tuning.chatRetries, tuning.httpTimeout) == (
        900_000,
        8,
        "PT10S",
    )
    assert (tuning.maxParseExceptions, tuning.maxSavedParseExceptions) == (2_147_483_647, 0)
    assert (tuning.offsetFetchPeriod, tuning.repartitionTransitionDuration) == ("PT30S", "PT2M")
    assert parsed.supervisor_id == "wiki"
    granularity = parsed.spec.dataSchema.granularitySpec
    assert granularity.rollup is True


def test_legacy_top_level_layout_is_accepted() -> None:
    nested = spec()
    legacy = {"type": "kafka", **nested["spec"]}
    assert parse_supervisor_spec(legacy).to_json() == parse_supervisor_spec(nested).to_json()


def test_with_both_layouts_spec_wins_as_in_druid() -> None:
    """Druid's read-back repeats spec's sections at the top level; a spec read, edited inside
    `spec` and sent back is the edited spec (Druid ignores the copies when spec is given)."""
    body = spec()
    body["ioConfig"] = {**body["spec"]["ioConfig"], "topic": "other"}
    assert parse_supervisor_spec(body).spec.ioConfig.topic == spec()["spec"]["ioConfig"]["topic"]


def test_unknown_druid_fields_are_kept() -> None:
    body = spec()
    body["spec"]["ioConfig"]["serverPriorityToReplicas"] = {"1": 2}
    body["spec"]["tuningConfig"] = {"type": "kafka", "someFutureKnob": [1, 2]}
    body["context"] = {"tags": {"team": "data"}}
    out = parse_supervisor_spec(body).to_json()
    assert out["spec"]["ioConfig"]["serverPriorityToReplicas"] == {"1": 2}
    assert out["spec"]["tuningConfig"]["someFutureKnob"] == [1, 2]
    assert out["context"] == {"tags": {"team": "data"}}


def test_use_earliest_sequence_number_alias() -> None:
    parsed = parse_supervisor_spec(spec(useEarliestSequenceNumber=True))
    assert parsed.spec.ioConfig.useEarliestOffset is True


def test_report_parse_exceptions_means_fail_on_first() -> None:
    body = spec()
    body["spec"]["tuningConfig"] = {"reportParseExceptions": True, "maxSavedParseExceptions": 10}
    tuning = parse_supervisor_spec(body).spec.tuningConfig
    assert (tuning.maxParseExceptions, tuning.maxSavedParseExceptions) == (0, 1)


def test_late_rejection_period_and_start_time_are_exclusive() -> None:
    body = spec(
        lateMessageRejectionPeriod="PT1H", lateMessageRejectionStartDateTime="2026-01-01T00:00:00Z"
    )
    with pytest.raises(SpecError, match="cannot be combined with lateMessageRejectionPeriod"):
        parse_supervisor_spec(body)


def test_topic_pattern_must_compile() -> None:
    body = spec()
    del body["spec"]["ioConfig"]["topic"]
    body["spec"]["ioConfig"]["topicPattern"] = "wiki-("
    with pytest.raises(SpecError, match="topicPattern: is not a valid regular expression"):
        parse_supervisor_spec(body)


def test_several_errors_are_reported_together() -> None:
    body = spec(taskCount=0, replicas=0)
    with pytest.raises(SpecError) as raised:
        parse_supervisor_spec(body)
    assert {e.field for e in raised.value.errors} >= {f"{IO}.taskCount", f"{IO}.replicas"}


def test_legacy_parser_stands_in_for_input_format() -> None:
    body = spec()
    del body["spec"]["ioConfig"]["inputFormat"]
    body["spec"]["dataSchema"]["parser"] = {"type": "string", "parseSpec": {"format": "json"}}
    assert parse_supervisor_spec(body).spec.dataSchema.parser is not None


@pytest.mark.parametrize("body", [[], "spec", 3, None])
def test_body_must_be_an_object(body: Any) -> None:
    with pytest.raises(SpecError, match="must be a JSON object"):
        parse_supervisor_spec(body)


@pytest.mark.parametrize(
    "pattern", ["yyyy-MM-dd HH:mm:ss", "dd/MM/yyyy'T'HH:mm", "EEE, d MMM yyyy HH:mm:ss Z"]
)
def test_joda_timestamp_patterns_are_accepted(pattern: str) -> None:
    body = set_path(spec(), "spec.dataSchema.timestampSpec.format", pattern)
    assert parse_supervisor_spec(body).spec.dataSchema.timestampSpec.format == pattern
