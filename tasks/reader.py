"""Read an exact offset range of a Kafka topic as one Spark batch job."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def offset_json(topic: str, offsets: Mapping[int, int]) -> str:
    return json.dumps({topic: {str(partition): offset for partition, offset in offsets.items()}})


def read_range(
    spark: Any,
    bootstrap_servers: str,
    topic: str,
    start: Mapping[int, int],
    end: Mapping[int, int],
    consumer_properties: Mapping[str, str] | None = None,
) -> Any:
    """A DataFrame of the records in [start, end) of each partition, read with read_committed.

    Columns are the Kafka source's: key, value, topic, partition, offset, timestamp,
    timestampType (and headers).
    """
    if set(start) != set(end):
        raise ValueError("start and end offsets must name the same partitions")
    for partition in start:
        if end[partition] < start[partition]:
            raise ValueError(
                f"partition {partition}: end {end[partition]} < start {start[partition]}"
            )
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("assign", json.dumps({topic: sorted(start)}))
        .option("startingOffsets", offset_json(topic, start))
        .option("endingOffsets", offset_json(topic, end))
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", "true")
        .option("failOnDataLoss", "true")
    )
    for key, value in (consumer_properties or {}).items():
        if key != "bootstrap.servers":
            reader = reader.option(f"kafka.{key}", value)
    return reader.load()
