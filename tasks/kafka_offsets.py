"""Where partitions begin and end right now, as a read_committed consumer sees them."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from tasks.kafka_properties import librdkafka_config, resolved
from tasks.partitions import PartitionKey, split_key

KAFKA_LOG = logging.getLogger("kafka")


def client_config(consumer_properties: Mapping[str, object]) -> dict[str, str]:
    """The consumer properties an admin client takes: where the brokers are, how to reach them."""
    allowed = ("bootstrap.servers", "security.protocol", "sasl.", "ssl.", "client.id")
    props = librdkafka_config(resolved(consumer_properties))
    return {k: v for k, v in props.items() if k.startswith(allowed)}


RETRY_S = 0.2
TRANSIENT = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    # what a broker that is restarting answers, or librdkafka says of it (bench/chaos.py seed
    # 10: a broker down 2.6 s failed every reading task with the first two)
    KafkaError._NOENT,  # "Failed to query partition leaders: No leaders found"
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError.BROKER_NOT_AVAILABLE,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError._ALL_BROKERS_DOWN,
}


# what asking Kafka raises: its own errors, and TimeoutError when a future is not answered
KAFKA_ERRORS = (KafkaException, TimeoutError)


def _error(exc: Exception) -> KafkaError | None:
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return error if isinstance(error, KafkaError) else None


def _code(exc: Exception) -> int | None:
    error = _error(exc)
    return None if error is None else int(error.code())


def transient(exc: Exception) -> bool:
    """A Kafka error that passes by itself (librdkafka's own retriable flag, or one of the
    codes a broker answers while a partition's leadership settles), or no answer in time."""
    if isinstance(exc, TimeoutError):
        return True
    error = _error(exc)
    return error is not None and (error.retriable() or error.code() in TRANSIENT)


class GroupOffsetsError(RuntimeError):
    """A consumer group's offsets were refused for some partitions (the cluster answered)."""


UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._ALL_BROKERS_DOWN}


def unreachable(exc: Exception) -> bool:
    """The cluster did not answer (not: it answered no)."""
    return isinstance(exc, TimeoutError) or _code(exc) in UNREACHABLE


ClientKey = tuple[tuple[str, str], ...]


def cluster_key(config: Mapping[str, str]) -> ClientKey:
    """Which admin client serves a client config (client_config's): one per config."""
    return tuple(sorted(config.items()))


