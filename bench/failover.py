"""Failover: how long a supervisor goes undriven when its leader overlord dies, and whether its
tasks stop reading meanwhile.

A real broker, a throwaway PostgreSQL and two `sluicegate serve` processes sharing them and one
task work directory. A producer writes numbered records at a steady rate; one supervisor reads
them (one task group, one replica). The leader is SIGKILLed `--kills` times, a few seconds of
steady reading apart (the dead one comes back as a follower each time). A sampler asks every
running task for its current offsets every 50 ms.

- failover_s: from the SIGKILL to the end of the new leader's first pass (the first status it
  writes under its epoch); the target is the lease plus 2 s.
- read_gap_s: the longest time, from 1 s before a kill until 5 s after the new leader's first
  pass, in which no task's offsets moved; read_gap_baseline_s is the same over the `--steady`
  seconds of reading before the first kill (this process, same run), and the ratio of the
  two is printed. The target is a gap of at most 1 s.
- lost, dupes: at the end everything produced is handed off and published; the published
  segments are read back and every record number counted.

    .venv/bin/python bench/failover.py [--kills 3] [--lease 10] [--rate 200]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from bench.live import Producer, workspace, write_results  # noqa: E402
from supervisor.db.engine import make_engine  # noqa: E402
from supervisor.db.models import (  # noqa: E402
    CommittedOffsetsRow,
    LeaderLeaseRow,
    SegmentRow,
    SupervisorStatusRow,
    TaskRow,
)
from supervisor.devstack.kafka import LocalKafka  # noqa: E402
from supervisor.devstack.postgres import LocalPostgres  # noqa: E402
from supervisor.devstack.specs import supervisor_spec  # noqa: E402
from supervisor.devstack.topics import create_topic  # noqa: E402
from supervisor.settings import default_jar_cache  # noqa: E402
from supervisor.testkit.overlord import Overlord  # noqa: E402
from supervisor.testkit.service import BASE  # noqa: E402
from supervisor.testkit.waits import wait_for  # noqa: E402
from tasks.protocol import TOKEN_HEADER  # noqa: E402

SID = "failover"
PARTITIONS = 2


def record(n: int, now: float) -> bytes:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return json.dumps({"ts": stamp, "n": n}).encode()


class Sampler:
    """Every 50 ms, the summed current offsets of every running task: (time, total)."""

    def __init__(self, db_url: str) -> None:
        self.engine = make_engine(db_url)
        self.samples: list[tuple[float, int]] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self.http = httpx.Client(timeout=1)

    def _run(self) -> None:
        while not self.stopping.wait(0.05):
            with self.engine.connect() as conn:
                rows = conn.execute(
                    select(TaskRow.id, TaskRow.location_port, TaskRow.token).where(
                        TaskRow.status == "RUNNING", TaskRow.location_port.is_not(None)
                    )
                ).all()
            furthest: dict[str, int] = {}
            for task_id, port, token in rows:
                url = f"http://127.0.0.1:{port}/druid/worker/v1/chat/{task_id}/offsets/current"
                try:
                    current = self.http.get(url, headers={TOKEN_HEADER: token or ""}).json()
                except (httpx.HTTPError, ValueError):
                    continue
                for partition, offset in (current or {}).items():
                    furthest[partition] = max(furthest.get(partition, 0), int(offset))
            self.samples.append((time.monotonic(), sum(furthest.values())))

    def gap(self, begin: float, end: float) -> float:
        """The longest time within [begin, end] in which the furthest offsets did not move."""
        moved = [begin]
        last = None
        for at, total in self.samples:
            if at < begin or at > end:
                last = total if at < begin else last
                continue
            if last is not None and total > last:
                moved.append(at)
            last = total
        moved.append(end)
        return max(b - a for a, b in itertools.pairwise(moved))


def rows(engine: Any, query: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(query).all())


def first_pass_after(engine: Any, epoch: int, timeout: float) -> float:
    """Monotonic time at which a status written under `epoch` (or later) first shows."""
    query = select(func.count()).where(SupervisorStatusRow.epoch >= epoch)
    wait_for(lambda: rows(engine, query)[0][0] > 0, timeout, f"a pass at epoch {epoch}", every=0.02)
    return time.monotonic()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--lease", type=float, default=10.0, help="SLUICEGATE_LEASE_S")
    parser.add_argument("--rate", type=float, default=200.0, help="records a second")
    parser.add_argument("--steady", type=float, default=15.0, help="seconds between kills")
    parser.add_argument("--keep", help="keep the run's files under this directory")
    args = parser.parse_args()

    with workspace("sluicegate-failover-", args.keep) as root:
        postgres = LocalPostgres().start()
        broker = LocalKafka(root / "kafka", default_jar_cache())
        broker.start()
        db_url = postgres.create_database("failover")
        engine = make_engine(db_url)
        overlords = [
            Overlord(
                root,
                default_jar_cache(),
                db_url,
                name,
                secure=False,
                lease_s=args.lease,
                env={"SLUICEGATE_LOG_LEVEL": "info"},
            )
            for name in ("a", "b")
        ]
        producer = sampler = None
        try:
            overlords[0].start()
            wait_for(overlords[0].leads, 30, "a to lead", every=0.05)
            overlords[1].start()
            topic = f"failover-{uuid.uuid4().hex[:8]}"
            create_topic(broker.bootstrap_servers, topic, PARTITIONS)
            producer = Producer(broker.bootstrap_servers, topic, args.rate, record).start()
            spec = supervisor_spec(
                SID,
                topic,
                broker.bootstrap_servers,
                [{"type": "long", "name": "n"}],
                segment_granularity="DAY",
                period="PT1S",
                taskDuration="PT1H",
            )
            api = httpx.Client(timeout=30, follow_redirects=True)
            assert api.post(overlords[1].url + BASE, json=spec).is_success
            sampler = Sampler(db_url)
            sampler.thread.start()
            wait_for(
                lambda: sampler.samples and sampler.samples[-1][1] > 0, 300, "reading", every=0.2
            )
            steady_begin = time.monotonic() + 1.0
            time.sleep(args.steady)
            steady_end = time.monotonic()
            failovers, gaps, windows = [], [], []
            leader, follower = overlords
            for _ in range(args.kills):
                (epoch,) = rows(engine, select(LeaderLeaseRow.epoch))[0]
                killed = time.monotonic()
                leader.kill9()
                first = first_pass_after(engine, epoch + 1, args.lease * 3 + 30)
                failovers.append(first - killed)
                time.sleep(5.0)
                windows.append((killed - 1.0, first + 5.0))
                leader.start()
                leader, follower = follower, leader
                time.sleep(args.steady)
            for begin, end in windows:
                gaps.append(sampler.gap(begin, end))
            baseline = sampler.gap(steady_begin, steady_end)  # steady reading, no failover

            producer.stopping.set()
            producer.thread.join(10)
            producer.producer.flush(30)
            latest = broker_latest(broker.bootstrap_servers, topic)
            asked = [0.0]

            def published_all() -> bool:
                """Hand off until a generation ends at the last record (one asked before the
                task read it all ends short, and its successor would read on)."""
                if rows(engine, select(CommittedOffsetsRow.offsets)) == [(latest,)]:
                    return True
                if time.monotonic() >= asked[0] + 10:
                    asked[0] = time.monotonic()
                    url = f"{leader.url}{BASE}/{SID}/taskGroups/handoff"
                    api.post(url, json={"taskGroupIds": [0]})
                return False

            wait_for(published_all, 600, "everything to be published", every=0.5)
            numbers: list[int] = []
            for (path,) in rows(engine, select(SegmentRow.path).where(SegmentRow.used)):
                numbers.extend(pq.read_table(path, columns=["n"]).column("n").to_pylist())
            counts = Counter(numbers)
            produced = sum(latest.values())
            lost = produced - len(counts)
            dupes = sum(c - 1 for c in counts.values())
        finally:
            if sampler is not None:
                sampler.stopping.set()
            if producer is not None:
                producer.stopping.set()
            for overlord in overlords:
                overlord.stop()
            broker.stop()
            engine.dispose()
            postgres.stop()

    failover_s, read_gap_s = max(failovers), max(gaps)
    print(f"lease {args.lease:.0f} s, {args.kills} kills: failover {failovers}, gaps {gaps}")
    print(f"read gap without a failover (same run): {baseline:.2f} s; produced {produced}")
    write_results(
        "failover",
        {
            "lease_s": args.lease,
            "kills": args.kills,
            "rate": args.rate,
            "failover_s": failovers,
            "read_gap_s": gaps,
            "read_gap_baseline_s": baseline,
            "produced": produced,
            "lost": lost,
            "dupes": dupes,
        },
    )
    print(
        f"RATIO failover_s={failover_s:.2f} read_gap_s={read_gap_s:.2f} lost={lost} "
        f"dupes={dupes} read_gap_vs_baseline={read_gap_s / max(baseline, 0.05):.2f}"
    )


def broker_latest(bootstrap: str, topic: str) -> dict[str, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}"})
    try:
        return {
            str(p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
