"""Where one indexing task's time goes: a KafkaIndexer run in this process against the limit
(one plain Spark batch job over the same offset range), both on one warm SparkSession, so the
figures are the data path alone, without JVM start-up or the control plane
(bench/throughput.py measures those, from cold).

The task's time is split into its steps (latest offsets, each micro-batch's persist, merging
persists into segments, the publish call), and one batch of the same size is taken apart by
running its first stages into Spark's no-op sink (the Kafka read alone; read and parse),
then the whole persist (counts, roll-up, write).

    .venv/bin/python bench/task_throughput.py --records 400000

Prints a table, writes bench/results/task_throughput.json and ends with a RATIO line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    data_schema,
    limit_job,
    parquet_files,
    peak_rss_mb,
    produce_edits,
    rolled_up_events,
    write_results,
)
from supervisor.clock import utc_now  # noqa: E402
from supervisor.db.engine import make_engine, migrate, session_factory  # noqa: E402
from supervisor.devstack.kafka import LocalKafka  # noqa: E402
from supervisor.devstack.specs import index_task_payload  # noqa: E402
from supervisor.services.publish import PublishService  # noqa: E402
from supervisor.settings import Settings  # noqa: E402
from tasks.protocol import IndexKafkaTask, TaskState  # noqa: E402
from tasks.reading.engines.choice import Engines  # noqa: E402
from tasks.reading.engines.python_workers import PythonWorkerEngine  # noqa: E402
from tasks.reading.reader import KafkaBatch, read_range  # noqa: E402
from tasks.rows import pipeline  # noqa: E402
from tasks.runtime.indexer import KafkaIndexer  # noqa: E402
from tasks.spark.session import build_session  # noqa: E402

TOPIC = "wiki-edits"


class Steps:
    """Seconds spent in named functions, by wrapping them where the task looks them up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, attribute: str, name: str) -> None:
        original = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - began
                self.calls[name] += 1

        setattr(owner, attribute, timed)
        self.undo.append(lambda: setattr(owner, attribute, original))

    def restore(self) -> None:
        for undo in reversed(self.undo):
            undo()


def index_task(topic: str, bootstrap: str, end: dict[int, int], batch: int) -> IndexKafkaTask:
    start = dict.fromkeys(end, 0)
    payload = index_task_payload(
        "bench", topic, bootstrap, data_schema(), start, end, maxRowsInMemory=batch
    )
    return IndexKafkaTask.model_validate(payload)


def sluicegate_run(
    spark: Any, bootstrap: str, end: dict[int, int], batch: int, work: Path, steps: Steps | None
) -> int:
    """Run one task over [0, end) with its own metadata DB; the events its segments hold."""
    work.mkdir(parents=True)
    engine = make_engine(f"sqlite:///{work / 'meta.db'}")
    migrate(engine)
    sessions = session_factory(engine)

    def publisher(action: Any) -> Any:
        with sessions() as session:
            return PublishService(session, utc_now).publish("bench", action)

    task = index_task(TOPIC, bootstrap, end, batch)
    run = KafkaIndexer(task, spark, work / "task", work / "deep", publisher)
    if steps is not None:
        steps.wrap(run.offsets, "latest", "latest offsets")
        steps.wrap(Engines, "persist", "micro-batch persists")
        steps.wrap(Engines, "merge", "merge persists into segments")
        steps.wrap(run, "publisher", "publish transaction")
    try:
        state = run.run()
    finally:
        if steps is not None:
            steps.restore()
    engine.dispose()
    if state.status is not TaskState.SUCCESS:
        raise RuntimeError(f"the task failed: {state.error}")
    return rolled_up_events(parquet_files(work / "deep"))


def noop(frame: Any) -> float:
    began = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - began


