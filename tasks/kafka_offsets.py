"""Where partitions begin and end right now, as a read_committed consumer sees them."""

from __future__ import annotations

from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]


class OffsetReader:
    def __init__(self, consumer_properties: dict[str, object], timeout: float = 10.0) -> None:
        allowed = ("bootstrap.servers", "security.protocol", "sasl.", "ssl.", "client.id")
        config: dict[str, str | int | float | bool] = {
            k: str(v) for k, v in consumer_properties.items() if k.startswith(allowed)
        }
        self.admin = AdminClient(config)
        self.timeout = timeout

    def _list(self, topic: str, partitions: list[int], spec: OffsetSpec) -> dict[int, int]:
        request = {TopicPartition(topic, p): spec for p in partitions}
        futures = self.admin.list_offsets(
            request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=self.timeout
        )
        return {tp.partition: future.result(self.timeout).offset for tp, future in futures.items()}

    def latest(self, topic: str, partitions: list[int]) -> dict[int, int]:
        """The last stable offset of each partition: what read_committed can read up to."""
        return self._list(topic, partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]

    def earliest(self, topic: str, partitions: list[int]) -> dict[int, int]:
        return self._list(topic, partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]
