"""Publish latency with and without the Iceberg commit, in one process.

`--supervisors` supervisors (200), each of its own datasource, publish every `--every`
seconds (5) for `--seconds` (60): a sequence's segment file of `--rows` rows (1,000), written
beforehand as a task writes it. Publishes are sent at their times by a pool of `--threads`
threads (the overlord's request threads; 40 as its thread limiter) through the publish
transaction itself (PublishService.publish, what `POST /action` runs and
`sluicegate_publish_seconds` times), once with the segment rows alone (the baseline, the
release before Iceberg) and once with each publish a snapshot of its datasource's table.
Each table first gets `--history` snapshots (1: made by its first publish, as a running
deployment's tables are; more: the metadata a table carries after that many publishes, with no
snapshot expiry yet). The metadata DB is a SQLite file, or PostgreSQL with
`--postgres` (Debian's, started here).

    .venv/bin/python bench/publish.py
    .venv/bin/python bench/publish.py --postgres --history 100

Prints each run's p50/p99/max and ends with
`RATIO publish_p99_s=<iceberg> baseline_p99_s=<segments alone> p50_s=<...> vs_baseline=<p99 ratio>`;
writes bench/results/publish.json.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from common import write_results

from supervisor.clock import utc_now
from supervisor.db.engine import make_engine, migrate, session_factory
from supervisor.lake.tables import Lake, open_lake
from supervisor.services.publish import PublishService
from supervisor.testkit.waits import percentile
from tasks.protocol import PublishAction, SegmentDescriptor, SequenceNumbers
from tasks.storage import parse

DAY_US = 86_400_000_000
START_US = 1_795_000_000_000_000  # 2026-11-18T...


def segment_file(directory: Path, rows: int, seq: int) -> Path:
    """A segment as a task writes it: __time, five string dimensions, three long metrics."""
    path = directory / f"{seq}.parquet"
    stamps = [START_US + seq * 5_000_000 + i for i in range(rows)]
    table = pa.table(
        {
            "__time": pa.array(stamps, pa.timestamp("us", tz="UTC")),
            **{d: [f"{d}{i % 97}" for i in range(rows)] for d in ("channel", "page", "user")},
            "count": pa.array([1] * rows, pa.int64()),
            "added": pa.array(range(rows), pa.int64()),
        }
    )
    pq.write_table(table, path, compression="zstd")
    return path


def action(datasource: str, path: Path, seq: int, rows: int) -> PublishAction:
    start_us = START_US + seq * 5_000_000
    day = start_us - start_us % DAY_US

    def iso(us: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(us // 1_000_000))

    def offsets(kind: str, offset: int) -> SequenceNumbers:
        return SequenceNumbers(
            type=kind,  # type: ignore[arg-type]
            stream=datasource,
            partitionSequenceNumberMap={"0": offset},
        )

    return PublishAction(
        supervisorId=datasource,
        dataSource=datasource,
        segments=[
            SegmentDescriptor(
                id=f"{datasource}_{seq}",
                dataSource=datasource,
                intervalStart=iso(day),
                intervalEnd=iso(day + DAY_US),
                version=f"v{seq}",
                partitionNum=0,
                path=str(path),
                size=path.stat().st_size,
                numRows=rows,
                dimensions=["channel", "page", "user"],
                metrics=["count", "added"],
            )
        ],
        startMetadata=offsets("start", seq * rows),
        endMetadata=offsets("end", (seq + 1) * rows),
    )


def run(args: argparse.Namespace, url: str, root: Path, iceberg: bool) -> dict[str, Any]:
    engine = make_engine(url)
    migrate(engine)
    sessions = session_factory(engine)
    lake: Lake | None = open_lake(engine, parse(root / "deep")) if iceberg else None
    files = root / "files"
    rounds = int(args.seconds / args.every)
    names = [f"ds{i:04d}" for i in range(args.supervisors)]
    template = [segment_file(files, args.rows, seq) for seq in range(args.history + rounds)]

    def publish(name: str, seq: int) -> float:
        began = time.perf_counter()
        with sessions() as session:
            result = PublishService(session, utc_now, None, lake).publish(
                f"{name}-{seq}", action(name, template[seq], seq, args.rows)
            )
        assert result.outcome.value == "published", (name, seq, result)
        return time.perf_counter() - began

    with ThreadPoolExecutor(args.threads) as pool:
        for seq in range(args.history):  # each table's past, as fast as it goes
            list(pool.map(lambda n, s=seq: publish(n, s), names))
        latencies: list[float] = []
        lock = threading.Lock()
        began = time.monotonic()
        late = 0
        futures = []
        # each supervisor publishes every `every` seconds, their times spread over the period
        for seq in range(args.history, args.history + rounds):
            for index, name in enumerate(names):
                due = began + (seq - args.history) * args.every + index * args.every / len(names)
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                elif wait < -1:
                    late += 1

                def timed(n: str = name, s: int = seq) -> None:
                    took = publish(n, s)
                    with lock:
                        latencies.append(took)

                futures.append(pool.submit(timed))
        for future in futures:
            future.result()
    engine.dispose()
    return {
        "iceberg": iceberg,
        "publishes": len(latencies),
        "p50_s": round(percentile(latencies, 50), 4),
        "p99_s": round(percentile(latencies, 99), 4),
        "max_s": round(max(latencies), 4),
        "sent_late": late,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--supervisors", type=int, default=200)
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=40)
    parser.add_argument("--history", type=int, default=1)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"args": vars(args), "runs": []}
    postgres = None
    if args.postgres:
        from supervisor.devstack.postgres import LocalPostgres

        postgres = LocalPostgres().start()
    try:
        for iceberg in (False, True):
            root = Path(tempfile.mkdtemp(prefix="sluicegate-publish-"))
            (root / "files").mkdir()
            try:
                url = (
                    postgres.create_database(f"publish_{int(iceberg)}_{int(time.time())}")
                    if postgres is not None
                    else f"sqlite:///{root / 'metadata.db'}"
                )
                measured = run(args, url, root, iceberg)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            results["runs"].append(measured)
            print(("iceberg " if iceberg else "baseline ") + str(measured), flush=True)
    finally:
        if postgres is not None:
            postgres.stop()
    base, ice = results["runs"]
    write_results("publish", results)
    print(
        f"RATIO publish_p99_s={ice['p99_s']} baseline_p99_s={base['p99_s']} "
        f"p50_s={ice['p50_s']} baseline_p50_s={base['p50_s']} "
        f"vs_baseline={ice['p99_s'] / base['p99_s']:.2f}"
    )


if __name__ == "__main__":
    main()
