"""A Kafka supervisor spec for development runs, tests and benchmarks: JSON records with an
ISO `ts` column, the given dimensions, one topic; any ioConfig field can be overridden (a
`topicPattern` replaces the topic)."""

from __future__ import annotations

from typing import Any


def supervisor_spec(
    datasource: str,
    topic: str,
    bootstrap: str,
    dimensions: list[Any],
    *,
    segment_granularity: str = "HOUR",
    metrics: list[dict[str, Any]] | None = None,
    tuning: dict[str, Any] | None = None,
    **io: Any,
) -> dict[str, Any]:
    return {
        "type": "kafka",
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": dimensions},
                "metricsSpec": metrics or [],
                "granularitySpec": {"segmentGranularity": segment_granularity, "rollup": False},
            },
            "ioConfig": {
                **({} if "topicPattern" in io else {"topic": topic}),
                "consumerProperties": {"bootstrap.servers": bootstrap},
                "inputFormat": {"type": "json"},
                "useEarliestOffset": True,
                **io,
            },
            "tuningConfig": {"type": "kafka", **(tuning or {})},
        },
    }
