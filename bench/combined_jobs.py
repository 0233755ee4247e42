"""Combined jobs: what one batch of each of N quiet tasks costs when their reads share Spark jobs.

N topics of one partition on a real broker; N threads (the tasks of a shared application) each hand
the combiner (tasks/reading/combiner.py) a batch of `--records` records at once, round after round,
and wait for its result; a round's time is from the hand-off to the last answer. No overlord, no
control plane: only the combined jobs, as a shared application with `--cores` runs them (FAIR pools,
its Python workers warmed as tasks/runtime/shared.py warms them).

Two ways of running a combined job, in this process, on the same Spark session, rounds
alternating between them:

- rdd (the product): an RDD job over the ranges' indexes, each result row a Python value;
- dataframe (the baseline, the product before): a DataFrame of the indexes through
  mapInArrow, the result rows an Arrow stream to the JVM and back.

Both run the same worker code per slice (tasks/reading/combiner.py `_combined`).

    .venv/bin/python bench/combined_jobs.py --tasks 100 --rounds 8

Writes bench/results/combined_jobs.json and ends with a RATIO line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from live import write_results

from supervisor.devstack.kafka import LocalKafka
from supervisor.devstack.topics import create_topic, produce
from supervisor.settings import Settings
from supervisor.testkit.waits import median, percentile
from tasks.reading import direct_read
from tasks.reading.combiner import JobCombiner, _combined
from tasks.reading.worker_batch import (
    RESULT_SCHEMA,
    Metric,
    ResultKind,
    WorkerPlan,
    _result_schema,
)
from tasks.runtime.shared import _start_python_workers
from tasks.spark.session import build_session


class DataFrameCombiner(JobCombiner):
    """The baseline: each combined job a DataFrame's mapInArrow."""

    def _job(
        self,
        plans: list[tuple[WorkerPlan, direct_read.Reading]],
        items: list[tuple[int, int]],
        slices: int,
    ) -> list[tuple[int, dict[str, Any]]]:
        run = _combined(plans, items)

        def arrow(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow as pa

            schema = _result_schema().append(pa.field("batch", pa.int32()))
            indexes = (i for arrow_batch in batches for i in arrow_batch.column(0).to_pylist())
            rows = [{**row, "batch": number} for number, row in run(indexes)]
            yield pa.RecordBatch.from_pylist(rows, schema=schema)

        frame = self.spark.range(0, len(items), 1, slices)
        found = []
        for row in frame.mapInArrow(arrow, f"{RESULT_SCHEMA}, batch int").collect():
            values = row.asDict()
            found.append((values.pop("batch"), values))
        return found


def plan(path: Path) -> WorkerPlan:
    return WorkerPlan(
        time_column="ts",
        time_format="millis",
        query_ms=None,
        dimensions=(("word", "string"),),
        metrics=(Metric("count", "count", "int64", None),),
        rollup=True,
        min_ms=None,
        max_ms=None,
        segment_granularity="HOUR",
        persist_path=str(path),
        max_samples=10,
    )


def one_round(
    combiner: JobCombiner,
    topics: list[str],
    config: dict[str, Any],
    start: int,
    args: Any,
    out: Path,
) -> dict[str, Any]:
    waits = [0.0] * len(topics)
    jobs = combiner.jobs

    def task(n: int) -> None:
        reading = direct_read.Reading(config, [(topics[n], 0, start, start + args.records)])
        began = time.monotonic()
        rows = combiner.collect(plan(out / f"{start}-{n}"), reading)
        waits[n] = time.monotonic() - began
        stats = [r for r in rows if r["kind"] == ResultKind.STATS]
        assert sum(r["processed"] for r in stats) == args.records, rows

    threads = [threading.Thread(target=task, args=(n,)) for n in range(len(topics))]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {
        "round_s": round(time.monotonic() - began, 3),
        "p50_s": round(median(waits), 3),
        "max_s": round(max(waits), 3),
        "jobs": combiner.jobs - jobs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=8, help="per way (the first is warm-up)")
    parser.add_argument("--records", type=int, default=20, help="per task per batch")
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="combined-jobs-"))
    cache = Settings().jar_cache
    broker = LocalKafka(root / "kafka", cache)
    broker.start()
    try:
        bootstrap = broker.bootstrap_servers
        topics = [f"quiet-{n}" for n in range(args.tasks)]
        per_topic = args.records * args.rounds * 2
        for topic in topics:
            create_topic(bootstrap, topic, 1)
            values = (
                json.dumps({"ts": 1_700_000_000_000 + i, "word": f"w{i % 5}"})
                for i in range(per_topic)
            )
            produce(bootstrap, topic, ((None, v.encode()) for v in values))
        spark = build_session(
            cache, master=f"local[{args.cores}]", conf={"spark.scheduler.mode": "FAIR"}
        )
        _start_python_workers(spark)
        ways = {
            "rdd": JobCombiner(spark, pool="reads"),
            "dataframe": DataFrameCombiner(spark, pool="reads"),
        }
        config = direct_read.consumer_config({"bootstrap.servers": bootstrap})
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in ways}
        start = 0
        for number in range(args.rounds):
            for name, combiner in ways.items():
                result = one_round(combiner, topics, config, start, args, root / "persists" / name)
                start += args.records
                rounds[name].append(result)
                print(f"round {number} {name:9s} {json.dumps(result)}", flush=True)
        for combiner in ways.values():
            combiner.close()
        spark.stop()
    finally:
        broker.stop()
    summary = {}
    for name, results in rounds.items():
        steady = results[1:]  # the first round of each way is its warm-up
        summary[name] = {
            "round_p50_s": round(median([r["round_s"] for r in steady]), 3),
            "round_p90_s": round(percentile([r["round_s"] for r in steady], 90), 3),
            "wait_p50_s": round(median([r["p50_s"] for r in steady]), 3),
            "first_round_s": results[0]["round_s"],
        }
    write_results("combined_jobs", {"args": vars(args), "rounds": rounds, "summary": summary})
    print(json.dumps(summary, indent=2))
    rdd, frame = summary["rdd"], summary["dataframe"]
    ratio = frame["round_p50_s"] / rdd["round_p50_s"]
    print(
        f"RATIO rdd_round_p50_s={rdd['round_p50_s']:.2f} dataframe_round_p50_s="
        f"{frame['round_p50_s']:.2f} dataframe_over_rdd={ratio:.2f}"
    )


if __name__ == "__main__":
    main()
