"""Spec builders shared by the tests."""

from __future__ import annotations

import copy
from typing import Any

MINIMAL: dict[str, Any] = {
    "type": "kafka",
    "spec": {
        "dataSchema": {
            "dataSource": "wiki",
            "timestampSpec": {"column": "ts", "format": "iso"},
            "dimensionsSpec": {"dimensions": ["channel", {"type": "long", "name": "delta"}]},
            "metricsSpec": [
                {"type": "count", "name": "count"},
                {"type": "longSum", "name": "added", "fieldName": "added"},
            ],
            "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "MINUTE"},
        },
        "ioConfig": {
            "topic": "wiki-edits",
            "consumerProperties": {"bootstrap.servers": "127.0.0.1:9092"},
            "inputFormat": {"type": "json"},
        },
    },
}


def spec(datasource: str = "wiki", **io_overrides: Any) -> dict[str, Any]:
    body = copy.deepcopy(MINIMAL)
    body["spec"]["dataSchema"]["dataSource"] = datasource
    body["spec"]["ioConfig"].update(io_overrides)
    return body


def set_path(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Set a dotted path (list indexes as numbers); a value of ... deletes the key."""
    parts = path.split(".")
    node: Any = body
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if value is ...:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return body


def task(task_id: str, consumer_properties: dict[str, Any]) -> dict[str, Any]:
    """An index_kafka task of the wiki datasource over one record of topic t (a user's own,
    as POST /druid/indexer/v1/task takes it)."""
    numbers = {"type": "end", "stream": "t"}
    return {
        "type": "index_kafka",
        "id": task_id,
        "dataSchema": spec("wiki")["spec"]["dataSchema"],
        "ioConfig": {
            "topic": "t",
            "consumerProperties": consumer_properties,
            "inputFormat": {"type": "json"},
            "startSequenceNumbers": {**numbers, "partitionSequenceNumberMap": {"0": 0}},
            "endSequenceNumbers": {**numbers, "partitionSequenceNumberMap": {"0": 1}},
        },
    }
