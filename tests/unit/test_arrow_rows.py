"""The Python-worker batch's Arrow fast path (tasks/reading/arrow_rows.py) against the loop it
stands in for: the same persist files, counts and samples from the same values, whichever
path reads them, and declined chunks where Arrow would read otherwise."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.reading import arrow_rows
from tasks.reading.worker_batch import Metric, WorkerPlan, worker_function
from tasks.rows.json_values import GiveUp, iso_millis

VALID = [
    "2026-11-22T08:00:00Z",
    "2026-11-22T08:00:00",
    "2026-11-22T09:30:00+01:30",
    "2026-11-22T06:00:00-02:00",
    "2024-02-29T00:00:00.123456Z",
    "1969-12-31T23:59:59.999Z",
    "0001-01-01T00:00:00.5Z",
    "2026-11-22T08:00:00.12+18:59",
]
REFUSED = [
    "2026-11-22 08:00:00",
    "2025-02-29T00:00:00Z",
    "2026-13-01T00:00:00Z",
    "2026-00-01T00:00:00Z",
    "2026-11-00T00:00:00Z",
    "2026-11-22T24:00:00Z",
    "2026-11-22T08:60:00Z",
    "2026-11-22T08:00:60Z",
    "2026-11-22T08:00:00.1234567Z",
    "2026-11-22T08:00:00+19:00",
    "2026-11-22T08:00:00+01:60",
    "0000-01-01T00:00:00Z",
]


def test_iso_texts_read_as_the_loop_reads_each() -> None:
    rng = random.Random(3)
    texts = list(VALID)
    for _ in range(2000):
        year, month = rng.randrange(1, 9999), rng.randrange(1, 13)
        day = rng.randrange(1, 29)
        fraction = "".join(rng.choice("0123456789") for _ in range(rng.randrange(0, 7)))
        zone = rng.choice(["", "Z", f"+{rng.randrange(19):02d}:{rng.randrange(60):02d}", "-05:30"])
        texts.append(
            f"{year:04d}-{month:02d}-{day:02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:"
            f"{rng.randrange(60):02d}{'.' + fraction if fraction else ''}{zone}"
        )
    millis = arrow_rows.iso_millis(pa.array(texts))
    assert millis is not None
    assert millis.tolist() == [iso_millis(text) for text in texts]


@pytest.mark.parametrize("text", REFUSED)
def test_iso_texts_the_loop_refuses_are_declined(text: str) -> None:
    with pytest.raises(GiveUp):
        iso_millis(text)
    assert arrow_rows.iso_millis(pa.array(["2026-11-22T08:00:00Z", text])) is None


def test_digits_beyond_ascii_are_left_to_the_loop() -> None:
    text = "\uff12026-11-22T08:00:00Z"  # a full-width 2: the loop's \d takes it, RE2's not
    assert iso_millis(text) == iso_millis("2026-11-22T08:00:00Z")
    assert arrow_rows.iso_millis(pa.array([text])) is None


def plan(path: Path, time_format: str = "iso", arrow: bool = True) -> WorkerPlan:
    return WorkerPlan(
        time_column="ts",
        time_format=time_format,
        query_ms=60_000,
        dimensions=(("channel", "string"), ("n", "int64")),
        metrics=(
            Metric("count", "count", "int64", None),
            Metric("added", "sum", "int64", "added"),
            Metric("least", "min", "int64", "added"),
        ),
        rollup=True,
        # some records before and after the intervals, thrown away
        min_ms=iso_millis("2026-11-22T08:30:00Z") if time_format == "iso" else 1_000_000,
        max_ms=iso_millis("2026-11-22T10:30:00Z") if time_format == "iso" else 1_700_002_000_000,
        segment_granularity="HOUR",
        persist_path=str(path),
        max_samples=3,
        arrow=arrow,
    )


def batches(values: list[bytes | None], per_chunk: int) -> list[Any]:
    out = []
    for begin in range(0, len(values), per_chunk):
        part = values[begin : begin + per_chunk]
        offsets = list(range(begin, begin + len(part)))
        out.append(
            pa.record_batch(
                [pa.array(part, pa.binary()), pa.array([0] * len(part), pa.int32()), offsets],
                names=["value", "partition", "offset"],
            )
        )
    return out


def run(work: WorkerPlan, values: list[bytes | None]) -> tuple[list[dict[str, Any]], Any]:
    """The results the worker answers and the rows of the persist it wrote."""
    results = [
        row
        for batch in worker_function(work)(iter(batches(values, 50)))
        for row in batch.to_pylist()
    ]
    files = sorted(Path(work.persist_path).glob("*.parquet"))
    tables = [pq.read_table(path).replace_schema_metadata(None) for path in files]
    rows = pa.concat_tables(tables).to_pylist() if tables else []
    key = ("__time", "channel", "n")
    return results, sorted(rows, key=lambda row: tuple(str(row[k]) for k in key))


def edits(time_format: str, rng: random.Random, count: int) -> list[bytes | None]:
    out: list[bytes | None] = []
    for n in range(count):
        stamp: Any = 1_700_000_000 + n * 7 if time_format == "posix" else None
        if time_format == "iso":
            stamp = f"2026-11-22T{8 + n % 3:02d}:{n % 60:02d}:{rng.randrange(60):02d}.{n % 1000}Z"
        record = {"ts": stamp, "channel": rng.choice(["#en", "#fr", None]), "added": n % 17}
        if n % 3:
            record["n"] = rng.randrange(5)
        if n % 11 == 0:
            record["extra"] = {"nested": [1, 2.5, "x"]}
        if n % 41 == 0:
            del record["ts"]  # unparseable on both paths, and sampled
        out.append(json.dumps(record).encode())
    return out


@pytest.mark.parametrize("time_format", ["iso", "posix"])
def test_the_fast_path_writes_what_the_loop_writes(time_format: str, tmp_path: Path) -> None:
    values = edits(time_format, random.Random(5), 400)
    if time_format == "posix":
        values.append(json.dumps({"ts": 1, "channel": "#en", "added": 1}).encode())  # too early
    fast = run(plan(tmp_path / "fast", time_format), values)
    loop = run(plan(tmp_path / "loop", time_format, arrow=False), values)
    assert fast == loop
    stats = fast[0][0]
    assert stats["processed"] > 0 and stats["unparseable"] == 10
    assert stats["thrownAway"] > 0
    assert [row["kind"] for row in fast[0]] == ["stats", "sample", "sample", "sample"]


@pytest.mark.parametrize(
    "odd",
    [
        b'{"ts": "2026-11-22T08:00:00Z", "channel": 5, "added": 1}',  # a number as text
        b'{"ts": "2026-11-22T08:00:00Z", "channel": true, "added": 1}',
        b'{"ts": "2026-11-22T08:00:00Z", "channel": "a", "channel": "b", "added": 1}',
        b'{"ts": "2026-11-22T08:00:00Z", "channel": "a", "added": "12"}',
        b'{"ts": "2026-11-22T08:00:00Z", "channel": "\\u00e9", "added": 1}',
        b'{"ts": "2026-11-22T08:00:00Z", "skipped": NaN, "added": 1}',
        b'{"ts": "2026-11-22 08:00:00", "added": 1}',
        b'{"ts": "2026-11-22T08:00:00Z",\n "added": 1}',
        b'\t{"ts": "2026-11-22T08:00:00Z", "added": 1}',
        b'{"ts": "2026-11-22T08:00:00Z", "added": 1} {"ts": "2026-11-22T08:00:00Z"}',
        b"not json",
        b"",
        None,
    ],
)
def test_a_chunk_with_a_value_arrow_reads_otherwise_goes_to_the_loop(
    odd: bytes | None, tmp_path: Path
) -> None:
    values = [*edits("iso", random.Random(1), 20), odd]
    work = plan(tmp_path / "fast")
    fields = [("channel", "string"), ("n", "int64"), ("added", "int64"), ("added", "int64")]
    fast_plan = arrow_rows.arrow_plan("ts", "iso", fields)
    assert fast_plan is not None
    assert arrow_rows.read_chunk(fast_plan, pa.array(values[:-1], pa.binary())) is not None
    assert arrow_rows.read_chunk(fast_plan, pa.array(values, pa.binary())) is None
    # the loop's judgement either way: a row read, unparseable, or the batch given up on
    assert run(work, values) == run(plan(tmp_path / "loop", arrow=False), values)


def test_plans_it_does_not_read() -> None:
    assert arrow_rows.arrow_plan("ts", "auto", []) is None
    assert arrow_rows.arrow_plan("ts", "iso", [("ratio", "float64")]) is None
    assert arrow_rows.arrow_plan("ts", "iso", [("ts", "int64")]) is None  # time read as text
    assert arrow_rows.arrow_plan("ts", "iso", [("ts", "string")]) is not None
