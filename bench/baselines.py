"""The two Spark baselines of bench/throughput.py, each run as a process of its own so that it
starts its SparkSession from cold, as a Sluicegate task does:

- limit: one Spark batch job over the whole offset range (read, parse, roll up, write);
- streaming: Spark Structured Streaming with the Kafka source from the earliest offsets,
  maxOffsetsPerTrigger records a batch, writing each batch's rollup to Parquet with
  foreachBatch and a checkpoint, until everything available is written (Trigger.AvailableNow);
- parts: no Spark at all, the machine's own libraries in two processes (bench/parts.py).

    .venv/bin/python bench/baselines.py limit --bootstrap HOST:PORT --topic T \
        --end '{"0": 250, ...}' --out DIR

Prints `DURABLE {...}` once the output is written (with its own phase timings), then stops
Spark and exits; the caller times from its start to that line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import limit_job, rollup_edits  # noqa: E402
from tasks.reading.reader import CONSUMER_DEFAULTS  # noqa: E402


def streaming_job(
    spark: Any, bootstrap: str, topic: str, per_trigger: int, out: str, checkpoint: str
) -> int:
    """Structured Streaming over everything in `topic`; the number of micro-batches."""
    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(per_trigger))
        .option("kafka.isolation.level", "read_committed")
        # the consumer setting Sluicegate's reader (and so the limit) uses: tasks/reading/reader.py
        .option("kafka.fetch.max.wait.ms", CONSUMER_DEFAULTS["fetch.max.wait.ms"])
        .load()
    )
    batches = []

    def write(batch: Any, batch_id: int) -> None:
        rollup_edits(batch).write.mode("overwrite").parquet(f"{out}/{batch_id:06d}")
        batches.append(batch_id)

    query = (
        stream.writeStream.foreachBatch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return len(batches)


def main() -> None:
    began = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("job", choices=("limit", "streaming", "parts"))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--end", required=True, help="end offsets as JSON: partition -> offset")
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", help="the streaming query's checkpoint directory")
    parser.add_argument("--per-trigger", type=int, default=150_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--jar-cache", type=Path, required=True)
    args = parser.parse_args()
    end = {int(p): int(o) for p, o in json.loads(args.end).items()}
    if args.job == "parts":
        from bench.parts import run

        phases = run(args.bootstrap, args.topic, end, args.out)
        print("DURABLE " + json.dumps(phases), flush=True)
        return

    from tasks.spark.session import build_session, cluster_conf

    # on a spark:// master: the machine's cores, as a Sluicegate task is given in the bench
    conf = cluster_conf(args.master, "127.0.0.1", os.cpu_count() or 2, "1g")
    spark = build_session(
        args.jar_cache, master=args.master, app_name=f"bench-{args.job}", conf=conf
    )
    started = time.perf_counter()
    phases: dict[str, Any] = {"session_s": round(started - began, 2)}
    if args.job == "limit":
        limit_job(spark, args.bootstrap, args.topic, end, args.out)
    else:
        checkpoint = args.checkpoint or f"{args.out}.checkpoint"
        phases["batches"] = streaming_job(
            spark, args.bootstrap, args.topic, args.per_trigger, args.out, checkpoint
        )
    phases["job_s"] = round(time.perf_counter() - started, 2)
    print("DURABLE " + json.dumps(phases), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
