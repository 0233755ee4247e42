"""The parts alone: what this machine's own libraries do with the edits of bench/throughput.py,
with no control plane, no Spark and no exactly-once bookkeeping. It is the limit Sluicegate's
task is measured against (`vs_parts`).

Two processes (one per core), each reading half the partitions from the earliest offset to
the end offsets with librdkafka (read_committed, as a task reads), parsing each chunk of
values with Arrow's JSON reader (the dataSchema's columns, timestamps as the reader parses
them), rolling them all up with one Arrow group-by (minute query granularity, a count and two
long sums) and writing one Parquet file per hour segment. (Rolling each chunk up as it came,
then the partial rollups once more, took longer: these edits hardly roll up.)

The output holds the rollup of the dataSchema in bench/common.py, so the same check applies:
its count metric sums to the records read.

Run by bench/baselines.py (`parts`), which times it from its own start as the other
contenders are timed.
"""

from __future__ import annotations

import io
import multiprocessing
from pathlib import Path
from typing import Any

from bench.common import DIMENSIONS

CHUNK = 10_000  # values per consume() call and per Arrow JSON parse
PROCESSES = 2


def assignment(end: dict[int, int], processes: int = PROCESSES) -> list[dict[int, int]]:
    """The partitions split round-robin over `processes`, each with its end offset; no process
    gets an empty share unless there are fewer partitions than processes."""
    shares: list[dict[int, int]] = [{} for _ in range(min(processes, len(end)))]
    for i, partition in enumerate(sorted(end)):
        shares[i % len(shares)][partition] = end[partition]
    return shares


def read_values(bootstrap: str, topic: str, end: dict[int, int]) -> Any:
    """Chunks of the record values of `topic`'s partitions in [0, end), as one newline-joined
    bytes each."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-parts",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 10,
            "fetch.queue.backoff.ms": 5,
        }
    )
    left = {p: o for p, o in end.items() if o > 0}
    consumer.assign([TopicPartition(topic, p, 0) for p in left])
    try:
        while left:
            values = []
            # what is queued now, waiting (for one) only when nothing is: consume() waits out
            # its timeout for as many messages as asked, and the last chunk is short
            for message in consumer.consume(CHUNK, 0) or consumer.consume(1, 0.5):
                if message.error() is not None:
                    raise RuntimeError(str(message.error()))
                partition, offset = message.partition(), message.offset()
                if partition not in left or offset >= left[partition]:
                    continue
                values.append(message.value())
                if offset + 1 >= left[partition]:
                    del left[partition]
            if values:
                yield b"\n".join(values)
    finally:
        consumer.close()


def rollup(table: Any) -> Any:
    """Rows rolled up by minute (`__time`) and the dimensions: a count and the two sums."""
    aggregates: list[Any] = [("added", "sum"), ("deleted", "sum"), ([], "count_all")]
    rolled = table.group_by(["__time", *DIMENSIONS], use_threads=False).aggregate(aggregates)
    named = {"added_sum": "added", "deleted_sum": "deleted", "count_all": "count"}
    return rolled.rename_columns([named.get(name, name) for name in rolled.column_names])


def one_process(bootstrap: str, topic: str, end: dict[int, int], out: str, number: int) -> int:
    """Read, parse, roll up and write this process's share; the records it read."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    columns = [("timestamp", pa.timestamp("s", tz="UTC"))]
    columns += [(name, pa.string()) for name in DIMENSIONS]
    columns += [("added", pa.int64()), ("deleted", pa.int64())]
    options = pj.ParseOptions(
        explicit_schema=pa.schema(columns), unexpected_field_behavior="ignore"
    )
    one_thread = pj.ReadOptions(use_threads=False)  # a process per core
    parsed = [
        pj.read_json(io.BytesIO(chunk), read_options=one_thread, parse_options=options)
        for chunk in read_values(bootstrap, topic, end)
    ]
    if not parsed:
        return 0
    rows = pa.concat_tables(parsed)
    minute = pc.floor_temporal(rows.column("timestamp"), unit="minute")
    rolled = rollup(rows.drop_columns(["timestamp"]).append_column("__time", minute))
    hours = pc.floor_temporal(rolled.column("__time"), unit="hour")
    for i, hour in enumerate(pc.unique(hours).to_pylist()):
        segment = rolled.filter(pc.equal(hours, pa.scalar(hour, hours.type)))
        pq.write_table(segment, Path(out) / f"part-{number}-{i:03d}.parquet")
    return rows.num_rows


def run(bootstrap: str, topic: str, end: dict[int, int], out: str) -> dict[str, Any]:
    """The parts over [0, end) of every partition, in PROCESSES processes; what they read."""
    Path(out).mkdir(parents=True, exist_ok=True)
    shares = assignment(end)
    with multiprocessing.get_context("fork").Pool(len(shares)) as pool:
        results = pool.starmap(
            one_process, [(bootstrap, topic, share, out, i) for i, share in enumerate(shares)]
        )
    return {"processes": len(shares), "records_read": sum(results)}
