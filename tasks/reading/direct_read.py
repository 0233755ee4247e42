"""A micro-batch's exact offset ranges read inside Spark's Python workers with librdkafka
(confluent-kafka), for the Python-worker batch (tasks/reading/worker_batch.py): one Spark task per
partition range, each consuming its range and handing the values on as Arrow record batches.

Spark's Kafka source decodes every record into a row in the JVM, converts the rows to Arrow
and ships them to the Python worker; librdkafka hands the worker the values directly. On this
machine a 150,000-record batch over four partitions took the Kafka source 0.4-0.55 s in the
no-op sink alone; librdkafka consumes one partition's 37,500 records in ~0.04 s.

The read must give what the Kafka source gives (read_committed, the offsets of exactly
[start, end)); whatever this path cannot promise makes it give up (`ReadGiveUp`), and the
batch is read by the Kafka source instead: consumer properties librdkafka does not take,
offsets no longer in the log (the Kafka source fails the batch, failOnDataLoss), a consumer
error, or no progress for STALL_S.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tasks.kafka_offsets import client_config
from tasks.partitions import PartitionKey, split_key
from tasks.reading.reader import GROUP_ID

log = logging.getLogger(__name__)
CHUNK = 10_000  # records per Arrow batch handed on
WAIT_S = 0.5  # one consume() call's longest wait
STALL_S = 30.0  # no record nor end-of-partition for this long: give the batch to Spark
CONSUMERS_KEPT = 8  # per Python worker process


@dataclass(frozen=True)
class Reading:
    """What the Python workers need to read a batch (pickled to each): the consumer settings
    and the (topic, partition, start, end) ranges."""

    config: dict[str, Any]
    ranges: list[tuple[str, int, int, int]]


class ReadGiveUp(Exception):
    """A range this path cannot read as Spark's Kafka source would."""


class RefusedSettings(ReadGiveUp):
    """Consumer settings librdkafka refuses (checked on the driver, once)."""


def consumer_config(consumer_properties: Mapping[str, Any]) -> dict[str, Any]:
    """A librdkafka consumer's settings for exact reads: the task's brokers and security
    settings (as its offset lookups use them), read_committed, nothing committed, an error
    (not a jump) where offsets are gone, and end-of-partition events."""
    return {
        **client_config(dict(consumer_properties)),
        "group.id": GROUP_ID,  # required by librdkafka; assign() forms no group, nothing commits
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 10,  # see tasks/reading/reader.py CONSUMER_DEFAULTS
        # prefetch a chunk ahead, not librdkafka's 100,000 messages: a range mostly ends
        # before the log does, and what was fetched past it is thrown away. A full queue makes
        # the fetcher wait fetch.queue.backoff.ms (1 s by default): with a chunk's queue that
        # held a 37,500-record range up 1-2 s (0.02-0.07 s with 5 ms)
        "queued.min.messages": CHUNK,
        "fetch.queue.backoff.ms": 5,
    }


def ranges(
    stream: str, start: Mapping[PartitionKey, int], end: Mapping[PartitionKey, int]
) -> list[tuple[str, int, int, int]]:
    """(topic, partition, start, end) of each partition with records to read."""
    rows = []
    for key in start:
        if end[key] > start[key]:
            topic, number = split_key(key, stream)
            rows.append((topic, number, start[key], end[key]))
    return rows


def ranges_frame(spark: Any, rows: list[tuple[str, int, int, int]]) -> Any:
    """A DataFrame of the ranges' indexes, one Spark partition each (each becomes one Spark
    task; `read_ranges` looks the range up). spark.range is made in the JVM: a DataFrame of
    the ranges themselves from Python rows took a second Python pass per task."""
    return spark.range(0, len(rows), 1, len(rows))


# ---- in the Python worker -------------------------------------------------------------------

# settings (JSON) -> an idle consumer, kept between batches, and the topics it has metadata of
_consumers: dict[str, tuple[Any, set[str]]] = {}
METADATA_TIMEOUT_S = 10.0


def read_ranges(reading: Reading, batches: Iterator[Any]) -> Iterator[Any]:
    """The records of the ranges whose indexes the batches hold (`ranges_frame`), as Arrow
    record batches of (value, partition, offset)."""
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield from read_range(reading.config, *reading.ranges[index])


