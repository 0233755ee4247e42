"""Batches read in Spark's Python workers with librdkafka (tasks/reading/direct_read.py) against
Spark's Kafka source, on the real broker: the same records of every range, transactions included,
and the Kafka source wherever the direct read cannot promise that."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic, produce
from tasks.protocol import KafkaIndexTaskIOConfig
from tasks.reading import direct_read
from tasks.reading.combiner import JobCombiner
from tasks.reading.engines.base import EngineName
from tasks.reading.engines.choice import Engines
from tasks.reading.engines.python_workers import PythonWorkerEngine
from tasks.reading.reader import GROUP_ID, KafkaBatch, read_range
from tasks.rows.pipeline import RowPlan, process_batch

SCHEMA = {
    "dataSource": "d",
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["word"]},
    "metricsSpec": [
        {"type": "count", "name": "count"},
        {"type": "longSum", "name": "n", "fieldName": "n"},
    ],
    "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "NONE", "rollup": False},
}


def _record(i: int) -> bytes:
    return json.dumps(
        {"ts": f"2026-11-24T08:{i % 60:02d}:00Z", "word": f"w{i % 7}", "n": i}
    ).encode()


def _transactional_topic(kafka: LocalKafka) -> str:
    """Two partitions, each: 5 plain records, a committed transaction of 4, an aborted one of
    3, a committed one of 2 (each transaction ends with a marker): offsets 0..16, 11 readable."""
    topic = f"d-{uuid.uuid4().hex[:8]}"
    bootstrap = kafka.bootstrap_servers
    create_topic(bootstrap, topic, 2)
    for partition in range(2):
        produce(bootstrap, topic, ((None, _record(i)) for i in range(5)), partition=partition)
        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{partition}"}
        )
        producer.init_transactions()
        for first, count, commit in ((5, 4, True), (100, 3, False), (9, 2, True)):
            producer.begin_transaction()
            for i in range(first, first + count):
                producer.produce(topic, _record(i), partition=partition)
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    return topic


def _io(kafka: LocalKafka, topic: str, **props: Any) -> KafkaIndexTaskIOConfig:
    return KafkaIndexTaskIOConfig.model_validate(
        {
            "startSequenceNumbers": {
                "type": "start",
                "stream": topic,
                "partitionSequenceNumberMap": {"0": 0, "1": 0},
            },
            "consumerProperties": {"bootstrap.servers": kafka.bootstrap_servers, **props},
            "inputFormat": {"type": "json"},
        }
    )


def _directly(
    kafka: LocalKafka, topic: str, partition: int, start: int, end: int
) -> list[tuple[int, bytes]]:
    config = direct_read.consumer_config({"bootstrap.servers": kafka.bootstrap_servers})
    return [
        (offset, value)
        for batch in direct_read.read_range(config, topic, partition, start, end)
        for offset, value in zip(
            batch.column(2).to_pylist(), batch.column(0).to_pylist(), strict=True
        )
    ]


def test_every_range_reads_what_the_kafka_source_reads(kafka: LocalKafka, spark: Any) -> None:
    """Ranges that start or end on transaction markers and aborted records, read again out of
    order by the same (kept) consumer, give the Kafka source's records exactly."""
    topic = _transactional_topic(kafka)
    ranges = [(0, 17), (3, 10), (9, 17), (10, 14), (0, 5), (14, 17), (16, 17), (12, 13), (0, 17)]
    for start, end in ranges:
        frame = read_range(spark, kafka.bootstrap_servers, topic, {0: start}, {0: end})
        expected = sorted((r["offset"], bytes(r["value"])) for r in frame.collect())
        assert _directly(kafka, topic, 0, start, end) == expected, (start, end)
    assert len(_directly(kafka, topic, 1, 0, 17)) == 11
    groups = AdminClient({"bootstrap.servers": kafka.bootstrap_servers}).list_consumer_groups()
    assert GROUP_ID not in {group.group_id for group in groups.result(timeout=30).valid}


