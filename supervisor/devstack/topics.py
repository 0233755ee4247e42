"""Topic creation and producing, for the quickstart and the tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    timeout: float = 30.0,
    client: Mapping[str, str] | None = None,
) -> bool:
    """Create a topic; False when it already exists. `client`: librdkafka settings beyond
    the bootstrap servers (a secured broker's)."""
    # log_level 3: a client destroyed at once logs "Purging 1 unserved events" at level 6
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3, **(client or {})})
    future = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[
        name
    ]
    try:
        future.result(timeout)
    except KafkaException as exc:
        if exc.args and exc.args[0].name() == "TOPIC_ALREADY_EXISTS":
            return False
        raise
    return True


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes]],
    partition: int | None = None,
    transactional_id: str | None = None,
    client: Mapping[str, str] | None = None,
) -> int:
    """Produce (key, value) records and wait for every delivery; return how many were sent."""
    # log_level 3: librdkafka's retry warnings while a fresh broker loads its coordinators are noise
    config = {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "enable.idempotence": True,
        "log_level": 3,
        **(client or {}),
    }
    if transactional_id:
        config["transactional.id"] = transactional_id
    producer = Producer(config)
    errors: list[str] = []

    def _delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    if transactional_id:
        producer.init_transactions()
        producer.begin_transaction()
    count = 0
    for key, value in records:
        while True:
            try:
                if partition is None:
                    producer.produce(topic, value=value, key=key, on_delivery=_delivered)
                else:
                    producer.produce(
                        topic, value=value, key=key, partition=partition, on_delivery=_delivered
                    )
                break
            except BufferError:
                # the local queue is full (a fresh broker still electing leaders, or a burst
                # faster than delivery): wait for deliveries to make room
                producer.poll(0.1)
        producer.poll(0)
        count += 1
    if transactional_id:
        producer.commit_transaction()
    remaining = producer.flush(60)
    if remaining or errors:
        raise RuntimeError(f"{remaining} records undelivered; errors: {errors[:3]}")
    return count
