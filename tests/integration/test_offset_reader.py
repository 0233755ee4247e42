"""The offset reader's admin clients on a real broker: one shared by the tasks of a host
application sees what changes on the cluster as a client of its own would."""

from __future__ import annotations

import time
import uuid

from confluent_kafka.admin import AdminClient, NewPartitions

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic
from tasks.kafka_offsets import OffsetReader


def test_a_shared_client_sees_partitions_added_after_it_was_made(kafka: LocalKafka) -> None:
    """A partition added to a topic the shared client already knows: a task of it asks where
    the new partition ends and is answered, as a task with a client of its own is (the
    client's metadata cache said "Unknown partition" until its refresh, minutes later, and
    each task made for the partition failed at once: tests/e2e/test_supervisor.py launched
    2,838 tasks)."""
    topic = f"grown-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    config = {"bootstrap.servers": kafka.bootstrap_servers}
    first = OffsetReader(config, retry_transient=True, shared=True)
    assert first.latest(topic, [0, 1]) == {0: 0, 1: 0}
    admin = AdminClient(config)
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(30)
    began = time.monotonic()
    second = OffsetReader(config, retry_transient=True, shared=True)
    assert second.admin is first.admin  # the same client, made before the partition was
    assert second.latest(topic, [2]) == {2: 0}
    assert first.latest(topic, [0, 1, 2]) == {0: 0, 1: 0, 2: 0}
    assert time.monotonic() - began < first.timeout