def test_one_kept_consumer_reads_many_new_topics_exactly(kafka: LocalKafka) -> None:
    """A host's Python worker reads ranges of topic after topic with its one kept consumer:
    each new topic's metadata is asked for before its range is assigned (assigned straight
    away, its first fetch waited about a second for librdkafka's own request, topic after
    topic: bench/density.py's first batches); every range reads exactly its records, and the
    consumer is the same one throughout."""
    config = direct_read.consumer_config({"bootstrap.servers": kafka.bootstrap_servers})
    key = json.dumps(config, sort_keys=True)
    topics = [f"many-{uuid.uuid4().hex[:8]}" for _ in range(6)]
    for topic in topics:
        create_topic(kafka.bootstrap_servers, topic, 2)
        for partition in range(2):
            produce(
                kafka.bootstrap_servers,
                topic,
                ((None, _record(i)) for i in range(10)),
                partition=partition,
            )
    consumers = set()
    for topic in topics:
        for partition, (start, end) in enumerate([(2, 9), (0, 10)]):
            got = _directly(kafka, topic, partition, start, end)
            assert [offset for offset, _ in got] == list(range(start, end)), (topic, partition)
            assert [value for _, value in got] == [_record(i) for i in range(start, end)]
            consumer, known = direct_read._consumers[key]
            consumers.add(id(consumer))
            assert topic in known
    assert len(consumers) == 1
    assert set(topics) <= direct_read._consumers[key][1]


def test_ranges_read_together_give_what_each_read_alone_gives(kafka: LocalKafka) -> None:
    """read_together (a combined job's slice): ranges of two transactional topics, the same
    partition more than once (replicas on one host), one past the readable end, one empty:
    each gets exactly what read_range gives it."""
    first, second = _transactional_topic(kafka), _transactional_topic(kafka)
    config = direct_read.consumer_config({"bootstrap.servers": kafka.bootstrap_servers})
    ranges = [
        (first, 0, 0, 17),
        (first, 0, 3, 10),
        (second, 1, 9, 17),
        (first, 1, 10, 14),
        (second, 0, 16, 17),
        (first, 0, 12, 13),
        (second, 1, 0, 5),
    ]
    together = direct_read.read_together(config, ranges)
    for (topic, partition, start, end), got in zip(ranges, together, strict=True):
        assert not isinstance(got, direct_read.ReadGiveUp), got
        rows = [
            (offset, value)
            for batch in got
            for offset, value in zip(
                batch.column(2).to_pylist(), batch.column(0).to_pylist(), strict=True
            )
        ]
        assert rows == _directly(kafka, topic, partition, start, end), (topic, partition, start)


def test_a_batch_persists_the_same_read_either_way(
    kafka: LocalKafka, spark: Any, tmp_path: Path
) -> None:
    topic = _transactional_topic(kafka)
    plan = RowPlan(_schema(), _io(kafka, topic).inputFormat)
    batch = KafkaBatch(spark, _io(kafka, topic), {0: 2, 1: 0}, {0: 17, 1: 12})
    workers = PythonWorkerEngine(spark, plan)
    direct = workers.persist(workers.read(batch), str(tmp_path / "direct"), 5, [])
    by_source = workers.persist(batch.frame(), str(tmp_path / "source"), 5, [])
    assert direct.stats == by_source.stats and direct.stats.processed == 9 + 9
    assert _rows(tmp_path / "direct") == _rows(tmp_path / "source")


def test_batches_of_many_tasks_in_one_job_persist_what_each_job_alone_does(
    kafka: LocalKafka, spark: Any, tmp_path: Path
) -> None:
    """The shared application's combined jobs (tasks/reading/combiner.py): five tasks' batches, of
    two topics and two plans, lined up and run as one job; each task gets its own counts and
    samples, and its persist holds what a job of its own writes."""
    first, second = _transactional_topic(kafka), _transactional_topic(kafka)
    other = {**SCHEMA, "dimensionsSpec": {"dimensions": ["word", {"type": "long", "name": "m"}]}}
    from tasks.spec.data_schema import DataSchema

    cases = [
        (first, _schema(), {0: 0, 1: 0}, {0: 17, 1: 17}),
        (second, _schema(), {0: 2, 1: 5}, {0: 12, 1: 17}),
        (first, DataSchema.model_validate(other), {0: 3, 1: 0}, {0: 16, 1: 9}),
        (second, DataSchema.model_validate(other), {0: 0, 1: 0}, {0: 17, 1: 1}),
        (first, _schema(), {0: 10, 1: 10}, {0: 10, 1: 14}),
    ]
    combiner = JobCombiner(spark, start=False)
    outcomes: dict[int, Any] = {}

    def persist(number: int, engine: PythonWorkerEngine, batch: KafkaBatch, path: Path) -> None:
        outcomes[number] = engine.persist(engine.read(batch), str(path), 5, [])

    threads = []
    for number, (topic, schema, start, end) in enumerate(cases):
        io = _io(kafka, topic)
        engine = PythonWorkerEngine(spark, RowPlan(schema, io.inputFormat), combiner=combiner)
        batch = KafkaBatch(spark, io, start, end)
        thread = threading.Thread(
            target=persist, args=(number, engine, batch, tmp_path / f"combined-{number}")
        )
        thread.start()
        threads.append(thread)
    deadline = time.monotonic() + 60
    while combiner.waiting_count() < len(cases) and time.monotonic() < deadline:
        time.sleep(0.05)
    combiner.start()
    for thread in threads:
        thread.join(120)
    assert combiner.jobs == 1 and combiner.batches == len(cases)
    for number, (topic, schema, start, end) in enumerate(cases):
        io = _io(kafka, topic)
        alone = PythonWorkerEngine(spark, RowPlan(schema, io.inputFormat))
        batch = KafkaBatch(spark, io, start, end)
        expected = alone.persist(alone.read(batch), str(tmp_path / f"alone-{number}"), 5, [])
        assert outcomes[number].stats == expected.stats, number
        assert outcomes[number].samples == expected.samples, number
        combined_rows = _rows(tmp_path / f"combined-{number}")
        assert combined_rows == _rows(tmp_path / f"alone-{number}"), number
        assert len(combined_rows) == expected.stats.processed
    combiner.close()


