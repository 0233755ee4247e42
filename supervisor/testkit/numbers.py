"""The numbered producer and its ledger: records {"ts": now, "n": n} for n = 0, 1, 2 ...
written to the topics in turn, and where each committed one landed, so a test or a chaos run
can prove that the published segments hold each record exactly once.

Plain (the end-to-end tests): one idempotent producer at `rate` records a second, and any
failed delivery fails the run. With `transactions` (the chaos runs): half the rate from the
idempotent producer, half in transactions of 1-8 records, about a third of them aborted
(drawn from the seed); a record whose outcome a fault left open (an idempotent producer's
failed delivery, a transactional producer that failed fatally in a commit) is `uncertain`,
counted neither missing nor aborted."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any


class Numbers:
    def __init__(
        self,
        bootstrap: str,
        topics: list[str],
        rate: float,
        seed: int = 0,
        transactions: bool = False,
        multi: bool = False,
    ) -> None:
        self.bootstrap, self.topics, self.rate = bootstrap, list(topics), rate
        self.multi = multi  # partition keys name the topic ("topic:0"), as a topicPattern's do
        self.transactions = transactions
        self.rng = random.Random(seed ^ 0x5EED)
        self.where: dict[int, tuple[str, int, int]] = {}  # n -> (topic, partition, offset)
        self.pending: dict[int, tuple[str, int, int]] = {}  # in an open transaction
        self.aborted: set[int] = set()
        self.uncertain: set[int] = set()
        self.errors: list[str] = []
        self.count = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.transactional_id = f"numbers-{seed}-{uuid.uuid4().hex[:6]}"
        self.plain = self._producer({"enable.idempotence": True})
        self.broken: list[str] = []  # a producer thread that died: the run proves nothing
        producers = [self._plain, self._transactions] if transactions else [self._plain]
        self.threads = [
            threading.Thread(target=self._guarded, args=(produce,), daemon=True)
            for produce in producers
        ]
        self.pause = len(producers) / rate  # between two records of one producer

    def _guarded(self, produce: Callable[[], None]) -> None:
        try:
            produce()
        except Exception as exc:
            self.broken.append(f"{produce.__name__}: {type(exc).__name__}: {exc}")

    def _producer(self, extra: dict[str, Any]) -> Any:
        from confluent_kafka import Producer

        return Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "linger.ms": 5,
                "message.timeout.ms": 900_000,  # a broker down for a while: wait, not fail
                "topic.metadata.refresh.interval.ms": 1000,  # added partitions soon
                "log_level": 0,
                **extra,
            }
        )

    def _next(self) -> tuple[int, str, bytes]:
        with self.lock:
            n = self.count
            self.count += 1
            topic = self.topics[n % len(self.topics)]
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        return n, topic, json.dumps({"ts": now, "n": n}).encode()

    def add_topic(self, topic: str) -> None:
        with self.lock:
            self.topics.append(topic)

    def start(self) -> Numbers:
        for thread in self.threads:
            thread.start()
        return self

    def _plain(self) -> None:
        def delivered(err: Any, msg: Any) -> None:
            n = json.loads(msg.value())["n"]
            with self.lock:
                if err is None:
                    self.where[n] = (msg.topic(), msg.partition(), msg.offset())
                else:  # an idempotent producer's failed record may still be in the log
                    self.uncertain.add(n)
                    self.errors.append(f"plain {n}: {err}")

        while not self.stopping.is_set():
            n, topic, value = self._next()
            while True:
                try:
                    self.plain.produce(topic, value, str(n).encode(), on_delivery=delivered)
                    break
                except BufferError:
                    self.plain.poll(0.1)
            self.plain.poll(0)
            time.sleep(self.pause)

    def _transactions(self) -> None:
        from confluent_kafka import KafkaException

        producer = self._transactional()

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                n = json.loads(msg.value())["n"]
                with self.lock:
                    self.pending[n] = (msg.topic(), msg.partition(), msg.offset())

        while not self.stopping.is_set():
            size, abort = self.rng.randint(1, 8), self.rng.random() < 0.3
            numbers: list[int] = []
            try:
                producer.begin_transaction()
                for _ in range(size):
                    n, topic, value = self._next()
                    numbers.append(n)
                    producer.produce(topic, value, str(n).encode(), on_delivery=delivered)
                    time.sleep(self.pause)
                if abort:
                    self._abort(producer, numbers)
                else:
                    self._commit(producer, numbers)
            except KafkaException as exc:
                error = exc.args[0]
                if error.txn_requires_abort():
                    self._abort(producer, numbers)
                else:  # fatal: a new producer of the same id fences this one and aborts
                    self.errors.append(f"transactional producer: {error}")
                    with self.lock:
                        self.uncertain.update(numbers)
                    producer = self._transactional()

    def _transactional(self) -> Any:
        while True:
            producer = self._producer(
                {
                    "transactional.id": self.transactional_id,
                    "transaction.timeout.ms": 120_000,
                    # at most the transaction's: a record not sent by then aborts it
                    "message.timeout.ms": 120_000,
                }
            )
            try:
                producer.init_transactions(60)
                return producer
            except Exception as exc:  # the broker is down: again
                self.errors.append(f"init_transactions: {exc}")
                time.sleep(1)

    def _commit(self, producer: Any, numbers: list[int]) -> None:
        _retried(lambda: producer.commit_transaction(60))
        with self.lock:
            for n in numbers:
                self.where[n] = self.pending.pop(n)

    def _abort(self, producer: Any, numbers: list[int]) -> None:
        # Its records delivered first: an abort sent before the coordinator has the
        # transaction's partitions finds the last one's state (COMPLETE_COMMIT) and fails the
        # producer fatally with INVALID_TXN_STATE (librdkafka #4849; 7 runs of 12 hit it)
        producer.flush(60)
        _retried(lambda: producer.abort_transaction(60))
        with self.lock:
            self.aborted.update(numbers)
            for n in numbers:
                self.pending.pop(n, None)

    def stop(self) -> None:
        """Stop producing and wait for every delivery; without transactions, a record that
        failed or was never delivered fails the caller."""
        self.stopping.set()
        for thread in self.threads:
            thread.join(120)
        left = self.plain.flush(120)
        if not self.transactions:
            assert left == 0 and not self.errors and not self.broken, (
                f"{left} records undelivered; {(self.errors + self.broken)[:5]}"
            )

    # -- the supervisor's view: records by partition key --------------------------------

    def key(self, topic: str, partition: int) -> str:
        return f"{topic}:{partition}" if self.multi else str(partition)

    def next_offset(self, key: str) -> int:
        """The offset after the last record delivered to this partition key."""
        self.plain.flush(10)
        with self.lock:
            return 1 + max(o for n, (t, p, o) in self.where.items() if self.key(t, p) == key)

    def locate(self, numbers: list[int]) -> list[tuple[str, int]]:
        """(partition key, offset) of each record."""
        if any(n not in self.where for n in numbers):
            self.plain.flush(10)  # read before its delivery report arrived
        with self.lock:
            return [(self.key(t, p), o) for t, p, o in (self.where[n] for n in numbers)]


def _retried(call: Callable[[], None]) -> None:
    """A transaction's commit or abort, asked again while its error is retriable (the broker
    is down: librdkafka says so, and the outcome is still to come)."""
    from confluent_kafka import KafkaException

    while True:
        try:
            call()
            return
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
