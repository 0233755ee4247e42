"""Partition keys, shared by the overlord and the tasks.

A supervisor of one `topic` keys its partitions by number (JSON "0", "1", ...); a supervisor of
a `topicPattern` reads several topics and keys each partition "topic:number", as Druid 28+'s
multi-topic KafkaTopicPartition is serialized. The two never mix within one supervisor (a spec
update cannot switch between them), and the task group of a key follows Druid: `partition %
taskCount` for one topic, `abs(31 * topic.hashCode() + partition) % taskCount` for a pattern.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PartitionKey = int | str
Offsets = dict[PartitionKey, int]


def multi_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def parse_key(text: str | int) -> PartitionKey:
    """ "3" -> 3; "events:3" -> "events:3"; anything else is a ValueError naming the problem."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ValueError("partition ids are non-negative integers")
        return text
    text = str(text)
    if text.isdigit():
        return int(text)
    topic, sep, number = text.rpartition(":")
    if not sep or not topic or not number.isdigit():
        raise ValueError(
            "partition ids are non-negative integers, or 'topic:partition' for a topicPattern"
        )
    return multi_key(topic, int(number))


def split_key(key: PartitionKey, stream: str) -> tuple[str, int]:
    """(topic, partition number); a numbered key belongs to `stream`, the supervisor's topic."""
    if isinstance(key, int):
        return stream, key
    topic, _, number = key.rpartition(":")
    return topic, int(number)


def order(key: PartitionKey) -> tuple[str, int]:
    """Sort key: by topic, then partition number (so "t:10" comes after "t:9")."""
    return split_key(key, "")


def sorted_keys(keys: Iterable[PartitionKey]) -> list[PartitionKey]:
    return sorted(keys, key=order)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit wrap-around)."""
    data = text.encode("utf-16-be")
    value = 0
    for i in range(0, len(data), 2):
        value = (31 * value + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def task_group(key: PartitionKey, task_count: int) -> int:
    """The task group a partition belongs to, as Druid assigns it."""
    if isinstance(key, int):
        return key % task_count
    topic, number = split_key(key, "")
    mixed = (31 * java_string_hash(topic) + number) & 0xFFFFFFFF
    signed = mixed - (1 << 32) if mixed >= 1 << 31 else mixed
    return abs(signed) % task_count  # Java's Math.abs; Python's % keeps it non-negative


def offsets_json(offsets: Mapping[PartitionKey, int]) -> dict[str, int]:
    return {str(p): o for p, o in sorted(offsets.items(), key=lambda item: order(item[0]))}


def offsets_from_json(raw: Mapping[str, Any]) -> Offsets:
    return {parse_key(p): int(o) for p, o in raw.items()}


def by_topic(keys: Iterable[PartitionKey], stream: str) -> dict[str, list[PartitionKey]]:
    """The keys grouped by the topic they belong to, each group in partition order."""
    topics: dict[str, list[PartitionKey]] = {}
    for key in sorted_keys(keys):
        topics.setdefault(split_key(key, stream)[0], []).append(key)
    return topics
