"""A steady stream of wiki-edit events for the quickstart and the benchmarks: channels, pages
and users drawn with realistic skew, robots among the editors, sizes of additions and
deletions with long tails, and the wall-clock time of each event as its timestamp."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

CHANNELS = [  # (channel, weight): English dominates, then a long tail of languages
    ("#en.wikipedia", 40),
    ("#de.wikipedia", 12),
    ("#fr.wikipedia", 10),
    ("#ja.wikipedia", 8),
    ("#es.wikipedia", 8),
    ("#ru.wikipedia", 7),
    ("#it.wikipedia", 6),
    ("#zh.wikipedia", 5),
    ("#pt.wikipedia", 4),
]
TOPICS = [
    "Apache Kafka", "Apache Druid", "Apache Spark", "Stream processing", "Exactly-once",
    "Columnar storage", "Apache Parquet", "Event time", "Log-structured storage", "Zipf's law",
    "Consensus (computer science)", "Two-phase commit", "Write-ahead logging", "OLAP cube",
    "Time series database", "Backpressure", "Idempotence", "Raft (algorithm)", "Bloom filter",
    "HyperLogLog",
]  # fmt: skip
NAMES = ["Margaret", "Ken", "Grace", "Edsger", "Barbara", "Donald", "Leslie", "Frances", "Tony"]
ROBOTS = ["InternetArchiveBot", "ClueBot NG", "AnomieBOT"]


class WikiEdits:
    """Events as dicts; `seed` makes the sequence repeatable (timestamps aside)."""

    def __init__(
        self, seed: int = 7, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self.random = random.Random(seed)
        self.clock = clock
        self.channels, self.weights = zip(*CHANNELS, strict=True)

    def event(self) -> dict[str, Any]:
        r = self.random
        robot = r.random() < 0.15
        if robot:
            user = r.choice(ROBOTS)
        elif r.random() < 0.2:  # anonymous edits show an address
            user = f"203.0.113.{r.randrange(1, 255)}"
        else:
            user = r.choice(NAMES)
        page = TOPICS[min(int(r.paretovariate(1.2)) - 1, len(TOPICS) - 1)]  # a few hot pages
        return {
            "timestamp": self.clock().isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "channel": r.choices(self.channels, self.weights)[0],
            "page": page,
            "user": user,
            "isRobot": robot,
            "added": int(r.lognormvariate(4.0, 1.3)),
            "deleted": int(r.lognormvariate(2.5, 1.5)) if r.random() < 0.6 else 0,
        }


class EditStream:
    """Produces WikiEdits to a topic at a steady rate, in a thread, until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: float, seed: int = 7) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 3})
        self.topic = topic
        self.rate = rate
        self.edits = WikiEdits(seed)
        self.sent = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="wiki-edits", daemon=True)

    def start(self) -> EditStream:
        self.thread.start()
        return self

    def _run(self) -> None:
        began = time.monotonic()
        while not self.stopping.is_set():
            due = int((time.monotonic() - began) * self.rate)
            while self.sent < due:
                event = self.edits.event()
                self.producer.produce(
                    self.topic, json.dumps(event).encode(), event["page"].encode()
                )
                self.sent += 1
            self.producer.poll(0)
            self.stopping.wait(0.05)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(5)
        self.producer.flush(10)
