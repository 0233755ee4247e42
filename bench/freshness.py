"""Freshness: how long from a record's produce time until it is in a published segment.

A producer at a steady rate stamps each record with its produce time (epoch millis, the
row's timestamp); one supervisor (taskCount 1, replicas 1) with a short
`intermediateHandoffPeriod` publishes a sequence every few seconds, rollup off so every record
is a row. After the run every published segment is read back: a row's freshness is its
segment's publish time (the metadata commit) minus its produce time. Records produced in the
warm-up (until the first publish, and the task has caught up with what was produced while it
started: lag at most 3 s of records) are left out, as are those produced after the window.

    .venv/bin/python bench/freshness.py --rate 20000 --seconds 120

Writes bench/results/freshness.json and ends with a RATIO line.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
from live import (
    BASE,
    Producer,
    Stack,
    epoch,
    running,
    write_results,
)
from sqlalchemy import select

from supervisor.db.models import SegmentRow
from supervisor.devstack.specs import supervisor_spec
from supervisor.devstack.topics import create_topic
from supervisor.testkit.waits import median, percentile
from tasks.spec.periods import duration_millis

SUPERVISOR = "fresh"
CAUGHT_UP_S = 3.0  # the steady state: lag at most this many seconds of records
WARM_UP_LIMIT_S = 300.0
PAGES = [f"Page {n}" for n in range(500)]


def record(n: int, now: float) -> bytes:
    return json.dumps(
        {"ts": int(now * 1000), "page": PAGES[n % 500], "user": f"u{n % 97}", "added": n % 800}
    ).encode()


def spec(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    body = supervisor_spec(
        SUPERVISOR,
        "fresh",
        bootstrap,
        ["page", "user"],
        metrics=[{"type": "longSum", "name": "added", "fieldName": "added"}],
        tuning={"intermediateHandoffPeriod": args.handoff_period},
        period="PT5S",
        taskDuration="PT1H",
        useEarliestOffset=False,
    )
    body["spec"]["dataSchema"]["timestampSpec"] = {"column": "ts", "format": "millis"}
    return body


def segments(stack: Stack) -> list[Any]:
    return stack.rows(select(SegmentRow).where(SegmentRow.used.is_(True)))


def warm_up(api: httpx.Client, stack: Stack, rate: float) -> float:
    """Wait for the steady state: the task has published once and caught up with the backlog
    the producer built while it started (lag at most CAUGHT_UP_S seconds of records). Seconds
    waited; the window starts then, so that it measures freshness, not the catch-up."""
    began = time.monotonic()
    while time.monotonic() - began < WARM_UP_LIMIT_S:
        status = api.get(f"{BASE}/{SUPERVISOR}/status").json()["payload"]
        lag = status.get("aggregateLag")
        if segments(stack) and lag is not None and lag <= rate * CAUGHT_UP_S:
            return time.monotonic() - began
        time.sleep(0.5)
    print(f"warning: not caught up after {WARM_UP_LIMIT_S:.0f} s; measuring anyway")
    return time.monotonic() - began


def freshness(rows: list[Any], produced_from: float, produced_to: float) -> list[float]:
    """Seconds from produce to publish of every row produced in [produced_from, produced_to]."""
    values: list[float] = []
    for segment in rows:
        published = epoch(segment.created_at)
        times = pq.read_table(segment.path, columns=["__time"]).column("__time")
        millis = times.cast(pa.timestamp("ms", tz=times.type.tz)).cast(pa.int64())
        for stamp in millis.to_pylist():
            produced = stamp / 1000
            if produced_from <= produced <= produced_to:
                values.append(published - produced)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=20000.0, help="records per second")
    parser.add_argument("--seconds", type=float, default=120.0, help="measured production")
    parser.add_argument("--handoff-period", default="PT5S", help="intermediateHandoffPeriod")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]", help="the task's Spark master")
    parser.add_argument("--keep", help="run in a directory under this one and keep it")
    parser.add_argument(
        "--runtime", choices=("process", "shared"), default="shared", help="task_runtime"
    )
    args = parser.parse_args()

    with running(
        "sluicegate-fresh-", args.keep, task_master=args.master, task_runtime=args.runtime
    ) as stack:
        create_topic(stack.bootstrap, "fresh", args.partitions)
        with httpx.Client(base_url=stack.url, timeout=30) as api:
            api.post(BASE, json=spec(stack.bootstrap, args)).raise_for_status()
            producer = Producer(stack.bootstrap, "fresh", args.rate, record).start()
            try:
                warm_up_s = warm_up(api, stack, args.rate)
                measured_from, sent_from = time.time(), producer.sent
                time.sleep(args.seconds)
                measured_to, sent_to = time.time(), producer.sent
                # keep producing while the window's last records are published
                time.sleep(3 * duration_millis(args.handoff_period) / 1000 + 15)
                rate = producer.achieved_rate()
                rows = segments(stack)
            finally:
                producer.stop()
            api.post(f"{BASE}/{SUPERVISOR}/terminate")
        values = freshness(rows, measured_from, measured_to)

    expected = sent_to - sent_from
    results = {
        "rate_asked": args.rate,
        "rate_produced": round(rate, 1),
        "measured_seconds": args.seconds,
        "records_produced_in_window": expected,
        "records_published_in_window": len(values),
        "intermediateHandoffPeriod": args.handoff_period,
        "warm_up_s": round(warm_up_s, 1),
        "segments": len(rows),
        "p50_s": round(median(values), 2),
        "p90_s": round(percentile(values, 90), 2),
        "p99_s": round(percentile(values, 99), 2),
        "max_s": round(max(values), 2) if values else float("nan"),
    }
    print(f"freshness at {rate:.0f} records/s produced ({args.rate:.0f} asked), ", end="")
    print(f"intermediateHandoffPeriod {args.handoff_period}, {len(rows)} segments")
    print(f"{'records':>10} {'p50 s':>7} {'p90 s':>7} {'p99 s':>7} {'max s':>7}")
    print(
        f"{len(values):>10} {results['p50_s']:>7.2f} {results['p90_s']:>7.2f} "
        f"{results['p99_s']:>7.2f} {results['max_s']:>7.2f}"
    )
    print(f"results: {write_results('freshness', results)}")
    period_s = duration_millis(args.handoff_period) / 1000
    print(
        f"RATIO p50_s={results['p50_s']:.2f} p99_s={results['p99_s']:.2f} "
        f"p99_over_handoff_period={results['p99_s'] / period_s:.2f} "
        f"produced_over_asked={rate / args.rate:.2f} "
        f"published_over_produced={len(values) / max(1, expected):.3f}"
    )


if __name__ == "__main__":
    main()