def batch_stages(
    spark: Any, bootstrap: str, end: dict[int, int], batch: int, work: Path
) -> dict[str, float]:
    """One batch's stages, each run on its own into the no-op sink (and the real persist)."""
    per_partition = batch // len(end)
    start = {p: 0 for p in end}
    stop = {p: min(o, per_partition) for p, o in end.items()}
    task = index_task(TOPIC, bootstrap, stop, batch)
    plan = pipeline.RowPlan(task.dataSchema, task.ioConfig.inputFormat)

    def frame() -> Any:
        return read_range(spark, bootstrap, TOPIC, start, stop)

    stages = {
        "Kafka read": noop(frame()),
        "read, parse (Spark SQL)": noop(pipeline.parse_batch(plan, frame())),
    }
    began = time.perf_counter()
    pipeline.process_batch(plan, frame(), str(work / "spark-persist"), 100, [])
    stages["persist by Spark SQL"] = time.perf_counter() - began
    workers = PythonWorkerEngine(spark, plan)
    began = time.perf_counter()
    workers.persist(frame(), str(work / "fast-persist"), 100, [])
    stages["persist by Python workers"] = time.perf_counter() - began
    began = time.perf_counter()
    direct = KafkaBatch(spark, task.ioConfig, start, stop)
    workers.persist(workers.read(direct), str(work / "direct-persist"), 100, [])
    stages["the same, reading with librdkafka"] = time.perf_counter() - began
    return stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--batch", type=int, default=150_000, help="maxRowsInMemory")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    settings = Settings()
    with tempfile.TemporaryDirectory(prefix="sluicegate-task-bench-") as tmp:
        work = Path(tmp)
        with LocalKafka(work / "kafka", settings.jar_cache, heap="1g") as kafka:
            bootstrap = kafka.bootstrap_servers
            end = produce_edits(bootstrap, TOPIC, args.records)
            spark = build_session(
                settings.jar_cache,
                master=args.master,
                app_name="bench",
                conf={"spark.ui.showConsoleProgress": "false"},
            )
            small = {p: min(1000, o) for p, o in end.items()}
            # JIT, connector and Python worker warm-up, not timed
            limit_job(spark, bootstrap, TOPIC, small, str(work / "warm-limit"))
            sluicegate_run(spark, bootstrap, small, args.batch, work / "warm-task", None)
            began = time.perf_counter()
            limit_job(spark, bootstrap, TOPIC, end, str(work / "limit"))
            limit_s = time.perf_counter() - began
            steps = Steps()
            began = time.perf_counter()
            task_events = sluicegate_run(spark, bootstrap, end, args.batch, work / "task", steps)
            task_s = time.perf_counter() - began
            stages = batch_stages(spark, bootstrap, end, args.batch, work / "stages")
            jvm_pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
            jvm_mb, python_mb = peak_rss_mb(jvm_pid), peak_rss_mb("self")
            limit_events = rolled_up_events(parquet_files(work / "limit"))
            spark.stop()
    assert limit_events == task_events == args.records, (limit_events, task_events)
    report(args, limit_s, task_s, steps, stages, jvm_mb, python_mb)


def report(
    args: argparse.Namespace,
    limit_s: float,
    task_s: float,
    steps: Steps,
    stages: dict[str, float],
    jvm_mb: float,
    python_mb: float,
) -> None:
    n = args.records
    print(f"\n{n} records, batch {args.batch}, master {args.master}, warm JVM")
    print(f"{'contender':<34}{'seconds':>9}{'events/s':>11}")
    print(f"{'limit':<34}{limit_s:>9.2f}{n / limit_s:>11.0f}")
    print(f"{'sluicegate task':<34}{task_s:>9.2f}{n / task_s:>11.0f}")
    print("\nthe task's steps")
    other = task_s - sum(steps.seconds.values())
    for name, seconds in [*steps.seconds.items(), ("other", other)]:
        calls = steps.calls.get(name)
        print(f"  {name:<32}{seconds:>9.2f}" + (f"  ({calls} calls)" if calls else ""))
    print(f"\none batch of {args.batch} records, stage by stage (no-op sink)")
    for name, seconds in stages.items():
        print(f"  {name:<32}{seconds:>9.2f}")
    print(f"driver peak RSS: JVM {jvm_mb:.0f} MiB, Python {python_mb:.0f} MiB")
    results = {
        "records": n,
        "batch": args.batch,
        "limit_seconds": limit_s,
        "task_seconds": task_s,
        "task_steps_seconds": dict(steps.seconds),
        "batch_stages_seconds": stages,
        "driver_peak_rss_mb": {"jvm": jvm_mb, "python": python_mb},
        "vs_limit": limit_s / task_s,
    }
    write_results("task_throughput", results)
    print(f"RATIO vs_limit={limit_s / task_s:.2f} events_per_s={n / task_s:.0f}")


if __name__ == "__main__":
    main()
