"""Dashboard queries: the SQL API (DuckDB over the published table and the rows tasks hold)
against `sluicegate sql`'s Spark path (Spark SQL over the published segments), on the same
data in the same run.

A 4-partition topic is filled with `--rows` wiki edits (bench/common.py; rollup off, so every
record is a published row), one supervisor reads them all and hands off (the publish), and
its successor task then holds what a producer sends at `--live-rate` records/s, timestamped
now. Then five dashboard queries, each asked `--rounds` times in turn through
`/druid/v2/sql` (the client's time, HTTP included): counts by minute, the top channels by
added, a distinct count of users, a filtered sum, and `sys.supervisors`. The first four run
`--spark-rounds` times as Spark SQL on a local Spark session of this process (views over the
published segments, as `sluicegate sql --master` builds them); `sys.supervisors` has no Spark
counterpart. The first round of each is a warm-up, not counted. The filtered sum's window has
no live rows, so both paths must agree on it, and the API's total count is the published rows
plus what the tasks hold.

    .venv/bin/python bench/query.py --rows 10000000

Ends with `RATIO p99_ms=<the API's p99 over all five queries' rounds>
vs_spark=<Spark's p99 over its four over the API's p99 over the same four>`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.common import CHANNELS, edits_spec, produce_edits, write_results  # noqa: E402
from bench.live import BASE, Producer, running  # noqa: E402
from supervisor.testkit.waits import median, percentile  # noqa: E402

TOPIC = "dashboard-edits"
DATASOURCE = "wiki"
SQL = "/druid/v2/sql"
WINDOW = ("2026-11-22 09:00:00", "2026-11-22 10:00:00")  # the filtered sum's: published only
# each query as Druid SQL (the API) and as Spark SQL (None: the API's alone)
QUERIES: dict[str, tuple[str, str | None]] = {
    "counts_by_minute": (
        f"SELECT TIME_FLOOR(__time, 'PT1M') AS m, COUNT(*) AS n FROM {DATASOURCE} "
        "GROUP BY 1 ORDER BY 1",
        f"SELECT date_trunc('MINUTE', __time) AS m, COUNT(*) AS n FROM {DATASOURCE} "
        "GROUP BY 1 ORDER BY 1",
    ),
    "top_channels": (
        f"SELECT channel, SUM(added) AS added FROM {DATASOURCE} GROUP BY 1 ORDER BY 2 DESC LIMIT 5",
        f"SELECT channel, SUM(added) AS added FROM {DATASOURCE} GROUP BY 1 ORDER BY 2 DESC LIMIT 5",
    ),
    "distinct_users": (
        f'SELECT APPROX_COUNT_DISTINCT("user") AS users FROM {DATASOURCE}',
        f"SELECT approx_count_distinct(user) AS users FROM {DATASOURCE}",
    ),
    "filtered_sum": (
        f"SELECT SUM(added) AS added FROM {DATASOURCE} WHERE channel = '{CHANNELS[0]}' "
        f"AND __time >= TIMESTAMP '{WINDOW[0]}' AND __time < TIMESTAMP '{WINDOW[1]}'",
        f"SELECT SUM(added) AS added FROM {DATASOURCE} WHERE channel = '{CHANNELS[0]}' "
        f"AND __time >= TIMESTAMP '{WINDOW[0]}' AND __time < TIMESTAMP '{WINDOW[1]}'",
    ),
    "sys_supervisors": ("SELECT supervisor_id, state, healthy FROM sys.supervisors", None),
}


def live_edit(n: int, now: float) -> bytes:
    """A wiki edit stamped with its produce time."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return json.dumps(
        {
            "timestamp": stamp,
            "channel": CHANNELS[n % len(CHANNELS)],
            "page": f"Page {n % 2000}",
            "user": f"user{n % 500}",
            "namespace": "Main",
            "countryName": None,
            "added": n % 800,
            "deleted": n % 200,
        }
    ).encode()


def ask(api: httpx.Client, query: str) -> tuple[float, Any]:
    """The query's answer through the SQL API and its time (seconds, HTTP included)."""
    began = time.perf_counter()
    answer = api.post(SQL, json={"query": query, "context": {"timeout": 120_000}})
    spent = time.perf_counter() - began
    if answer.status_code != 200:
        raise RuntimeError(f"{query}: {answer.status_code} {answer.text[:300]}")
    return spent, answer.json()


def publish_backlog(api: httpx.Client, rows: int, end: dict[int, int]) -> float:
    """Read the whole topic, hand off, and wait for the publish; its seconds."""
    began = time.monotonic()
    final = {str(p): o for p, o in end.items()}
    asked = -1e9  # a handoff asked for then (a group handed off early, its successor again)
    while True:
        payload = api.get(f"{BASE}/{DATASOURCE}/status").json()["payload"]
        if payload.get("committedOffsets") == final:
            return time.monotonic() - began
        if payload.get("aggregateLag") == 0 and time.monotonic() - asked > 20:
            reply = api.post(f"{BASE}/{DATASOURCE}/taskGroups/handoff", json={"taskGroupIds": [0]})
            asked = time.monotonic() if reply.status_code == 200 else asked
        if int(time.monotonic() - began) % 30 == 0:
            print(
                f"  lag {payload.get('aggregateLag')}, committed {payload.get('committedOffsets')}",
                flush=True,
            )
        if time.monotonic() - began > 3600:
            raise RuntimeError(f"{rows} rows not published within an hour")
        time.sleep(1)


