"""The Python-worker engine (tasks/reading/engines/python_workers.py) against the Spark SQL engine
(tasks/rows/pipeline.py) on real Spark: the same Kafka-shaped rows through both must give the same
persist rows, counts and samples, or the Python-worker engine must hand the batch on."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tasks.reading.engines.base import EngineName, FallBack
from tasks.reading.engines.choice import Engines
from tasks.reading.engines.python_workers import PythonWorkerEngine, unsupported
from tasks.rows.pipeline import RowPlan, process_batch
from tasks.spec.data_schema import DataSchema
from tasks.spec.io_config import InputFormat

KAFKA_SCHEMA = "key binary, value binary, topic string, partition int, offset long"
# only text and long values: Arrow's reader reads their chunks (tasks/reading/arrow_rows.py)
LONGS = {
    "dimensionsSpec": {"dimensions": ["channel", "page", {"type": "long", "name": "n"}]},
    "metricsSpec": [
        {"type": "count", "name": "count"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
        {"type": "longMin", "name": "least", "fieldName": "added"},
    ],
}
WIKI = {
    "timestampSpec": {"column": "timestamp", "format": "iso"},
    "dimensionsSpec": {
        "dimensions": ["channel", "page", {"type": "long", "name": "n"}, "flag"],
    },
    "metricsSpec": [
        {"type": "count", "name": "count"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
        {"type": "doubleSum", "name": "ratio", "fieldName": "ratio"},
        {"type": "longMin", "name": "least", "fieldName": "added"},
        {"type": "doubleMax", "name": "most", "fieldName": "ratio"},
    ],
    "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "MINUTE"},
}


def _value(record: Any) -> bytes | None:
    if record is None or isinstance(record, bytes):
        return record
    return json.dumps(record).encode()


def frame(spark: Any, records: list[Any]) -> Any:
    """Kafka-shaped rows over two partitions, offsets counting up in each."""
    rows = [
        (None, _value(record), "t", index % 2, index // 2) for index, record in enumerate(records)
    ]
    return spark.createDataFrame(rows, KAFKA_SCHEMA).repartition(2, "partition")


def plan_of(schema: dict[str, Any], window: tuple[int | None, int | None] = (None, None)) -> Any:
    return RowPlan(
        DataSchema.model_validate({"dataSource": "d", **schema}),
        InputFormat.model_validate({"type": "json"}),
        *window,
    )


def persisted(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    rows = [tuple(sorted(r.asDict().items())) for r in spark.read.parquet(str(path)).collect()]
    return sorted(rows, key=lambda row: json.dumps(row, default=str))


def both(spark: Any, tmp_path: Path, plan: Any, records: list[Any]) -> tuple[Any, Any]:
    """(Spark pipeline result and rows, fast path result and rows or None if it gave up)."""
    spark_out, fast_out = tmp_path / "spark", tmp_path / "fast"
    expected = process_batch(plan, frame(spark, records), str(spark_out), 5, [])
    try:
        got = PythonWorkerEngine(spark, plan).persist(frame(spark, records), str(fast_out), 5, [])
    except FallBack:
        return (expected, persisted(spark, spark_out)), None
    return (expected, persisted(spark, spark_out)), (got, persisted(spark, fast_out))


def assert_same(expected: Any, got: Any) -> None:
    (result, rows), (fast_result, fast_rows) = expected, got
    assert fast_result.stats == result.stats
    assert fast_result.samples == result.samples
    assert fast_result.dimensions == result.dimensions
    assert len(fast_rows) == len(rows)
    for fast_row, row in zip(fast_rows, rows, strict=True):
        assert [k for k, _ in fast_row] == [k for k, _ in row]
        for (name, fast_value), (_, value) in zip(fast_row, row, strict=True):
            if isinstance(value, float):
                assert math.isclose(fast_value, value, rel_tol=1e-12), name
            else:
                assert fast_value == value, name


def edit(second: int, **fields: Any) -> dict[str, Any]:
    return {
        "timestamp": f"2026-11-22T08:{second // 60 % 60:02d}:{second % 60:02d}Z",
        "channel": f"#c{second % 3}",
        "page": f"p{second % 5}",
        "n": second % 4,
        "flag": second % 2 == 0,
        "added": second * 10,
        "ratio": second / 7,
        **fields,
    }


TRICKY = [
    *(edit(s) for s in range(200)),
    edit(1, channel=None, page=7, added="12", n="-3"),  # ints and digit strings
    edit(2, timestamp="2026-11-22T09:00:00.123456+01:30", ratio=3),
    edit(3, timestamp="2026-11-22T08:00:59.9"),  # fraction, no zone
    edit(4, timestamp="2024-02-29T23:59:59Z"),
    edit(5, timestamp="1969-12-31T23:59:59.001Z"),  # before the epoch
    {k: v for k, v in edit(6).items() if k not in ("added", "ratio", "page")},
    {"channel": "no time"},
    {"timestamp": None, "channel": "null time"},
    b'  {"timestamp": "2026-11-22T08:00:00Z", "channel": "leading spaces"}',
    b"\t{}",  # not an object after spaces: unparseable for both
    b"[1, 2]",
    b"42",
    b"",
    None,  # a tombstone
]


def test_the_same_persist_as_the_spark_pipeline(spark: Any, tmp_path: Path) -> None:
    plan = plan_of(WIKI)
    assert unsupported(plan) is None
    expected, got = both(spark, tmp_path, plan, TRICKY)
    assert got is not None, "the fast path gave up"
    assert_same(expected, got)
    assert expected[0].stats.unparseable == 7 and expected[0].samples


@pytest.mark.parametrize(
    ("schema", "window"),
    [
        ({**WIKI, "granularitySpec": {"queryGranularity": "NONE", "rollup": False}}, (None, None)),
        ({**WIKI, "metricsSpec": []}, (None, None)),
        (
            {**WIKI, "timestampSpec": {"column": "t", "format": "millis"}},
            (1795334410000, 1795334420000),
        ),
        ({**WIKI, **LONGS}, (None, None)),
        (
            {**WIKI, **LONGS, "timestampSpec": {"column": "t", "format": "millis"}},
            (1795334410000, 1795334420000),
        ),
        (
            {
                **WIKI,
                "timestampSpec": {"column": "t", "format": "auto"},
                "dimensionsSpec": {"dimensions": [{"type": "double", "name": "ratio"}, "page"]},
                "metricsSpec": [{"type": "count", "name": "count"}],
            },
            (None, None),
        ),
    ],
    ids=[
        "no-rollup",
        "no-metrics",
        "millis-window",
        "arrow-longs",
        "arrow-longs-millis-window",
        "auto-double-dimension",
    ],
)
def test_the_same_persist_for_other_plans(
    spark: Any, tmp_path: Path, schema: dict[str, Any], window: tuple[int | None, int | None]
) -> None:
    records = [edit(s) for s in range(50)]
    if schema["timestampSpec"]["column"] == "t":
        base = 1795334400000  # 2026-11-22T08:00:00Z
        records = [
            {**r, "t": base + i * 997 if i % 3 else str(base + i)} for i, r in enumerate(records)
        ]
    if schema["timestampSpec"]["format"] == "auto":
        records.append({"t": "2026-11-22T08:00:00.5Z", "page": "auto reads ISO too"})
    plan = plan_of(schema, window)
    assert unsupported(plan) is None
    expected, got = both(spark, tmp_path, plan, records)
    assert got is not None, "the fast path gave up"
    assert_same(expected, got)
    if window != (None, None):
        assert expected[0].stats.thrownAway > 0


@pytest.mark.parametrize(
    "odd",
    [
        {"page": 1.5},  # a fraction where text is read: its JSON text is not known here
        {"added": 2.0},  # a fraction where a long is read
        {"ratio": "0.5"},  # a number written as text where a double is read
        {"timestamp": "2026-11-22 08:00:00"},  # not the canonical ISO form
        {"timestamp": "2026-02-30T08:00:00Z"},  # no such day
        {"page": {"nested": 1}},
    ],
    ids=["float-text", "float-long", "text-double", "iso-space", "bad-day", "nested"],
)
def test_values_it_cannot_promise_send_the_batch_to_spark(
    spark: Any, tmp_path: Path, odd: dict[str, Any]
) -> None:
    records = [edit(s) for s in range(20)] + [edit(20, **odd)]
    _, got = both(spark, tmp_path, plan_of(WIKI), records)
    assert got is None


def test_records_cut_short_are_unparseable_on_both_paths(spark: Any, tmp_path: Path) -> None:
    """A record that ends inside its object (a producer cut off mid-write) is counted and
    sampled by the workers as the Spark pipeline does, without sending the batch to Spark."""
    cut = [
        b'{"timestamp": "2026-11-22T08:00:00Z", "page": ',
        b'{"timestamp": "2026-11-22T08:00:00Z", "page": "\xc3\xa9t\xc3\xa9',
        b'{"timestamp": "2026-11-22T08:00:00Z", "added": 1  ',
        b'{"timestamp": "2026-11-22T08:00:00Z", "added": -',
        b'{"page": "\\u12',
        b"{",
        b'  {"page": ["a", {"b": ',
    ]
    records = [edit(s) for s in range(20)] + cut
    expected, got = both(spark, tmp_path, plan_of(WIKI), records)
    assert got is not None
    assert_same(expected, got)
    assert got[0].stats.unparseable == len(cut)
    assert got[0].stats.processed == 20
    assert [s["message"] for s in got[0].samples] == ["Unable to parse row"] * 5


@pytest.mark.parametrize(
    "record",
    [
        b"{'page': 'single quotes'}",
        b'{"timestamp": "2026-11-22T08:00:00Z", "page": NaN',
        b'{"timestamp": "2026-11-22T08:00:00Z"} and more',
        b'{"timestamp": "2026-11-22T08:00:00Z", "page": "\xc3',
    ],
    ids=["single-quotes", "nan-then-cut", "trailing-content", "cut-inside-a-character"],
)
def test_records_orjson_rejects_are_judged_by_spark(
    spark: Any, tmp_path: Path, record: bytes
) -> None:
    records = [edit(s) for s in range(20)] + [record]
    _, got = both(spark, tmp_path, plan_of(WIKI), records)
    assert got is None


def test_a_key_twice_is_read_last_as_druid_does(spark: Any, tmp_path: Path) -> None:
    """Druid's Jackson map keeps a repeated key's last value; both paths do too."""
    record = b'{"timestamp": "2026-11-22T08:00:00Z", "channel": "first", "channel": "last"}'
    (_, rows), got = both(spark, tmp_path, plan_of(WIKI), [record])
    assert got is not None
    assert [dict(r)["channel"] for r in got[1]] == ["last"]
    assert [dict(r)["channel"] for r in rows] == ["last"]


@pytest.mark.parametrize(
    "change",
    [
        {"timestampSpec": {"column": "t", "format": "yyyy-MM-dd"}},
        {"timestampSpec": {"column": "t", "format": "iso", "missingValue": "2026-01-01"}},
        {"transformSpec": {"transforms": [{"name": "x", "expression": "upper(page)"}]}},
        {"transformSpec": {"filter": {"type": "selector", "dimension": "page", "value": "a"}}},
        {"dimensionsSpec": {"dimensions": []}},
        {"dimensionsSpec": {"dimensions": [{"type": "float", "name": "f"}]}},
        {"metricsSpec": [{"type": "longFirst", "name": "f", "fieldName": "added"}]},
        {"granularitySpec": {"segmentGranularity": "MONTH", "queryGranularity": "WEEK"}},
    ],
)
def test_plans_it_does_not_run(change: dict[str, Any]) -> None:
    assert unsupported(plan_of({**WIKI, **change}))
    assert unsupported(plan_of(WIKI)) is None


@pytest.mark.parametrize(
    ("segment", "rollup", "inline"),
    [("HOUR", True, False), ("WEEK", True, False), ("HOUR", False, False), ("HOUR", True, True)],
)
def test_merging_by_interval_makes_the_segments_spark_does(
    spark: Any, tmp_path: Path, segment: str, rollup: bool, inline: bool
) -> None:
    """Two fast persists merged by build_segments_by_interval and by the Spark merge: the same
    segment ids, row counts, footers and rows in the same order; also when the merge runs on
    the caller's thread (`inline`: a shared application's small sequences)."""
    import pyarrow.parquet as pq

    from tasks.output.segments import SegmentContext, build_segments, build_segments_by_interval

    schema = {
        **WIKI,
        "granularitySpec": {
            "segmentGranularity": segment,
            "queryGranularity": "MINUTE",
            "rollup": rollup,
        },
    }
    plan = plan_of(schema)
    # three hours either side of a Monday 00:00 (2026-11-23), with rows to roll up and nulls
    records = [
        edit(s, timestamp=f"2026-11-2{2 + (s % 6 >= 3)}T{(21 + s % 6) % 24:02d}:{s % 60:02d}:00Z")
        for s in range(240)
    ]
    records += [edit(s, channel=None) for s in range(5)] + [edit(s) for s in range(5)]
    records += [edit(7), edit(7)]  # one in each persist: rolled up only by the merge
    persists = []
    for index, half in enumerate((records[::2], records[1::2])):
        persists.append(str(tmp_path / f"persist-{index}"))
        PythonWorkerEngine(spark, plan).persist(frame(spark, half), persists[-1], 0, [])

    def context(name: str) -> SegmentContext:
        return SegmentContext("task", "d", "t", {0: 0}, {0: 9}, "1", str(tmp_path / name))

    dims = [name for name, _ in plan.declared_dimensions()]
    by_spark = build_segments(spark, plan, persists, dims, context("spark"), 40)
    group = f"merge-{segment}-{rollup}-{inline}"
    spark.sparkContext.setJobGroup(group, "the merge by interval")
    by_interval = build_segments_by_interval(
        spark, plan, persists, dims, context("arrow"), 40, (1 << 30) if inline else 0
    )
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert (len(jobs) == 0) is inline  # inline: no Spark job at all
    assert len({s.intervalStart for s in by_spark}) >= 2  # across an hour or week edge
    assert [(s.id, s.numRows) for s in by_interval] == [(s.id, s.numRows) for s in by_spark]
    for ours, theirs in zip(by_interval, by_spark, strict=True):
        got, expected = pq.read_table(ours.path), pq.read_table(theirs.path)
        assert got.schema.equals(expected.schema, check_metadata=True)
        for got_row, row in zip(got.to_pylist(), expected.to_pylist(), strict=True):
            assert got_row.keys() == row.keys()
            for name, value in row.items():
                if isinstance(value, float):
                    assert math.isclose(got_row[name], value, rel_tol=1e-12), name
                else:
                    assert got_row[name] == value, name


def test_a_sequence_of_both_kinds_merges_with_spark(spark: Any, tmp_path: Path) -> None:
    """A batch handed to Spark makes its sequence's merge Spark's, which reads the fast
    persists beside it."""
    from tasks.output.segments import SegmentContext

    plan = plan_of(WIKI)
    engines = Engines(spark, plan)
    fast_dir, spark_dir = str(tmp_path / "fast"), str(tmp_path / "spark")
    records = [edit(s) for s in range(60)]
    engines.workers.persist(frame(spark, records[:30]), fast_dir, 0, [])
    handed_over = frame(spark, [*records[30:], edit(0, page=0.5)])
    with pytest.raises(FallBack, match="a float value where text is read"):
        engines.workers.persist(handed_over, spark_dir, 0, [])
    engines.sql.persist(handed_over, spark_dir, 0, [])
    written_by = {EngineName.PYTHON_WORKERS, EngineName.SPARK_SQL}
    assert engines.merger(written_by) is engines.sql
    assert engines.merger({EngineName.PYTHON_WORKERS}) is engines.workers
    context = SegmentContext("task", "d", "t", {0: 0}, {0: 9}, "1", str(tmp_path / "deep"))
    dims = [name for name, _ in plan.declared_dimensions()]
    segments = engines.merge([fast_dir, spark_dir], written_by, dims, context, 1000)
    counted = spark.read.parquet(*(s.path for s in segments)).agg({"count": "sum"}).first()[0]
    assert counted == len(records) + 1
