"""Spec features the pipeline cannot run yet are refused by name at submission."""

from __future__ import annotations

from typing import Any

import pytest

from supervisor.schemas.spec import parse_supervisor_spec
from tasks.support import unsupported
from tests.specs import set_path, spec

DS = "spec.dataSchema"
IO = "spec.ioConfig"

CASES: list[tuple[str, Any, str, str]] = [
    (
        f"{DS}.transformSpec.transforms",
        [{"type": "expression", "name": "x", "expression": "lookup(page, 'names')"}],
        f"{DS}.transformSpec.transforms[0].expression",
        "function lookup() is not supported yet",
    ),
    (
        f"{DS}.transformSpec.filter",
        {"type": "javascript", "dimension": "x"},
        f"{DS}.transformSpec.filter.type",
        "filter type 'javascript' is not supported yet",
    ),
    (
        f"{DS}.transformSpec.filter",
        {"type": "and", "fields": [{"type": "interval", "dimension": "x"}]},
        f"{DS}.transformSpec.filter.fields[0].type",
        "filter type 'interval'",
    ),
    (
        f"{DS}.transformSpec.filter",
        {"type": "selector", "dimension": "x", "value": "1", "extractionFn": {"type": "substring"}},
        f"{DS}.transformSpec.filter.extractionFn",
        "extraction functions",
    ),
    (
        f"{DS}.metricsSpec",
        [{"type": "thetaSketch", "name": "u", "fieldName": "user"}],
        f"{DS}.metricsSpec[0].type",
        "aggregator 'thetaSketch' is not supported yet",
    ),
    (
        f"{DS}.metricsSpec",
        [{"type": "longSum", "name": "a", "expression": "x + 1"}],
        f"{DS}.metricsSpec[0].expression",
        "expression inputs",
    ),
    (
        f"{DS}.dimensionsSpec.dimensions",
        [{"type": "json", "name": "payload"}],
        f"{DS}.dimensionsSpec.dimensions[0].type",
        "'json' dimensions",
    ),
    (
        f"{DS}.granularitySpec.segmentGranularity",
        {"type": "period", "period": "PT2H"},
        f"{DS}.granularitySpec.segmentGranularity",
        "only named granularities",
    ),
    (
        f"{DS}.granularitySpec.segmentGranularity",
        "all",
        f"{DS}.granularitySpec.segmentGranularity",
        "only named granularities",
    ),
    (
        f"{IO}.inputFormat",
        {"type": "orc"},
        f"{IO}.inputFormat.type",
        "input format 'orc' is not supported yet",
    ),
    (
        f"{IO}.inputFormat",
        {"type": "json", "flattenSpec": {"fields": [{"type": "path"}]}},
        f"{IO}.inputFormat.flattenSpec.fields[0].name",
        "is required",
    ),
    (
        f"{IO}.inputFormat",
        {"type": "kafka", "valueFormat": {"type": "protobuf"}},
        f"{IO}.inputFormat.valueFormat.protoBytesDecoder",
        "needs its protoBytesDecoder",
    ),
]


@pytest.mark.parametrize(("path", "value", "field", "reason"), CASES, ids=[c[2] for c in CASES])
def test_unsupported_features_are_named(path: str, value: Any, field: str, reason: str) -> None:
    parsed = parse_supervisor_spec(set_path(spec(), path, value))
    problems = {
        p.field: p.reason
        for p in unsupported(parsed.spec.dataSchema, parsed.spec.ioConfig.inputFormat, "spec.")
    }
    assert field in problems, problems
    assert reason in problems[field]


def test_the_supported_pipeline_passes() -> None:
    body = spec()
    body["spec"]["dataSchema"]["transformSpec"] = {
        "transforms": [
            {"type": "expression", "name": "site", "expression": "concat(upper(page), '!')"}
        ],
        "filter": {
            "type": "or",
            "fields": [
                {"type": "selector", "dimension": "channel", "value": "#en"},
                {"type": "bound", "dimension": "added", "lower": "10", "ordering": "numeric"},
            ],
        },
    }
    body["spec"]["dataSchema"]["metricsSpec"].append(
        {"type": "stringLast", "name": "lastUser", "fieldName": "user"}
    )
    body["spec"]["ioConfig"]["inputFormat"] = {"type": "kafka", "valueFormat": {"type": "json"}}
    parsed = parse_supervisor_spec(body)
    assert unsupported(parsed.spec.dataSchema, parsed.spec.ioConfig.inputFormat, "spec.") == []