def api_rounds(api: httpx.Client, rounds: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Each query `rounds` times in turn; each one's times (the first round left out) and its
    last answer."""
    times: dict[str, list[float]] = {name: [] for name in QUERIES}
    answers: dict[str, Any] = {}
    for round_number in range(rounds + 1):
        for name, (druid, _) in QUERIES.items():
            spent, answers[name] = ask(api, druid)
            if round_number:
                times[name].append(spent)
    return times, answers


def spark_rounds(url: str, rounds: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """The Spark path's queries, on a local session over the published segments."""
    from supervisor.cli.views import local_session, published_files, register_views

    spark = local_session("local[*]")
    try:
        register_views(spark, published_files(url))
        times: dict[str, list[float]] = {n: [] for n, (_, s) in QUERIES.items() if s}
        answers: dict[str, Any] = {}
        for round_number in range(rounds + 1):
            for name in times:
                began = time.perf_counter()
                rows = spark.sql(QUERIES[name][1]).collect()
                spent = time.perf_counter() - began
                answers[name] = [row.asDict() for row in rows]
                if round_number:
                    times[name].append(spent)
        return times, answers
    finally:
        spark.stop()


def summary(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        name: {
            "p50_ms": round(median(values) * 1000, 1),
            "p99_ms": round(percentile(values, 99) * 1000, 1),
        }
        for name, values in times.items()
    }


def pooled_p99_ms(times: dict[str, list[float]], names: list[str]) -> float:
    return percentile([v for name in names for v in times[name]], 99) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000, help="published rows")
    parser.add_argument("--live-rate", type=float, default=2000.0, help="records/s held live")
    parser.add_argument("--live-seconds", type=float, default=30.0, help="held before querying")
    parser.add_argument("--rounds", type=int, default=30, help="API rounds of the five")
    parser.add_argument("--spark-rounds", type=int, default=5, help="Spark rounds of the four")
    parser.add_argument("--keep", help="run in a directory under this one and keep it")
    args = parser.parse_args()

    with running("sluicegate-query-", args.keep, task_master="local[2]") as stack:
        began = time.monotonic()
        end = produce_edits(stack.bootstrap, TOPIC, args.rows)
        produced_s = time.monotonic() - began
        print(f"{args.rows} edits produced in {produced_s:.1f} s", flush=True)
        with httpx.Client(base_url=stack.url, timeout=300) as api:
            api.post(
                BASE, json=edits_spec(DATASOURCE, TOPIC, stack.bootstrap, rollup=False)
            ).raise_for_status()
            published_s = publish_backlog(api, args.rows, end)
            print(f"read and published in {published_s:.1f} s", flush=True)
            producer = Producer(stack.bootstrap, TOPIC, args.live_rate, live_edit).start()
            try:
                time.sleep(args.live_seconds)
                counted = ask(api, f"SELECT COUNT(*) AS n FROM {DATASOURCE}")[1][0]["n"]
                api_times, api_answers = api_rounds(api, args.rounds)
                spark_times, spark_answers = spark_rounds(stack.url, args.spark_rounds)
                sent = producer.sent
            finally:
                producer.stop()
            api.post(f"{BASE}/{DATASOURCE}/terminate")

    if not args.rows < counted <= args.rows + sent:
        raise SystemExit(f"COUNT(*) was {counted}: not {args.rows} published plus held rows")
    if api_answers["filtered_sum"] != spark_answers["filtered_sum"]:
        raise SystemExit(
            f"the paths disagree: {api_answers['filtered_sum']} {spark_answers['filtered_sum']}"
        )
    shared = list(spark_times)
    api_p99 = pooled_p99_ms(api_times, list(QUERIES))
    api_shared_p99 = pooled_p99_ms(api_times, shared)
    spark_p99 = pooled_p99_ms(spark_times, shared)
    results = {
        "rows_published": args.rows,
        "rows_held_when_counted": counted - args.rows,
        "live_rate": args.live_rate,
        "produce_s": round(produced_s, 1),
        "ingest_and_publish_s": round(published_s, 1),
        "api": summary(api_times),
        "spark": summary(spark_times),
        "api_p99_ms": round(api_p99, 1),
        "api_p99_ms_of_spark_queries": round(api_shared_p99, 1),
        "spark_p99_ms": round(spark_p99, 1),
    }
    print(f"{args.rows} published rows, {counted - args.rows} held by the live task")
    print(f"{'query':<18} {'API p50':>9} {'API p99':>9} {'Spark p50':>10} {'Spark p99':>10}")
    for name in QUERIES:
        ours, theirs = results["api"][name], results["spark"].get(name)
        spark_cells = f"{theirs['p50_ms']:>10.1f} {theirs['p99_ms']:>10.1f}" if theirs else ""
        print(f"{name:<18} {ours['p50_ms']:>9.1f} {ours['p99_ms']:>9.1f} {spark_cells}")
    print(f"results: {write_results('query', results)}")
    print(f"RATIO p99_ms={api_p99:.1f} vs_spark={spark_p99 / api_shared_p99:.2f}")


if __name__ == "__main__":
    main()
