"""Handoff gap: how long a task group stops reading at each rollover, and what lag does then.

One supervisor (taskCount 1, replicas 1, a short taskDuration) on a real broker, the service in
this process with real tasks, a producer at a steady rate. For each rollover:

- gap to read: from the moment generation N paused (its report's pausedAt, the rollover's
  pause) to generation N+1 starting its first batch with records (firstReadAt);
- gap to persist: to that batch being indexed and persisted (firstPersistAt);
- where the gap to read goes: pause -> end offsets set on every replica (the row's rolled_at)
  -> the successor's task row (the overlord's next pass) -> the first read;
- lag (records, from the supervisor's status every 0.5 s): the median over the 10 s before the
  pause, the peak from the pause until 3 s after the successor's first persist, the median
  over the 10 s after that; steady-state lag is the median outside those windows.

Two runs in one process: the shared runtime (the default: every task a thread of the host's
one Spark application, so a successor starts with no JVM start-up) and the baseline, a Spark
driver process per task (`--task-runtime process`: a successor starts its driver after the
rollover, as a Druid peon starts its JVM).

    .venv/bin/python bench/handoff.py --rollovers 10 --baseline-rollovers 3

Writes bench/results/handoff.json and ends with a RATIO line.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from typing import Any

import httpx
from live import (
    BASE,
    Producer,
    Stack,
    epoch,
    parse_time,
    running,
    write_results,
)

from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic
from supervisor.testkit.waits import median

SUPERVISOR = "handoff"


def record(n: int, now: float) -> bytes:
    stamp = datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z")
    return json.dumps({"ts": stamp, "n": n, "page": f"Page {n % 97}"}).encode()


def spec(topic: str, bootstrap: str, duration: str) -> dict[str, Any]:
    return supervisor_spec(
        SUPERVISOR,
        topic,
        bootstrap,
        ["page"],
        metrics=[
            {"type": "count", "name": "count"},
            {"type": "longSum", "name": "n", "fieldName": "n"},
        ],
        period="PT1S",
        taskDuration=duration,
    )


def sample_until(stack: Stack, api: httpx.Client, rollovers: int) -> list[tuple[float, int]]:
    """Lag every 0.5 s until `rollovers` generations have successors that read."""
    samples: list[tuple[float, int]] = []
    while True:
        payload = api.get(f"{BASE}/{SUPERVISOR}/status").json()["payload"]
        if payload.get("offsetsLastUpdated"):
            samples.append((time.time(), int(payload.get("aggregateLag") or 0)))
        if sum(1 for t in stack.tasks() if t.end_offsets is not None) > rollovers:
            return samples
        time.sleep(0.5)


def run_case(args: argparse.Namespace, runtime: str, rollovers: int) -> dict[str, Any]:
    with running(
        "sluicegate-handoff-",
        args.keep,
        task_master=args.master,
        task_runtime=runtime,
        publish_niceness=args.publish_niceness,
    ) as stack:
        create_topic(stack.bootstrap, "edits", 2)
        producer = Producer(stack.bootstrap, "edits", args.rate, record).start()
        try:
            with httpx.Client(base_url=stack.url, timeout=30) as api:
                api.post(BASE, json=spec("edits", stack.bootstrap, args.task_duration))
                samples = sample_until(stack, api, rollovers)
                api.post(f"{BASE}/{SUPERVISOR}/suspend").raise_for_status()
                deadline = time.monotonic() + 300
                while any(t.status == "RUNNING" for t in stack.tasks()):
                    if time.monotonic() > deadline:
                        raise RuntimeError("tasks did not finish after suspend")
                    time.sleep(0.5)
            rate = producer.achieved_rate()
        finally:
            producer.stop()
        rows = stack.tasks()
    return {"runtime": runtime, **measure(rows, samples, rate)}


def measure(rows: list[Any], samples: list[tuple[float, int]], rate: float) -> dict[str, Any]:
    reports = {t.id: t.report or {} for t in rows}
    start_of = {
        t.id: t.payload["ioConfig"]["startSequenceNumbers"]["partitionSequenceNumberMap"]
        for t in rows
    }
    first_persist = [parse_time(r.get("firstPersistAt")) for r in reports.values()]
    steady_from = min((p for p in first_persist if p is not None), default=0.0)
    rollovers = []
    for task in rows:
        successor = next((t for t in rows if start_of[t.id] == task.end_offsets), None)
        if task.end_offsets is None or successor is None:
            continue
        paused = parse_time(reports[task.id].get("pausedAt"))
        read = parse_time(reports[successor.id].get("firstReadAt"))
        persisted = parse_time(reports[successor.id].get("firstPersistAt"))
        if paused is None or read is None or persisted is None:
            continue  # the last generation: suspended before its successor read anything
        window_end = persisted + 3
        created = epoch(successor.created_at)
        rolled = epoch(task.rolled_at) if task.rolled_at is not None else created
        rollovers.append(
            {
                "task": task.id,
                "successor": successor.id,
                "rolled_after_pause_s": round(rolled - paused, 3),
                "created_after_rolled_s": round(created - rolled, 3),
                "read_after_created_s": round(read - created, 3),
                "gap_to_read_s": round(read - paused, 3),
                "gap_to_persist_s": round(persisted - paused, 3),
                "lag_before": median([lag for at, lag in samples if paused - 10 <= at < paused]),
                "lag_at": max(
                    (lag for at, lag in samples if paused <= at <= window_end), default=0
                ),
                "lag_after": median(
                    [lag for at, lag in samples if window_end < at <= window_end + 10]
                ),
                "window": (paused, window_end),
            }
        )
    windows = [r.pop("window") for r in rollovers]
    steady = [
        lag
        for at, lag in samples
        if at >= steady_from + 3 and not any(a <= at <= b for a, b in windows)
    ]
    steady_lag = median(steady)
    return {
        "producer_rate": round(rate, 1),
        "rollovers": rollovers,
        "steady_lag": steady_lag,
        "gap_max_s": max((r["gap_to_read_s"] for r in rollovers), default=float("nan")),
        "gap_median_s": median([r["gap_to_read_s"] for r in rollovers]),
        "persist_gap_max_s": max((r["gap_to_persist_s"] for r in rollovers), default=float("nan")),
        "persist_gap_median_s": median([r["gap_to_persist_s"] for r in rollovers]),
        "lag_ratio": max((r["lag_at"] for r in rollovers), default=0) / steady_lag
        if steady_lag
        else float("nan"),
    }


def print_case(name: str, case: dict[str, Any]) -> None:
    print(f"\n{name}: producer {case['producer_rate']:.0f} rec/s, steady lag {case['steady_lag']}")
    print(
        f"{'#':>3} {'gap→read s':>11} {'=rolled s':>10} {'+row s':>7} {'+read s':>8} "
        f"{'gap→persist s':>14} {'lag before':>11} {'lag at':>8} {'lag after':>10}"
    )
    for n, r in enumerate(case["rollovers"], 1):
        print(
            f"{n:>3} {r['gap_to_read_s']:>11.2f} {r['rolled_after_pause_s']:>10.2f} "
            f"{r['created_after_rolled_s']:>7.2f} {r['read_after_created_s']:>8.2f} "
            f"{r['gap_to_persist_s']:>14.2f} {r['lag_before']:>11.0f} {r['lag_at']:>8.0f} "
            f"{r['lag_after']:>10.0f}"
        )
    print(
        f"max gap→read {case['gap_max_s']:.2f} s, max gap→persist "
        f"{case['persist_gap_max_s']:.2f} s, lag at rollover / steady {case['lag_ratio']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollovers", type=int, default=10)
    parser.add_argument("--baseline-rollovers", type=int, default=3, help="0: no baseline")
    parser.add_argument("--rate", type=float, default=500.0, help="records per second")
    parser.add_argument("--task-duration", default="PT120S")
    parser.add_argument("--master", default="local[2]", help="the tasks' Spark master")
    parser.add_argument(
        "--publish-niceness",
        type=int,
        default=10,
        help="the service's publish_niceness (off, 0, by default in the service)",
    )
    parser.add_argument("--keep", help="run in a directory under this one and keep it")
    args = parser.parse_args()

    shared = run_case(args, "shared", rollovers=args.rollovers)
    print_case("shared application", shared)
    results: dict[str, Any] = {
        "rate": args.rate,
        "taskDuration": args.task_duration,
        "publish_niceness": args.publish_niceness,
        "shared": shared,
    }
    ratio = ""
    if args.baseline_rollovers:
        process = run_case(args, "process", rollovers=args.baseline_rollovers)
        print_case("baseline: a Spark driver process per task", process)
        results["process"] = process
        results["process_over_shared_gap"] = process["gap_median_s"] / shared["gap_median_s"]
        ratio = f" process_over_shared_gap={results['process_over_shared_gap']:.1f}"
    print(f"results: {write_results('handoff', results)}")
    print(
        f"RATIO gap_max_s={shared['gap_max_s']:.2f} persist_gap_max_s="
        f"{shared['persist_gap_max_s']:.2f} lag_ratio={shared['lag_ratio']:.2f}{ratio}"
    )


if __name__ == "__main__":
    main()
