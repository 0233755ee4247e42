"""What the throughput benchmarks share: the wiki-edit records and their dataSchema, the topic
they are produced to, the plain Spark rollup the baselines run, and the output checks."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PARTITIONS = 4
CHANNELS = [f"#{c}.wikipedia" for c in ("en", "fr", "de", "ja", "es", "it", "ru", "zh")]
DIMENSIONS = ["channel", "page", "user", "namespace", "countryName"]
# The typed schema a hand-written Spark job declares for the same records.
ROW_SCHEMA = (
    "timestamp STRING, channel STRING, page STRING, user STRING, namespace STRING, "
    "countryName STRING, added BIGINT, deleted BIGINT"
)


def edit(n: int, rng: random.Random) -> bytes:
    """Record n: a wiki edit of about 180 bytes, one second after record n-1, over four hours."""
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


def data_schema(datasource: str = "wiki") -> dict[str, Any]:
    """Hour segments, minute query granularity, rollup on; a count and two long sums."""
    return {
        "dataSource": datasource,
        "timestampSpec": {"column": "timestamp", "format": "iso"},
        "dimensionsSpec": {"dimensions": DIMENSIONS},
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


def edits_spec(
    datasource: str,
    topic: str,
    bootstrap: str,
    replicas: int = 1,
    batch: int | None = None,
    rollup: bool = True,
) -> dict[str, Any]:
    """A supervisor of the edits on `topic` from the earliest offset, one task group whose
    tasks run an hour (a run ends with a suspend or terminate, not a rollover), observed every
    second; `batch` its maxRowsInMemory; without `rollup`, every record a row."""
    schema = data_schema(datasource)
    if not rollup:
        schema["granularitySpec"].update({"rollup": False, "queryGranularity": "NONE"})
    tuning: dict[str, Any] = {"type": "kafka"}
    if batch is not None:
        tuning["maxRowsInMemory"] = batch
    return {
        "type": "kafka",
        "spec": {
            "dataSchema": schema,
            "ioConfig": {
                "topic": topic,
                "consumerProperties": {"bootstrap.servers": bootstrap},
                "inputFormat": {"type": "json"},
                "useEarliestOffset": True,
                "taskCount": 1,
                "replicas": replicas,
                "taskDuration": "PT1H",
                "period": "PT1S",
            },
            "tuningConfig": tuning,
        },
    }


def produce_edits(bootstrap: str, topic: str, records: int, seed: int = 42) -> dict[int, int]:
    """Create `topic` with PARTITIONS partitions, fill it round-robin with `records` edits and
    return each partition's end offset."""
    from supervisor.devstack.topics import create_topic, produce

    rng = random.Random(seed)
    create_topic(bootstrap, topic, PARTITIONS)
    for p in range(PARTITIONS):
        numbers = range(p, records, PARTITIONS)
        produce(bootstrap, topic, ((None, edit(n, rng)) for n in numbers), partition=p)
    return {p: len(range(p, records, PARTITIONS)) for p in range(PARTITIONS)}


def rollup_edits(frame: Any) -> Any:
    """Kafka rows -> the rollup of the dataSchema above, as a Spark user would write it."""
    from pyspark.sql import functions as F

    rows = frame.select(F.from_json(F.col("value").cast("string"), ROW_SCHEMA).alias("r"))
    rows = rows.select("r.*")
    minute = F.date_trunc("minute", F.col("timestamp").try_cast("timestamp"))
    return rows.groupBy(minute.alias("__time"), *DIMENSIONS).agg(
        F.count(F.lit(1)).alias("count"),
        F.sum("added").alias("added"),
        F.sum("deleted").alias("deleted"),
    )


def limit_job(spark: Any, bootstrap: str, topic: str, end: dict[int | str, int], out: str) -> None:
    """The limit: one Spark batch job over the whole offset range, read, parse, roll up, write."""
    from tasks.reading.reader import read_range

    frame = read_range(spark, bootstrap, topic, {p: 0 for p in end}, end)
    rollup_edits(frame).write.mode("overwrite").parquet(out)


def parquet_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.parquet") if not p.name.startswith((".", "_")))


def rolled_up_events(files: list[Path]) -> int:
    """How many input records Parquet rollup files hold: the sum of their count metric."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    total = 0
    for path in files:
        counts = pq.read_table(path, columns=["count"]).column("count")
        total += int(pc.sum(counts).as_py() or 0)
    return total


def peak_rss_mb(pid: int | str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def write_results(name: str, results: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(results, indent=2) + "\n")
    return path


def stop_on_sigterm() -> None:
    """A SIGTERM raises SystemExit(143) in the main thread, so the benchmark's `finally`
    blocks and context managers stop the broker, services and hosts it started (by default
    SIGTERM ends Python at once and leaves them all running). From the main thread only."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def unwind(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, unwind)
