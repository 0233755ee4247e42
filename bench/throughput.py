"""Throughput: events per second from a cold start until N records are durable in Parquet.

The same input for every contender, in the same run on the same machine: N wiki-edit JSON
records (about 180 bytes; 5 string dimensions, 2 long metrics, timestamps over four hours)
already in a 4-partition topic of a real broker, and the same dataSchema (hour segments,
minute query granularity, rollup on). One contender runs at a time, each on the same Spark
master, each starting its own Spark driver from cold inside its timing:

- limit: one Spark batch job over the whole offset range (read, parse, roll up, write), no
  control plane (bench/baselines.py, a process of its own);
- Structured Streaming: the Kafka source from the earliest offsets, maxOffsetsPerTrigger equal
  to Sluicegate's batch, foreachBatch writing each batch's rollup to Parquet, a checkpoint,
  Trigger.AvailableNow (bench/baselines.py, a process of its own);
- the parts alone: no Spark and no control plane, two processes each reading half the
  partitions with librdkafka, parsing with Arrow's JSON reader, rolling up with Arrow's
  group-by and writing Parquet (bench/parts.py): what the machine's own libraries do, the
  limit Sluicegate's task is held to (`vs_parts`);
- Sluicegate: the service in this process (uvicorn, SQLite metadata) with one supervisor,
  taskCount 1, useEarliestOffset, replicas 1 and then 2. Timed from the spec POST until the
  supervisor's committed offsets equal the end offsets, so it includes the reconcile loop,
  the task process and its Spark start, reading, merging persists into segments and the
  publish transaction. A supervisor's tasks read until asked to hand off; this one is
  suspended (`--finish suspend`, the default) as soon as a task's live row counts show it read
  the whole topic: the group rolls over (pause, end offsets, resume), publishes, and no
  successor starts. `--finish handoff` asks for an early handoff instead, after which a
  successor task starts at once and shares the two cores with the publish.

The service runs its tasks in the host's shared application (the default runtime), started
with the service as a host's long-lived application is, so its task starts with no Spark
start-up; with `--runtime process` its task starts its Spark driver after the POST, as the
baselines do.

Sluicegate reads maxRowsInMemory / partitions records per partition per micro-batch
(`--batch` is maxRowsInMemory; Structured Streaming gets maxOffsetsPerTrigger = the same total).
Every contender's output is checked: the sum of its rollup's count metric must equal N.

`--rounds` (3) runs every contender that many times, interleaved (limit, Structured Streaming,
the parts, replicas 1, replicas 2, then again); the table and the RATIO line use each
contender's median round (of an even number, the faster of the two middle ones), the JSON
holds every round. One round each is not a measurement on a shared 2-core machine.

Next to the wall time the table shows the CPU seconds of the contender's processes
(sampled from /proc; for Sluicegate the task processes and this process, the service): a
figure that moves less than wall time when something else shares the machine.

    .venv/bin/python bench/throughput.py --records 1000000
    .venv/bin/python bench/throughput.py --records 50000     # a quick check
    .venv/bin/python bench/throughput.py --rounds 2 --keep /tmp  # keeps task logs
    .venv/bin/python bench/throughput.py --master spark://127.0.0.1:7077   # and on a cluster
    .venv/bin/python bench/throughput.py --cluster    # on a spark-local cluster it starts

With a `spark://` master (`--master`, or `--cluster`: a standalone cluster of one worker
offering twice the machine's cores, started here like `sluicegate spark-local`), the local
contenders run on `--local-master` (local[2]) as before, and Structured Streaming and
Sluicegate (replicas 1) run again on the cluster in the same round, Sluicegate through a
second service on the same broker whose tasks run there: the RATIO line adds
`cluster_vs_local` (Sluicegate's local seconds over its cluster seconds) and
`vs_structured_streaming_cluster`. Each application takes as many cores as the machine has
(SLUICEGATE_TASK_CORES), as local[2] gives it; with `--runtime shared` the cluster service's
application holds its cores from the start, hence the worker's doubled count.

Prints a table, writes bench/results/throughput.json and ends with a RATIO line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from sqlalchemy import select  # noqa: E402

from bench.common import (  # noqa: E402
    PARTITIONS,
    edits_spec,
    parquet_files,
    produce_edits,
    rolled_up_events,
    write_results,
)
from bench.live import BASE, Stack, running  # noqa: E402
from supervisor.db.models import SegmentRow, TaskRow  # noqa: E402
from supervisor.devstack.spark import LocalSparkCluster  # noqa: E402
from supervisor.settings import default_jar_cache  # noqa: E402
from tasks.procfs import SYSTEM_TICKS, USER_TICKS, children, stat_fields  # noqa: E402

TOPIC = "wiki-edits"
POLL_S = 0.1
TIMEOUT_S = 3600.0
TICK = os.sysconf("SC_CLK_TCK")
CONTENDERS = {
    "limit": "limit (one Spark batch job)",
    "streaming": "Spark Structured Streaming",
    "parts": "the parts alone (2 processes)",
    "sluicegate_r1": "Sluicegate, replicas 1",
    "sluicegate_r2": "Sluicegate, replicas 2",
}
ON_CLUSTER = {
    "streaming_cluster": "Structured Streaming, cluster",
    "sluicegate_cluster": "Sluicegate, cluster",
}


class CpuMeter:
    """CPU seconds used by this process's descendants (and itself, with `own`) between start and
    stop, sampled from /proc: a process's last sample counts after it has exited. A descendant
    already running at the start (the broker) counts only what it used after it."""

    def __init__(self, own: bool = False) -> None:
        self.own = own
        self.seen: dict[int, float] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._sample_until_stopped, daemon=True)
        self.began = self._own()
        self.before: dict[int, float] = {}

    def __enter__(self) -> CpuMeter:
        self._sample()
        self.before = dict(self.seen)
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join()
        self._sample()

    @property
    def seconds(self) -> float:
        own = self._own() - self.began if self.own else 0.0
        return own + sum(cpu - self.before.get(pid, 0.0) for pid, cpu in self.seen.items())

    def _own(self) -> float:
        times = os.times()
        return times.user + times.system

    def _sample_until_stopped(self) -> None:
        while not self.stopping.wait(0.2):
            self._sample()

    def _sample(self) -> None:
        stack = children(os.getpid())
        while stack:
            pid = stack.pop()
            try:
                fields = stat_fields(pid)
            except OSError:
                continue
            self.seen[pid] = max(
                self.seen.get(pid, 0.0),
                (int(fields[USER_TICKS]) + int(fields[SYSTEM_TICKS])) / TICK,
            )
            stack += children(pid)


def run_baseline(
    job: str,
    args: argparse.Namespace,
    bootstrap: str,
    end: dict[int, int],
    work: Path,
    master: str | None = None,
) -> dict[str, Any]:
    """Run bench/baselines.py `job` in a process of its own; seconds from its start until it
    reports its output written."""
    work.mkdir(parents=True, exist_ok=True)
    out = work / job
    command = [
        sys.executable,
        str(ROOT / "bench" / "baselines.py"),
        job,
        "--bootstrap",
        bootstrap,
        "--topic",
        TOPIC,
        "--end",
        json.dumps(end),
        "--out",
        str(out),
        "--checkpoint",
        str(work / f"{job}.checkpoint"),
        "--per-trigger",
        str(args.batch // PARTITIONS * PARTITIONS),
        "--master",
        master or args.local_master,
        "--jar-cache",
        str(args.jar_cache),
    ]
    log_path = work / f"{job}.log"
    with log_path.open("wb") as log, CpuMeter() as cpu:
        began = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, cwd=work)
        assert process.stdout is not None
        durable, phases = None, {}
        for line in process.stdout:
            if line.startswith(b"DURABLE "):
                durable = time.perf_counter()
                phases = json.loads(line[len(b"DURABLE ") :])
        code = process.wait()
    if code != 0 or durable is None:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{job} exited {code} without finishing:\n{tail}")
    return {
        "seconds": durable - began,
        "cpu_s": round(cpu.seconds, 1),
        "events": rolled_up_events(parquet_files(out)),
        "output_files": len(parquet_files(out)),
        **phases,
    }


def run_sluicegate(
    api: httpx.Client,
    stack: Stack,
    args: argparse.Namespace,
    end: dict[int, int],
    replicas: int,
    datasource: str,
) -> dict[str, Any]:
    """Submit a supervisor; seconds from the POST until its committed offsets reach `end`, and
    the CPU seconds of the service and its tasks meanwhile."""
    with CpuMeter(own=True) as cpu:
        posted_at = datetime.now(UTC)
        began = time.perf_counter()
        spec = edits_spec(datasource, TOPIC, stack.bootstrap, replicas, args.batch)
        api.post(BASE, json=spec).raise_for_status()
        caught_up = await_committed(api, args, datasource, end, began)
        durable = time.perf_counter()
        api.post(f"{BASE}/{datasource}/terminate").raise_for_status()
        tasks = wait_for_tasks(stack, datasource)
    segments = used_segments(stack, datasource)
    result: dict[str, Any] = {
        "seconds": durable - began,
        "cpu_s": round(cpu.seconds, 1),
        "events": rolled_up_events(segments),
        "segments": len(segments),
        "caught_up_s": None if caught_up is None else round(caught_up - began, 2),
        "tasks": len(tasks),
    }
    winner = next((t for t in tasks if t.report and t.report.get("segments")), None)
    if winner is not None:
        report = winner.report
        reading = datetime.fromisoformat(report["readingSince"].replace("Z", "+00:00"))
        result["task_launched_s"] = round((winner.created_at - posted_at).total_seconds(), 2)
        result["task_reading_s"] = round((reading - posted_at).total_seconds(), 2)
        result["counters"] = report["counters"]
    return result


def read_everything(api: httpx.Client, datasource: str, records: int) -> bool:
    """Whether a running task has read all `records`, by the live row counts of the supervisor's
    tasks (GET .../stats asks them; the status's offsets are as of the loop's last pass, up to
    a `period` old)."""
    response = api.get(f"{BASE}/{datasource}/stats")
    response.raise_for_status()
    counts = ("processed", "processedWithError", "unparseable", "thrownAway")
    return any(
        sum(task["totals"]["buildSegments"][name] for name in counts) >= records
        for group in response.json().values()
        for task in group.values()
    )


def await_committed(
    api: httpx.Client, args: argparse.Namespace, datasource: str, end: dict[int, int], began: float
) -> float | None:
    """Poll until the supervisor's committed offsets are `end`. Once a task has read everything,
    suspend the supervisor (or ask for a handoff, `--finish handoff`), so that it publishes;
    when that happened (perf_counter), None if it never showed."""
    final = {str(p): o for p, o in end.items()}
    caught_up = None
    while True:
        if caught_up is None and read_everything(api, datasource, sum(end.values())):
            caught_up = time.perf_counter()
            if args.finish == "suspend":
                api.post(f"{BASE}/{datasource}/suspend").raise_for_status()
            else:
                api.post(f"{BASE}/{datasource}/taskGroups/handoff", json={"taskGroupIds": [0]})
        if caught_up is not None:
            response = api.get(f"{BASE}/{datasource}/status")
            response.raise_for_status()
            payload = response.json()["payload"]
            if payload["committedOffsets"] == final:
                return caught_up
        if time.perf_counter() - began > TIMEOUT_S:
            raise RuntimeError(f"{datasource}: not committed within {TIMEOUT_S} s")
        time.sleep(POLL_S)


def wait_for_tasks(stack: Stack, datasource: str) -> list[Any]:
    """Wait until no task of the datasource runs; its task rows."""
    deadline = time.monotonic() + 300
    while True:
        rows = stack.rows(select(TaskRow).where(TaskRow.datasource == datasource))
        if all(r.status != "RUNNING" for r in rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def used_segments(stack: Stack, datasource: str) -> list[Path]:
    query = select(SegmentRow.path).where(
        SegmentRow.datasource == datasource, SegmentRow.used.is_(True)
    )
    return [Path(path) for (path,) in stack.rows(query)]


def warm_file_cache(
    args: argparse.Namespace, bootstrap: str, end: dict[int, int], work: Path
) -> None:
    """An untimed tiny limit job first, so the jars and libraries are in the OS file cache for
    every timed contender alike (no JVM outlives it)."""
    run_baseline("limit", args, bootstrap, {p: min(100, o) for p, o in end.items()}, work / "warm")


def describe(key: str, result: dict[str, Any]) -> str:
    if key == "limit":
        return f"session {result['session_s']} s, job {result['job_s']} s"
    if key == "parts":
        return f"{result['processes']} processes"
    if key in ("streaming", "streaming_cluster"):
        return (
            f"session {result['session_s']} s, {result['batches']} batches in {result['job_s']} s"
        )
    parts = [f"{result['segments']} segments"]
    if "task_reading_s" in result:
        counters = result["counters"]
        parts += [
            f"task launched {result['task_launched_s']} s",
            f"reading from {result['task_reading_s']} s",
            f"caught up {result['caught_up_s']} s",
            f"{counters['persists']} persists {counters['persistSeconds']} s",
            f"merge+publish {counters['handoffSeconds']} s",
        ]
    return ", ".join(parts)


def report(args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]]) -> None:
    n = args.records
    for result in (r for rs in runs.values() for r in rs):
        result["events_per_s"] = n / result["seconds"]
    best = {key: median_round(rs) for key, rs in runs.items()}
    cluster = f", cluster {args.master}" if args.master else ""
    print(
        f"\n{n} records, batch {args.batch}, master {args.local_master}{cluster}, "
        f"finish by {args.finish}, median of {args.rounds} round(s)"
    )
    print(f"{'contender':<30}{'seconds':>9}{'events/s':>11}{'cpu s':>8}  phases")
    for key, label in {**CONTENDERS, **(ON_CLUSTER if args.master else {})}.items():
        result = best[key]
        print(
            f"{label:<30}{result['seconds']:>9.1f}{result['events_per_s']:>11.0f}"
            f"{result['cpu_s']:>8.0f}  {describe(key, result)}"
        )
    ratios = {}
    for suffix, key in (("", "sluicegate_r1"), ("_r2", "sluicegate_r2")):
        seconds = best[key]["seconds"]
        ratios[f"vs_structured_streaming{suffix}"] = best["streaming"]["seconds"] / seconds
        ratios[f"vs_limit{suffix}"] = best["limit"]["seconds"] / seconds
        ratios[f"vs_parts{suffix}"] = best["parts"]["seconds"] / seconds
    met = {
        "vs_structured_streaming>=3": ratios["vs_structured_streaming"] >= 3,
        "vs_parts>=0.8": ratios["vs_parts"] >= 0.8,
        "vs_parts_r2>=0.5": ratios["vs_parts_r2"] >= 0.5,
    }
    if args.master:
        on_cluster = best["sluicegate_cluster"]["seconds"]
        ratios["cluster_vs_local"] = best["sluicegate_r1"]["seconds"] / on_cluster
        ratios["vs_structured_streaming_cluster"] = (
            best["streaming_cluster"]["seconds"] / on_cluster
        )
        met["cluster_vs_local>=0.9"] = ratios["cluster_vs_local"] >= 0.9
    print("targets: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in met.items()))
    path = write_results(
        "throughput",
        {
            "records": n,
            "batch": args.batch,
            "master": args.local_master,
            "cluster_master": args.master,
            "finish": args.finish,
            "rounds": runs,
            "median": best,
            "ratios": ratios,
            "targets_met": met,
        },
    )
    print(f"results: {path.relative_to(ROOT)}")
    figures = " ".join(f"{k}={v:.2f}" for k, v in ratios.items())
    print(
        f"RATIO {figures} events_per_s={best['sluicegate_r1']['events_per_s']:.0f} "
        f"events_per_s_r2={best['sluicegate_r2']['events_per_s']:.0f}"
    )


def median_round(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The round of median seconds (of an even number, the faster of the two middle ones)."""
    ordered = sorted(rounds, key=lambda r: r["seconds"])
    return ordered[(len(ordered) - 1) // 2]


def run_round(
    args: argparse.Namespace,
    api: httpx.Client,
    stack: Stack,
    end: dict[int, int],
    work: Path,
    runs: dict[str, list[dict[str, Any]]],
    cluster: tuple[httpx.Client, Stack] | None,
) -> None:
    """Every contender once, one after the other; the cluster's Sluicegate on `cluster`, a
    service of its own whose tasks run on `args.master`."""
    number = len(runs["limit"]) + 1
    for job in ("limit", "streaming", "parts"):
        runs[job].append(run_baseline(job, args, stack.bootstrap, end, work))
        print(f"round {number} {job}: {runs[job][-1]['seconds']:.1f} s", flush=True)
    for replicas in (1, 2):
        key = f"sluicegate_r{replicas}"
        datasource = f"wiki_{number}_r{replicas}"
        runs[key].append(run_sluicegate(api, stack, args, end, replicas, datasource))
        print(f"round {number} {key}: {runs[key][-1]['seconds']:.1f} s", flush=True)
    if cluster is None:
        return
    runs["streaming_cluster"].append(
        run_baseline("streaming", args, stack.bootstrap, end, work / "cluster", args.master)
    )
    print(f"round {number} streaming_cluster: {runs['streaming_cluster'][-1]['seconds']:.1f} s")
    cluster_api, cluster_stack = cluster
    datasource = f"wiki_{number}_cluster"
    runs["sluicegate_cluster"].append(
        run_sluicegate(cluster_api, cluster_stack, args, end, 1, datasource)
    )
    print(f"round {number} sluicegate_cluster: {runs['sluicegate_cluster'][-1]['seconds']:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--batch", type=int, default=150_000, help="maxRowsInMemory: records per micro-batch"
    )
    parser.add_argument(
        "--local-master", default="local[2]", help="every contender's local Spark master"
    )
    parser.add_argument(
        "--master", help="a spark:// master: Structured Streaming and Sluicegate run there too"
    )
    parser.add_argument(
        "--cluster", action="store_true", help="start a one-worker standalone cluster for --master"
    )
    parser.add_argument("--finish", choices=("suspend", "handoff"), default="suspend")
    parser.add_argument("--rounds", type=int, default=3, help="runs of every contender")
    parser.add_argument(
        "--runtime",
        choices=("process", "shared"),
        default="shared",
        help="Sluicegate's task_runtime: shared starts its application with the service, "
        "before any contender (a host's long-lived application), so its tasks start warm",
    )
    parser.add_argument("--keep", metavar="DIR", help="keep the run's files (task logs too) here")
    args = parser.parse_args()
    if args.master and not args.master.startswith("spark://"):
        parser.error("--master: a spark://HOST:PORT master (local ones: --local-master)")
    args.jar_cache = default_jar_cache()
    with ExitStack() as stack:
        if args.cluster:
            cores = os.cpu_count() or 2
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sg-cluster-")))
            # twice the machine's cores in the worker's books: the cluster service's shared
            # application holds its share for as long as it runs, and Structured Streaming
            # must still get one; only one of them works at a time
            cluster = LocalSparkCluster(root, workers=1, cores=2 * cores, memory="8g")
            args.master = stack.enter_context(cluster).url
            print(f"Spark cluster {args.master}: one worker of {2 * cores} cores", flush=True)
        measure(args, task_cores=os.cpu_count() or 2)


def measure(args: argparse.Namespace, task_cores: int) -> None:
    runs: dict[str, list[dict[str, Any]]] = {
        key: [] for key in {**CONTENDERS, **(ON_CLUSTER if args.master else {})}
    }
    settings = {"task_cores": task_cores, "task_runtime": args.runtime}
    with ExitStack() as services:
        stack = services.enter_context(
            running("sluicegate-throughput-", args.keep, task_master=args.local_master, **settings)
        )
        api = services.enter_context(httpx.Client(base_url=stack.url, timeout=30))
        cluster = None
        if args.master:
            # a second service on the same broker, its tasks on the cluster (with the shared
            # runtime, its application starts there now, as a task host's would)
            on_cluster = services.enter_context(
                running(
                    "sluicegate-throughput-cluster-",
                    args.keep,
                    broker=stack.broker,
                    task_master=args.master,
                    **settings,
                )
            )
            cluster = (
                services.enter_context(httpx.Client(base_url=on_cluster.url, timeout=30)),
                on_cluster,
            )
        work = stack.settings.work_dir.parent
        end = produce_edits(stack.bootstrap, TOPIC, args.records)
        print(f"produced {args.records} records to {TOPIC}: end offsets {end}", flush=True)
        warm_file_cache(args, stack.bootstrap, end, work)
        for number in range(1, args.rounds + 1):
            run_round(args, api, stack, end, work / f"round{number}", runs, cluster)
    wrong = {k: [r["events"] for r in rs] for k, rs in runs.items()}
    wrong = {k: events for k, events in wrong.items() if set(events) != {args.records}}
    if wrong:
        raise SystemExit(f"output does not hold {args.records} events: {wrong}")
    report(args, runs)


if __name__ == "__main__":
    main()
