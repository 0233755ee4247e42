"""Specs for development runs, tests and benchmarks: a Kafka supervisor spec (JSON records with
an ISO `ts` column, the given dimensions, one topic; any ioConfig field can be overridden, a
`topicPattern` replaces the topic), and an index_kafka task over exact offset ranges."""

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


def index_task_payload(
    task_id: str,
    topic: str,
    bootstrap: str,
    data_schema: dict[str, Any],
    start: dict[int, int],
    end: dict[int, int],
    **tuning: Any,
) -> dict[str, Any]:
    """Druid's index_kafka task reading [start, end) of each partition of a JSON topic."""

    def numbers(kind: str, offsets: dict[int, int]) -> dict[str, Any]:
        partitions = {str(p): o for p, o in offsets.items()}
        return {"type": kind, "stream": topic, "partitionSequenceNumberMap": partitions}

    return {
        "type": "index_kafka",
        "id": task_id,
        "dataSchema": data_schema,
        "tuningConfig": {"type": "kafka", **tuning},
        "ioConfig": {
            "type": "kafka",
            "startSequenceNumbers": numbers("start", start),
            "endSequenceNumbers": numbers("end", end),
            "consumerProperties": {"bootstrap.servers": bootstrap},
            "inputFormat": {"type": "json"},
        },
    }
