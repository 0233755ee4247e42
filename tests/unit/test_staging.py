"""Segments staged while a sequence is read (tasks/output/staging.py), on real Parquet persists
written by the Python-worker batch: the staged chunks and the merge of the rest hold what one
merge of every persist holds, numbered without gaps in each interval, each sorted."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tasks.output import staging
from tasks.output.segments import SegmentContext, build_segments_by_interval
from tasks.reading.engines.python_workers import worker_plan
from tasks.reading.worker_batch import worker_function
from tasks.rows.json_values import iso_millis
from tasks.rows.pipeline import RowPlan
from tasks.spec.data_schema import DataSchema
from tasks.spec.io_config import InputFormat
from tasks.storage import Storage
from tasks.support import STAGE_ROWS, stage_rows

SCHEMA = {
    "dataSource": "wiki",
    "timestampSpec": {"column": "ts", "format": "iso"},
    "dimensionsSpec": {"dimensions": ["channel", "user"]},
    "metricsSpec": [
        {"type": "count", "name": "count"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
    ],
    "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "MINUTE"},
}
PLAN = RowPlan(DataSchema.model_validate(SCHEMA), InputFormat.model_validate({"type": "json"}))
DIMS = ["channel", "user"]
INLINE = 1 << 40  # merged on this thread, no Spark


def write_persist(path: Path, first: int, count: int, rng: random.Random) -> None:
    values = [
        json.dumps(
            {
                "ts": f"2026-11-22T{8 + n % 3:02d}:{n % 60:02d}:00Z",
                "channel": rng.choice(["#en", "#fr", None]),
                "user": f"u{rng.randrange(6)}",
                "added": n,
            }
        ).encode()
        for n in range(first, first + count)
    ]
    batch = pa.record_batch(
        [pa.array(values, pa.binary()), pa.array([0] * count, pa.int32()), range(count)],
        names=["value", "partition", "offset"],
    )
    list(worker_function(worker_plan(PLAN, str(path), 5))(iter([batch])))


def context(root: Path, name: str) -> SegmentContext:
    storage = Storage(str(root))
    return SegmentContext(
        "task-1", "wiki", "t", {"0": 0}, {"0": 900}, "1", str(root / name), storage
    )


def contents(segments: list[Any]) -> dict[tuple[Any, ...], list[int]]:
    """(time, dimensions) -> [count, added] summed over every segment."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for segment in segments:
        for row in pq.read_table(segment.path).to_pylist():
            key = (row["__time"], row["channel"], row["user"])
            total = out.setdefault(key, [0, 0])
            total[0] += row["count"]
            total[1] += row["added"]
    return out


@pytest.mark.parametrize("stage_rows", [100, 250, 10_000])
def test_staged_chunks_and_the_rest_hold_what_one_merge_holds(
    tmp_path: Path, stage_rows: int
) -> None:
    rng = random.Random(stage_rows)
    persists = []
    for n in range(9):
        path = tmp_path / "persists" / f"{n:04d}"
        write_persist(path, n * 100, 100, rng)
        persists.append(str(path))
    whole = build_segments_by_interval(
        None, PLAN, persists, DIMS, context(tmp_path, "whole"), 1000, INLINE
    )
    storage = Storage(str(tmp_path))
    stager = staging.Stager(PLAN, storage, str(tmp_path / "staged"), {}, stage_rows, 40)
    for persist in persists:
        stager.add(0, persist, 100)
    staged, held = stager.take(0)
    stager.close()
    rest = [p for p in persists if p not in held]
    ctx = context(tmp_path, "staged-run")
    merged = build_segments_by_interval(None, PLAN, rest, DIMS, ctx, 1000, INLINE)
    segments = staging.place(staged, merged, ctx, PLAN, DIMS)

    assert contents(segments) == contents(whole)
    if stage_rows <= 250:
        group = -(-stage_rows // 100)  # persists of 100 records each staging takes
        assert staged and len(held) == 9 - 9 % group and len(rest) < group
    else:
        assert not staged and segments == merged
    by_interval: dict[str, list[int]] = {}
    for segment in segments:
        by_interval.setdefault(segment.intervalStart, []).append(segment.partitionNum)
        assert Path(segment.path).exists() and str(tmp_path / "staged-run") in segment.path
        assert segment.id == ctx.segment_id(
            iso_millis(segment.intervalStart), iso_millis(segment.intervalEnd), segment.partitionNum
        )
        table = pq.read_table(segment.path)
        assert table.num_rows == segment.numRows
        keys = [(k, "ascending", "at_start") for k in ["__time", *DIMS]]
        assert table.sort_by(keys).equals(table)
    for numbers in by_interval.values():
        assert sorted(numbers) == list(range(len(numbers)))
    assert len({s.id for s in segments}) == len(segments)


def test_stage_rows_from_the_task_context() -> None:
    assert stage_rows({}) == STAGE_ROWS
    assert stage_rows({"stageRows": 0}) == 0
    for bad in (-1, "5", True, 1.5):
        with pytest.raises(ValueError, match="whole number"):
            stage_rows({"stageRows": bad})


def test_plans_that_discover_dimensions_are_not_staged(tmp_path: Path) -> None:
    schema = {**SCHEMA, "dimensionsSpec": {"dimensions": [], "useSchemaDiscovery": True}}
    plan = RowPlan(DataSchema.model_validate(schema), InputFormat.model_validate({"type": "json"}))
    stager = staging.Stager(plan, Storage(str(tmp_path)), str(tmp_path), {}, 1, 10)
    stager.add(0, str(tmp_path / "p"), 100)
    assert stager.take(0) == ([], set())