class SharedAdmins:
    """The admin clients of a process, one per cluster (an admin client's config), for the
    readers that share them: the tasks of a host application (tasks/runtime/shared.py) reading one
    cluster ask where their partitions end through one client, not a client each (with its
    threads and broker connections: four threads a client, some 800 at 200 tasks). Held
    weakly: a cluster's client goes with the last reader holding it. A reader that finds the
    client stale (renew) makes the next one for all, at most every RENEW_AFTER_S: a partition
    that stays without a leader costs its task's retries, not every task a new client."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.lock = threading.Lock()
        self.clock = clock
        self.clients: weakref.WeakValueDictionary[ClientKey, AdminClient] = (
            weakref.WeakValueDictionary()
        )
        self.made_at: dict[ClientKey, float] = {}

    def get(self, key: ClientKey, make: Callable[[], AdminClient]) -> AdminClient:
        with self.lock:
            client = self.clients.get(key)
            if client is None:
                client = self._make(key, make)
            return client

    def renew(
        self, key: ClientKey, stale: AdminClient | None, make: Callable[[], AdminClient]
    ) -> AdminClient:
        """The client after `stale`: made now, unless another reader already replaced it or
        it is younger than RENEW_AFTER_S."""
        with self.lock:
            client = self.clients.get(key)
            if client is None or (
                client is stale and self.clock() - self.made_at[key] >= RENEW_AFTER_S
            ):
                client = self._make(key, make)
            return client

    def _make(self, key: ClientKey, make: Callable[[], AdminClient]) -> AdminClient:
        client = self.clients[key] = make()
        self.made_at[key] = self.clock()
        for gone in self.made_at.keys() - self.clients.keys():
            del self.made_at[gone]
        return client


# what a client says from its own metadata cache: a partition it does not know of (added after
# it last asked), no leader known for one
STALE_METADATA = {KafkaError._UNKNOWN_PARTITION, KafkaError._NOENT}
RENEW_AFTER_S = 30.0  # a shared client is replaced as stale at most this often
SHARED_ADMINS = SharedAdmins()


class OffsetReader:
    def __init__(
        self,
        consumer_properties: Mapping[str, object],
        timeout: float = 10.0,
        retry_transient: bool = False,
        shared: bool = False,
    ) -> None:
        """`retry_transient`: ask again, up to the timeout, while the broker answers an error
        that passes (a task's reads; not the overlord's lag probes, which answer at once).
        `shared`: its admin client is the process's one for the cluster (SharedAdmins)."""
        config = client_config(consumer_properties)
        self.config = config
        self.key: ClientKey | None = cluster_key(config) if shared else None
        self._admin: AdminClient | None = None
        self._making = threading.Lock()  # the overlord's passes share a reader per cluster
        self.timeout = timeout
        self.retry_transient = retry_transient

    def connect(self) -> None:
        """Its admin client made now, not on first use: a config Kafka refuses raises here."""
        _ = self.admin

    @property
    def admin(self) -> AdminClient:
        """Made on first use (record_times, the lag in time of each /metrics scrape, needs
        none, and a client connects to the brokers as soon as it is made); a shared reader's
        is the process's current one for its cluster."""
        if self.key is not None:
            self._admin = SHARED_ADMINS.get(self.key, self._client)
            return self._admin
        with self._making:
            if self._admin is None:
                self._admin = self._client()
            return self._admin

    @admin.setter
    def admin(self, client: AdminClient) -> None:
        """A client given outright: this reader's own from then on, shared or not."""
        self.key, self._admin = None, client

    def _renew(self) -> None:
        if self.key is None:
            self._admin = self._client()
        else:
            self._admin = SHARED_ADMINS.renew(self.key, self._admin, self._client)

    def _refresh(self, topics: set[str]) -> None:
        """Metadata of `topics` asked for, which updates the client's cache: a client made
        before a partition was added, or that saw partitions without leaders, answers from a
        cache it otherwise refreshes every 5 minutes (topic.metadata.refresh.interval.ms)."""
        for topic in sorted(topics):
            try:
                self.admin.list_topics(topic, timeout=min(self.timeout, 5.0))
            except KAFKA_ERRORS as exc:
                KAFKA_LOG.info("metadata of %s not refreshed: %s", topic, exc)

    def _client(self) -> AdminClient:
        # librdkafka's own log lines go through Python logging (text or JSON like the rest)
        return AdminClient({**self.config, "logger": KAFKA_LOG})  # type: ignore[dict-item]

    def _list(
        self, stream: str, partitions: list[PartitionKey], spec: OffsetSpec
    ) -> dict[PartitionKey, int]:
        """With retry_transient, asked again for up to the timeout while the broker answers an
        error that passes (a partition without a leader yet, a topic it does not know of yet, a
        request that timed out): a task's loop asks before every batch, and such an error
        failed the task."""
        keys = {split_key(key, stream): key for key in partitions}
        request = {TopicPartition(topic, number): spec for topic, number in keys}
        deadline = time.monotonic() + self.timeout
        while True:
            futures = self.admin.list_offsets(
                request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=self.timeout
            )
            try:
                return {
                    keys[(tp.topic, tp.partition)]: future.result(self.timeout).offset
                    for tp, future in futures.items()
                }
            except KAFKA_ERRORS as exc:
                stale = _code(exc) in STALE_METADATA
                if not self.retry_transient or not (stale or transient(exc)):
                    raise
                if stale:  # the client's own metadata: asked for afresh, then asked again
                    self._refresh({topic for topic, _ in keys})
                if time.monotonic() + RETRY_S >= deadline:
                    # A client that saw a restarting broker's partitions without a leader
                    # can keep saying "No leaders found" from its metadata cache long after
                    # they have one again: the next call asks with a new one.
                    if stale:
                        self._renew()
                    raise
                KAFKA_LOG.info("offsets of %s asked again: %s", stream, exc)
                time.sleep(RETRY_S)

    def latest(self, stream: str, partitions: list[PartitionKey]) -> dict[PartitionKey, int]:
        """The last stable offset of each partition: what read_committed can read up to.
        `stream` is the topic of numbered keys; "topic:n" keys name their own."""
        return self._list(stream, partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]

    def earliest(self, stream: str, partitions: list[PartitionKey]) -> dict[PartitionKey, int]:
        return self._list(stream, partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]

    def record_times(
        self, stream: str, offsets: dict[PartitionKey, int], timeout: float = 5.0
    ) -> dict[PartitionKey, int]:
        """The Kafka timestamp (epoch millis) of the record at each offset (the first readable
        one at or after it); partitions with none within `timeout` are left out."""
        if not offsets:
            return {}
        keys = {split_key(key, stream): key for key in offsets}
        consumer = Consumer(
            {
                **self.config,
                "group.id": "sluicegate-lag-probe",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "logger": KAFKA_LOG,
            }
        )
        found: dict[PartitionKey, int] = {}
        try:
            consumer.assign([TopicPartition(t, n, offsets[k]) for (t, n), k in keys.items()])
            deadline = time.monotonic() + timeout
            while len(found) < len(keys) and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is None or message.error() is not None:
                    continue
                topic, number = str(message.topic()), int(message.partition() or 0)
                key = keys[(topic, number)]
                if key not in found:
                    found[key] = message.timestamp()[1]
                    consumer.pause([TopicPartition(topic, number)])
        finally:
            consumer.close()
        return found

    def commit_group(self, group: str, stream: str, offsets: Mapping[PartitionKey, int]) -> None:
        """Set a consumer group's committed offsets (no member joins it: an admin request, as
        `kafka-consumer-groups.sh --reset-offsets` makes). `stream` is the topic of numbered
        keys; "topic:n" keys name their own."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        partitions = [
            TopicPartition(*split_key(key, stream), offset) for key, offset in offsets.items()
        ]
        request = ConsumerGroupTopicPartitions(group, partitions)
        answered = self.admin.alter_consumer_group_offsets([request], request_timeout=self.timeout)
        result = answered[group].result(timeout=self.timeout)
        failed = [p for p in result.topic_partitions or [] if p.error is not None]
        if failed:
            first = failed[0]
            raise GroupOffsetsError(
                f"{len(failed)} partition(s) refused, {first.topic}:{first.partition}: "
                f"{first.error}"
            )

    def group_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """A consumer group's committed offsets, by (topic, partition)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        asked = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout
        )
        result = asked[group].result(timeout=self.timeout)
        return {
            (str(p.topic), int(p.partition)): int(p.offset)
            for p in result.topic_partitions or []
            if p.offset >= 0
        }

    def delete_group(self, group: str) -> None:
        """Delete a consumer group and its offsets; one that does not exist is no error."""
        answered = self.admin.delete_consumer_groups([group], request_timeout=self.timeout)
        try:
            answered[group].result(timeout=self.timeout)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if not (
                isinstance(error, KafkaError) and error.code() == KafkaError.GROUP_ID_NOT_FOUND
            ):
                raise
