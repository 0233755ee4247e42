"""Read an exact offset range of one or more Kafka topics as one Spark batch job."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tasks.kafka_properties import resolved
from tasks.partitions import Offsets, PartitionKey, split_key

if TYPE_CHECKING:  # not at run time: Python workers import this module without pydantic
    from tasks.protocol import KafkaIndexTaskIOConfig

# An exact range is all there to read, so a fetch that finds nothing new has gone past its end
# and the broker need not hold it: with Kafka's default of 500 ms, a range ending at the log end
# (every batch of a caught-up task) waited that long per wave of Spark tasks. Measured on a
# 150k-record range ending at the log end, warm: 1.3 s with the default, 0.3 s with this.
CONSUMER_DEFAULTS = {"fetch.max.wait.ms": "10"}
# Spark keeps the Kafka consumers of a batch for reuse, keyed by group id and partition, but a
# batch read gets a new group id each time: every batch opened new consumers (and the pool
# logged "exceeds its soft max size"). One id for every read of this process lets each batch
# take the last one's consumers, as a streaming query's micro-batches do (the Structured
# Streaming baseline). Spark reads with assign() and never commits, so no group forms on the
# broker. 150-record batches, warm: median 111-145 ms -> 97 ms.
GROUP_ID = f"sluicegate-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def offset_json(stream: str, offsets: Mapping[PartitionKey, int]) -> str:
    """The Kafka source's offsets option: {"topic": {"partition": offset}} for each topic."""
    topics: dict[str, dict[str, int]] = {}
    for key, offset in offsets.items():
        topic, number = split_key(key, stream)
        topics.setdefault(topic, {})[str(number)] = offset
    return json.dumps(topics)


def assign_json(stream: str, keys: Mapping[PartitionKey, int]) -> str:
    topics: dict[str, list[int]] = {}
    for key in keys:
        topic, number = split_key(key, stream)
        topics.setdefault(topic, []).append(number)
    return json.dumps({topic: sorted(numbers) for topic, numbers in topics.items()})


def read_range(
    spark: Any,
    bootstrap_servers: str,
    stream: str,
    start: Mapping[PartitionKey, int],
    end: Mapping[PartitionKey, int],
    consumer_properties: Mapping[str, str] | None = None,
    headers: bool = False,
) -> Any:
    """A DataFrame of the records in [start, end) of each partition, read with read_committed.
    `stream` is the topic of numbered partition keys ("topic:n" keys name their own).

    Columns are the Kafka source's: key, value, topic, partition, offset, timestamp,
    timestampType, and with `headers` (Spark builds them for every record: ask only when the
    inputFormat reads them) headers.
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
        .option("assign", assign_json(stream, start))
        .option("startingOffsets", offset_json(stream, start))
        .option("endingOffsets", offset_json(stream, end))
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", str(headers).lower())
        .option("failOnDataLoss", "true")
    )
    defaults = {**CONSUMER_DEFAULTS, "group.id": GROUP_ID}
    for key, value in {**defaults, **(consumer_properties or {})}.items():
        if key != "bootstrap.servers":
            reader = reader.option(f"kafka.{key}", value)
    return reader.load()


@dataclass(frozen=True)
class KafkaBatch:
    """One micro-batch of a task: [start, end) of each partition of its stream, read as its
    ioConfig says. tasks/reading/worker_batch.py reads it in the Python workers where it can
    (tasks/reading/direct_read.py), else through `frame()`."""

    spark: Any
    io: KafkaIndexTaskIOConfig
    start: Offsets
    end: Offsets

    def frame(self) -> Any:
        """The records as a DataFrame from Spark's Kafka source."""
        io = self.io
        return read_range(
            self.spark,
            str(io.consumerProperties["bootstrap.servers"]),
            io.topic,
            self.start,
            self.end,
            kafka_options(io.consumerProperties),
            headers=io.inputFormat.type == "kafka",
        )


def kafka_options(props: dict[str, Any]) -> dict[str, str]:
    """A task's consumerProperties as the Kafka source's `kafka.` options."""
    skip = (
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "auto.offset.reset",
        "key.deserializer",
        "value.deserializer",
        "isolation.level",
    )
    return {
        k: str(v)
        for k, v in resolved(props).items()
        if k not in skip and not k.startswith("druid.")
    }
