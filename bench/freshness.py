"""Freshness: how long from a record's produce time until it is in a published segment, and
until the SQL API counts it (bench/queryable.py: taskDuration PT1H, no intermediate handoff).

A producer at a steady rate stamps each record with its produce time (epoch millis, the
row's timestamp); one supervisor (taskCount 1, replicas 1) with a short
`intermediateHandoffPeriod` publishes a sequence every few seconds, rollup off so every record
is a row. After the run every published segment is read back: a row's freshness is its
segment's publish time (the metadata commit) minus its produce time. Records produced in the
warm-up (until the first publish, and the task has caught up with what was produced while it
started: lag at most 3 s of records) are left out, as are those produced after the window.

    .venv/bin/python bench/freshness.py --rate 20000 --seconds 120 [--measure queryable]

Writes bench/results/freshness.json and ends with a RATIO line.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
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
from queryable import Poller, probe_record
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


def spec(bootstrap: str, args: argparse.Namespace, handoff: bool = True) -> dict[str, Any]:
    """The supervisor; with `handoff`, an intermediateHandoffPeriod of args.handoff_period."""
    period = args.handoff_period if handoff else None
    body = supervisor_spec(
        SUPERVISOR,
        "fresh",
        bootstrap,
        ["page", "user"],
        metrics=[{"type": "longSum", "name": "added", "fieldName": "added"}],
        tuning={"intermediateHandoffPeriod": period} if period else {},
        period="PT5S",
        taskDuration="PT1H",
        useEarliestOffset=False,
    )
    body["spec"]["dataSchema"]["timestampSpec"] = {"column": "ts", "format": "millis"}
    return body


def segments(stack: Stack) -> list[Any]:
    return stack.rows(select(SegmentRow).where(SegmentRow.used.is_(True)))


def warm_up(api: httpx.Client, ready: Callable[[], bool], rate: float) -> float:
    """Wait for the steady state: `ready` (a first publish, a first probe visible) and the
    task has caught up with the backlog the producer built while it started (lag at most
    CAUGHT_UP_S seconds of records). Seconds waited; the window starts then, so that it
    measures freshness, not the catch-up."""
    began = time.monotonic()
    while time.monotonic() - began < WARM_UP_LIMIT_S:
        status = api.get(f"{BASE}/{SUPERVISOR}/status").json()["payload"]
        lag = status.get("aggregateLag")
        if lag is not None and lag <= rate * CAUGHT_UP_S and ready():
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


def publish_run(args: argparse.Namespace) -> dict[str, Any]:
    """Produce to published segment, with intermediateHandoffPeriod `args.handoff_period`."""
    with running(
        "sluicegate-fresh-", args.keep, task_master=args.master, task_runtime=args.runtime
    ) as stack:
        create_topic(stack.bootstrap, "fresh", args.partitions)
        with httpx.Client(base_url=stack.url, timeout=30) as api:
            api.post(BASE, json=spec(stack.bootstrap, args)).raise_for_status()
            producer = Producer(stack.bootstrap, "fresh", args.rate, record).start()
            try:
                warm_up_s = warm_up(api, lambda: bool(segments(stack)), args.rate)
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
    return results


def queryable_run(args: argparse.Namespace) -> dict[str, Any]:
    """Produce to visible in /druid/v2/sql (bench/queryable.py): taskDuration PT1H and no
    intermediate handoff, so every answer is of the rows the task holds."""
    with running(
        "sluicegate-queryable-", args.keep, task_master=args.master, task_runtime=args.runtime
    ) as stack:
        create_topic(stack.bootstrap, "fresh", args.partitions)
        body = spec(stack.bootstrap, args, handoff=False)
        body["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"].append("probe")
        with httpx.Client(base_url=stack.url, timeout=30) as api:
            api.post(BASE, json=body).raise_for_status()
            producer = Producer(stack.bootstrap, "fresh", args.rate, probe_record).start()
            poller = Poller(stack.url, "fresh").start()
            try:
                began = time.time()
                warm_up_s = warm_up(api, lambda: poller.seen_since(began), args.rate)
                measured_from, sent_from = time.time(), producer.sent
                poller.since = measured_from
                time.sleep(args.seconds)
                sent_to = producer.sent
                time.sleep(10)  # the window's last probes: visible within this, or never
                rate = producer.achieved_rate()
                published = len(segments(stack))
            finally:
                poller.stop()
                producer.stop()
            api.post(f"{BASE}/{SUPERVISOR}/terminate")
    values = poller.freshness(sent_from, sent_to)
    seen = [v for v in values if v != float("inf")]
    results = {
        "rate_asked": args.rate,
        "rate_produced": round(rate, 1),
        "measured_seconds": args.seconds,
        "probes_in_window": len(values),
        "probes_never_visible": len(values) - len(seen),
        "segments_published": published,
        "warm_up_s": round(warm_up_s, 1),
        "queries": len(poller.query_s),
        "queries_refused": poller.refused,
        "queries_lacking_groups": poller.lacking,
        "query_p50_ms": round(median(poller.query_s) * 1000, 1),
        "query_p99_ms": round(percentile(poller.query_s, 99) * 1000, 1),
        "queryable_p50_s": round(median(values), 2),
        "queryable_p90_s": round(percentile(values, 90), 2),
        "queryable_p99_s": round(percentile(values, 99), 2),
        "queryable_max_s": round(max(seen), 2) if seen else float("nan"),
    }
    print(
        f"queryable at {rate:.0f} records/s produced ({args.rate:.0f} asked), taskDuration PT1H"
        f" and no intermediate handoff: {len(seen)} of {len(values)} probes seen; SQL query"
        f" p50 {results['query_p50_ms']} ms, p99 {results['query_p99_ms']} ms"
    )
    print(f"{'probes':>10} {'p50 s':>7} {'p90 s':>7} {'p99 s':>7} {'max s':>7}")
    print(
        f"{len(values):>10} {results['queryable_p50_s']:>7.2f} "
        f"{results['queryable_p90_s']:>7.2f} {results['queryable_p99_s']:>7.2f} "
        f"{results['queryable_max_s']:>7.2f}"
    )
    return results


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
    parser.add_argument(
        "--measure",
        choices=("both", "publish", "queryable"),
        default="both",
        help="produce to published, produce to visible in /druid/v2/sql, or both (in turn)",
    )
    args = parser.parse_args()

    results: dict[str, Any] = {}
    ratio: list[str] = []
    if args.measure in ("both", "publish"):
        published = publish_run(args)
        results["publish"] = published
        period_s = duration_millis(args.handoff_period) / 1000
        expected = max(1, published["records_produced_in_window"])
        ratio += [
            f"p50_s={published['p50_s']:.2f}",
            f"p99_s={published['p99_s']:.2f}",
            f"p99_over_handoff_period={published['p99_s'] / period_s:.2f}",
            f"produced_over_asked={published['rate_produced'] / args.rate:.2f}",
            f"published_over_produced={published['records_published_in_window'] / expected:.3f}",
        ]
    if args.measure in ("both", "queryable"):
        queried = queryable_run(args)
        results["queryable"] = queried
        ratio += [
            f"queryable_p50_s={queried['queryable_p50_s']:.2f}",
            f"queryable_p99_s={queried['queryable_p99_s']:.2f}",
            f"queryable_produced_over_asked={queried['rate_produced'] / args.rate:.2f}",
            f"query_p99_ms={queried['query_p99_ms']:.1f}",
        ]
    print(f"results: {write_results('freshness', results)}")
    print("RATIO " + " ".join(ratio))


if __name__ == "__main__":
    main()