def read_range(
    config: dict[str, Any], topic: str, partition: int, start: int, end: int
) -> Iterator[Any]:
    try:
        from confluent_kafka import KafkaError, TopicPartition
    except ImportError as exc:
        raise ReadGiveUp(f"confluent-kafka is not importable here: {exc}") from exc

    with _pooled(config, f"{topic}/{partition}: ") as (consumer, known):
        _learn(consumer, known, {topic})
        consumer.assign([TopicPartition(topic, partition, start)])
        values: list[bytes | None] = []
        offsets: list[int] = []
        position, progress = start, time.monotonic()
        while position < end:
            # consume() waits out its timeout until it has as many messages as asked, and
            # transaction markers, aborted records and compacted offsets never come: take what
            # is queued now, and only wait (for one) when nothing is
            messages = consumer.consume(min(CHUNK, end - position), 0) or consumer.consume(
                1, WAIT_S
            )
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise ReadGiveUp(f"{topic}/{partition}: {error}")
                    # nothing readable before this offset: the rest of the range, if any, is
                    # transaction markers or aborted records (read_committed skips them)
                    position = max(position, message.offset())
                    continue
                offset = message.offset()
                if offset < position:
                    continue
                if offset >= end:
                    position = end
                    break
                values.append(message.value())
                offsets.append(offset)
                position = offset + 1
            if messages:
                progress = time.monotonic()
            elif time.monotonic() - progress > STALL_S:
                raise ReadGiveUp(f"{topic}/{partition}: no progress at {position} in {STALL_S} s")
            if len(values) >= CHUNK or (values and position >= end):
                yield _batch(values, partition, offsets)
                values, offsets = [], []
        consumer.unassign()  # no fetching past the range while the consumer waits


def _learn(consumer: Any, known: set[str], topics: set[str]) -> None:
    """The metadata of the topics new to the consumer, asked for before they are assigned.
    Assigned straight away, a new topic's first fetch waited about a second for librdkafka's
    own metadata request, each new topic in turn (a host's hundred new tasks: a hundred
    seconds). Several new topics are asked for in one request for the whole cluster's: one
    at a time, a hundred new tasks' first combined job spent ~0.4 s on them."""
    new = topics - known
    if len(new) > 1:
        metadata = consumer.list_topics(timeout=METADATA_TIMEOUT_S)
        known.update(name for name, topic in metadata.topics.items() if topic.error is None)
        new -= known
    for topic in new:  # one, or one the cluster's answer did not have yet
        consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
        known.add(topic)


class _Range:
    """One range's read in progress (read_together)."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        self.topic, self.partition, self.end = topic, partition, end
        self.position = start
        self.progress = time.monotonic()
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.batches: list[Any] = []
        self.error: ReadGiveUp | None = None

    def done(self) -> bool:
        return self.error is not None or self.position >= self.end

    def take(self, message: Any, eof_code: int) -> None:
        """A message of this range's partition, by the rules of read_range."""
        self.progress = time.monotonic()
        error = message.error()
        if error is not None:
            if error.code() != eof_code:
                self.error = ReadGiveUp(f"{self.topic}/{self.partition}: {error}")
            else:
                self.position = max(self.position, message.offset())
            return
        offset = message.offset()
        if offset < self.position:
            return
        if offset >= self.end:
            self.position = self.end
            return
        self.values.append(message.value())
        self.offsets.append(offset)
        self.position = offset + 1
        if len(self.values) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.values:
            self.batches.append(_batch(self.values, self.partition, self.offsets))
            self.values, self.offsets = [], []