def test_properties_librdkafka_does_not_take_send_the_batch_to_the_kafka_source(
    kafka: LocalKafka, spark: Any, tmp_path: Path
) -> None:
    """A Java-only consumer property: the workers give the read up, the Kafka source reads the
    batch and the workers still build its persist."""
    topic = _transactional_topic(kafka)
    io = _io(kafka, topic, **{"ssl.truststore.type": "JKS"})
    plan = RowPlan(_schema(), io.inputFormat)
    batch = KafkaBatch(spark, io, {0: 0, 1: 0}, {0: 17, 1: 17})
    with pytest.raises(direct_read.ReadGiveUp, match="consumer properties"):
        PythonWorkerEngine(spark, plan).read(batch)
    persist = tmp_path / "persist"
    (persist).mkdir()
    (persist / "stale.parquet").write_bytes(b"left by a worker that read before another gave up")
    persisted = Engines(spark, plan).persist(batch, str(persist), 5, [])
    assert persisted.engine is EngineName.PYTHON_WORKERS
    result = persisted.result
    assert result.stats.processed == 22
    assert sum(pq.read_table(path).num_rows for path in persist.glob("*.parquet")) == 22


def test_records_cut_short_keep_the_batch_in_the_workers(
    kafka: LocalKafka, spark: Any, tmp_path: Path
) -> None:
    """Records a producer cut off mid-object are counted and sampled by the workers reading the
    broker, as the Spark pipeline counts them; the batch does not go to Spark."""
    topic = f"d-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    for partition in range(2):
        values = [_record(i) for i in range(8)]
        values[3] = values[3][:20]
        values[6] = values[6][:-1]
        produce(kafka.bootstrap_servers, topic, ((None, v) for v in values), partition=partition)
    io = _io(kafka, topic)
    plan = RowPlan(_schema(), io.inputFormat)
    batch = KafkaBatch(spark, io, {0: 0, 1: 0}, {0: 8, 1: 8})
    workers = PythonWorkerEngine(spark, plan)
    direct = workers.persist(workers.read(batch), str(tmp_path / "direct"), 5, [])
    spark_made = process_batch(plan, batch.frame(), str(tmp_path / "spark"), 5, [])
    assert direct.stats == spark_made.stats and direct.stats.unparseable == 4
    assert direct.samples == spark_made.samples and len(direct.samples) == 4
    assert len(_rows(tmp_path / "direct")) == direct.stats.processed == 12


def test_offsets_gone_from_the_log_or_never_reached_give_the_read_up(
    kafka: LocalKafka, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = f"d-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 1)
    produce(kafka.bootstrap_servers, topic, ((None, _record(i)) for i in range(10)), partition=0)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    for future in admin.delete_records([TopicPartition(topic, 0, 4)]).values():
        future.result(30)
    assert [o for o, _ in _directly(kafka, topic, 0, 4, 10)] == list(range(4, 10))
    with pytest.raises(direct_read.ReadGiveUp):
        _directly(kafka, topic, 0, 2, 10)
    monkeypatch.setattr(direct_read, "STALL_S", 1.0)
    with pytest.raises(direct_read.ReadGiveUp, match="no progress at 10"):
        _directly(kafka, topic, 0, 6, 12)


def _schema() -> Any:
    from tasks.spec.data_schema import DataSchema

    return DataSchema.model_validate(SCHEMA)


def _rows(persist: Path) -> list[tuple[Any, ...]]:
    rows = [
        tuple(row.values())
        for path in persist.glob("*.parquet")
        for row in pq.read_table(path).to_pylist()
    ]
    return sorted(rows, key=repr)
