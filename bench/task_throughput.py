"""Events per second of one Sluicegate indexing task, against the limit: one plain Spark batch
job over the same offset range (read, parse, roll up, write Parquet), in the same process.

    .venv/bin/python bench/task_throughput.py --records 400000

Prints a table, writes bench/results/task_throughput.json and ends with a RATIO line.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from supervisor.clock import utc_now  # noqa: E402
from supervisor.db.engine import make_engine, migrate, session_factory  # noqa: E402
from supervisor.devstack.kafka import LocalKafka  # noqa: E402
from supervisor.devstack.topics import create_topic, produce  # noqa: E402
from supervisor.services.publish import PublishService  # noqa: E402
from supervisor.settings import Settings  # noqa: E402
from tasks.indexer import KafkaIndexer  # noqa: E402
from tasks.protocol import IndexKafkaTask, TaskState  # noqa: E402
from tasks.reader import read_range  # noqa: E402
from tasks.spark import build_session  # noqa: E402

PARTITIONS = 4
CHANNELS = [f"#{c}.wikipedia" for c in ("en", "fr", "de", "ja", "es", "it", "ru", "zh")]


def edit(n: int, rng: random.Random) -> bytes:
    second = n % (4 * 3600)
    return json.dumps(
        {
            "timestamp": f"2026-11-22T{8 + second // 3600:02d}:"
            f"{second % 3600 // 60:02d}:{second % 60:02d}Z",
            "channel": rng.choice(CHANNELS),
            "page": f"Page {rng.randrange(2000)}",
            "user": f"user{rng.randrange(500)}",
            "namespace": rng.choice(["Main", "Talk", "User", "File"]),
            "countryName": rng.choice(["France", "Japan", "Peru", "Kenya", "Canada", None]),
            "added": rng.randrange(0, 800),
            "deleted": rng.randrange(0, 200),
        }
    ).encode()


def data_schema() -> dict[str, Any]:
    return {
        "dataSource": "wiki",
        "timestampSpec": {"column": "timestamp", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel", "page", "user", "namespace", "countryName"]},
        "metricsSpec": [
            {"type": "count", "name": "count"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
            {"type": "longSum", "name": "deleted", "fieldName": "deleted"},
        ],
        "granularitySpec": {
            "segmentGranularity": "HOUR",
            "queryGranularity": "MINUTE",
            "rollup": True,
        },
    }


def limit_run(spark: Any, bootstrap: str, topic: str, end: dict[int, int], out: str) -> int:
    from pyspark.sql import functions as F

    frame = read_range(spark, bootstrap, topic, {p: 0 for p in end}, end)
    schema = (
        "timestamp STRING, channel STRING, page STRING, user STRING, namespace STRING, "
        "countryName STRING, added BIGINT, deleted BIGINT"
    )
    rows = frame.select(F.from_json(F.col("value").cast("string"), schema).alias("r")).select("r.*")
    minute = F.date_trunc("minute", F.col("timestamp").try_cast("timestamp"))
    rolled = rows.groupBy(
        minute.alias("__time"), "channel", "page", "user", "namespace", "countryName"
    ).agg(
        F.count(F.lit(1)).alias("count"),
        F.sum("added").alias("added"),
        F.sum("deleted").alias("deleted"),
    )
    rolled.write.mode("overwrite").partitionBy().parquet(out)
    return int(spark.read.parquet(out).agg(F.sum("count")).first()[0])


def sluicegate_run(spark: Any, bootstrap: str, topic: str, end: dict[int, int], work: Path) -> int:
    engine = make_engine(f"sqlite:///{work / 'meta.db'}")
    migrate(engine)
    sessions = session_factory(engine)
    task = IndexKafkaTask.model_validate(
        {
            "type": "index_kafka",
            "id": "bench",
            "dataSchema": data_schema(),
            "tuningConfig": {"type": "kafka"},
            "ioConfig": {
                "startSequenceNumbers": {
                    "type": "start",
                    "stream": topic,
                    "partitionSequenceNumberMap": {str(p): 0 for p in end},
                },
                "endSequenceNumbers": {
                    "type": "end",
                    "stream": topic,
                    "partitionSequenceNumberMap": {str(p): o for p, o in end.items()},
                },
                "consumerProperties": {"bootstrap.servers": bootstrap},
                "inputFormat": {"type": "json"},
            },
        }
    )

    def publisher(action: Any) -> Any:
        with sessions() as session:
            return PublishService(session, utc_now).publish("bench", action)

    state = KafkaIndexer(task, spark, work / "task", work / "deep", publisher).run()
    engine.dispose()
    if state.status is not TaskState.SUCCESS:
        raise RuntimeError(f"the task failed: {state.error}")
    return state.stats.processed


def peak_rss_mb(pid: int | str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=400_000)
    args = parser.parse_args()
    settings = Settings()
    rng = random.Random(42)
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-") as tmp:
        work = Path(tmp)
        with LocalKafka(work / "kafka", settings.jar_cache, heap="1g") as kafka:
            topic = "wiki-bench"
            create_topic(kafka.bootstrap_servers, topic, PARTITIONS)
            for p in range(PARTITIONS):
                produce(
                    kafka.bootstrap_servers,
                    topic,
                    ((None, edit(n, rng)) for n in range(p, args.records, PARTITIONS)),
                    partition=p,
                )
            end = {p: len(range(p, args.records, PARTITIONS)) for p in range(PARTITIONS)}
            spark = build_session(settings.jar_cache, master="local[2]", app_name="bench")
            limit_run(
                spark,
                kafka.bootstrap_servers,
                topic,
                {p: min(1000, e) for p, e in end.items()},
                str(work / "warmup"),
            )  # JIT and connector warm-up, not timed
            began = time.perf_counter()
            limit_rows = limit_run(spark, kafka.bootstrap_servers, topic, end, str(work / "limit"))
            limit_s = time.perf_counter() - began
            began = time.perf_counter()
            task_rows = sluicegate_run(spark, kafka.bootstrap_servers, topic, end, work)
            task_s = time.perf_counter() - began
            jvm_pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
            jvm_mb, python_mb = peak_rss_mb(jvm_pid), peak_rss_mb("self")
            spark.stop()
    assert limit_rows == task_rows == args.records, (limit_rows, task_rows)
    results = {
        "records": args.records,
        "limit_events_per_s": args.records / limit_s,
        "sluicegate_events_per_s": args.records / task_s,
        "limit_seconds": limit_s,
        "sluicegate_seconds": task_s,
        "driver_peak_rss_mb": {"jvm": jvm_mb, "python": python_mb},
        "vs_limit": limit_s / task_s,
    }
    print(f"{'contender':<12}{'seconds':>10}{'events/s':>12}")
    print(f"{'limit':<12}{limit_s:>10.1f}{results['limit_events_per_s']:>12.0f}")
    print(f"{'sluicegate':<12}{task_s:>10.1f}{results['sluicegate_events_per_s']:>12.0f}")
    print(f"driver peak RSS: JVM {jvm_mb:.0f} MiB, Python {python_mb:.0f} MiB")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "task_throughput.json").write_text(json.dumps(results, indent=2))
    print(
        f"RATIO vs_limit={results['vs_limit']:.2f} "
        f"events_per_s={results['sluicegate_events_per_s']:.0f} jvm_peak_mb={jvm_mb:.0f}"
    )


if __name__ == "__main__":
    main()
