"""The real broker and Spark with the spark-sql-kafka connector, end to end."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from supervisor.controller.observe import StreamError, StreamReader
from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic, produce
from supervisor.net import free_port
from tasks.reading.reader import GROUP_ID, read_range


def _topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _filled_topic(kafka: LocalKafka, partitions: int, records: int) -> str:
    """A new topic whose every partition holds `records` JSON records {"p": partition, "i": i}."""
    topic = _topic()
    create_topic(kafka.bootstrap_servers, topic, partitions)
    for partition in range(partitions):
        produce(
            kafka.bootstrap_servers,
            topic,
            ((None, json.dumps({"p": partition, "i": i}).encode()) for i in range(records)),
            partition=partition,
        )
    return topic


def test_produce_and_consume_through_the_broker(kafka: LocalKafka) -> None:
    topic = _topic()
    assert create_topic(kafka.bootstrap_servers, topic, 2) is True
    assert create_topic(kafka.bootstrap_servers, topic, 2) is False
    records = [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(50)]
    assert produce(kafka.bootstrap_servers, topic, records, partition=1) == 50
    consumer = Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": f"g-{topic}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, 1, 0)])
    seen: list[int] = []
    while len(seen) < 50:
        message = consumer.poll(10)
        assert message is not None, f"only {len(seen)} records arrived"
        assert message.error() is None
        seen.append(json.loads(message.value())["n"])
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 1), timeout=10)
    consumer.close()
    assert seen == list(range(50))
    assert (low, high) == (0, 50)


def test_spark_reads_an_exact_offset_range(kafka: LocalKafka, spark) -> None:
    topic = _filled_topic(kafka, 3, 20)
    start = {0: 0, 1: 5, 2: 19}
    end = {0: 10, 1: 12, 2: 20}
    frame = read_range(spark, kafka.bootstrap_servers, topic, start, end)
    rows = frame.select("partition", "offset", frame.value.cast("string").alias("v")).collect()
    got = sorted((r["partition"], r["offset"]) for r in rows)
    expected = sorted((p, o) for p in start for o in range(start[p], end[p]))
    assert got == expected
    for row in rows:
        assert json.loads(row["v"]) == {"p": row["partition"], "i": row["offset"]}


def test_spark_skips_transaction_markers_and_aborted_records(kafka: LocalKafka, spark) -> None:
    """read_committed: a committed transaction's control records leave gaps, not data loss."""
    topic = _topic()
    create_topic(kafka.bootstrap_servers, topic, 1)
    produce(
        kafka.bootstrap_servers,
        topic,
        ((None, f"{i}".encode()) for i in range(5)),
        partition=0,
        transactional_id=f"tx-{topic}",
    )
    produce(
        kafka.bootstrap_servers,
        topic,
        ((None, f"{i}".encode()) for i in range(5, 8)),
        partition=0,
        transactional_id=f"tx-{topic}",
    )
    # 5 records + a commit marker, then 3 records + a commit marker: offsets 0..9
    frame = read_range(spark, kafka.bootstrap_servers, topic, {0: 0}, {0: 10})
    values = sorted(
        int(r["v"]) for r in frame.select(frame.value.cast("string").alias("v")).collect()
    )
    assert values == list(range(8))


def test_reads_of_one_process_reuse_consumers_and_stay_exact(kafka: LocalKafka, spark) -> None:
    """Every read of a process shares one group id (tasks.reading.reader.GROUP_ID), so Spark hands
    each batch the consumers the last one left: ranges after, before and inside earlier ones still
    read exactly their records, and no consumer group forms on the broker."""
    topic = _filled_topic(kafka, 2, 40)
    for start, end in [(10, 20), (20, 40), (0, 5), (5, 10), (12, 13), (39, 40)]:
        frame = read_range(
            spark, kafka.bootstrap_servers, topic, {0: start, 1: start}, {0: end, 1: end}
        )
        got = sorted((r["partition"], r["offset"]) for r in frame.collect())
        assert got == [(p, o) for p in range(2) for o in range(start, end)], (start, end)
    groups = AdminClient({"bootstrap.servers": kafka.bootstrap_servers}).list_consumer_groups()
    listed = {group.group_id for group in groups.result(timeout=30).valid}
    assert GROUP_ID not in listed


def test_stream_reader_keeps_one_client_per_cluster_and_drops_a_failed_one(
    kafka: LocalKafka,
) -> None:
    topic = _topic()
    create_topic(kafka.bootstrap_servers, topic, 2)
    produce(kafka.bootstrap_servers, topic, ((None, b"{}") for _ in range(3)), partition=1)
    stream = StreamReader(timeout_s=2.0)
    props = {"bootstrap.servers": kafka.bootstrap_servers}
    assert stream.describe(props, topic) == ((0, 1), {0: 0, 1: 0}, {0: 0, 1: 3})
    [client] = stream.readers._entries.values()
    produce(kafka.bootstrap_servers, topic, ((None, b"{}") for _ in range(2)), partition=0)
    assert stream.describe({**props, "group.id": "ignored"}, topic)[2] == {0: 2, 1: 3}
    assert list(stream.readers._entries.values()) == [client]  # the same cluster, one client
    dead = {"bootstrap.servers": f"127.0.0.1:{free_port()}"}
    with pytest.raises(StreamError, match="cannot reach Kafka"):
        stream.describe(dead, topic)
    assert list(stream.readers._entries.values()) == [client]  # the dead one is not kept
