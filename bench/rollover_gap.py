"""How long a task group stops reading at a rollover, and how far lag rises meanwhile.

One supervisor (taskCount 1, replicas 1, short taskDuration) on a real broker with a producer
at a steady rate. For each rollover it prints the gap between the group's pause (end offsets
agreed) and its successor's first read, and the peak lag around it against the lag in the
steady state between rollovers. The baseline, run in the same process: the first task's own
start-up (created -> reading) with nothing else running.

    .venv/bin/python bench/rollover_gap.py --rollovers 4 --rate 200

Writes bench/results/rollover_gap.json and ends with a RATIO line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from sqlalchemy import select  # noqa: E402

from supervisor.app import create_app  # noqa: E402
from supervisor.db.engine import make_engine  # noqa: E402
from supervisor.db.models import TaskRow  # noqa: E402
from supervisor.devstack.kafka import LocalKafka  # noqa: E402
from supervisor.devstack.ports import free_port  # noqa: E402
from supervisor.devstack.specs import supervisor_spec  # noqa: E402
from supervisor.devstack.topics import create_topic  # noqa: E402
from supervisor.settings import Settings, default_jar_cache  # noqa: E402

BASE = "/druid/indexer/v1/supervisor"


class Producer:
    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        from confluent_kafka import Producer as KafkaProducer

        self.producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.rate = topic, rate
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        began = time.monotonic()
        while not self.stopping.is_set():
            now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
            self.producer.produce(self.topic, json.dumps({"ts": now, "n": n}).encode())
            n += 1
            self.producer.poll(0)
            ahead = began + n / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.producer.flush(10)


def spec(topic: str, bootstrap: str, duration: str) -> dict[str, Any]:
    return supervisor_spec(
        "gap",
        topic,
        bootstrap,
        [{"type": "long", "name": "n"}],
        tuning={"maxRowsInMemory": 20000},
        period="PT1S",
        taskDuration=duration,
    )


def parse(moment: str) -> datetime:
    return datetime.fromisoformat(moment)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollovers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=200.0, help="records per second")
    parser.add_argument("--task-duration", default="PT20S")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="sluicegate-gap-") as tmp:
        root = Path(tmp)
        jars = default_jar_cache()
        broker = LocalKafka(root / "kafka", jars)
        broker.start()
        settings = Settings(
            port=free_port(),
            metadata_url=f"sqlite:///{root / 'meta.db'}",
            deep_storage=root / "deep",
            work_dir=root / "work",
            jar_cache=jars,
            task_master="local[1]",
            kill_tasks_on_exit=True,
            log_level="warning",
        )
        server = uvicorn.Server(
            uvicorn.Config(create_app(settings), port=settings.port, log_level="warning")
        )
        serving = threading.Thread(target=server.run, daemon=True)
        serving.start()
        producer = None
        try:
            while not server.started:
                time.sleep(0.05)
            topic = "gap"
            create_topic(broker.bootstrap_servers, topic, 2)
            producer = Producer(broker.bootstrap_servers, topic, args.rate)
            producer.thread.start()
            samples = run(settings, broker.bootstrap_servers, topic, args)
            producer.stop()
            producer = None
            report(settings, samples, args)
        finally:
            if producer is not None:
                producer.stop()
            server.should_exit = True
            serving.join(60)
            broker.stop()


def run(
    settings: Settings, bootstrap: str, topic: str, args: argparse.Namespace
) -> list[tuple[datetime, int]]:
    """Submit, sample the aggregate lag every 0.5 s through N rollovers, then suspend."""
    samples: list[tuple[datetime, int]] = []
    url = f"http://127.0.0.1:{settings.port}"
    with httpx.Client(base_url=url, timeout=30) as api:
        api.post(BASE, json=spec(topic, bootstrap, args.task_duration)).raise_for_status()
        while len(rolled(settings)) < args.rollovers + 1:
            payload = api.get(f"{BASE}/gap/status").json()["payload"]
            if payload["offsetsLastUpdated"]:
                samples.append((datetime.now(UTC), int(payload["aggregateLag"])))
            time.sleep(0.5)
        api.post(f"{BASE}/gap/suspend").raise_for_status()
        while any(t.status == "RUNNING" for t in tasks(settings)):
            time.sleep(0.5)
    return samples


def tasks(settings: Settings) -> list[Any]:
    engine = make_engine(settings.metadata_url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(TaskRow).order_by(TaskRow.created_at)).all())
    finally:
        engine.dispose()


def rolled(settings: Settings) -> list[Any]:
    return [t for t in tasks(settings) if t.end_offsets is not None]


def report(
    settings: Settings, samples: list[tuple[datetime, int]], args: argparse.Namespace
) -> None:
    rows = tasks(settings)
    reading = {t.id: parse(t.report["readingSince"]) for t in rows if t.report}
    start_of = {
        t.id: t.payload["ioConfig"]["startSequenceNumbers"]["partitionSequenceNumberMap"]
        for t in rows
    }
    first = rows[0]
    startup = (reading[first.id] - first.created_at).total_seconds()
    gaps, windows = [], []
    for task in rows:
        if task.end_offsets is None or task.rolled_at is None:
            continue
        successor = next((t for t in rows if start_of[t.id] == task.end_offsets), None)
        if successor is None or successor.id not in reading:
            continue  # the last rollover: the supervisor was suspended, nothing follows
        gap = (reading[successor.id] - task.rolled_at).total_seconds()
        gaps.append(gap)
        windows.append((task.rolled_at, reading[successor.id]))
    near = [lag for at, lag in samples if any(a <= at <= b for a, b in windows)]
    steady = [lag for at, lag in samples if not any(a <= at <= b for a, b in windows)]
    steady_lag = statistics.median(steady) if steady else 0
    peak_lag = max(near) if near else 0
    result = {
        "rate": args.rate,
        "taskDuration": args.task_duration,
        "baseline_task_startup_s": round(startup, 2),
        "gaps_s": [round(g, 2) for g in gaps],
        "median_gap_s": round(statistics.median(gaps), 2) if gaps else None,
        "steady_lag_records": steady_lag,
        "peak_lag_at_rollover_records": peak_lag,
        "peak_lag_seconds_of_data": round(peak_lag / args.rate, 2),
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "bench" / "results" / "rollover_gap.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    if gaps:
        ratio = statistics.median(gaps) / startup if startup else float("nan")
        print(f"RATIO median rollover gap / lone task start-up = {ratio:.2f}")


if __name__ == "__main__":
    main()