def read_together(
    config: dict[str, Any], ranges: list[tuple[str, int, int, int]]
) -> list[list[Any] | ReadGiveUp]:
    """Each range's records (Arrow batches of value, partition, offset), or the ReadGiveUp of
    a range that cannot be read (the others still are): every partition assigned at once, so
    one fetch serves them all. Read one after another, a hundred quiet ranges took 1.3 s on
    a local broker (a fetch round trip each); together, 0.04-0.1 s. Ranges of the same
    partition (replicas on one host) are read in rounds."""
    try:
        from confluent_kafka import KafkaError, TopicPartition
    except ImportError as exc:
        raise ReadGiveUp(f"confluent-kafka is not importable here: {exc}") from exc

    states = [_Range(*r) for r in ranges]
    rounds: list[list[_Range]] = []
    for state in states:
        place = (state.topic, state.partition)
        for group in rounds:
            if all((s.topic, s.partition) != place for s in group):
                group.append(state)
                break
        else:
            rounds.append([state])
    with _pooled(config, "") as (consumer, known):
        for group in rounds:
            _learn(consumer, known, {s.topic for s in group})
            reading = {(s.topic, s.partition): s for s in group if not s.done()}
            assigned = [TopicPartition(s.topic, s.partition, s.position) for s in reading.values()]
            consumer.assign(assigned)
            while reading:
                messages = consumer.consume(CHUNK, 0) or consumer.consume(1, WAIT_S)
                for message in messages:
                    taker = reading.get((message.topic(), message.partition()))
                    if taker is not None:
                        taker.take(message, KafkaError._PARTITION_EOF)
                now = time.monotonic()
                for part, state in list(reading.items()):
                    if not state.done() and now - state.progress > STALL_S:
                        state.error = ReadGiveUp(
                            f"{state.topic}/{state.partition}: no progress at "
                            f"{state.position} in {STALL_S} s"
                        )
                    if state.done():
                        del reading[part]
                        # no fetching past the range while the others read
                        consumer.pause([TopicPartition(state.topic, state.partition)])
            # a partition's pause outlives its assignment in librdkafka: the next read of it
            # (this consumer is kept) would wait for nothing
            consumer.resume(assigned)
            consumer.unassign()
    results: list[list[Any] | ReadGiveUp] = []
    for state in states:
        state.flush()
        results.append(state.error if state.error is not None else state.batches)
    return results


def _consumer(config: dict[str, Any]) -> Any:
    from confluent_kafka import Consumer, KafkaException

    try:
        return Consumer(config)
    except (KafkaException, ValueError, TypeError) as exc:
        raise ReadGiveUp(f"librdkafka does not take these consumer properties: {exc}") from exc


def settings_key(config: dict[str, Any]) -> str:
    """Consumer settings as one string: what kept consumers and refused settings are keyed by,
    and what a combined job groups its ranges by."""
    return json.dumps(config, sort_keys=True)


@contextlib.contextmanager
def _pooled(config: dict[str, Any], where: str) -> Iterator[tuple[Any, set[str]]]:
    """A consumer of `config` from the pool (or a new one) and the topics it knows: back in the
    pool after the read, closed after a failed one (a Kafka error gives the read up, `where`
    names it)."""
    from confluent_kafka import KafkaException

    key = settings_key(config)
    kept = _consumers.pop(key, None)
    consumer, known = kept if kept is not None else (_consumer(config), set[str]())
    try:
        yield consumer, known
    except KafkaException as exc:
        _close(consumer)
        raise ReadGiveUp(f"{where}{exc}") from exc
    except BaseException:
        _close(consumer)
        raise
    _keep(key, consumer, known)


def _close(consumer: Any) -> None:
    """Close a consumer on the way out of an error without hiding that error."""
    with contextlib.suppress(Exception):
        consumer.close()


_refused: dict[str, str] = {}  # settings (JSON) -> why librdkafka refused them (driver side)


def check(config: dict[str, Any]) -> None:
    """On the driver, before a Spark job: ReadGiveUp if librdkafka refuses the settings (Java-only
    properties such as a JKS truststore), remembered so each batch does not find it again."""
    key = settings_key(config)
    if key not in _refused:
        try:
            _close(_consumer(config))
            _refused[key] = ""
        except ReadGiveUp as exc:
            _refused[key] = str(exc)
            log.warning("batches are read by Spark's Kafka source: %s", exc)
    if _refused[key]:
        raise RefusedSettings(_refused[key])


def _keep(key: str, consumer: Any, known: set[str]) -> None:
    _consumers[key] = (consumer, known)
    while len(_consumers) > CONSUMERS_KEPT:
        _consumers.pop(next(iter(_consumers)))[0].close()


def _batch(values: list[bytes | None], partition: int, offsets: list[int]) -> Any:
    import pyarrow as pa

    return pa.record_batch(
        [
            pa.array(values, pa.binary()),
            pa.array([partition] * len(values), pa.int32()),
            pa.array(offsets, pa.int64()),
        ],
        names=["value", "partition", "offset"],
    )
