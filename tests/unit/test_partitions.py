"""Partition keys of one topic (numbers) and of a topicPattern ("topic:partition")."""

from __future__ import annotations

import pytest

from supervisor.controller.actions import CreateTask
from supervisor.controller.plan import groups_of, plan
from tasks.partitions import (
    by_topic,
    offsets_from_json,
    offsets_json,
    parse_key,
    sorted_keys,
    split_key,
    task_group,
)
from tasks.protocol import SequenceNumbers
from tasks.reading.reader import assign_json, offset_json
from tests.unit.test_plan import snap


@pytest.mark.parametrize(
    ("text", "key"),
    [("0", 0), ("17", 17), (3, 3), ("wiki:0", "wiki:0"), ("a:b:12", "a:b:12"), ("t:007", "t:7")],
)
def test_parse_key(text: str | int, key: int | str) -> None:
    assert parse_key(text) == key


@pytest.mark.parametrize("text", ["", "-1", "x", "wiki:", ":3", "wiki:-1", "wiki:x", -2])
def test_parse_key_refuses(text: str | int) -> None:
    with pytest.raises(ValueError, match="partition ids are non-negative integers"):
        parse_key(text)


def test_keys_sort_by_topic_then_number_and_round_trip_through_json() -> None:
    keys = ["b:0", "a:10", "a:9", "a:0"]
    assert sorted_keys(keys) == ["a:0", "a:9", "a:10", "b:0"]
    assert sorted_keys([10, 2, 1]) == [1, 2, 10]
    offsets = {"b:0": 5, "a:10": 1, "a:9": 2}
    assert list(offsets_json(offsets)) == ["a:9", "a:10", "b:0"]
    assert offsets_from_json(offsets_json({2: 5, 10: 1})) == {2: 5, 10: 1}
    assert split_key(3, "wiki") == ("wiki", 3)
    assert split_key("edits:3", "ignored") == ("edits", 3)
    assert by_topic(["b:1", "a:0", "b:0"], "") == {"a": ["a:0"], "b": ["b:0", "b:1"]}


def test_task_groups_follow_druid() -> None:
    # one topic: partition % taskCount
    assert [task_group(p, 3) for p in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    # a pattern: abs(31 * topic.hashCode() + partition) % taskCount, Java int arithmetic;
    # "hello".hashCode() == 99162322, and 31 * 99162322 wraps to -1220935314
    assert task_group("hello:0", 7) == 1220935314 % 7
    assert task_group("hello:1", 1000) == 313  # abs(-1220935313) % 1000
    assert groups_of(("t:1", "t:0", "u:0"), 1) == {0: ["t:0", "t:1", "u:0"]}


def test_sequence_numbers_take_either_kind_of_key_but_not_both() -> None:
    multi = SequenceNumbers(
        type="start", stream="wiki-.*", partitionSequenceNumberMap={"wiki-a:0": 3, "wiki-b:1": 4}
    )
    assert multi.offsets() == {"wiki-a:0": 3, "wiki-b:1": 4}
    with pytest.raises(ValueError, match="all numbers or all 'topic:partition'"):
        SequenceNumbers(
            type="start", stream="wiki", partitionSequenceNumberMap={"0": 3, "wiki-b:1": 4}
        )
    with pytest.raises(ValueError, match="partition ids are non-negative integers"):
        SequenceNumbers(type="start", stream="wiki", partitionSequenceNumberMap={"p1": 3})


def test_the_kafka_source_options_name_each_topic() -> None:
    start = {"wiki-b:0": 4, "wiki-a:1": 2, "wiki-a:0": 1}
    assert assign_json("wiki-.*", start) == '{"wiki-b": [0], "wiki-a": [0, 1]}'
    assert offset_json("wiki-.*", start) == ('{"wiki-b": {"0": 4}, "wiki-a": {"1": 2, "0": 1}}')
    assert offset_json("wiki", {0: 5, 1: 6}) == '{"wiki": {"0": 5, "1": 6}}'


def test_plan_groups_a_pattern_by_topic_and_partition() -> None:
    keys = ("edits:0", "edits:1", "pages:0")
    snapshot = snap(
        partitions=keys,
        earliest=dict.fromkeys(keys, 0),
        latest=dict.fromkeys(keys, 50),
        committed={"edits:0": 7},
    )
    created = [a for a in plan(snapshot) if isinstance(a, CreateTask)]
    expected = groups_of(keys, 2)
    assert {a.group: sorted_keys(a.start) for a in created} == expected
    starts = {k: o for a in created for k, o in a.start.items()}
    # committed offsets where there are some; new partitions from the earliest offset
    assert starts == {"edits:0": 7, "edits:1": 0, "pages:0": 0}
    assert len(created) == 2 * len(expected)  # two replicas per group
